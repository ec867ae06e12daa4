"""The publisher-side service of S-CN range-aggregate subscriptions (Chandramouli 4.2.4): it
keeps a published table, reformulates every tuple update into range-aggregate changes
(:mod:`.range_min_table`) and publishes them on the table's feed topic at the EDN, which matches them
statelessly against ``urn:wsframework:dialects:range-aggregate`` subscriptions
(:mod:`matchers.range_aggregate`). The service does not know the subscriptions.

Publishers update the table through its topic: an ordinary publication (the framework's
Publish action, ``wsframework.publisher.publish(service, table, element)``) to
``{service}/topics/{table}`` whose body is one of::

    <ra:Put xmlns:ra="urn:wsframework:range-aggregate" key="t4" x="40" y="4"/>   insert or update
    <ra:Delete xmlns:ra="urn:wsframework:range-aggregate" key="t4"/>

A tuple keeps its ``x`` (moving one is a Delete then a Put); ``key`` is 1 to
:data:`MAX_KEY_CHARS` characters, ``x`` a number inside the table's range domain, ``y`` a
finite number; a table holds at most ``max_tuples`` tuples (``--set max_tuples=N``; default
:data:`MAX_TUPLES`: publishers have no credential, so the memory they can claim is bounded).
Anything else is refused with a Sender fault (as every malformed publication).
``<ra:Query function="MIN" x1="20" x2="60"/>`` answers ``<ra:QueryResponse seq="..">`` with
an ``ra:Result`` (none: no tuple in the range): a subscriber subscribes first, then queries,
and keeps the change of highest ``seq`` from then on, so it starts from the right result
without missing a change.

What is guaranteed.
- An update is acknowledged (HTTP 202) once it is durable: the tuple, the table's update
  number ``seq`` and the update's changes (MIN and MAX) are written in one SQLite transaction
  (WAL) before the answer, and survive ``kill -9``; a restarted service reloads the table and
  sends the changes still in its outbox first.
- Every change is handed to the EDN at least once, oldest first; a row leaves the outbox once
  a root acknowledged it. A repeated change carries the same ``seq``: subscribers keep the
  highest ``seq``, so repeats and reordering are harmless.
- One process owns a table's store (the ordered structures live in its memory): a
  :class:`TableStore` holds an exclusive lock on ``STORE.lock`` while it is open, so a second
  process (another worker, another ``edn serve table`` on the same ``--data``) is refused
  instead of applying updates the first one's memory never sees; the kernel drops the lock
  when its owner dies, ``kill -9`` included. Updates are applied one at a time under a lock.

The role that serves it, under gunicorn like every other, is :mod:`.table_role`
(``edn serve table``).
"""
from __future__ import annotations

import errno
import fcntl
import logging
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from matchers.range_aggregate import change_element, feed_schema
from matchers.schema.codecs import NUMBER_PATTERN
from matchers.vocabulary import RANGE_AGGREGATE
from wsframework.exceptions import WsFrameworkError, sender_fault
from wsframework.faults import translate
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from route_manager.publisher import Publisher
from wsframework.migrations import migrate
from wsframework.service import Service
from wsframework.store import Store, upsert_sql

from .feed import send_changes
from .range_min_table import RangeMinTable

log = logging.getLogger(__name__)

__all__ = ["TableUpdate", "InvalidTableUpdate", "TableStoreBusy", "TableStore", "TableService",
           "parse_update", "put", "delete", "query", "MAX_KEY_CHARS", "MAX_TUPLES",
           "QUERY_ACTION"]

RA = RANGE_AGGREGATE
MAX_KEY_CHARS = 200
MAX_TUPLES = 1_000_000   # publishers have no credential: the table's memory is bounded
QUERY_ACTION = RA + "/Query"
FUNCTIONS = (("MIN", 1), ("MAX", -1))
_NUMBER = re.compile(rf"\s*{NUMBER_PATTERN}\s*")


class InvalidTableUpdate(WsFrameworkError):
    """An update or query the table refuses (a Sender fault: publishers are not subscribers,
    so no WS-Eventing vocabulary)."""


@translate(InvalidTableUpdate)
def _invalid_update(exc: InvalidTableUpdate):
    return sender_fault(str(exc))


@dataclass(frozen=True)
class TableUpdate:
    key: str
    x: float | None     # None for a Delete
    y: float | None     # None for a Delete


def put(key: str, x: float, y: float) -> etree._Element:
    return etree.Element(f"{{{RA}}}Put", {"key": key, "x": repr(float(x)), "y": repr(float(y))},
                         nsmap={"ra": RA})


def delete(key: str) -> etree._Element:
    return etree.Element(f"{{{RA}}}Delete", {"key": key}, nsmap={"ra": RA})


def query(function: str, x1: float, x2: float) -> etree._Element:
    return etree.Element(f"{{{RA}}}Query", {"function": function, "x1": repr(float(x1)),
                                             "x2": repr(float(x2))}, nsmap={"ra": RA})


def _number(element: etree._Element, name: str) -> float:
    text = element.get(name)
    if text is None or len(text) > 64 or not _NUMBER.fullmatch(text):
        raise InvalidTableUpdate(f"{element.tag} needs a number {name} (at most 64 characters)")
    value = float(text)
    if not math.isfinite(value):
        raise InvalidTableUpdate(f"{name} must be finite")
    return value


def parse_update(element: etree._Element | None) -> TableUpdate:
    if element is None or element.tag not in (f"{{{RA}}}Put", f"{{{RA}}}Delete"):
        raise InvalidTableUpdate(f"a table update is ra:Put or ra:Delete in {RA}")
    if len(element):
        raise InvalidTableUpdate("a table update has no child elements")
    key = element.get("key")
    if not key or len(key) > MAX_KEY_CHARS:
        raise InvalidTableUpdate(f"a table update needs a key of 1 to {MAX_KEY_CHARS} characters")
    if element.tag == f"{{{RA}}}Delete":
        return TableUpdate(key, None, None)
    return TableUpdate(key, _number(element, "x"), _number(element, "y"))


_SCHEMA = """
CREATE TABLE IF NOT EXISTS ra_meta (id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL,
    value_attribute TEXT NOT NULL, over_attribute TEXT NOT NULL, low REAL NOT NULL,
    high REAL NOT NULL, seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS ra_tuples (key TEXT PRIMARY KEY, x REAL NOT NULL, y REAL NOT NULL);
CREATE TABLE IF NOT EXISTS ra_outbox (seq INTEGER NOT NULL, part INTEGER NOT NULL,
    function TEXT NOT NULL, new REAL, inner_l REAL NOT NULL, inner_r REAL NOT NULL,
    outer_l REAL NOT NULL, outer_r REAL NOT NULL, PRIMARY KEY (seq, part));
"""


class TableStoreBusy(RuntimeError):
    """Another process (or another open store in this one) owns the table's store."""


def _own(path: Path, wait: float) -> int:
    """An exclusive ``flock`` on ``path`` (created if need be), waiting up to ``wait``
    seconds: a restarted or replacing worker may start while its predecessor is still
    exiting (a graceful restart, the last moments of a ``kill -9``). Returns the descriptor
    that holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    raise TableStoreBusy(
                        f"{path} is held by another process serving this table (one process "
                        f"owns a table's store: its ordered structures live in that "
                        f"process's memory)") from None
                raise
        time.sleep(0.05)   # looked up at call time: cooperative under gevent


class TableStore:
    """One table, durable in SQLite, with its MIN and MAX structures in memory and an outbox
    of the changes not yet acknowledged by the network. Owns its store while open (an
    exclusive lock on ``PATH.lock``; ``owner_wait`` seconds to get it)."""

    def __init__(self, path: Path | str, name: str, value: str, over: str, low: float,
                 high: float, *, max_tuples: int = MAX_TUPLES, owner_wait: float = 0.0):
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError("the range domain needs finite low < high")
        self.name, self.value, self.over, self.low, self.high = name, value, over, low, high
        self.max_tuples = max_tuples
        self.store = None
        self._owner = _own(Path(f"{path}.lock"), owner_wait)
        try:
            self.store = Store(path)
            self._check_meta(path)
        except BaseException:
            self.close()
            raise
        self._lock = threading.Lock()
        self._load()

    def _check_meta(self, path: Path | str) -> None:
        name, value, over, low, high = self.name, self.value, self.over, self.low, self.high
        migrate(self.store, "range_table", [_SCHEMA])
        with self.store.transaction() as conn:
            row = conn.execute("SELECT * FROM ra_meta").fetchone()
            if row is None:
                conn.execute("INSERT INTO ra_meta(id, name, value_attribute, over_attribute, low, "
                             "high) VALUES (1, ?, ?, ?, ?, ?)", (name, value, over, low, high))
            elif (row["name"], row["value_attribute"], row["over_attribute"], row["low"],
                  row["high"]) != (name, value, over, low, high):
                raise ValueError(f"{path} holds table {row['name']!r} ({row['value_attribute']} "
                                 f"over {row['over_attribute']} in [{row['low']}, {row['high']}])")

    def _load(self) -> None:
        self.tables = {function: RangeMinTable(sign) for function, sign in FUNCTIONS}
        for row in self.store.query("SELECT key, x, y FROM ra_tuples"):
            for function, _ in FUNCTIONS:
                self.tables[function].update(row["key"], row["x"], row["y"])
        self.seq = self.store.query("SELECT seq FROM ra_meta")[0]["seq"]

    def __len__(self) -> int:
        return len(self.tables["MIN"])

    def apply(self, update: TableUpdate) -> int:
        """Apply one update durably; returns its ``seq`` (the changes are in the outbox)."""
        with self._lock:
            current = self.tables["MIN"].get(update.key)
            if update.x is None:
                if current is None:
                    return self.seq   # deleting what is not there changes nothing
                x = current[0]
            else:
                x = update.x
                if not self.low <= x <= self.high:
                    raise InvalidTableUpdate(f"x={x!r} lies outside [{self.low!r}, {self.high!r}]")
                if current is not None and current[0] != x:
                    raise InvalidTableUpdate(f"tuple {update.key!r} lies at x={current[0]!r}: "
                                             "delete it to move it")
                if current is None and len(self) >= self.max_tuples:
                    raise InvalidTableUpdate(f"the table holds the most tuples allowed "
                                             f"({self.max_tuples}): delete some first")
            seq = self.seq + 1
            try:
                rows = []
                for function, _ in FUNCTIONS:
                    for message in self.tables[function].update(update.key, x, update.y)[1]:
                        rows.append((seq, len(rows), function, *message.as_tuple()))
                with self.store.transaction() as conn:
                    if update.y is None:
                        conn.execute("DELETE FROM ra_tuples WHERE key = ?", (update.key,))
                    else:
                        conn.execute(upsert_sql("ra_tuples", ("key", "x", "y"), ("key",)),
                                     (update.key, x, update.y))
                    conn.execute("UPDATE ra_meta SET seq = ?", (seq,))
                    conn.executemany("INSERT INTO ra_outbox VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._load()   # memory follows the store: what was not committed never happened
                raise
            self.seq = seq
            return seq

    def result(self, function: str, x1: float, x2: float) -> tuple[int, float | None]:
        """``(seq, result)``: the aggregate now and the update number it reflects."""
        if function not in self.tables:
            raise InvalidTableUpdate("function is MIN or MAX")
        if not (x1 <= x2):
            raise InvalidTableUpdate(f"the range [{x1!r}, {x2!r}] is empty")
        with self._lock:
            return self.seq, self.tables[function].result(x1, x2)

    def pending(self, limit: int) -> list[tuple[int, int, etree._Element]]:
        rows = self.store.query("SELECT * FROM ra_outbox ORDER BY seq, part LIMIT ?", (limit,))
        return [(row["seq"], row["part"],
                 change_element(self.name, row["seq"], row["function"], row["new"], row["inner_l"],
                                row["inner_r"], row["outer_l"], row["outer_r"])) for row in rows]

    def pending_count(self) -> int:
        """How many changes wait in the outbox (not yet acknowledged by the network)."""
        return self.store.query("SELECT COUNT(*) AS n FROM ra_outbox")[0]["n"]

    def sent(self, keys) -> None:
        with self.store.transaction() as conn:
            conn.executemany("DELETE FROM ra_outbox WHERE seq = ? AND part = ?", keys)

    def feed_schema(self) -> etree._Element:
        """The ``edn:Schema`` the feed topic is created with."""
        return feed_schema(self.value, self.over, self.low, self.high).to_element()

    def close(self) -> None:
        try:
            if self.store is not None:
                self.store.close()
        finally:
            if self._owner is not None:
                os.close(self._owner)   # closing the descriptor releases the flock
                self._owner = None


class TableService:
    """The table's topic endpoint (updates, queries) and the sender of its outbox to the
    EDN's feed topic."""

    def __init__(self, service: Service, table: TableStore, publisher: Publisher, feed: str, *,
                 batch_max: int = 256, retry_seconds: float = 0.5):
        self.service, self.table, self.publisher, self.feed = service, table, publisher, feed
        self.batch_max = batch_max
        self._sending = threading.Lock()   # one sender at a time keeps the outbox's order
        self._stop = threading.Event()
        service.messaging.route("range-aggregate.table",
                                MessageFilter(path=f"/topics/{table.name}"), self._handle)
        service.add_component(self)
        # Changes an earlier run left (or a send that failed) go out without waiting for the
        # next update.
        self._retry = threading.Thread(target=self._retry_loop, args=(retry_seconds,),
                                       name="table-outbox", daemon=True)
        self._retry.start()

    def _handle(self, message: IncomingMessage) -> Reply | None:
        body = message.body
        if body is not None and body.tag == f"{{{RA}}}Query":
            function = body.get("function", "")
            seq, result = self.table.result(function, _number(body, "x1"), _number(body, "x2"))
            answer = etree.Element(f"{{{RA}}}QueryResponse", {"seq": str(seq)}, nsmap={"ra": RA})
            if result is not None:
                etree.SubElement(answer, f"{{{RA}}}Result").text = repr(float(result))
            return Reply(QUERY_ACTION + "Response", answer)
        self.table.apply(parse_update(body))
        self.flush(quietly=True)
        return None

    def flush(self, quietly: bool = False) -> int:
        """Send the outbox, oldest first; returns how many changes went."""
        sent = 0
        with self._sending:
            while not self._stop.is_set():   # closed: the store is no longer ours
                pending = self.table.pending(self.batch_max)
                if not pending:
                    return sent
                try:
                    send_changes(self.publisher, self.feed, [event for _, _, event in pending])
                except Exception:
                    if not quietly:
                        raise
                    log.warning("the feed %s did not take %d changes; retrying", self.feed,
                                len(pending), exc_info=True)
                    return sent
                self.table.sent([(seq, part) for seq, part, _ in pending])
                sent += len(pending)
            return sent

    def _retry_loop(self, seconds: float) -> None:
        while not self._stop.wait(seconds):
            self.flush(quietly=True)

    def close(self) -> None:
        self._stop.set()
        # A send in progress ends first (bounded by the publisher's timeouts, within the
        # worker's graceful stop): its rows leave the outbox, and the store is not closed
        # under it.
        with self._sending:
            self.publisher.close()
            self.table.close()
