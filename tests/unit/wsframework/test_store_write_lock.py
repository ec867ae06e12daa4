"""Waiting for SQLite's write lock: a writer that finds another connection's write under way
tries again in short sleeps (not SQLite's busy handler, whose sleeps grow to 100 ms), up to
the store's busy timeout; the connection's own busy timeout is left as it was."""
import sqlite3
import threading

import pytest

from wsframework import store as store_module
from wsframework.store import WRITE_LOCK_POLL_MAX, Store

pytestmark = pytest.mark.sqlite_only("SQLite's write lock, held by a second connection")


class RecordedSleeps:
    """Stands in for the store module's ``time``: records each sleep, and sets ``waiting``
    at the first (the lock was found taken)."""

    def __init__(self):
        self.sleeps: list[float] = []
        self.waiting = threading.Event()

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.waiting.set()
        _real_time.sleep(seconds)

    def monotonic(self):
        return _real_time.monotonic()


_real_time = store_module.time


@pytest.fixture
def two_stores(tmp_path):
    first = Store(tmp_path / "s.db")
    first.executescript("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    second = Store(tmp_path / "s.db", busy_timeout_ms=10_000)
    yield first, second
    first.close()
    second.close()


def test_a_writer_waits_in_short_steps_and_writes_once_the_lock_is_let_go(two_stores,
                                                                        monkeypatch):
    first, second = two_stores
    recorded = RecordedSleeps()
    monkeypatch.setattr(store_module, "time", recorded)
    done = threading.Event()

    def write_second():
        with second.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (2)")
        done.set()

    with first.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        writer = threading.Thread(target=write_second)
        writer.start()
        assert recorded.waiting.wait(10)  # it found the lock taken ...
        assert not done.is_set()          # ... and waits
    writer.join(10)
    assert done.is_set()
    assert sorted(row[0] for row in first.query("SELECT x FROM t")) == [1, 2]
    assert max(recorded.sleeps) <= WRITE_LOCK_POLL_MAX
    # the connection's own busy timeout (reads, commits) is as configured again
    assert second.query("PRAGMA busy_timeout")[0][0] == 10_000


def test_a_writer_gives_up_after_the_busy_timeout(tmp_path):
    first = Store(tmp_path / "s.db")
    first.executescript("CREATE TABLE t (x INTEGER)")
    impatient = Store(tmp_path / "s.db", busy_timeout_ms=30)
    try:
        with first.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                with impatient.transaction() as other:
                    other.execute("INSERT INTO t VALUES (2)")
        assert impatient.query("PRAGMA busy_timeout")[0][0] == 30
        with impatient.transaction() as conn:  # the lock free again: it writes
            conn.execute("INSERT INTO t VALUES (3)")
        assert sorted(row[0] for row in first.query("SELECT x FROM t")) == [1, 3]
    finally:
        first.close()
        impatient.close()


def test_other_sqlite_errors_are_raised_at_once(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.db")
    recorded = RecordedSleeps()
    monkeypatch.setattr(store_module, "time", recorded)
    conn = store.connection()
    conn.execute("BEGIN")  # a transaction already open: BEGIN IMMEDIATE is refused
    try:
        with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
            with store.transaction():
                pass
        assert recorded.sleeps == []
    finally:
        conn.execute("ROLLBACK")
        store.close()
