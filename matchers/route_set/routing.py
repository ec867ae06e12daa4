"""The routing hot path: which servers' boxes meet each event, answered the fastest of
several ways, chosen by measurement per table.

Structure (measured; ``edn bench matchers``)
    Every change builds a new immutable :class:`~.table.RoutingTable` (all boxes of all servers in one
    array, grouped by server, each server's boxes largest first) and swaps one reference.
    Readers take the reference once and never see a half-updated table; writers are
    serialized by a lock.  Replacing one server's summary re-sorts only that server's boxes.

    Which servers' boxes hold a point is answered one of three ways:

    * **bitmap** (batches): per server and dimension, bitmaps over its boxes indexed by rank
      (:class:`~.bitmaps.RankBitmaps`); a point costs two binary searches and two bitmap rows per
      dimension and server, independent of how many boxes contain it or how wide they are.
      Needs 2d (K+1) K / 8 bytes per server of K boxes, so only up to
      :data:`~.bitmaps.MAX_BITMAP_BOXES` boxes per server.
    * **scan** (numpy; batches) / **columns** (single events): for a batch, per server, its
      boxes are tested largest first, in chunks, against the points not yet known to be
      routed there; a point leaves a server's work list at its first hit (imprecise
      summaries settle most points on their largest boxes).  A single event is tested
      against all boxes at once, one contiguous column per dimension.
    * **rtree**: one R-tree over all boxes (libspatialindex; a batch is one
      ``Index_Intersects_id_v`` call), box hits mapped to servers.  Wins when boxes are
      many and small and few contain a point: misses are pruned near the root.

    Measured with 10 servers x 1,000 boxes in d = 4 (``edn bench matchers``), per event in
    batches: bitmap ~7 us, scan 10-35 us, R-tree 60-130 us; single events: columns ~32 us,
    R-tree 80-130 us; with precise small summaries and a low hit ratio the R-tree overtakes
    the scans.  So the table decides by measurement: after each change, the first batch of
    at least :data:`CALIBRATION_POINTS` events is routed every way on its first points, and
    the first :data:`CALIBRATION_POINTS` single events are kept and then routed every way;
    the fastest serves until the next change.  All give the same answer.  One global index
    beat one index per server (10 ctypes calls per event) in every measurement.

Bloom filters
    Servers whose summary has Bloom filters (:mod:`matchers.summary.bloom`) are routed by
    their boxes like the others, then :func:`drop_bloom_misses` withdraws each event a
    filter rejects: per Bloom dimension the batch's coordinates are hashed once, then each
    such server tests the events its boxes took.  A table without filters skips it.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..summary.bloom import hash_pairs
from .table import RoutingTable

__all__ = ["CALIBRATION_POINTS", "calibration_cpu", "route", "strategies", "candidates", "by_bitmaps", "by_rtree",
           "by_scan", "by_columns", "by_cells", "fastest", "drop_bloom_misses"]

CALIBRATION_POINTS = 64
_FIRST_CHUNK = 16
_MAX_CHUNK = 256

# CPU seconds this thread spent calibrating (building indexes, timing every strategy). A
# caller that measures routing CPU subtracts it: calibration runs once per table change and
# can cost up to a second on a large table, which would otherwise read as a slow event path
# right after every precision change and mislead the self-tuning controller.
_calibration = threading.local()


def calibration_cpu() -> float:
    """Cumulative thread CPU seconds spent calibrating route tables in the calling thread."""
    return getattr(_calibration, "seconds", 0.0)


def _calibrating(run):
    started = time.thread_time()
    try:
        return run()
    finally:
        _calibration.seconds = calibration_cpu() + (time.thread_time() - started)


def route(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> list[frozenset]:
    """One frozenset of server ids per query box [lo[i], hi[i]], by ``table``."""
    m = lo.shape[0]
    if not table.servers or m == 0:
        return [frozenset()] * m
    if lo.shape[1] != table.mins.shape[1]:
        raise ValueError(f"points have {lo.shape[1]} coordinates; summaries {table.mins.shape[1]}")
    if len(table.owner) == 0:
        return table.sets(np.zeros((m, len(table.servers)), dtype=bool))
    if m == 1:
        strategy = table.choice["single"]
        if strategy is None:
            strategy = _calibrating(lambda: calibrate_single(table, lo, hi))
    else:
        strategy = table.choice["batch"]
        if strategy is None and m >= CALIBRATION_POINTS:
            # One thread calibrates (building the indexes and timing every way costs up to
            # a second of CPU on a large table); the others route the numpy way meanwhile
            # instead of each calibrating the same table again.
            if table.calibrating.acquire(blocking=False):
                try:
                    strategy = table.choice["batch"] or _calibrating(lambda: calibrate_batch(
                        table, lo[:CALIBRATION_POINTS], hi[:CALIBRATION_POINTS]))
                finally:
                    table.calibrating.release()
    method = strategies(m == 1).get(strategy or ("columns" if m == 1 else "scan"))
    hit = method(table, lo, hi)
    if table.blooms:
        drop_bloom_misses(table, lo, hi, hit)
    return table.sets(hit)


def drop_bloom_misses(table: RoutingTable, lo: np.ndarray, hi: np.ndarray,
                      hit: np.ndarray) -> None:
    """Clear ``hit[i, s]`` where a Bloom filter of server ``s`` rejects event ``i``'s
    coordinate; an event spanning an interval on that dimension (eCube) cannot be looked up
    and keeps its hit."""
    hashed: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # dimension -> hashes of the batch
    for position, filters in table.blooms:
        events = np.flatnonzero(hit[:, position])
        for j, bloom in filters:
            if not len(events):
                break
            pair = hashed.get(j)
            if pair is None:
                pair = hashed[j] = hash_pairs(lo[:, j])
            passed = bloom.contains_hashed(pair[0][events], pair[1][events])
            passed |= lo[events, j] != hi[events, j]
            hit[events[~passed], position] = False
            events = events[passed]


def strategies(single: bool) -> dict:
    """The ways of routing one event (``single``) or a batch, by name."""
    if single:
        # (bitmaps cost a numpy pass per server and dimension: ~10x slower for one event)
        return {"columns": by_columns, "rtree": by_rtree, "cells": by_cells}
    return {"scan": by_scan, "rtree": by_rtree, "bitmap": by_bitmaps, "cells": by_cells}


def candidates(table: RoutingTable, single: bool) -> dict:
    """The strategies worth timing on ``table`` (bitmaps only when every server has them)."""
    methods = strategies(single)
    if "bitmap" in methods and any(bitmap is None for bitmap in table.bitmaps):
        del methods["bitmap"]  # some server has too many boxes for bitmaps
    table.index  # build the tree and the cells outside the timing
    table.cells
    return methods


def calibrate_batch(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> str:
    methods = candidates(table, single=False)
    if "bitmap" in methods:
        for bitmaps in table.bitmaps:
            bitmaps.value  # build them outside the timing
    choice = fastest({name: (lambda method=method: method(table, lo, hi))
                      for name, method in methods.items()})
    table.choice["batch"] = choice
    return choice


def calibrate_single(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> str | None:
    """Until CALIBRATION_POINTS single events were seen, use the numpy way and keep them;
    then time every way on them and keep the fastest."""
    recent = table.recent
    if len(recent) < CALIBRATION_POINTS:
        recent.append((lo, hi))
        return None
    sample = list(recent[:CALIBRATION_POINTS])
    methods = candidates(table, single=True)
    choice = fastest({name: (lambda method=method: [method(table, a, b) for a, b in sample])
                      for name, method in methods.items()})
    table.choice["single"] = choice
    recent.clear()
    return choice


def by_bitmaps(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    hit = np.zeros((lo.shape[0], len(table.servers)), dtype=bool)
    for position, bitmaps in enumerate(table.bitmaps):
        if bitmaps is not None:
            hit[:, position] = bitmaps.value.any_hit(lo, hi)
    return hit


def by_cells(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Cell bitmaps (:mod:`.cells`) for points; a batch holding boxes (eCube events) is
    scanned instead."""
    if not np.array_equal(lo, hi):
        return by_scan(table, lo, hi)
    return table.cells.hits(lo, table.owner, len(table.servers))


def by_rtree(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    hit = np.zeros((lo.shape[0], len(table.servers)), dtype=bool)
    if lo.shape[0] == 1:
        hit[0, table.owner[table.index.intersecting(lo[0], hi[0])]] = True
        return hit
    ids, counts = table.index.intersecting_batch(lo, hi)
    hit[np.repeat(np.arange(lo.shape[0]), counts), table.owner[ids]] = True
    return hit


def by_scan(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    m, d = lo.shape
    hit = np.zeros((m, len(table.servers)), dtype=bool)
    mins, maxs, starts = table.mins, table.maxs, table.starts
    everyone = np.arange(m)
    for position in range(len(table.servers)):
        begin, end = int(starts[position]), int(starts[position + 1])
        waiting = everyone
        chunk = _FIRST_CHUNK
        while begin < end and len(waiting):
            stop = min(begin + chunk, end)
            inside = np.ones((len(waiting), stop - begin), dtype=bool)
            for j in range(d):
                inside &= mins[begin:stop, j] <= hi[waiting, j, None]
                inside &= maxs[begin:stop, j] >= lo[waiting, j, None]
            found = inside.any(axis=1)
            hit[waiting[found], position] = True
            waiting = waiting[~found]
            begin = stop
            chunk = min(chunk * 2, _MAX_CHUNK)
    return hit


def by_columns(table: RoutingTable, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """One event against every box at once, a contiguous column per dimension (measured
    faster for one event than any early-exit loop: numpy's per-call cost dominates)."""
    low, high = lo[0].tolist(), hi[0].tolist()
    columns_lo, columns_hi = table.columns_lo, table.columns_hi
    inside = columns_lo[0] <= high[0]
    inside &= columns_hi[0] >= low[0]
    for j in range(1, len(low)):
        inside &= columns_lo[j] <= high[j]
        inside &= columns_hi[j] >= low[j]
    hit = np.zeros((1, len(table.servers)), dtype=bool)
    hit[0, table.owner[inside]] = True
    return hit


def fastest(runs: dict, rounds: int = 3) -> str:
    """The name of the fastest of ``runs`` (best of ``rounds`` timings each, the runs
    taking turns: on a busy machine a burst of preemption then hits one run of each rather
    than every run of one)."""
    timings = {name: float("inf") for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            timings[name] = min(timings[name], time.perf_counter() - start)
    return min(timings, key=timings.get)
