"""Checkpoints of the store's log off the requests' thread (wsframework.checkpoints)."""
from __future__ import annotations

import sqlite3
import threading

import pytest

from wsframework import checkpoints, store as store_module
from wsframework.checkpoints import Checkpointer
from wsframework.store import BACKSTOP_CHECKPOINT_PAGES, Store

pytestmark = pytest.mark.sqlite_only("the checkpoints of SQLite's write-ahead log")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Captured:
    """A spawner that keeps what it was asked to run, for the test to run when it likes."""

    def __init__(self):
        self.started = []

    def __call__(self, function):
        self.started.append(function)
        return None


def _log_backfilled(path) -> tuple[int, int]:
    """(pages in the log, pages of it copied into the database) as SQLite reports them."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        _, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return log, done
    finally:
        conn.close()


def test_one_checkpoint_at_a_time_and_at_most_one_an_interval(tmp_path):
    clock, spawn = Clock(), Captured()
    checkpointer = Checkpointer(str(tmp_path / "a.db"), spawn, interval=0.5, clock=clock)
    checkpointer.committed()
    checkpointer.committed()  # the first is under way
    assert len(spawn.started) == 1
    spawn.started[0]()  # it ends
    checkpointer.committed()  # but the last one started less than an interval ago
    assert len(spawn.started) == 1
    clock.now += 0.5
    checkpointer.committed()
    assert len(spawn.started) == 2
    checkpointer.close()


def test_a_checkpoint_copies_the_log_into_the_database(tmp_path):
    path = str(tmp_path / "b.db")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x BLOB)")
    for _ in range(50):
        writer.execute("INSERT INTO t VALUES (randomblob(3000))")
    spawn = Captured()
    checkpointer = Checkpointer(path, spawn, clock=Clock())
    checkpointer.committed()
    spawn.started[0]()
    assert checkpointer.checkpoints == 1
    log, done = _log_backfilled(path)
    assert log > 50 and done == log
    checkpointer.close()
    writer.close()


def test_a_failed_checkpoint_is_logged_and_the_next_commit_tries_again(tmp_path, caplog):
    clock, spawn = Clock(), Captured()
    checkpointer = Checkpointer(str(tmp_path / "missing" / "c.db"), spawn, clock=clock)
    checkpointer.committed()
    spawn.started[0]()  # the directory does not exist: SQLite cannot open the file
    assert checkpointer.checkpoints == 0 and "checkpoint" in caplog.text
    clock.now += 1
    checkpointer.committed()
    assert len(spawn.started) == 2
    checkpointer.close()


def test_close_waits_for_the_checkpoint_under_way(tmp_path):
    path = str(tmp_path / "d.db")
    sqlite3.connect(path, isolation_level=None).execute("PRAGMA journal_mode=WAL").close()
    release, finished = threading.Event(), []

    class Result:
        def __init__(self, thread):
            self.thread = thread

        def wait(self, timeout):
            self.thread.join(timeout)

    def spawn(function):
        def run():
            release.wait(10)
            function()
            finished.append(True)
        thread = threading.Thread(target=run)
        thread.start()
        return Result(thread)

    checkpointer = Checkpointer(path, spawn, clock=Clock())
    checkpointer.committed()
    threading.Timer(0.05, release.set).start()
    checkpointer.close()
    assert finished == [True] and checkpointer.checkpoints == 1
    checkpointer.committed()  # closed: nothing more starts
    assert checkpointer.checkpoints == 1


def test_without_gevent_sqlite_keeps_its_own_checkpoints(tmp_path):
    assert checkpoints.background_spawner() is None  # the tests are not monkey-patched
    store = Store(tmp_path / "e.db")
    try:
        assert store.checkpointer is None
        assert store.connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    finally:
        store.close()


def test_a_store_with_a_checkpointer_starts_one_after_a_commit(tmp_path, monkeypatch):
    spawn = Captured()
    monkeypatch.setattr(store_module, "background_spawner", lambda: spawn)
    store = Store(tmp_path / "f.db")
    try:
        conn = store.connection()
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == \
            BACKSTOP_CHECKPOINT_PAGES
        store.executescript("CREATE TABLE IF NOT EXISTS t (x BLOB)")
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (randomblob(3000))")
        assert len(spawn.started) == 1
        spawn.started[0]()
        log, done = _log_backfilled(str(tmp_path / "f.db"))
        assert done == log
    finally:
        store.close()


def test_an_in_memory_store_has_no_checkpointer(monkeypatch):
    monkeypatch.setattr(store_module, "background_spawner", lambda: Captured())
    store = Store(":memory:")
    try:
        assert store.checkpointer is None
    finally:
        store.close()


def test_a_checkpoint_that_cannot_start_does_not_fail_the_commit(tmp_path, caplog):
    def full(function):
        raise RuntimeError("the pool is gone")
    checkpointer = Checkpointer(str(tmp_path / "g.db"), full, clock=Clock())
    checkpointer.committed()  # logged, not raised
    assert "could not start" in caplog.text
    checkpointer.close()
