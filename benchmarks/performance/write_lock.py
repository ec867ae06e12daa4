"""How long a write waits for SQLite's write lock while another process writes, two ways side by
side in one run.

Two processes share one SQLite database (WAL), as two workers of one role do: a writer
process commits short transactions back to back (a renewal storm's, say), and this process
times its own short write transactions (one row, committed) at a steady pace:

* ``sqlite_busy_handler`` -- ``BEGIN IMMEDIATE`` on a connection with SQLite's busy timeout,
  whose handler sleeps 1, 2, 5, 10, 15, 20, 25, then 50 and 100 ms between tries;
* ``store`` -- :meth:`wsframework.store.Store.transaction`, which tries again in sleeps of
  at most :data:`wsframework.store.WRITE_LOCK_POLL_MAX`.

Figures: ``write_lock_p50_ms_*``, ``write_lock_p99_ms_*`` and ``write_lock_max_ms_*`` (the
medians over rounds, alternated), and ``write_lock_p99_busy_handler_over_store``.
"""
from __future__ import annotations

import multiprocessing
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from wsframework.store import Store

WAYS = ("sqlite_busy_handler", "store")
_PACE = 0.002  # seconds between two timed transactions
_WRITER_PAUSE = 0.0005  # seconds between two of the writer's transactions
_WRITER_ROWS = 50  # rows each of the writer's transactions updates


def _writer(path: str, stop) -> None:
    store = Store(path, durability="normal")
    i = 0
    while not stop.is_set():
        with store.transaction() as conn:  # a write of some rows, as a Renew's with its triggers
            conn.executemany("UPDATE counted SET n = n + 1 WHERE id = ?",
                             [((i + k) % 100,) for k in range(_WRITER_ROWS)])
        i += 1
        time.sleep(_WRITER_PAUSE)


def _timed(path: str, way: str, n: int) -> list[float]:
    if way == "store":
        store = Store(path, durability="normal")

        def write(k):
            with store.transaction() as conn:
                conn.execute("INSERT INTO timed(k) VALUES (?)", (k,))
    else:
        conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        conn.execute("PRAGMA synchronous=NORMAL")

        def write(k):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO timed(k) VALUES (?)", (k,))
            conn.execute("COMMIT")
    out = []
    for k in range(n):
        started = time.perf_counter()
        write(k)
        out.append((time.perf_counter() - started) * 1000)
        time.sleep(_PACE)
    return out


def run(quick: bool = False) -> dict:
    n, rounds = (100, 2) if quick else (500, 3)
    context = multiprocessing.get_context("spawn")  # no fork of this process's connections
    figures: dict = {}
    samples: dict[str, dict[str, list[float]]] = {w: {"p50": [], "p99": [], "max": []}
                                                  for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="edn-write-lock-") as tmp:
        path = str(Path(tmp) / "shared.db")
        setup = Store(path, durability="normal")
        setup.executescript("CREATE TABLE counted (id INTEGER PRIMARY KEY, n INTEGER);"
                            "CREATE TABLE timed (k INTEGER)")
        with setup.transaction() as conn:
            conn.executemany("INSERT INTO counted VALUES (?, 0)", [(i,) for i in range(100)])
        setup.close()
        for r in range(rounds):
            for way in (WAYS if r % 2 == 0 else WAYS[::-1]):
                stop = context.Event()
                writer = context.Process(target=_writer, args=(path, stop), daemon=True)
                writer.start()
                try:
                    _wait_for_writes(path)
                    times = _timed(path, way, n)
                finally:
                    stop.set()
                    writer.join(30)
                p50, p99 = np.percentile(times, [50, 99])
                samples[way]["p50"].append(float(p50))
                samples[way]["p99"].append(float(p99))
                samples[way]["max"].append(max(times))
    for way in WAYS:
        for figure, values in samples[way].items():
            figures[f"write_lock_{figure}_ms_{way}"] = round(statistics.median(values), 2)
    store_p99 = figures["write_lock_p99_ms_store"]
    figures["write_lock_p99_busy_handler_over_store"] = (
        round(figures["write_lock_p99_ms_sqlite_busy_handler"] / store_p99, 2)
        if store_p99 > 0 else None)
    return figures


def _wait_for_writes(path: str, timeout: float = 30.0) -> None:
    """Until the writer process has committed (it started and holds the lock at times)."""
    conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    try:
        deadline = time.monotonic() + timeout
        first = conn.execute("SELECT sum(n) FROM counted").fetchone()[0]
        while conn.execute("SELECT sum(n) FROM counted").fetchone()[0] == first:
            if time.monotonic() > deadline:
                raise RuntimeError("the writer process committed nothing")
            time.sleep(0.01)
    finally:
        conn.close()
