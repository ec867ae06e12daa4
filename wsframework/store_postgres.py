"""The durable store on PostgreSQL: the shared and replicated backend of :class:`Store`.

A store is one PostgreSQL *schema*: several worker processes and several hosts that name the
same database and schema share one state (subscriptions, the outbox, the dispatcher's log,
...), and a synchronous standby keeps it when a host is lost. Components write the same SQL
as on SQLite; :func:`translate_sql` rewrites the few SQLite forms they use (``?``
placeholders, ``INSERT OR IGNORE``, the two-argument ``max``/``min``, SQLite's column types).

What SQLite gives for free is kept:

- **One writer at a time per store.** A write transaction takes a transaction-scoped advisory
  lock named after the schema, as ``BEGIN IMMEDIATE`` takes SQLite's write lock: components
  that read and then write in one transaction stay correct with many processes and hosts.
- **Acknowledged means durable.** A commit returns once PostgreSQL has flushed its WAL
  (``synchronous_commit=on``; with a synchronous standby, once the standby has it too), so
  there is nothing left to wait for before answering. ``durability="normal"`` sets
  ``synchronous_commit=off``: the last commits can be lost to a crash of the database host.
- **A connection per request, bounded.** Connections come from a pool per process (psycopg's,
  opened lazily so a forked worker never shares its parent's). Outside a transaction each
  statement borrows one; inside, the transaction keeps its own, and reads the thread makes
  meanwhile go through it (they see its writes, as on SQLite).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import threading
import time
import urllib.parse
import weakref
from pathlib import Path
from typing import Iterator

import psycopg
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.numeric import Int8Dumper
from psycopg_pool import ConnectionPool, PoolTimeout

from .exceptions import SoapFault, receiver_fault
from .faults import translate
from .store import (BASE_SCHEMA, HeldElsewhere, Store, check_durability, default_durability,
                    is_postgresql, placed, register_store, unregister_store)

log = logging.getLogger(__name__)

STORE_UNAVAILABLE_REASON = ("the service's store is unavailable (its database does not "
                            "answer): retry later; if the failure came as the change was "
                            "being committed, it may have been stored (retrying is safe)")
POOL_SIZE = 8  # connections per process; a pool's waiters queue for the next free one
# libpq settings a store's URL may override. A database host that vanishes (a cut, a lost
# host) must fail the requests waiting on it within seconds, not TCP's quarter of an hour,
# so that they are answered with a fault and the next connection reaches the standby.
CONNECTION_DEFAULTS = {
    "connect_timeout": "5",  # per host of a multi-host URL
    "tcp_user_timeout": "5000",  # ms that sent data may stay unacknowledged
    "keepalives": "1", "keepalives_idle": "2", "keepalives_interval": "1",
    "keepalives_count": "3",
}
DRAIN_INTERVAL_S = 1.0  # the pool's connections are replaced at most this often
POOL_TIMEOUT_S = 30.0  # waiting longer for a connection is a failure of the database
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}\Z")


def schema_exists(location: str, schema: str | None) -> bool:
    conninfo, named = split_location(location)
    with psycopg.connect(conninfo, autocommit=True) as raw:
        return raw.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                           (schema or named,)).fetchone() is not None


def check_schema_name(schema: str, longest: int = 63) -> None:
    """A store's schema is a plain SQL name: ``ValueError`` otherwise (PostgreSQL would cut a
    longer one to 63 characters, and two long names could meet)."""
    if not _SCHEMA_NAME.match(schema) or len(schema) > longest:
        raise ValueError(f"a store's schema is a plain SQL name (letters, digits, _; at most "
                         f"{longest}), not {schema!r}")


def split_location(location: str) -> tuple[str, str]:
    """``postgresql://...?schema=NAME`` -> (the connection string libpq reads, NAME); the
    schema defaults to ``public``."""
    parts = urllib.parse.urlsplit(location)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schema = "public"
    kept = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            kept.append((key, value))
    check_schema_name(schema)
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(kept)))
    return conninfo, schema


@translate(psycopg.OperationalError)
def _operational_error(exc: psycopg.OperationalError) -> SoapFault:
    """The database is gone (a lost host, a failover under way): the peer retries; the
    details of the connection are the operator's (logged), not the peer's."""
    log.error("store unavailable: %s", exc)
    return receiver_fault(STORE_UNAVAILABLE_REASON)


@translate(PoolTimeout)
def _pool_timeout(exc: PoolTimeout) -> SoapFault:
    log.error("store unavailable: %s", exc)
    return receiver_fault(STORE_UNAVAILABLE_REASON)


# -- SQL ---------------------------------------------------------------------------------
_TOKENS = re.compile(r"'(?:[^']|'')*'|\?|%")
_INSERT_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_FUNCTIONS = [  # SQLite's functions the components call, as PostgreSQL's
    (re.compile(r"\binstr\(", re.IGNORECASE), "strpos("),
    # json_each over a JSON list of ids (the components pass id lists so)
    (re.compile(r"SELECT\s+value\s+FROM\s+json_each\(\?\)", re.IGNORECASE),
     "SELECT value::bigint FROM json_array_elements_text(?::json)"),
    # SQLite's index hints: PostgreSQL's planner takes none
    (re.compile(r"\s(?:INDEXED\s+BY\s+\w+|NOT\s+INDEXED)\b", re.IGNORECASE), ""),
]
_SCALAR_MAX_MIN = re.compile(r"\b(max|min)\(([^(),]+),([^()]+)\)", re.IGNORECASE)
_DDL_TYPES = [
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\b(?!\s*CHECK)", re.IGNORECASE),
     "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b", re.IGNORECASE), "BIGINT"),
    (re.compile(r"\bREAL\b", re.IGNORECASE), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b", re.IGNORECASE), "BYTEA"),
]
_DDL = re.compile(r"\s*(CREATE|ALTER)\s", re.IGNORECASE)
_PRAGMA_TABLE_INFO = re.compile(r"\s*PRAGMA\s+table_info\((\w+)\)\s*\Z", re.IGNORECASE)
_TABLE_INFO = ("SELECT ordinal_position - 1 AS cid, column_name AS name, data_type AS type, "
               "(is_nullable = 'NO')::int AS notnull, column_default AS dflt_value, 0 AS pk "
               "FROM information_schema.columns WHERE table_schema = current_schema() "
               "AND table_name = %s ORDER BY ordinal_position")


def _placeholder(match: re.Match) -> str:
    """``?`` -> ``%s``; a ``%`` anywhere, quoted or not, is doubled (psycopg reads every
    ``%`` as the start of a placeholder)."""
    token = match.group(0)
    return "%s" if token == "?" else token.replace("%", "%%")


@functools.lru_cache(maxsize=4096)
def translate_sql(statement: str) -> str:
    """One statement as SQLite's dialect writes it, in PostgreSQL's."""
    for pattern, replacement in _FUNCTIONS:
        statement = pattern.sub(replacement, statement)
    text = _TOKENS.sub(_placeholder, statement)
    if _INSERT_OR_IGNORE.search(text):
        text = _INSERT_OR_IGNORE.sub("INSERT INTO", text)
        returning = _RETURNING.search(text)
        if returning:
            text = (text[:returning.start()] + "ON CONFLICT DO NOTHING "
                    + text[returning.start():])
        else:
            text = text.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return _SCALAR_MAX_MIN.sub(
        lambda m: ("GREATEST" if m.group(1).lower() == "max" else "LEAST")
        + f"({m.group(2)},{m.group(3)})", text)


@functools.lru_cache(maxsize=256)
def translate_script(script: str) -> str:
    """A schema script (``CREATE TABLE ...``) with SQLite's column types as PostgreSQL's."""
    for pattern, replacement in _DDL_TYPES:
        script = pattern.sub(replacement, script)
    return script


# -- rows and results --------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _row_class(names: tuple[str, ...]) -> type:
    """A tuple with columns by name too, as :class:`sqlite3.Row` reads."""
    index = {name: i for i, name in enumerate(names)}

    class Row(tuple):
        __slots__ = ()

        def __getitem__(self, key):
            if isinstance(key, str):
                return tuple.__getitem__(self, index[key])
            return tuple.__getitem__(self, key)

        def keys(self):
            return list(names)

    return Row


def _rows(cursor) -> list:
    if cursor.description is None:
        return []
    row = _row_class(tuple(column.name for column in cursor.description))
    return [row(values) for values in cursor.fetchall()]


class Result:
    """A statement's rows, read in full before the connection goes back to the pool."""

    def __init__(self, rows: list, rowcount: int):
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount
        self.lastrowid = None  # PostgreSQL has none: write INSERT ... RETURNING id
        self.row_factory = None

    def fetchone(self):
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list:
        rows, self._next = self._rows[self._next:], len(self._rows)
        return rows

    def fetchmany(self, size: int) -> list:
        rows = self._rows[self._next:self._next + size]
        self._next += len(rows)
        return rows

    def __iter__(self):
        return iter(self.fetchall())


class PostgresConnection:
    """What components hold as "the connection": SQLite's calls over a pooled connection,
    ``pinned`` for a transaction or borrowed per statement outside one."""

    def __init__(self, store: "PostgresStore", pinned: psycopg.Connection | None = None):
        self._store = store
        self._pinned = pinned

    @contextlib.contextmanager
    def _raw(self) -> Iterator[psycopg.Connection]:
        if self._pinned is not None:
            yield self._pinned
            return
        try:
            with self._store.pool().connection() as raw:
                yield raw
        except psycopg.OperationalError as exc:
            self._store.connection_failed(exc)
            raise

    @property
    def in_transaction(self) -> bool:
        return (self._pinned is not None
                and self._pinned.info.transaction_status != TransactionStatus.IDLE)

    def execute(self, statement: str, params=()) -> Result:
        info = _PRAGMA_TABLE_INFO.match(statement)
        if info:
            statement, params = _TABLE_INFO, (info.group(1).lower(),)
        elif _DDL.match(statement):  # a migration's ALTER TABLE: SQLite's types too
            statement = translate_sql(translate_script(statement))
        else:
            statement = translate_sql(statement)
        with self._raw() as raw, raw.cursor() as cursor:
            # always a tuple, even empty: psycopg reads %% as % only in a query with
            # parameters, and translate_sql doubled every %
            cursor.execute(statement, tuple(params))
            return Result(_rows(cursor), cursor.rowcount)

    def executemany(self, statement: str, rows) -> Result:
        rows = [tuple(row) for row in rows]
        if not rows:
            return Result([], 0)
        with self._raw() as raw, raw.cursor() as cursor:
            cursor.executemany(translate_sql(statement), rows)
            return Result([], cursor.rowcount)

    def executescript(self, script: str) -> None:
        with self._raw() as raw:
            raw.execute(translate_script(script).encode())

    def cursor(self) -> "PostgresCursor":
        return PostgresCursor(self)


class PostgresCursor:
    """``conn.cursor()``: each ``execute`` answers a :class:`Result`."""

    def __init__(self, conn: PostgresConnection):
        self._conn = conn
        self.row_factory = None

    def execute(self, statement: str, params=()) -> Result:
        return self._conn.execute(statement, params)

    def executemany(self, statement: str, rows) -> Result:
        return self._conn.executemany(statement, rows)


class _BoolAsInt(Int8Dumper):
    """Flags are 0/1 integers in the schemas (SQLite has no boolean type)."""

    def dump(self, obj):
        return super().dump(int(obj))


def _lock_key(schema: str) -> int:
    """The advisory lock of a schema's writers: 64 bits of its name's hash."""
    return int.from_bytes(hashlib.blake2b(schema.encode(), digest_size=8).digest(), "big",
                          signed=True)


class PostgresStore(Store):
    """A :class:`Store` in one schema of a PostgreSQL database (see the module's text)."""

    dialect = "postgresql"
    integrity_error = psycopg.IntegrityError

    def __init__(self, path: str, *, durability: str | None = None,
                 pool_size: int = POOL_SIZE, busy_timeout_ms: int | None = None):
        self.path = str(path)  # as named: a file path put here by use_postgresql, or a URL
        location, schema = placed(path)
        self.conninfo, named_schema = split_location(location)
        self.schema = schema or named_schema
        check_schema_name(self.schema)  # also one that use_postgresql's schema_of made
        if not is_postgresql(self.path) and self.path != ":memory:":
            # files that go with a store (its locks, its seal key) stay beside its path
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.durability = durability or default_durability()
        check_durability(self.durability)
        self.group_sync = None  # PostgreSQL flushes its WAL before a commit returns
        self._pool_size = pool_size
        self._pool: ConnectionPool | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self._drained = 0.0
        self._local = threading.local()
        self._lock_key = _lock_key(self.schema)
        with self.transaction() as conn:
            conn._pinned.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                pgsql.Identifier(self.schema)))
            conn.executescript(BASE_SCHEMA)
        register_store(self)

    def pool(self) -> ConnectionPool:
        if self._pool is None or self._pool_pid != os.getpid():
            with self._pool_lock:
                if self._pool is None or self._pool_pid != os.getpid():
                    self._pool = ConnectionPool(
                        self.conninfo, min_size=1, max_size=self._pool_size,
                        timeout=POOL_TIMEOUT_S, kwargs=self._connection_options(),
                        configure=self._configure, open=True, num_workers=2,
                        name=f"edn-store-{self.schema}")
                    self._pool_pid = os.getpid()
                    # a store dropped unclosed gives its connections back
                    weakref.finalize(self, _close_pool, self._pool, self._pool_pid)
        return self._pool

    def _connection_options(self) -> dict:
        given = conninfo_to_dict(self.conninfo)
        return {"autocommit": True,
                **{k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given}}

    def _configure(self, raw: psycopg.Connection) -> None:
        raw.adapters.register_dumper(bool, _BoolAsInt)
        raw.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
        raw.execute("SET synchronous_commit TO " + ("on" if self.durability == "full" else "off"))

    def connection(self) -> PostgresConnection:
        return getattr(self._local, "pinned", None) or PostgresConnection(self)

    def release_connection(self) -> None:
        """Nothing to hand back: a connection is taken from the pool for each statement or
        transaction, and returned when it ends."""

    def executescript(self, script: str) -> None:
        """Schema changes are serialized like writes: processes that start together create
        their tables once."""
        pinned = getattr(self._local, "pinned", None)
        if pinned is not None:
            pinned.executescript(script)
            return
        with self.transaction() as conn:
            conn.executescript(script)

    def connection_failed(self, exc: BaseException) -> None:
        """If ``exc`` says a connection broke (its database host is gone, or a failover is
        under way), the pool's other connections most likely lead to the same place: they
        are replaced (at most once a second), and the new ones find the database that now
        accepts writes (libpq tries a multi-host URL's hosts in order). An overloaded pool,
        a cancelled statement or a full disk leave the connections as they are."""
        if not _connection_broke(exc):
            return
        now = time.monotonic()
        if now - self._drained < DRAIN_INTERVAL_S:
            return
        self._drained = now
        log.warning("store %s: a connection failed; replacing the pool's connections",
                    self.schema)
        with contextlib.suppress(Exception):
            self.pool().drain()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PostgresConnection]:
        if getattr(self._local, "pinned", None) is not None:
            raise RuntimeError("a transaction is already open in this thread")
        try:
            with self._transaction() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            self.connection_failed(exc)
            raise

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[PostgresConnection]:
        with self.pool().connection() as raw:
            conn = PostgresConnection(self, raw)
            self._local.pinned = conn
            try:
                # one round trip: the key is this store's own integer, not a peer's text
                raw.execute(f"BEGIN; SELECT pg_advisory_xact_lock({self._lock_key:d})".encode())
                yield conn
            except BaseException:
                self._local.pinned = None
                if not raw.closed and raw.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        raw.execute("ROLLBACK")
                raise
            self._local.pinned = None
            if raw.info.transaction_status == TransactionStatus.INERROR:
                # a statement failed and its error was caught inside the block: PostgreSQL
                # would answer COMMIT with a rollback, and the caller would think it stored
                raw.execute("ROLLBACK")
                raise RuntimeError("a statement of the transaction failed; nothing was "
                                   "committed")
            raw.execute("COMMIT")

    def query(self, sql: str, params=()) -> list:
        return self.connection().execute(sql, params).fetchall()

    def hold_exclusive(self, purpose: str) -> "_ExclusiveHold":
        """A session advisory lock on a connection of its own, held until ``close()`` or
        the holder's death (its connection then ends): one holder among every process and
        host of the database."""
        raw = psycopg.connect(self.conninfo, **self._connection_options())
        key = _lock_key(f"{self.schema}:{purpose}")
        if not raw.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            raw.close()
            raise HeldElsewhere(f"another process holds the {purpose} of schema {self.schema}")
        return _ExclusiveHold(raw)

    def hold_taken(self, path: str, purpose: str) -> bool:
        """Whether a session holds ``purpose`` in the schema that ``path`` names (see
        :meth:`Store.hold_taken`): one read of ``pg_locks`` on this store's pool."""
        location, schema = placed(path)
        schema = schema or split_location(location)[1]
        key = _lock_key(f"{schema}:{purpose}")
        # a bigint advisory lock shows its high 32 bits as classid, its low 32 as objid
        high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        return bool(self.query(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
            "database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1",
            (high, low))[0][0])

    def last_commit(self) -> int:
        return 0

    def owe(self, commit: int) -> None:
        pass

    def make_durable(self) -> None:
        pass

    def drop(self) -> None:
        """Remove the schema and everything in it (tests, and an operator's reset)."""
        with self.pool().connection() as raw:
            raw.execute(pgsql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                pgsql.Identifier(self.schema)))

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None and self._pool_pid == os.getpid():
                self._pool.close()
            self._pool = None
        self._local = threading.local()
        unregister_store(self)


class _ExclusiveHold:
    def __init__(self, raw: psycopg.Connection):
        self._raw = raw

    def close(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._raw.close()


def _connection_broke(exc: BaseException) -> bool:
    """A failure of the connection itself (SQLSTATE class 08, an administrator's or a
    crash's shutdown 57P01-57P03, or no state at all: the socket is gone)."""
    if isinstance(exc, PoolTimeout):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _close_pool(pool: ConnectionPool, pid: int) -> None:
    if os.getpid() == pid:
        with contextlib.suppress(Exception):
            pool.close(timeout=1.0)
