"""A process's SQLite connections keep at most SQLITE_HEAP_LIMIT for their page caches
together, however many of them there are."""
import ctypes
import ctypes.util
import os
import sqlite3

import pytest

from wsframework.store import SQLITE_HEAP_LIMIT, Store


def _sqlite_library():
    """The SQLite library this Python's sqlite3 module runs on, when ctypes can reach the
    same one (a dynamically linked system SQLite); else None."""
    name = ctypes.util.find_library("sqlite3")
    if not name:
        return None
    try:
        library = ctypes.CDLL(name)
        library.sqlite3_libversion.restype = ctypes.c_char_p
        library.sqlite3_memory_used.restype = ctypes.c_int64
    except (OSError, AttributeError):
        return None
    return library if library.sqlite3_libversion().decode() == sqlite3.sqlite_version else None


pytestmark = pytest.mark.sqlite_only("SQLite's own page caches")


def test_a_store_sets_the_process_wide_soft_heap_limit(tmp_path):
    store = Store(tmp_path / "limit.db", durability="normal")
    assert store.connection().execute("PRAGMA soft_heap_limit").fetchone()[0] == SQLITE_HEAP_LIMIT


@pytest.mark.skipif(_sqlite_library() is None,
                    reason="ctypes cannot reach the SQLite library the sqlite3 module uses")
def test_many_connections_reading_a_large_store_keep_no_more_than_the_limit(tmp_path):
    library = _sqlite_library()
    store = Store(tmp_path / "large.db", durability="normal")
    conn = store.connection()
    conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO rows (body) VALUES (?)", ((os.urandom(1000),) for _ in range(40_000)))
    conn.execute("COMMIT")
    readers = [sqlite3.connect(tmp_path / "large.db") for _ in range(16)]
    try:
        for reader in readers:  # each would cache up to 2 MB of the 40 MB it reads
            assert reader.execute("SELECT count(*), sum(length(body)) FROM rows").fetchone() == (
                40_000, 40_000_000)
        assert library.sqlite3_memory_used() <= SQLITE_HEAP_LIMIT + (4 << 20)
    finally:
        for reader in readers:
            reader.close()
