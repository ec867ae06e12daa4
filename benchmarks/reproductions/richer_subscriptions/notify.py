"""Notification conditions (seed section 5): messages saved, the index's cost, re-indexings.

``notify_figures(quick)`` returns, by name:

* ``trace``: a price trace (a Gaussian random walk from 100, sigma 0.5 per update; 10,000
  updates, 2,000 quick). ``saved``: for each delta and tolerance t, the events one
  subscription with ``edn:NotifyWhen`` receives (without one it receives every update),
  and the share of messages saved; counted with the source's own rule
  (:meth:`NotifyWhen.fires`).
* ``index``: N subscriptions (10k, 100k, 1M; 10k and 50k quick) on one Value, deltas drawn
  from 1,000 levels, all with L = the first price (the paper's v0), in two regimes:
  ``narrow`` deltas in [0.5, 5] (a sizeable share of them reached per update of this walk)
  and ``wide`` deltas in [5, 50] (few reached: the regime the index is for); per update of
  the walk, the mean cost of :meth:`NotifyIndex.notify` (look up, re-key the M reached),
  against a scan of every subscription in Python (:meth:`NotifyIndex.scan`, a few updates)
  and a vectorised numpy scan (thresholds in arrays, the reached ones' thresholds
  rewritten); M per update; the index's answer checked against the numpy scan each update.
* ``reindex``: for 10,000 subscriptions (2,000 quick), deltas from 1,000 levels in
  [0.5, 5], re-indexings (keys entering or leaving the sorted structures) and
  notifications over the trace with one tolerance t for all of them, t = 0, 0.1, 0.25, 0.5
  (seed 5.4's simple case: fewer re-indexings, at the price of some "may" notifications).

In process and single-threaded: the index module itself, no HTTP or SQLite (the source adds
one SQLite write transaction per event, whatever the index costs).
"""
from __future__ import annotations

import random
import time

import numpy as np

from subscription_manager.notify_index import NotifyIndex
from subscription_manager.notify_when import NotifyWhen

__all__ = ["notify_figures", "price_trace"]

_NS = (("q", "urn:quotes"),)
_VALUE = "/q:quote/q:price"


def price_trace(length: int, seed: int = 17, start: float = 100.0, sigma: float = 0.5) -> list[float]:
    rng = random.Random(seed)
    walk = [start]
    for _ in range(length - 1):
        walk.append(walk[-1] + rng.gauss(0.0, sigma))
    return walk


def _saved(trace: list[float]) -> list[dict]:
    rows = []
    for delta in (0.5, 1.0, 2.0, 5.0):
        for share in (0.0, 0.25, 0.5):
            condition = NotifyWhen(_VALUE, _NS, delta, False, delta * share)
            delivered = len(condition.notified(trace))
            rows.append({"delta": delta, "tolerance": delta * share, "delivered": delivered,
                         "without_notify_when": len(trace),
                         "saved_share": round(1 - delivered / len(trace), 4)})
    return rows


def _conditions(levels: int, tolerance: float, low: float = 0.5,
                high: float = 5.0) -> list[NotifyWhen]:
    deltas = np.linspace(low, high, levels)
    return [NotifyWhen(_VALUE, _NS, float(d), False, tolerance) for d in deltas]


def _index_cost(size: int, trace: list[float], updates: int, scan_updates: int,
                deltas: tuple[float, float], seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    conditions = _conditions(1000, 0.0, *deltas)
    level = rng.integers(0, len(conditions), size)
    delta = np.array([c.changed_by for c in conditions])[level]
    v0 = trace[0]
    index = NotifyIndex()
    started = time.perf_counter()
    for i in range(size):
        index.add(str(i), conditions[level[i]], v0)
    build_s = time.perf_counter() - started
    lo, hi = v0 - delta, v0 + delta  # the numpy scan's own copy of the thresholds
    index_s = numpy_s = 0.0
    reached_total = 0
    for value in trace[1:updates + 1]:
        t0 = time.perf_counter()
        reached = index.notify(value)
        t1 = time.perf_counter()
        hit = np.nonzero((lo >= value) | (hi <= value))[0]
        lo[hit], hi[hit] = value - delta[hit], value + delta[hit]
        t2 = time.perf_counter()
        index_s += t1 - t0
        numpy_s += t2 - t1
        reached_total += len(reached)
        if len(hit) != len(reached) or {int(s) for s in reached} != set(hit.tolist()):
            raise AssertionError(f"index and scan disagree at {value}")
    python_s = 0.0
    for value in trace[updates + 1:updates + 1 + scan_updates]:
        t0 = time.perf_counter()
        index.scan(value)
        python_s += time.perf_counter() - t0
    return {"subscriptions": size, "deltas": list(deltas), "updates": updates,
            "build_s": round(build_s, 2),
            "index_us_per_update": round(1e6 * index_s / updates, 1),
            "reached_per_update": round(reached_total / updates, 1),
            "index_us_per_reached": round(1e6 * index_s / max(1, reached_total), 2),
            "numpy_scan_us_per_update": round(1e6 * numpy_s / updates, 1),
            "python_scan_updates": scan_updates,
            "python_scan_us_per_update": round(1e6 * python_s / max(1, scan_updates), 1)}


def _reindex(size: int, trace: list[float], seed: int = 5) -> list[dict]:
    rows = []
    for tolerance in (0.0, 0.1, 0.25, 0.5):
        rng = random.Random(seed)
        conditions = _conditions(1000, tolerance)
        index = NotifyIndex()
        for i in range(size):
            index.add(str(i), rng.choice(conditions), trace[0])
        after_build = index.reindexings
        notified = sum(len(index.notify(value)) for value in trace[1:])
        updates = len(trace) - 1
        reindexings = index.reindexings - after_build
        rows.append({"tolerance": tolerance, "subscriptions": size,
                     "updates": updates, "notifications": notified,
                     "reindexings": reindexings,
                     "reindexings_per_update": round(reindexings / updates, 2),
                     "reindexings_per_notification": round(reindexings / max(1, notified), 4)})
    return rows


def notify_figures(quick: bool = False) -> dict:
    trace = price_trace(2_000 if quick else 10_000)
    sizes = (10_000, 50_000) if quick else (10_000, 100_000, 1_000_000)
    updates = 100 if quick else 200
    return {
        "trace": {"updates": len(trace), "start": trace[0], "sigma": 0.5,
                  "min": round(min(trace), 2), "max": round(max(trace), 2)},
        "saved": _saved(trace),
        # the wide regime over more updates: the walk needs a few hundred to cross 5
        "index": {regime: [_index_cost(size, trace, count, 3, deltas) for size in sizes]
                  for regime, deltas, count in (("narrow", (0.5, 5.0), updates),
                                                ("wide", (5.0, 50.0), 10 * updates))},
        "reindex": _reindex(2_000 if quick else 10_000, trace),
    }


if __name__ == "__main__":  # python -m benchmarks.reproductions.richer_subscriptions.notify [--quick]
    import json
    import sys
    print(json.dumps(notify_figures(quick="--quick" in sys.argv), indent=1))
