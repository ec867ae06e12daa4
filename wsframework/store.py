"""The durable store: SQLite in WAL mode, one connection per thread.

Every gunicorn worker is its own process with its own in-memory indexes (namespace trie,
matchers). The store is the source of truth they all follow: each change bumps a named
*generation* counter in the same transaction, and a worker that sees a generation it has not
applied reloads what changed. Writes are committed before the caller answers its client, so
a ``kill -9`` never loses an acknowledged change (WAL with synchronous=NORMAL survives a
process crash; only a power failure can lose the last transactions).
"""
from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import weakref
from pathlib import Path
from typing import Iterator

from .exceptions import SoapFault, receiver_fault
from .faults import UNEXPECTED_REASON, translate

_BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


log = logging.getLogger(__name__)

STORAGE_FULL_REASON = ("the service's storage is full (no space left on its disk); nothing "
                       "was accepted: retry later")


def storage_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's "database or disk is full" (SQLITE_FULL)."""
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorname", None) == "SQLITE_FULL" or "is full" in str(exc))


@translate(sqlite3.OperationalError)
def _operational_error(exc: sqlite3.OperationalError) -> SoapFault:
    """A full disk is the peer's business (it should retry later, or elsewhere); any other
    store failure says nothing about the service's insides."""
    if storage_full(exc):
        return receiver_fault(STORAGE_FULL_REASON)
    log.error("store failure: %s", exc)
    return receiver_fault(UNEXPECTED_REASON)


class Store:
    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL", busy_timeout_ms: int = 10_000):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        # Open connections, through their holders: a holder lives in its thread's (under
        # gevent: its greenlet's) local and closes its connection when that thread or
        # greenlet is gone. Holding the connections themselves kept one SQLite connection
        # (its page cache, three file descriptors) per client connection a gevent worker
        # ever served: +2 MB and 3 fds per connection, forever.
        self._all: weakref.WeakSet[_Holder] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.executescript(_BASE_SCHEMA)

    def connection(self) -> sqlite3.Connection:
        holder = getattr(self._local, "holder", None)
        conn = holder.conn if holder is not None else None
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000,
                                   isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            conn.row_factory = sqlite3.Row
            holder = _Holder(conn)
            self._local.holder = holder
            with self._lock:
                self._all.add(holder)
        return conn

    def executescript(self, script: str) -> None:
        self.connection().executescript(script)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction, taken eagerly so concurrent writers queue instead of failing
        on lock upgrade."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            # SQLite rolls back by itself on some errors (SQLITE_FULL among them): a second
            # ROLLBACK would raise and hide the error that matters
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a COMMIT that failed (a full disk) leaves it open
                conn.execute("ROLLBACK")
            raise

    def query(self, sql: str, params=()) -> list[sqlite3.Row]:
        return self.connection().execute(sql, params).fetchall()

    # -- generations -----------------------------------------------------------------------
    @staticmethod
    def bump(conn: sqlite3.Connection, name: str) -> int:
        conn.execute("INSERT INTO generations(name, value) VALUES (?, 1) "
                     "ON CONFLICT(name) DO UPDATE SET value = value + 1", (name,))
        return conn.execute("SELECT value FROM generations WHERE name = ?", (name,)).fetchone()[0]

    def generation(self, name: str) -> int:
        row = self.connection().execute("SELECT value FROM generations WHERE name = ?",
                                        (name,)).fetchone()
        return row[0] if row else 0

    def close(self) -> None:
        with self._lock:
            for holder in list(self._all):
                holder.close()
            self._all.clear()
        self._local = threading.local()


class _Holder:
    """One thread's (or greenlet's) connection; closed when the holder is collected."""

    __slots__ = ("conn", "_finalizer", "__weakref__")

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._finalizer = weakref.finalize(self, _close_quietly, conn)

    def close(self) -> None:
        self._finalizer()


def _close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.close()
