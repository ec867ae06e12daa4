"""Checkpoints of a SQLite store's write-ahead log, away from the requests' thread.

SQLite copies the log back into the database (a checkpoint) in the connection whose commit
took the log past ``wal_autocheckpoint`` pages (1,000), before that commit returns; with
``synchronous=NORMAL`` the checkpoint ends with an fsync of the database file. Under gevent
every request of a worker shares its one thread, so each checkpoint held all of them: in a
renewal storm, a single-row commit took 13.6 ms at p99.9 and up to 27 ms at a million rows
(against 0.09 ms and 1 ms with no checkpoint in the commit), once every few hundred commits.

Under gevent a store therefore turns the automatic checkpoints off and runs them in the
hub's thread pool, on a connection of their own (:class:`Checkpointer`): at most one at a
time, at most every ``interval`` seconds, and only after a commit, as SQLite's own would.
They are PASSIVE: they copy what no reader still needs and never wait for one, as the
automatic ones do. Nothing of durability changes: a commit is durable through its log
(:class:`~wsframework.store.GroupSync`), and a checkpoint syncs the database before the log
may be reused. Elsewhere (threads, tools) SQLite's automatic checkpoints stay, since a
checkpoint then holds only the thread that commits.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Callable

from .greenlets import threads_are_greenlets

log = logging.getLogger(__name__)

#: seconds between the starts of two checkpoints at most
CHECKPOINT_INTERVAL = 0.5


def background_spawner() -> Callable[[Callable[[], None]], object] | None:
    """How a checkpoint is started off the requests' thread: under gevent, the hub's thread
    pool (returns a result to wait on); None when the process is not patched (keep SQLite's
    automatic checkpoints). Decided when a store is made: in the worker, after the patch."""
    if not threads_are_greenlets():
        return None
    import gevent
    return lambda function: gevent.get_hub().threadpool.spawn(function)


class Checkpointer:
    """The log's checkpoints of the SQLite database at ``path``, started by
    :meth:`committed` through ``spawn`` (one at a time, at most every ``interval`` s)."""

    def __init__(self, path: str, spawn: Callable[[Callable[[], None]], object],
                 interval: float = CHECKPOINT_INTERVAL, clock=time.monotonic):
        self.path = path
        self._spawn = spawn
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._running = None  # the result of the checkpoint under way
        self._last = float("-inf")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self.checkpoints = 0  # made, in all
        self.seconds = 0.0    # that they took, in all

    def committed(self) -> None:
        """After a commit: start a checkpoint if none is under way and the last one started
        ``interval`` seconds ago or more."""
        now = self._clock()
        with self._lock:
            if self._closed or self._running is not None or now - self._last < self.interval:
                return
            self._last = now
            self._running = True
        try:
            result = self._spawn(self._checkpoint)
        except Exception as exc:  # after a commit: never the committing request's failure
            with self._lock:
                self._running = None
            log.warning("a checkpoint of %s could not start: %s", self.path, exc)
            return
        with self._lock:
            if self._running is True:  # not finished already
                self._running = result

    def _checkpoint(self) -> None:
        started = time.perf_counter()
        try:
            conn = self._conn
            if conn is None:
                conn = self._conn = sqlite3.connect(self.path, isolation_level=None,
                                                    check_same_thread=False)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
            self.seconds += time.perf_counter() - started
        except sqlite3.Error as exc:  # the next commit's checkpoint tries again
            log.warning("a checkpoint of %s failed: %s", self.path, exc)
        finally:
            with self._lock:
                self._running = None

    def close(self, timeout: float = 10.0) -> None:
        """Wait for a checkpoint under way (up to ``timeout`` s), then close the connection
        (left to the process's end if that checkpoint is still going)."""
        with self._lock:
            self._closed = True
            running = self._running
        if running is not None and running is not True:
            running.wait(timeout)
        with self._lock:
            if self._running is not None:
                return
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
