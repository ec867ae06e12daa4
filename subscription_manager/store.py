"""Durable subscriptions: one SQLite table in the service's store, and the record type.

Every change runs in one write transaction that also bumps the ``eventing:subscriptions``
generation and stamps the changed rows with it (``seq``). A process applies changes made by
others by reading the rows whose ``seq`` is above the last generation it applied: no
separate change log, and a reader never misses a change (transactions are serialized, so
``seq`` only grows).

State changes are conditional UPDATEs driven by :mod:`.lifecycle` (``WHERE status IN
(sources)``); the caller learns whether *it* made the change (the row comes back) or lost a
race (nothing comes back). Rows are never deleted on a transition -- only purged long after
they became terminal -- so a late reader still sees why a subscription went away.

Limits (:class:`SubscriptionLimits`: the whole service, one topic, one NotifyTo host) are
counted in the insert's own write transaction (``BEGIN IMMEDIATE``: transactions of every
worker are serialized), so two workers can never both take the last place. Only active,
unexpired rows count; an expired row the sweeper has not reached yet does not.
"""
from __future__ import annotations

import json
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, fields, replace
from typing import Iterable, Mapping, Sequence

from lxml import etree

from matchers import FilterSpec
from wsframework import ns
from wsframework.addressing import EndpointReference
from wsframework.matching.packed_forms import PackedForms
from wsframework.migrations import Step, columns, migrate
from wsframework.store import Store, upsert_sql
from wsframework.urlpolicy import UrlRefused, parse_url
from wsframework.xmlparse import parse_xml

from .lifecycle import Event, State, next_state, sources
from .notify_state import NOTIFY_SCHEMA, NotifyState
from .notify_when import NotifyWhen
from .versions import VERSIONS, EventingVersion

__all__ = ["Subscription", "SubscriptionStore", "SubscriptionLimits", "LimitReached",
           "DuplicateRequest", "GENERATION", "MOVED_TO", "SUBSCRIPTIONS_TABLE", "notify_host"]

GENERATION = "eventing:subscriptions"
#: the end reason of a subscription released to another server (followed by its address)
MOVED_TO = "moved to "
SUBSCRIPTIONS_TABLE = "eventing_subscriptions"
_TABLE = SUBSCRIPTIONS_TABLE

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    topic_uid TEXT NOT NULL,
    version TEXT NOT NULL,
    soap_version TEXT NOT NULL,
    dialect TEXT,
    expression TEXT,
    namespaces TEXT,
    notify_to BLOB NOT NULL,
    end_to BLOB,
    format TEXT NOT NULL,
    expires REAL,
    expires_kind TEXT NOT NULL,
    status TEXT NOT NULL,
    end_reason TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    seq INTEGER NOT NULL,
    notify_host TEXT,
    request_key TEXT,
    notify_when TEXT,
    owner TEXT
);
"""
# After the migration below (a table made before notify_host or request_key existed gets the
# column first). request_key: the Subscribe's idempotency key (see SubscriptionStore.insert);
# one subscription per key, terminal rows release theirs.
_INDEXES = f"""
CREATE INDEX IF NOT EXISTS {_TABLE}_seq ON {_TABLE}(seq);
CREATE INDEX IF NOT EXISTS {_TABLE}_status_expires ON {_TABLE}(status, expires);
CREATE INDEX IF NOT EXISTS {_TABLE}_topic ON {_TABLE}(topic_uid, status);
CREATE INDEX IF NOT EXISTS {_TABLE}_host ON {_TABLE}(notify_host, status, expires);
CREATE UNIQUE INDEX IF NOT EXISTS {_TABLE}_request ON {_TABLE}(request_key)
    WHERE request_key IS NOT NULL;
"""
_ACTIVE_NOW = "status = 'active' AND (expires IS NULL OR expires > ?)"
# ids bound in one statement: under the 999 variables an older SQLite allows
_IDS_PER_STATEMENT = 500

_EPR_TAG = ns.qname(ns.EVENTING, "EndpointReference")


def notify_host(address: str) -> str:
    """The host a NotifyTo address names, as the per-host limit counts it (lower-cased
    name or IP literal, without the port)."""
    try:
        return parse_url(address, max_length=len(address) + 1).host
    except UrlRefused:  # refused at Subscribe anyway; stored rows may predate a rule
        return address.lower()


@dataclass(frozen=True)
class SubscriptionLimits:
    """Most active subscriptions: of the whole service, of one topic, whose NotifyTo names
    one host; 0 is no limit."""

    total: int = 0
    per_topic: int = 0
    per_host: int = 0


class DuplicateRequest(Exception):
    """A Subscribe with this idempotency key is already stored and active: ``existing``."""

    def __init__(self, existing: "Subscription"):
        super().__init__(f"subscription {existing.id} was made by the same request")
        self.existing = existing


class LimitReached(Exception):
    """An insert would take a count past its limit; ``scope`` says which
    (``"the service"``, ``"topic T"``, ``"host H"``)."""

    def __init__(self, scope: str, limit: int):
        super().__init__(f"{scope} already has the most active subscriptions allowed ({limit})")
        self.scope = scope
        self.limit = limit


@dataclass(frozen=True, slots=True)  # (slots: a few hundred bytes less a subscription)
class Subscription:
    """One subscription as stored (and as each process holds it in memory)."""

    id: str
    topic: str
    topic_uid: str
    version: EventingVersion
    soap_version: str
    filter: FilterSpec | None
    notify_to: EndpointReference
    end_to: EndpointReference | None
    format: str
    expires: float | None
    expires_kind: str
    status: State = State.ACTIVE
    created: float = 0.0
    seq: int = 0
    end_reason: str | None = None
    notify_when: NotifyWhen | None = None  # the edn:NotifyWhen condition (.notify_when)
    # the principal that made it (wsframework.access); None: its identifier alone manages it
    owner: str | None = None

    def expired_at(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    @property
    def is_active(self) -> bool:
        return self.status is State.ACTIVE


def _dump_epr(epr: EndpointReference | None, version: EventingVersion) -> bytes | None:
    if epr is None:
        return None
    address = epr.address
    if (not epr.reference_parameters and not epr.reference_properties and address.isascii()
            and address.isprintable()):
        # what lxml writes for an address alone (printable ASCII is written as itself, but
        # for the three escapes), without building the element: a bulk subscribe writes
        # thousands
        head, tail = _ADDRESS_ONLY[version.wsa]
        text = address.encode("ascii")
        for escaped, plain in reversed(_TEXT_ESCAPES):  # '&' first, then '<' and '>'
            text = text.replace(plain, escaped)
        return head + text + tail
    return etree.tostring(epr.to_element(_EPR_TAG, version.wsa))


def _load_epr(blob: bytes | None, version: EventingVersion) -> EndpointReference | None:
    if blob is None:
        return None
    blob = bytes(blob)
    address = _plain_address(blob, version)
    if address is not None:
        return EndpointReference.plain(address)
    return EndpointReference.from_element(parse_xml(blob), version.wsa)


_ADDRESS_ONLY = {  # what an address-only EPR is stored as, around its address
    wsa: tuple(etree.tostring(EndpointReference("@").to_element(_EPR_TAG, wsa)).split(b"@"))
    for wsa in {v.wsa for v in VERSIONS.values()}}
_TEXT_ESCAPES = ((b"&lt;", b"<"), (b"&gt;", b">"), (b"&amp;", b"&"))
#: an address-only EPR whose address has no markup or escapes, matched in one call
_UNESCAPED_ADDRESS = {wsa: re.compile(re.escape(head) + rb"([^<&]*)" + re.escape(tail))
                      for wsa, (head, tail) in _ADDRESS_ONLY.items()}


def _plain_address(blob: bytes, version: EventingVersion) -> str | None:
    """The address of a stored EPR that has nothing but an address (what :func:`_dump_epr`
    writes for most), read without parsing XML (a sixth of a restart's time); None when the
    blob is anything else, for the parser to read."""
    unescaped = _UNESCAPED_ADDRESS[version.wsa].fullmatch(blob)
    if unescaped is not None:  # nearly every stored EPR: half the time of the steps below
        return unescaped.group(1).decode("utf-8").strip() or None
    head, tail = _ADDRESS_ONLY[version.wsa]
    if not (blob.startswith(head) and blob.endswith(tail)):
        return None
    text = blob[len(head):len(blob) - len(tail)]
    if b"<" in text:
        return None
    if b"&" in text:
        escapes = sum(text.count(escaped) for escaped, _ in _TEXT_ESCAPES)
        if text.count(b"&") != escapes:  # e.g. a character reference: parse it
            return None
        for escaped, plain in _TEXT_ESCAPES:
            text = text.replace(escaped, plain)
    address = text.decode("utf-8").strip()
    return address or None


#: what every read of a subscription's row selects, in the order :func:`_from_row` reads it
#: (by position: a name is looked up column by column)
_READ_COLUMNS = ("id", "topic", "topic_uid", "version", "soap_version", "dialect",
                 "expression", "namespaces", "notify_to", "end_to", "format", "expires",
                 "expires_kind", "status", "created", "seq", "end_reason", "notify_when",
                 "owner")
_READ = ", ".join(_READ_COLUMNS)
#: what a start reads: :data:`_READ`, then the filter's compiled form (only a start uses it)
_READ_PACKED = f"{_READ}, filter_packed"
_PACKED_AT = len(_READ_COLUMNS)
#: a start's read of the active rows, along the seq index: the planner would take the status
#: index and sort the rows by seq afterwards, a quarter more time (PostgreSQL drops the hint)
_READ_AT_START = (f"SELECT {_READ_PACKED} FROM {_TABLE} INDEXED BY {_TABLE}_seq "
                  "WHERE status = ? ORDER BY seq")


def _from_row(row) -> Subscription:
    """The subscription a row of :data:`_READ` (or :data:`_READ_PACKED`) holds."""
    return _from_rows((row,))[0]


def _from_rows(rows: Sequence[tuple]) -> list[Subscription]:
    """The subscriptions rows of :data:`_READ` (or :data:`_READ_PACKED`) hold, built a
    column at a time: each field's values made by one ``map`` and set into every object by
    another, rather than a Python call per row and a step per field (a start of a million
    in process: 18.5 -> 17.4 s). Nothing but assignment
    happens in the objects: the frozen class's ``__init__`` would go through
    ``object.__setattr__`` field by field, twice the time."""
    if not rows:
        return []
    (ids, topics, topic_uids, version_names, soap_versions, dialects, expressions, namespaces,
     notify_tos, end_tos, formats, expires, expires_kinds, statuses, created, seqs, end_reasons,
     conditions, owners) = list(zip(*rows))[:_PACKED_AT]
    intern = sys.intern  # (the columns interned are NOT NULL)
    versions = list(map(VERSIONS.__getitem__, version_names))
    values = (ids, map(intern, topics), map(intern, topic_uids), versions,
              map(intern, soap_versions), map(_spec_of, dialects, expressions, namespaces),
              map(_load_epr, notify_tos, versions), map(_load_epr, end_tos, versions),
              map(intern, formats), expires, map(intern, expires_kinds),
              map(_STATES.__getitem__, statuses), created, seqs, end_reasons,
              map(_condition_of, conditions), map(_shared, owners))
    made = [_new(Subscription) for _ in rows]
    for set_field, column in zip(_FIELD_SETTERS, values, strict=True):
        deque(map(set_field, made, column), maxlen=0)  # (map stops at the shorter: rows)
    return made


def _spec_of(dialect: str | None, expression: str | None, namespaces: str | None
             ) -> FilterSpec | None:
    if dialect is None:
        return None
    return FilterSpec(_shared(dialect), expression or "",
                      tuple(tuple(pair) for pair in json.loads(namespaces))
                      if namespaces and namespaces != "[]" else ())


def _condition_of(text: str | None) -> NotifyWhen | None:
    return NotifyWhen.from_json(text) if text else None


_new = object.__new__
_STATES = {state.value: state for state in State}
_FIELD_SETTERS = tuple(getattr(Subscription, field.name).__set__ for field in fields(Subscription))


def _shared(text: str | None) -> str | None:
    """One string object for a value many rows repeat (a topic, a version, a principal)
    rather than one per row read."""
    return sys.intern(text) if text is not None else None


_ROW_COLUMNS = ("id", "topic", "topic_uid", "version", "soap_version", "dialect", "expression",
                "namespaces", "notify_to", "end_to", "format", "expires", "expires_kind",
                "status", "created", "updated", "seq", "notify_host", "request_key",
                "notify_when", "owner", "filter_packed")
_INSERT_ROW = (f"INSERT INTO {_TABLE} ({', '.join(_ROW_COLUMNS)}) "
               f"VALUES ({', '.join('?' * len(_ROW_COLUMNS))})")
_REPLACE_ROW = upsert_sql(_TABLE, _ROW_COLUMNS, ("id",))


def _insert_row(conn, s: Subscription, seq: int, now: float, *,
                replace_existing: bool = False, request_key: str | None = None,
                packed: bytes | None = None) -> None:
    spec = s.filter
    conn.execute(
        _REPLACE_ROW if replace_existing else _INSERT_ROW,
        (s.id, s.topic, s.topic_uid, s.version.name, s.soap_version,
         spec.dialect if spec else None, spec.expression if spec else None,
         json.dumps([list(p) for p in spec.namespaces]) if spec else None,
         _dump_epr(s.notify_to, s.version), _dump_epr(s.end_to, s.version),
         s.format, s.expires, s.expires_kind, State.ACTIVE.value, s.created or now, now,
         seq, notify_host(s.notify_to.address), request_key,
         s.notify_when.to_json() if s.notify_when is not None else None, s.owner, packed))


def _limit_scopes(s: Subscription, limits: SubscriptionLimits):
    """(limit, key, SQL condition, its parameters, scope) of each limit ``s`` counts against;
    the key names the scope's row of the active counts."""
    host = notify_host(s.notify_to.address)
    for limit, key, where, params, scope in (
            (limits.per_host, f"host:{host}", "notify_host = ?", (host,), f"host {host}"),
            (limits.per_topic, f"topic:{s.topic_uid}", "topic_uid = ?", (s.topic_uid,),
             f"topic {s.topic}"),
            (limits.total, "total", "1 = 1", (), "the service")):
        if limit > 0:
            yield limit, key, where, params, scope


def _counted(conn, key: str) -> int:
    """The active rows of a limit's scope, expired ones not yet ended included: never below
    what :func:`_active_count` counts."""
    row = conn.execute(f"SELECT n FROM {_COUNTS} WHERE scope = ?", (key,)).fetchone()
    return row[0] if row else 0


def _active_count(conn, where: str, params: tuple, now: float, limit: int) -> int:
    """Active, unexpired rows matching ``where``, counted up to ``limit`` (``LIMIT``: it
    costs at most ``limit`` index entries)."""
    return conn.execute(
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {_TABLE} WHERE {where} AND {_ACTIVE_NOW} "
        "LIMIT ?) AS capped", (*params, now, limit)).fetchone()[0]


def _over_limit(conn, s: Subscription, limits: SubscriptionLimits, now: float) -> None:
    """Raise :class:`LimitReached` if one more active subscription like ``s`` is one too
    many."""
    for limit, key, where, params, scope in _limit_scopes(s, limits):
        if (_counted(conn, key) >= limit
                and _active_count(conn, where, params, now, limit) >= limit):
            raise LimitReached(scope, limit)


class _LimitCounts:
    """The limits of a bulk insert, all taken before any row goes in: each scope's count
    read once in the transaction, plus the rows taken since; a count that reaches its limit
    is replaced once by the exact one, counted row by row (so n inserts cost one read per
    scope, not n counts)."""

    def __init__(self, conn, limits: SubscriptionLimits, now: float):
        self.conn = conn
        self.limits = limits
        self.now = now
        self.counts: dict[str, int] = {}
        self.taken: dict[str, int] = {}
        self.exact: set[str] = set()

    def take(self, s: Subscription) -> None:
        """Count ``s`` in; :class:`LimitReached` (nothing counted) if it is one too many."""
        scopes = list(_limit_scopes(s, self.limits))
        for limit, key, where, params, scope in scopes:
            if key not in self.counts:
                self.counts[key] = _counted(self.conn, key)
                self.taken[key] = 0
            if self.counts[key] >= limit and key not in self.exact:
                self.counts[key] = (_active_count(self.conn, where, params, self.now, limit)
                                    + self.taken[key])
                self.exact.add(key)
            if self.counts[key] >= limit:
                raise LimitReached(scope, limit)
        for _, key, _, _, _ in scopes:
            self.counts[key] += 1
            self.taken[key] += 1


def _add_columns(conn, store) -> None:
    """Give a table made before ``notify_host`` existed the column, filled in for its active
    rows (terminal ones are never counted); and one made before ``request_key`` existed that
    column, empty (older subscriptions have no idempotency key); likewise ``notify_when``
    (older subscriptions have no notification condition) and ``owner``."""
    known = columns(conn, _TABLE)
    for column in ("request_key", "notify_when", "owner"):
        if column not in known:
            conn.execute(f"ALTER TABLE {_TABLE} ADD COLUMN {column} TEXT")
    if "notify_host" in known:
        return
    conn.execute(f"ALTER TABLE {_TABLE} ADD COLUMN notify_host TEXT")
    for row in conn.execute(f"SELECT id, version, notify_to FROM {_TABLE} "
                            "WHERE status = 'active'").fetchall():
        epr = _load_epr(row["notify_to"], VERSIONS[row["version"]])
        conn.execute(f"UPDATE {_TABLE} SET notify_host = ? WHERE id = ?",
                     (notify_host(epr.address), row["id"]))


# How many active rows each limit's scope holds ('total', 'topic:<uid>', 'host:<host>'),
# kept by triggers in the transaction of every change, whatever the code path. An active
# row stays counted after its expiry until it leaves the active state, so a count is never
# below the rows a limit counts (active and unexpired): one below the limit settles a
# Subscribe with one indexed read, and only a count at the limit is checked row by row.
ACTIVE_COUNTS_TABLE = "eventing_active_counts"
_COUNTS = ACTIVE_COUNTS_TABLE
_COUNTS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_COUNTS} (scope TEXT PRIMARY KEY, n INTEGER NOT NULL);
"""


def _scopes(row: str) -> tuple[str, ...]:
    """The SQL expressions of the scope keys of the row ``row`` (NEW or OLD)."""
    return ("'total'", f"'topic:' || {row}.topic_uid",
            f"'host:' || COALESCE({row}.notify_host, '')")


def _count_in(row: str) -> str:
    values = ", ".join(f"({scope}, 1)" for scope in _scopes(row))
    return (f"INSERT INTO {_COUNTS} (scope, n) VALUES {values} "
            f"ON CONFLICT (scope) DO UPDATE SET n = {_COUNTS}.n + 1;")


def _count_out(row: str) -> str:
    # a scope left empty goes: NotifyTo hosts are the peers' to choose, so rows kept at
    # zero would grow with every host ever named
    scopes = ", ".join(_scopes(row))
    return (f"UPDATE {_COUNTS} SET n = n - 1 WHERE scope IN ({scopes}); "
            f"DELETE FROM {_COUNTS} WHERE n <= 0 AND scope IN ({scopes});")


_COUNTS_TRIGGERS = Step(sqlite=f"""
CREATE TRIGGER IF NOT EXISTS {_COUNTS}_inserted AFTER INSERT ON {_TABLE}
    WHEN NEW.status = 'active' BEGIN {_count_in("NEW")} END;
CREATE TRIGGER IF NOT EXISTS {_COUNTS}_left AFTER UPDATE OF status, topic_uid, notify_host
    ON {_TABLE} WHEN OLD.status = 'active' BEGIN {_count_out("OLD")} END;
CREATE TRIGGER IF NOT EXISTS {_COUNTS}_entered AFTER UPDATE OF status, topic_uid, notify_host
    ON {_TABLE} WHEN NEW.status = 'active' BEGIN {_count_in("NEW")} END;
CREATE TRIGGER IF NOT EXISTS {_COUNTS}_deleted AFTER DELETE ON {_TABLE}
    WHEN OLD.status = 'active' BEGIN {_count_out("OLD")} END;
""", postgresql=f"""
CREATE OR REPLACE FUNCTION {_COUNTS}_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        IF OLD.status = 'active' THEN {_count_out("OLD")} END IF;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        IF NEW.status = 'active' THEN {_count_in("NEW")} END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER {_COUNTS}_change
    AFTER INSERT OR UPDATE OF status, topic_uid, notify_host OR DELETE ON {_TABLE}
    FOR EACH ROW EXECUTE FUNCTION {_COUNTS}_change();
""")
_COUNTS_FILL = f"""
DELETE FROM {_COUNTS};
INSERT INTO {_COUNTS} (scope, n) SELECT 'total', COUNT(*) FROM {_TABLE} WHERE status = 'active';
INSERT INTO {_COUNTS} (scope, n) SELECT 'topic:' || topic_uid, COUNT(*) FROM {_TABLE}
    WHERE status = 'active' GROUP BY topic_uid;
INSERT INTO {_COUNTS} (scope, n) SELECT 'host:' || COALESCE(notify_host, ''), COUNT(*)
    FROM {_TABLE} WHERE status = 'active' GROUP BY COALESCE(notify_host, '');
"""


def _add_packed_filters(conn, store) -> None:
    """The filter's compiled form, from its topic's matcher (``Matcher.packed_filter``): a
    start loads it instead of compiling the filter's text. Older rows have none, and are
    compiled as before."""
    if "filter_packed" not in columns(conn, _TABLE):
        conn.execute(f"ALTER TABLE {_TABLE} ADD COLUMN filter_packed BLOB")


_MIGRATIONS = [_SCHEMA, _add_columns, _INDEXES, _COUNTS_SCHEMA, _COUNTS_TRIGGERS, _COUNTS_FILL,
               _add_packed_filters]


class SubscriptionStore:
    def __init__(self, store: Store):
        self.store = store
        migrate(store, "subscriptions", _MIGRATIONS)
        migrate(store, "notify_state", [NOTIFY_SCHEMA])  # adopt and release write L with the rows

    def generation(self) -> int:
        return self.store.generation(GENERATION)

    # -- creation --------------------------------------------------------------------------
    def insert(self, subscription: Subscription, limits: SubscriptionLimits | None = None,
               now: float | None = None, *, request_key: str | None = None,
               packed_filter: bytes | None = None) -> Subscription:
        """Store a new active subscription (committed when this returns); returns it with
        its ``seq``. With ``limits``: :class:`LimitReached` (nothing stored) if one more
        would exceed one of them, counting subscriptions active and unexpired at ``now``.

        With ``request_key`` (the Subscribe's idempotency key): :class:`DuplicateRequest`
        (nothing stored) if an active, unexpired subscription was stored under that key --
        decided in this write transaction, so two copies of one request racing in two
        workers make one subscription. An ended or expired one gives its key up.

        ``packed_filter`` is the filter's compiled form (:meth:`active_packed` gives it
        back)."""
        next_state(None, Event.SUBSCRIBE)
        s = subscription
        stamp = time.time()
        when = stamp if now is None else now
        with self.store.transaction() as conn:
            if request_key is not None:
                row = conn.execute(f"SELECT {_READ} FROM {_TABLE} WHERE request_key = ?",
                                   (request_key,)).fetchone()
                if row is not None:
                    existing = _from_row(row)
                    if existing.is_active and not existing.expired_at(when):
                        raise DuplicateRequest(existing)
                    conn.execute(f"UPDATE {_TABLE} SET request_key = NULL WHERE id = ?",
                                 (existing.id,))
            if limits is not None:
                _over_limit(conn, s, limits, when)
            seq = Store.bump(conn, GENERATION)
            _insert_row(conn, s, seq, stamp, request_key=request_key, packed=packed_filter)
        return replace(s, status=State.ACTIVE, seq=seq, created=s.created or stamp)

    def insert_many(self, subscriptions: list[Subscription], limits: SubscriptionLimits | None,
                    now: float, packed_filters: Mapping[str, bytes | None] | None = None,
                    ) -> tuple[list[Subscription], dict[str, LimitReached]]:
        """Store new active subscriptions in one transaction (a bulk subscribe, no
        idempotency keys): returns those stored, with their ``seq`` in order, and id ->
        :class:`LimitReached` for those that one of ``limits`` refused (counted as for
        :meth:`insert`, each row against those before it). ``packed_filters``: id -> the
        filter's compiled form, as for :meth:`insert`."""
        packed_filters = packed_filters or {}
        next_state(None, Event.SUBSCRIBE)  # the transition every row takes
        stamp = time.time()
        stored: list[Subscription] = []
        refused: dict[str, LimitReached] = {}
        with self.store.transaction() as conn:
            counts = _LimitCounts(conn, limits, now) if limits is not None else None
            accepted = []
            for s in subscriptions:
                try:
                    if counts is not None:
                        counts.take(s)
                except LimitReached as reached:
                    refused[s.id] = reached
                    continue
                accepted.append(s)
            if accepted:
                last = Store.bump(conn, GENERATION, len(accepted))
                for seq, s in enumerate(accepted, start=last - len(accepted) + 1):
                    _insert_row(conn, s, seq, stamp, packed=packed_filters.get(s.id))
                    stored.append(replace(s, status=State.ACTIVE, seq=seq,
                                          created=s.created or stamp))
        return stored, refused

    # -- moving subscriptions between servers (EDN offline partitioning) -------------------
    def adopt(self, conn, subscriptions: Iterable[Subscription],
              notified: Mapping[str, tuple[float | None, int]] | None = None) -> list[Subscription]:
        """Inside the caller's write transaction ``conn``: store ``subscriptions`` as active
        under their own ids (moved here from another server). A row with the same id (one
        that moved away earlier, or an earlier import of the same move) is replaced, so
        adopting is idempotent; a row replaced keeps its idempotency key (a subscription
        made here that comes back is still found by a repeated Subscribe). ``notified``
        (id -> (L, events without a number)) is the edn:NotifyWhen state they bring: it
        replaces what this store held for those ids, in the same transaction
        (:meth:`NotifyState.replace`)."""
        subscriptions = list(subscriptions)
        if not subscriptions:
            return []
        now = time.time()
        seq = Store.bump(conn, GENERATION)
        for s in subscriptions:
            kept = conn.execute(f"SELECT request_key FROM {_TABLE} WHERE id = ?",
                                (s.id,)).fetchone()
            _insert_row(conn, s, seq, now, replace_existing=True,
                        request_key=kept[0] if kept is not None else None)
        NotifyState.replace(conn, [s.id for s in subscriptions], notified or {})
        return [replace(s, status=State.ACTIVE, seq=seq, created=s.created or now)
                for s in subscriptions]

    def release(self, conn, expected: dict[str, int], target: str) -> list[Subscription]:
        """Inside the caller's write transaction ``conn``: end the subscriptions of
        ``expected`` (id -> the ``seq`` the caller saw) that are still active and unchanged
        since (they moved to the server ``target``, their end reason says so; no
        SubscriptionEnd is implied). Returns the rows ended; a subscription renewed or
        ended meanwhile is left alone. A released row keeps its idempotency key
        (:meth:`by_request_key`)."""
        if not expected:
            return []
        seq = Store.bump(conn, GENERATION)
        now = time.time()
        ended = []
        for subscription_id, seen in expected.items():
            row = conn.execute(
                f"UPDATE {_TABLE} SET status = ?, updated = ?, seq = ?, end_reason = ? "
                f"WHERE id = ? AND seq = ? AND status = ? RETURNING {_READ}",
                (next_state(State.ACTIVE, Event.END).value, now, seq, MOVED_TO + target,
                 subscription_id, seen, State.ACTIVE.value)).fetchone()
            if row is not None:
                ended.append(_from_row(row))
        NotifyState.drop(conn, [s.id for s in ended])  # their L travelled with them
        return ended

    # -- transitions -----------------------------------------------------------------------
    def renew(self, subscription_id: str, expires: float | None, kind: str,
              now: float) -> Subscription | None:
        """Set a new expiry on an active, unexpired subscription; None if it is not one."""
        rows = self._transition(Event.RENEW, "id = ? AND (expires IS NULL OR expires > ?)",
                                (subscription_id, now),
                                extra_set=("expires = ?, expires_kind = ?", (expires, kind)))
        return rows[0] if rows else None

    def unsubscribe(self, subscription_id: str, now: float) -> Subscription | None:
        rows = self._transition(Event.UNSUBSCRIBE, "id = ? AND (expires IS NULL OR expires > ?)",
                                (subscription_id, now))
        return rows[0] if rows else None

    def end(self, subscription_id: str, reason: str) -> Subscription | None:
        """End one subscription (the source's decision); None if someone else got there."""
        rows = self._transition(Event.END, "id = ?", (subscription_id,), reason=reason)
        return rows[0] if rows else None

    def end_in(self, conn, subscription_id: str, reason: str) -> Subscription | None:
        """:meth:`end`, inside the caller's write transaction ``conn`` (so the decision to end
        commits with whatever the caller wrote alongside)."""
        rows = self._transition_in(conn, Event.END, "id = ?", (subscription_id,), reason=reason)
        return _from_row(rows[0]) if rows else None

    def end_many(self, subscription_ids: Sequence[str], reason: str) -> list[Subscription]:
        """:meth:`end` for each of ``subscription_ids`` in one transaction; the ones this call
        ended (not those someone else got to first)."""
        ended: list = []
        with self.store.transaction() as conn:
            for start in range(0, len(subscription_ids), _IDS_PER_STATEMENT):
                chunk = tuple(subscription_ids[start:start + _IDS_PER_STATEMENT])
                ended += self._transition_in(conn, Event.END,
                                             f"id IN ({','.join('?' * len(chunk))})", chunk,
                                             reason=reason)
        return _from_rows(ended)

    def end_topic(self, topic_uid: str, reason: str) -> list[Subscription]:
        return self._transition(Event.END, "topic_uid = ?", (topic_uid,), reason=reason)

    def end_all(self, reason: str, *, exclude_topics: Iterable[str] = ()) -> list[Subscription]:
        keep = tuple(exclude_topics)
        if keep:
            where = f"topic_uid NOT IN ({','.join('?' * len(keep))})"
            return self._transition(Event.END, where, keep, reason=reason)
        return self._transition(Event.END, "1 = 1", (), reason=reason)

    def expire_due(self, now: float) -> list[Subscription]:
        return self._transition(Event.EXPIRE, "expires IS NOT NULL AND expires <= ?", (now,))

    def _transition(self, event: Event, where: str, params: tuple, *, reason: str | None = None,
                    extra_set: tuple[str, tuple] | None = None) -> list[Subscription]:
        with self.store.transaction() as conn:
            rows = self._transition_in(conn, event, where, params, reason=reason,
                                       extra_set=extra_set)
        return _from_rows(rows)  # parsed once the write lock is released

    @staticmethod
    def _transition_in(conn, event: Event, where: str, params: tuple, *,
                       reason: str | None = None,
                       extra_set: tuple[str, tuple] | None = None) -> list:
        """The transition's conditional UPDATE in the write transaction ``conn``; the rows
        it changed, unparsed."""
        allowed = sources(event)
        target = next_state(State(allowed[0]), event).value
        assignments = "status = ?, updated = ?, seq = ?, end_reason = COALESCE(?, end_reason)"
        values: list = [target, time.time(), None, reason]
        if extra_set is not None:
            assignments += ", " + extra_set[0]
            values.extend(extra_set[1])
        placeholders = ",".join("?" * len(allowed))
        sql = (f"UPDATE {_TABLE} SET {assignments} WHERE status IN ({placeholders}) AND ({where}) "
               f"RETURNING {_READ}")
        # Bump only when something changes, so idle sweeps do not wake every process.
        probe = conn.execute(f"SELECT 1 FROM {_TABLE} WHERE status IN ({placeholders}) "
                             f"AND ({where}) LIMIT 1", (*allowed, *params)).fetchone()
        if probe is None:
            return []
        values[2] = Store.bump(conn, GENERATION)
        return conn.execute(sql, (*values, *allowed, *params)).fetchall()

    # -- reading ---------------------------------------------------------------------------
    def get(self, subscription_id: str) -> Subscription | None:
        rows = self.store.query(f"SELECT {_READ} FROM {_TABLE} WHERE id = ?", (subscription_id,))
        return _from_row(rows[0]) if rows else None

    def by_request_key(self, request_key: str, now: float) -> Subscription | None:
        """The unexpired subscription stored under ``request_key``, if any: active here, or
        moved to another server (:meth:`release`; it lives on there under its id, and this
        server forwards requests for it), so a repeated Subscribe gets it back rather than
        a second subscription. The expiry judged is the one this server last saw."""
        rows = self.store.query(f"SELECT {_READ} FROM {_TABLE} WHERE request_key = ?", (request_key,))
        if not rows:
            return None
        found = _from_row(rows[0])
        moved = (found.status is State.ENDED and found.end_reason is not None
                 and found.end_reason.startswith(MOVED_TO))
        return found if (found.is_active or moved) and not found.expired_at(now) else None

    def active(self, topic_uid: str | None = None) -> list[Subscription]:
        """Active subscriptions (of one topic, by its uid, when given)."""
        if topic_uid is None:
            return [_from_row(r) for r in
                    self.store.query(f"SELECT {_READ} FROM {_TABLE} WHERE status = ? ORDER BY seq",
                                     (State.ACTIVE.value,))]
        return [_from_row(r) for r in self.store.query(
            f"SELECT {_READ} FROM {_TABLE} WHERE status = ? AND topic_uid = ? ORDER BY seq",
            (State.ACTIVE.value, topic_uid))]

    def active_after(self, topic_uid: str, after: str, limit: int) -> list[Subscription]:
        """Up to ``limit`` active subscriptions of one topic whose ids sort after ``after``,
        by id: pages that neither skip nor repeat a subscription that is renewed meanwhile."""
        return [_from_row(r) for r in self.store.query(
            f"SELECT {_READ} FROM {_TABLE} WHERE status = ? AND topic_uid = ? AND id > ? "
            "ORDER BY id LIMIT ?", (State.ACTIVE.value, topic_uid, after, limit))]

    def active_packed(self) -> tuple[list[Subscription], PackedForms]:
        """:meth:`active`, and the filters' compiled forms as stored (position by position,
        None where there is none): what a start loads. The rows are read a chunk at a time,
        so that a large start never holds them all (the memory they took would stay with
        the process)."""
        active: list[Subscription] = []
        forms = PackedForms()
        for rows in self.store.query_chunks(_READ_AT_START, (State.ACTIVE.value,)):
            active += _from_rows(rows)
            for row in rows:
                forms.append(row[_PACKED_AT])
        return active, forms

    def changed_since(self, seq: int) -> list[Subscription]:
        return _from_rows(self.store.query(
            f"SELECT {_READ} FROM {_TABLE} WHERE seq > ? ORDER BY seq", (seq,)))

    def check_limits(self, subscription: Subscription, limits: SubscriptionLimits,
                     now: float) -> None:
        """:class:`LimitReached` if ``subscription`` would exceed ``limits`` now (a read, for
        refusing early; :meth:`insert` decides)."""
        _over_limit(self.store.connection(), subscription, limits, now)

    def active_counts(self) -> tuple[int, dict[str, int]]:
        """Active rows in all, and per topic uid, from the counts the store's triggers keep
        (one read per topic, whatever the rows held; a row past its expiry counts until the
        sweeper ends it)."""
        total, per_topic = 0, {}
        for scope, n in self.store.query(
                f"SELECT scope, n FROM {_COUNTS} WHERE scope = 'total' OR scope LIKE 'topic:%'"):
            if scope == "total":
                total = n
            elif n:
                per_topic[scope[len("topic:"):]] = n
        return total, per_topic

    def count(self, status: State | None = None) -> int:
        if status is None:
            return self.store.query(f"SELECT COUNT(*) FROM {_TABLE}")[0][0]
        return self.store.query(f"SELECT COUNT(*) FROM {_TABLE} WHERE status = ?",
                                (status.value,))[0][0]

    def purge(self, before: float) -> int:
        """Delete terminal rows last changed before ``before`` (epoch seconds)."""
        with self.store.transaction() as conn:
            return conn.execute(f"DELETE FROM {_TABLE} WHERE status != ? AND updated < ?",
                                (State.ACTIVE.value, before)).rowcount
