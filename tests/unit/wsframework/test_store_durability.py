"""Acknowledged means on disk: a request's commits are fdatasync'ed (the write-ahead log)
before it is answered, and requests waiting at the same time share one sync (group commit).
No sockets: threads, a recording syncer, and the WSGI edge in process."""
from __future__ import annotations

import errno
import os
import threading

import pytest

from wsframework.store import GroupSync, Store, make_changes_durable, set_default_durability

pytestmark = pytest.mark.sqlite_only("SQLite's write-ahead log and its fdatasync (PostgreSQL flushes its own WAL at commit)")


class GatedSyncer:
    """Runs each sync when the test lets it, and records how many commits existed as each
    began (what it covers)."""

    def __init__(self, group: GroupSync):
        self.group = group
        self.began: list[int] = []
        self.gate = threading.Semaphore(0)
        self.started = threading.Semaphore(0)

    def __call__(self, sync) -> None:
        self.began.append(self.group._committed)
        self.started.release()
        self.gate.acquire()


def _waiter(group: GroupSync, commit: int, done: list[int]) -> threading.Thread:
    thread = threading.Thread(target=lambda: (group.wait(commit), done.append(commit)))
    thread.start()
    return thread


def test_waiters_behind_a_sync_share_the_next_one():
    group = GroupSync("/nonexistent/db")
    syncer = group._syncer = GatedSyncer(group)
    done: list[int] = []
    first = _waiter(group, group.committed(), done)
    assert syncer.started.acquire(timeout=5)  # the first waiter leads a sync covering 1
    later = [group.committed() for _ in range(5)]
    threads = [_waiter(group, commit, done) for commit in later]
    assert done == []  # nobody answered before a sync covering its commit ended
    syncer.gate.release()
    first.join(5)
    assert done == [1]
    assert syncer.started.acquire(timeout=5)  # one more sync for the five behind it
    syncer.gate.release()
    for thread in threads:
        thread.join(5)
    assert sorted(done) == [1, 2, 3, 4, 5, 6]
    assert syncer.began == [1, 6] and group.syncs == 2
    assert group.commits_synced == 6 and group.sync_seconds > 0  # 3 commits a sync
    group.wait(6)  # already on disk: no sync
    assert group.syncs == 2


def test_a_failed_sync_fails_its_waiters_and_the_next_waiter_tries_again():
    group = GroupSync("/nonexistent/db")
    calls = []

    def failing_once(sync):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EIO, "I/O error")

    group._syncer = failing_once
    commit = group.committed()
    with pytest.raises(OSError):
        group.wait(commit)
    group.wait(commit)  # not marked synced by the failure: synced now
    assert len(calls) == 2 and group.syncs == 1


def _synced_paths(monkeypatch) -> list[str]:
    paths: list[str] = []
    real = os.fdatasync

    def recording(fd):
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    return paths


def test_a_full_store_syncs_its_log_once_for_a_threads_commits(tmp_path, monkeypatch):
    paths = _synced_paths(monkeypatch)
    store = Store(tmp_path / "s.db", durability="full")
    try:
        store.executescript("CREATE TABLE t (x)")
        make_changes_durable()
        assert paths == []  # no transaction, nothing owed
        for k in range(3):
            with store.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (?)", (k,))
        assert paths == []  # commits do not sync under SQLite's write lock
        make_changes_durable()
        assert paths == [str(tmp_path / "s.db-wal")]
        make_changes_durable()  # nothing new
        assert len(paths) == 1
        # another thread's commit is that thread's to wait for
        worker = threading.Thread(target=_commit, args=(store,))
        worker.start()
        worker.join()
        make_changes_durable()
        assert len(paths) == 1
    finally:
        store.close()


def _commit(store: Store) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (99)")


def test_a_normal_store_never_syncs(tmp_path, monkeypatch):
    paths = _synced_paths(monkeypatch)
    store = Store(tmp_path / "n.db", durability="normal")
    try:
        store.executescript("CREATE TABLE t (x)")
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        make_changes_durable()
        assert paths == [] and store.group_sync is None
    finally:
        store.close()


def test_the_process_default_applies_to_stores_made_after_it(tmp_path):
    set_default_durability("normal")
    try:
        assert Store(tmp_path / "a.db").durability == "normal"
    finally:
        set_default_durability("full")
    assert Store(tmp_path / "b.db").durability == "full"
    with pytest.raises(ValueError):
        set_default_durability("sometimes")
    with pytest.raises(ValueError):
        Store(tmp_path / "c.db", durability="always")


def test_a_request_is_answered_only_after_its_changes_are_on_disk(tmp_path, monkeypatch):
    """Through the WSGI edge: a Subscribe commits, and the sync of that commit happens
    before the answer; a sync the disk refuses turns the answer into a Receiver fault."""
    from tests.support.eventing import Harness
    harness = Harness(tmp_path)
    try:
        order: list[str] = []
        real = os.fdatasync
        monkeypatch.setattr(os, "fdatasync", lambda fd: (order.append("sync"), real(fd)))
        harness.subscribe()
        assert order == ["sync"]

        def broken(fd):
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fdatasync", broken)
        from wsframework.exceptions import SoapFault
        with pytest.raises(SoapFault) as refused:
            harness.subscribe()
        assert "was not acknowledged" in str(refused.value.reason)
        assert refused.value.code.endswith("Receiver")
    finally:
        harness.close()


def test_the_syncs_are_figures_on_metrics():
    from wsframework.metrics import _store_readings
    group = GroupSync("/nonexistent/db", syncer=lambda sync: None)
    for _ in range(3):
        group.committed()
    group.wait(3)
    readings = {r.name: r.value for r in _store_readings("edn_", group)}
    assert readings["edn_store_syncs_total"] == 1
    assert readings["edn_store_commits_synced_total"] == 3
    assert readings["edn_store_sync_seconds_total"] >= 0
