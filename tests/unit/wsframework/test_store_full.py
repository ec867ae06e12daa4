"""A store on a full disk: the write fails as SQLite says, the peer is told the cause (a
Receiver fault: retry later), and once there is room again the same store writes."""
import sqlite3

import pytest

from wsframework.faults import fault_for
from wsframework.store import STORAGE_FULL_REASON, Store, storage_full

pytestmark = pytest.mark.sqlite_only("SQLite's full-disk error, injected into its files")


def test_a_full_database_is_answered_with_a_receiver_fault_that_names_the_cause(tmp_path):
    store = Store(tmp_path / "s.db")
    store.executescript("CREATE TABLE t (x BLOB)")
    # a database capped at its current size behaves as a full disk does: SQLITE_FULL
    with store.transaction() as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError) as raised:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (zeroblob(1000000))")
    assert storage_full(raised.value)
    fault = fault_for(raised.value)
    assert fault.code.endswith("Receiver") and fault.reason == STORAGE_FULL_REASON
    with store.transaction() as conn:  # room again: the same store goes on
        conn.execute("PRAGMA max_page_count = 1000000")
        conn.execute("INSERT INTO t VALUES (zeroblob(1000))")
    assert store.query("SELECT count(*) FROM t")[0][0] == 1


def test_another_store_failure_tells_the_peer_nothing_of_the_insides():
    fault = fault_for(sqlite3.OperationalError("no such table: secret_table"))
    assert fault.code.endswith("Receiver") and "secret" not in fault.reason
