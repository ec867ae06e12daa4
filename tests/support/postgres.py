"""The tests' PostgreSQL: a throwaway cluster for a session run with ``--store-backend
postgresql``, where every store a test makes by a file path gets a schema of its own."""
from __future__ import annotations

import hashlib
import itertools
import os

from benchmarks.postgres_cluster import PostgresCluster, unavailable_reason
from wsframework.store import use_postgresql

_memory = itertools.count(1)


def schema_of(path: str) -> str:
    """One schema per store file (the same file reopened finds its state again), a new one
    per in-memory store."""
    if path == ":memory:":
        return f"m_{os.getpid()}_{next(_memory)}"
    return "s_" + hashlib.blake2b(os.path.abspath(path).encode(), digest_size=12).hexdigest()


def start_test_database() -> PostgresCluster:
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(f"--store-backend postgresql: {reason}")
    cluster = PostgresCluster(settings={"max_connections": "2000", "fsync": "off",
                                        "synchronous_commit": "off"})
    cluster.init().start()
    use_postgresql(cluster.create_database("edn_tests"), schema_of)
    return cluster
