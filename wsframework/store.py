"""The durable store: SQLite in WAL mode, one connection per thread.

Every gunicorn worker is its own process with its own in-memory indexes (namespace trie,
matchers). The store is the source of truth they all follow: each change bumps a named
*generation* counter in the same transaction, and a worker that sees a generation it has not
applied reloads what changed.

**Acknowledged means on disk.** Writes are committed before the caller answers its client,
and with ``durability="full"`` (the default, :func:`set_default_durability`) the answer
waits, in :func:`make_changes_durable` (called by the WSGI edge before any response is
sent), for an ``fdatasync`` of the write-ahead log holding the commits the request made.
Commits themselves run with ``synchronous=NORMAL``, so no fsync is taken under SQLite's write
lock: the sync happens after, and requests waiting at the same time share one
(:class:`GroupSync`, group commit). A power cut or an OS crash then loses nothing
acknowledged. With ``durability="normal"`` nothing waits: a ``kill -9`` still loses nothing
(the WAL is in the kernel's page cache), a power cut or an OS crash can lose the last
transactions, acknowledged or not.
"""
from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Callable, Iterator, Sequence

from .checkpoints import Checkpointer, background_spawner
from .exceptions import SoapFault, receiver_fault
from .greenlets import threads_are_greenlets
from .faults import UNEXPECTED_REASON, translate

BASE_SCHEMA = """
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


DURABILITY_MODES = ("full", "normal")
_default_durability = "full"
_stores: "weakref.WeakSet[Store]" = weakref.WeakSet()  # every store of this process


def check_durability(mode: str) -> None:
    if mode not in DURABILITY_MODES:
        raise ValueError(f"durability is one of {', '.join(DURABILITY_MODES)}, not {mode!r}")


def set_default_durability(mode: str) -> None:
    """The durability of every :class:`Store` made after this without its own (``edn serve
    --durable-sync``; set in the arbiter, inherited by its workers)."""
    global _default_durability
    check_durability(mode)
    _default_durability = mode


def default_durability() -> str:
    return _default_durability


# Where stores named by a file path live: None (SQLite files), or a PostgreSQL database and
# how a path names its schema there (edn serve --store postgresql://...).
_postgresql: "tuple[str, Callable[[str], str]] | None" = None


def use_postgresql(location: str | None, schema_of: "Callable[[str], str] | None" = None) -> None:
    """Put every store this process makes from now on by a file path into the PostgreSQL
    database ``location`` (``postgresql://...``), each in the schema ``schema_of(path)``;
    ``None`` goes back to SQLite files. A store made with a ``postgresql://`` location goes
    there whatever this says."""
    global _postgresql
    if location is None:
        _postgresql = None
        return
    if schema_of is None:
        raise ValueError("use_postgresql needs schema_of: the schema of each store's path")
    _postgresql = (location, schema_of)


def is_postgresql(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def placed(path: "str | Path") -> tuple[str, str | None]:
    """(the location a store made from ``path`` opens, its PostgreSQL schema if
    :func:`use_postgresql` chose it, else None)."""
    location = str(path)
    if _postgresql is not None and not is_postgresql(location):
        return _postgresql[0], _postgresql[1](location)
    return location, None


def store_exists(path: "str | Path") -> bool:
    """Whether a store made from ``path`` would find one already there (its file, or its
    PostgreSQL schema)."""
    location, schema = placed(path)
    if is_postgresql(location):
        from .store_postgres import schema_exists
        return schema_exists(location, schema)
    return location == ":memory:" or Path(location).exists()


def register_store(store: "Store") -> None:
    _stores.add(store)


def unregister_store(store: "Store") -> None:
    _stores.discard(store)


def make_changes_durable() -> None:
    """Return once every commit this thread (greenlet) made in any store is on disk: called
    before a request is answered. ``OSError`` when the disk refused the sync: the change
    must not be acknowledged."""
    for store in list(_stores):
        store.make_durable()


def release_connections() -> None:
    """Hand this thread's (greenlet's) connection to each store back to it, for the next
    request of any client: called once a request is answered. A gevent worker serves each
    client connection in a greenlet of its own, which lives as long as the client keeps the
    connection open; without this, every idle keep-alive client would hold a SQLite
    connection (its page cache, statements and three file descriptors) until it left."""
    for store in list(_stores):
        store.release_connection()


class GroupSync:
    """Group commit for one database file: commits are numbered as they end
    (:meth:`committed`); :meth:`wait` returns once an ``fdatasync`` of the write-ahead log
    that began after that commit has finished. One waiter syncs (outside the lock, so
    commits go on meanwhile) and covers every commit made before it began; the waiters
    behind it share it, or the next one."""

    def __init__(self, database: str, syncer=None):
        self.wal_path = database + "-wal"
        self.directory = os.path.dirname(os.path.abspath(database))
        self._syncer = syncer or _sync_runner()
        self._cond = threading.Condition()
        self._committed = 0
        self._synced = 0
        self._syncing = False
        self._file: tuple[int, tuple[int, int]] | None = None  # (fd, (device, inode))
        # figures (edn_store_*): syncs made, the seconds they took, and the commits they
        # covered (commits / syncs: how many requests share a sync)
        self.syncs = 0
        self.sync_seconds = 0.0
        self.commits_synced = 0

    def committed(self) -> int:
        with self._cond:
            self._committed += 1
            return self._committed

    def wait(self, commit: int) -> None:
        with self._cond:
            while self._synced < commit:
                if not self._syncing:
                    self._syncing = True
                    target = self._committed
                    break
                self._cond.wait()
            else:
                return
        started = time.perf_counter()
        try:
            self._syncer(self._sync)
        except BaseException:
            with self._cond:
                self._syncing = False
                self._cond.notify_all()
            raise
        with self._cond:
            self.commits_synced += max(0, target - self._synced)
            self._synced = max(self._synced, target)
            self._syncing = False
            self.syncs += 1
            self.sync_seconds += time.perf_counter() - started
            self._cond.notify_all()

    def _sync(self) -> None:
        try:
            status = os.stat(self.wal_path)
        except FileNotFoundError:
            return  # no log: its last connection checkpointed it into the database, synced
        identity = (status.st_dev, status.st_ino)
        if self._file is None or self._file[1] != identity:
            self._close()
            descriptor = os.open(self.wal_path, os.O_RDONLY | os.O_CLOEXEC)
            self._file = (descriptor, identity)
            _sync_directory(self.directory)  # a new log's name must survive a crash too
        os.fdatasync(self._file[0])

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.close(self._file[0])
            self._file = None

    def close(self) -> None:
        with self._cond:
            self._close()


def _sync_runner():
    """How a sync is run: directly, or under gevent in the hub's thread pool, so an fsync
    blocks only the greenlet that waits for it, not every connection of the worker. Decided
    once per store: stores are made in the worker, after gevent patched it."""
    if not threads_are_greenlets():
        return lambda function: function()
    import gevent
    return lambda function: gevent.get_hub().threadpool.apply(function)


def _sync_directory(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class HeldElsewhere(RuntimeError):
    """Another process holds what :meth:`Store.hold_exclusive` asked for."""


def upsert_sql(table: str, columns: "Sequence[str]", key: "Sequence[str]") -> str:
    """``INSERT`` of a row of ``columns`` that replaces the one with the same ``key``: one
    statement both backends speak (SQLite's ``INSERT OR REPLACE`` PostgreSQL has not)."""
    marks = ", ".join("?" * len(columns))
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
            f"ON CONFLICT({', '.join(key)}) {action}")


#: how much memory all of a process's SQLite connections may keep for their page caches
#: together. Each connection would otherwise keep up to 2 MB of pages (SQLite's default),
#: and a served process keeps a connection for each of up to ~20 greenlets or threads at
#: once: 30-40 MB that grew as the store did. A WAL reader drops its whole cache whenever
#: another connection has written since its last read, so on a busy store most of those
#: pages were stale anyway; reads past the cache come from the operating system's.
SQLITE_HEAP_LIMIT = 16 << 20
_sqlite_heap_bounded = False


def _bound_sqlite_heap(conn: sqlite3.Connection) -> None:
    """Set SQLite's soft heap limit, once per process: past it, SQLite recycles cached
    pages instead of allocating more (enforced for the page cache since SQLite 3.7.3)."""
    global _sqlite_heap_bounded
    if not _sqlite_heap_bounded:
        conn.execute(f"PRAGMA soft_heap_limit={SQLITE_HEAP_LIMIT}")
        _sqlite_heap_bounded = True


class Store:
    """A durable store: a SQLite file (here), or a PostgreSQL schema
    (:class:`~wsframework.store_postgres.PostgresStore`) when its location is a
    ``postgresql://`` URL or :func:`use_postgresql` put file paths there. Components use one
    interface and write SQLite's SQL; the PostgreSQL store translates it."""

    def __new__(cls, path: "str | Path" = ":memory:", **options):
        if cls is Store and is_postgresql(placed(path)[0]):
            from .store_postgres import PostgresStore
            return super().__new__(PostgresStore)
        return super().__new__(cls)

    dialect = "sqlite"  # the SQL the store speaks natively (wsframework.migrations.Step)
    integrity_error: type = sqlite3.IntegrityError  # a constraint refused a write

    def __init__(self, path: str | Path, *, durability: str | None = None,
                 busy_timeout_ms: int = 10_000):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.durability = durability or _default_durability
        check_durability(self.durability)
        self.group_sync = (GroupSync(self.path) if self.durability == "full"
                           and self.path != ":memory:" else None)
        self._synchronous = "NORMAL"  # the sync, if any, comes after the commit (GroupSync)
        self._busy_timeout_ms = busy_timeout_ms
        spawn = background_spawner() if self.path != ":memory:" else None
        self.checkpointer = Checkpointer(self.path, spawn) if spawn is not None else None
        self._local = threading.local()
        # Open connections, through their holders: a holder lives in its thread's (under
        # gevent: its greenlet's) local and closes its connection when that thread or
        # greenlet is gone. Holding the connections themselves kept one SQLite connection
        # (its page cache, three file descriptors) per client connection a gevent worker
        # ever served: +2 MB and 3 fds per connection, forever.
        self._all: weakref.WeakSet[_Holder] = weakref.WeakSet()
        # ... and the connections of threads and greenlets that are gone, kept open (up to
        # IDLE_CONNECTIONS) for the next: a gevent worker starts a greenlet per client
        # connection, and opening one (its pragmas, then reading the schema) costs ~0.4 ms.
        # A deque: a holder's finalizer may run in any thread, even inside a held lock.
        self._idle: collections.deque[sqlite3.Connection] = collections.deque()
        self._lock = threading.Lock()
        self.executescript(BASE_SCHEMA)
        _stores.add(self)

    def connection(self) -> sqlite3.Connection:
        holder = getattr(self._local, "holder", None)
        conn = holder.conn if holder is not None else None
        if conn is None:
            conn = self._take_idle() or self._open()
            # an in-memory database is one per connection: never handed to another thread
            holder = _Holder(conn, self._idle if self.path != ":memory:" else None)
            self._local.holder = holder
            with self._lock:
                self._all.add(holder)
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000,
                               isolation_level=None, check_same_thread=False)
        _bound_sqlite_heap(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
        if self.checkpointer is not None:
            # SQLite's own only past a log of BACKSTOP_CHECKPOINT_PAGES: for commits that are
            # not a transaction's (which start the background ones), and a checkpointer that
            # cannot keep up
            conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")
        conn.row_factory = sqlite3.Row
        return conn

    def release_connection(self) -> None:
        """This thread's (greenlet's) connection goes back to the idle ones (closed if a
        transaction was left open, or enough are idle): :func:`release_connections`. An
        in-memory database lives only in its connection, so that one is kept."""
        holder = getattr(self._local, "holder", None)
        if holder is None or self.path == ":memory:":
            return
        self._local.holder = None
        with self._lock:
            self._all.discard(holder)
        holder.release()

    def _take_idle(self) -> sqlite3.Connection | None:
        try:
            return self._idle.pop()
        except IndexError:
            return None

    def executescript(self, script: str) -> None:
        self.connection().executescript(script)

    def hold_exclusive(self, purpose: str):
        """Become the one holder of ``purpose`` in this store, among every process (an
        open file with ``close()``; :class:`HeldElsewhere` if another holds it): a lock file
        beside the database, ``None`` for an in-memory store, which no other process sees."""
        if self.path == ":memory:":
            return None
        holder = open(f"{self.path}.{purpose}-lock", "a+b")
        try:
            fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder.close()
            raise HeldElsewhere(f"another process holds the {purpose} of {self.path}") from None
        return holder

    def hold_taken(self, path: "str | Path", purpose: str) -> bool:
        """Whether a process holds ``purpose`` (:meth:`hold_exclusive`) in the store that
        ``path`` names, asked without opening that store: the lock file beside it is tried
        and let go at once."""
        lock = Path(f"{path}.{purpose}-lock")
        if not lock.exists():
            return False
        with open(lock, "a+b") as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(probe, fcntl.LOCK_UN)
        return False

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
        if self.group_sync is not None:
            self._local.unsynced = self.group_sync.committed()
        if self.checkpointer is not None:
            self.checkpointer.committed()

    def last_commit(self) -> int:
        """The number of this thread's latest commit not yet synced (0: none), for a thread
        that commits on behalf of others (a group commit): each of them :meth:`owe` it."""
        return getattr(self._local, "unsynced", 0)

    def owe(self, commit: int) -> None:
        """Make ``commit`` (another thread's, made for this one) this thread's to be synced
        before it answers (:func:`make_changes_durable`)."""
        if commit and self.group_sync is not None:
            self._local.unsynced = max(commit, getattr(self._local, "unsynced", 0))

    def make_durable(self) -> None:
        """Return once this thread's commits in this store are on disk (:class:`GroupSync`)."""
        commit = getattr(self._local, "unsynced", 0)
        if not commit or self.group_sync is None:
            return
        self.group_sync.wait(commit)
        if getattr(self._local, "unsynced", 0) == commit:  # not a newer commit meanwhile
            self._local.unsynced = 0

    def query(self, sql: str, params=()) -> list[sqlite3.Row]:
        return self.connection().execute(sql, params).fetchall()

    def query_chunks(self, sql: str, params=(), size: int = 4096) -> Iterator[list]:
        """:meth:`query`'s rows, ``size`` at a time: a caller that keeps something smaller
        than each row (a start loading a million) never holds them all at once."""
        cursor = self.connection().execute(sql, params)
        while rows := cursor.fetchmany(size):
            yield rows

    # -- generations -----------------------------------------------------------------------
    @staticmethod
    def bump(conn: sqlite3.Connection, name: str, by: int = 1) -> int:
        """Move generation ``name`` on by ``by`` in the caller's transaction; returns the
        new value (``by`` changes stamped value - by + 1 .. value)."""
        return conn.execute("INSERT INTO generations(name, value) VALUES (?, ?) "
                            "ON CONFLICT(name) DO UPDATE SET value = generations.value + ? "
                            "RETURNING value", (name, by, by)).fetchone()[0]

    def generation(self, name: str) -> int:
        row = self.connection().execute("SELECT value FROM generations WHERE name = ?",
                                        (name,)).fetchone()
        return row[0] if row else 0

    def generations(self, names: "Sequence[str]") -> dict[str, int]:
        """name -> generation of each of ``names`` (0 for one never bumped), in one read."""
        marks = ", ".join("?" * len(names))
        found = {row[0]: row[1] for row in self.query(
            f"SELECT name, value FROM generations WHERE name IN ({marks})", tuple(names))}
        return {name: found.get(name, 0) for name in names}

    def close(self) -> None:
        with self._lock:
            for holder in list(self._all):
                holder.close()
            self._all.clear()
            while self._idle:
                _close_quietly(self._idle.pop())
        self._local = threading.local()
        if self.checkpointer is not None:
            self.checkpointer.close()
        if self.group_sync is not None:
            self.group_sync.close()
        _stores.discard(self)


#: the log's size (pages) past which a commit checkpoints it itself although checkpoints run
#: in the background (:mod:`.checkpoints`): ten times SQLite's default, about 40 MB
BACKSTOP_CHECKPOINT_PAGES = 10_000

#: the most idle SQLite connections a store keeps open for threads and greenlets to come:
#: about a worker's usual concurrency (in a renewal storm from 32 clients, opening
#: connections took 9% of the server's request time with 8 kept, under 1% with 32); their
#: page caches share the process's :data:`SQLITE_HEAP_LIMIT`
IDLE_CONNECTIONS = 16


class _Holder:
    """One thread's (or greenlet's) connection. When the holder is collected (its thread or
    greenlet is gone) the connection goes to ``idle``, unless that holds
    :data:`IDLE_CONNECTIONS` already, ``idle`` is None, or a transaction was left open:
    then it is closed."""

    __slots__ = ("conn", "_finalizer", "__weakref__")

    def __init__(self, conn: sqlite3.Connection,
                 idle: "collections.deque[sqlite3.Connection] | None" = None):
        self.conn = conn
        self._finalizer = weakref.finalize(self, _release, conn, idle)

    def close(self) -> None:
        if self._finalizer.detach() is not None:
            _close_quietly(self.conn)

    def release(self) -> None:
        """Now, what collecting the holder would do."""
        self._finalizer()


def _release(conn: sqlite3.Connection,
             idle: "collections.deque[sqlite3.Connection] | None") -> None:
    try:
        reusable = idle is not None and not conn.in_transaction and len(idle) < IDLE_CONNECTIONS
    except sqlite3.ProgrammingError:  # closed already
        return
    if reusable:
        idle.append(conn)
    else:
        _close_quietly(conn)


def _close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.close()
