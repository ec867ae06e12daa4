"""CellBitmapEngine: the R-tree engine's filters and summaries over per-attribute cell bitmaps.

::

    from matchers.cell_bitmap import CellBitmapEngine

    engine = CellBitmapEngine(schema_element)    # same config, dialects and answers as
    engine.bulk_load(ids, mins, maxs)            # RTreeMatchingEngine
    engine.add_filter("s1", FilterSpec(RANGES_DIALECT, "x3 in [10, 20]"))
    engine.match(event)                          # -> ids, insertion order
    engine.match_many(events)                    # -> one id list per event, one index pass
    engine.match_points(points)                  # (m, d) coordinates -> one id list per row
    engine.summary(0.5)                          # the summary manager is the R-tree engine's

For workloads with many subscriptions over many attributes (HEM's: 1M subscriptions, d = 20,
10 wide predicates each), where an R-tree degrades below a scan (66 ms per event there).
Only the *filtering index* differs from :class:`~matchers.rtree_engine.RTreeMatchingEngine`:
filter compilation, exact checks, insertion order, bulk loading, batch matching
(``match_many``: one extraction, then one batch query of the index) and the
maximal-rectangle summary manager (deferred, see :class:`_DeferredMaximal`) are the R-tree
engine's.  Which index serves is measured at every rebuild (``strategy = "measured"``,
:meth:`CellBitmapEngine._measure`): cell bitmaps, or the R-tree engine's paged R-tree where
few dimensions and many hits favour it, so the engine is never much slower than the R-tree
engine.

The index (:class:`~matchers.cell_bitmap_index.CellBitmapIndex`) cuts each dimension into
equi-depth cells and keeps one bitmap per (dimension, cell) over the rectangle rows; a point
picks one cell per dimension, and the AND of those bitmaps holds its candidates, checked
exactly against the rectangles' coordinates.

Measured on HEM's workload at 1M subscriptions (``benchmarks/performance/hem.py``, this 2-core
machine): 0.17 ms per event (``match_box``), 0.16 ms in batches of 64 (``match_points``),
4.2 s to bulk-load (1.0 s of it choosing the index), ~95x a numpy scan.  The time is the
``d`` ANDs over ``n / 64`` words (memory bound), whatever the number of cells; cells only trade memory (``d x cells`` bits
per rectangle: 160 MB at 64) for candidates (37 per event at 16 cells, 15 at 32, 10 at 64,
7.5 at 128).  Memory besides the bits: the rectangles' coordinates (16 d bytes each).

Summaries: the maximal rectangles of HEM's boxes take the summary manager 4 s at 10,000
subscriptions and 50 s at 30,000 (nearly every pair is a candidate cover), so the manager
is deferred to the first summary asked for, and past 20,000 rectangles summaries are cut
from all the rectangles instead (see :class:`_DeferredMaximal`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from matchers.vocabulary import MATCHER_CELL_BITMAP
from wsframework.matching.base import ReportingMatcher

from .cell_bitmap_index import CellBitmapIndex
from .paged_index import PagedBoxIndex
from .rtree_engine import RTreeMatchingEngine
from .summary import MaximalRectangles, str_groups

__all__ = ["CELL_BITMAP_URI", "CellBitmapEngine", "CellBitmapIndex"]

CELL_BITMAP_URI = MATCHER_CELL_BITMAP

_LOG_LIMIT = 1024    # logged summary changes beyond which the next summary reloads
_MAXIMAL_LIMIT = 20_000  # rectangles beyond which summaries are cut from all of them
_CALIBRATION_MIN_ROWS = 4096  # rows below which cells are taken without measuring
_CALIBRATION_ROWS = 100_000   # rows sampled to time both indexes on (and a quarter of them)
_CALIBRATION_QUERIES = 32     # points timed on each
_CALIBRATION_BUDGET = 0.25    # seconds of queries per index and sample, at most


def _sample_points(rng: np.random.Generator, mins: np.ndarray, maxs: np.ndarray,
                   count: int) -> np.ndarray:
    """``count`` points, each coordinate the edge of a random box on that dimension, less
    the edges at the extremes (unconstrained sides) where there are others: points among
    the boxes, as events meeting them would be."""
    d = mins.shape[1]
    points = np.empty((count, d))
    for j in range(d):
        edges = np.concatenate([mins[:, j], maxs[:, j]])
        inner = edges[(edges > edges.min()) & (edges < edges.max())]
        points[:, j] = rng.choice(inner if len(inner) else edges, count)
    return points


def _query_time(index: Any, points: np.ndarray) -> float:
    """Median seconds of ``index.intersecting`` over ``points`` (after one warm-up query;
    stops after ``_CALIBRATION_BUDGET`` seconds)."""
    index.intersecting(points[0], points[0])
    times = []
    started = time.perf_counter()
    for point in points:
        before = time.perf_counter()
        index.intersecting(point, point)
        times.append(time.perf_counter() - before)
        if before - started > _CALIBRATION_BUDGET:
            break
    return float(np.median(times))


class _DeferredMaximal:
    """The R-tree engine's summary manager (:class:`~matchers.summary.MaximalRectangles`),
    brought up to date only when a summary is asked for.

    Finding the maximal rectangles of a million wide boxes in d = 20, half of them
    unconstrained on each dimension, takes the manager minutes (nearly every pair is a
    candidate cover), so loading and changing filters must not wait for it.  Changes are
    logged (``add`` with the box, ``remove``); a bulk load, or more logged changes than a
    quarter of the rows, makes the next summary reload the manager from the engine's live
    rows instead.  ``generation`` counts changes (every change may change the summaries).
    A lock makes concurrent summaries bring the manager up to date once.

    Past ``_MAXIMAL_LIMIT`` rectangles, summaries are cut from *all* the live rectangles
    instead of the maximal ones (all of them, or STR groups of them): still boxes covering
    every filter, in the same numbers, but a precise summary may hold rectangles another
    one covers (redundant for routing, never wrong).  :attr:`maximal_count` still answers
    exactly, at the manager's cost.
    """

    def __init__(self, d: int, live_boxes: Any) -> None:
        self.d = d
        self._live_boxes = live_boxes   # () -> (rows, mins, maxs) of the engine
        self._inner = MaximalRectangles(d)
        self._log: list[tuple[int, Any, Any]] = []  # (row, lo, hi), lo None for a removal
        self._reload = False
        self._size = 0
        self._lock = threading.Lock()
        self.generation = 0

    @property
    def pending(self) -> bool:
        return self._reload or bool(self._log)

    def add(self, row: int, lo: Any, hi: Any) -> None:
        with self._lock:
            self._note((int(row), np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)))
            self._size += 1

    def add_many(self, rows: Any, mins: Any, maxs: Any) -> None:
        for row, lo, hi in zip(np.asarray(rows).tolist(), mins, maxs):
            self.add(row, lo, hi)

    def remove(self, row: int) -> None:
        with self._lock:
            self._note((int(row), None, None))
            self._size -= 1

    def load(self, rows: Any, mins: Any = None, maxs: Any = None) -> None:
        """Everything replaced by the engine's live rows (read at the next summary)."""
        with self._lock:
            self.generation += 1
            self._reload = True
            self._log.clear()
            self._size = len(rows)

    def _note(self, change: tuple[int, Any, Any]) -> None:
        self.generation += 1
        if self._reload:
            return
        if len(self._log) >= max(_LOG_LIMIT, self._size // 4):
            self._reload = True
            self._log.clear()
            return
        self._log.append(change)

    def _sync(self) -> MaximalRectangles:
        inner = self._inner
        try:
            if self._reload:
                inner.load(*self._live_boxes())
            else:
                for row, lo, hi in self._log:
                    if lo is None:
                        inner.remove(row)
                    else:
                        inner.add(row, lo, hi)
        except BaseException:
            self._reload = True  # half applied: start again from the rows next time
            raise
        self._reload = False
        self._log.clear()
        return inner

    @property
    def maximal_count(self) -> int:
        with self._lock:
            return self._sync().maximal_count

    def boxes_at(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._size <= _MAXIMAL_LIMIT:
                return self._sync().boxes_at(target)
            if not self._reload:  # the manager falls behind from here on: reload it if asked
                self._reload = True
                self._log.clear()
        _, mins, maxs = self._live_boxes()
        if target <= 0 or not len(mins):
            return mins[:0].copy(), maxs[:0].copy()
        return str_groups(mins, maxs, target)  # copies when target >= len(mins)


class CellBitmapEngine(RTreeMatchingEngine):
    """:class:`~matchers.rtree_engine.RTreeMatchingEngine` with a :class:`CellBitmapIndex`
    as its filtering index where that is faster: same config, dialects, answers and
    summaries.

    ``config`` as for the R-tree engine (the topic's event schema).  Class attributes:
    :attr:`cells` per dimension (64: ~10 candidates per match on HEM's workload; memory is
    ``d x cells`` bits per rectangle) and :attr:`strategy`: ``"cells"``, ``"rtree"`` (the
    R-tree engine's paged index) or ``"measured"``: when the index is rebuilt from the rows
    (bulk loads; the amortized repacks) and their number has halved or doubled since the
    last measurement, both are built on a sample of the rows and timed on sample points,
    and the faster one indexes all rows (``choice_``).  Cell
    bitmaps win by far where many wide boxes span many dimensions (HEM: 0.17 ms per event
    against 66 ms at 1M); the paged R-tree where few dimensions and many hits make the
    bitmaps' candidates many (d = 4, 1M boxes, 1% hits: 1.3 ms against 5.9 ms).
    """

    uri = CELL_BITMAP_URI
    cells = 64
    strategy = "measured"

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        if self.strategy not in ("cells", "rtree", "measured"):
            raise ValueError(f"strategy must be cells, rtree or measured, not {self.strategy!r}")
        self.choice_ = "rtree" if self.strategy == "rtree" else "cells"
        self._measured_for = 0  # rows at the last measurement (0: none that counts)
        if self.choice_ == "cells":
            self._index = CellBitmapIndex(self.schema.d, cells=self.cells)
        self._maximal = _DeferredMaximal(self.schema.d, self._live_boxes)

    def _live_boxes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        table = self._table
        live = table.live_rows()
        return live, table.mins[live], table.maxs[live]

    def _index_new_rows(self, rows: np.ndarray) -> None:
        if len(rows) >= self._table.boxes * self.REBUILD_FRACTION:
            # the R-tree engine's bulk branch, without gathering boxes for the summary
            # manager: deferred, it reads the live rows when a summary is asked for
            self._maximal.load(self._repack(), None, None)
            return
        super()._index_new_rows(rows)

    def _repack(self) -> np.ndarray:
        table = self._table
        live = table.live_rows()
        # rows 0 .. k - 1 (after a bulk load into an empty engine): views, not copies
        held = slice(0, len(live)) if not len(live) or live[-1] == len(live) - 1 else live
        mins, maxs = table.mins[held], table.maxs[held]
        if self.strategy != "measured":
            choice, index = self.strategy, None
        elif self._measured_for and self._measured_for / 2 <= len(live) <= 2 * self._measured_for:
            choice, index = self.choice_, None  # as many rows as last measured: same answer
        else:
            choice, index = self._measure(live, mins, maxs)
            self._measured_for = len(live) if len(live) >= _CALIBRATION_MIN_ROWS else 0
        self._index = index if index is not None else self._build(choice, live, mins, maxs)
        self.choice_ = choice
        return live

    def _build(self, choice: str, rows: np.ndarray, mins: np.ndarray, maxs: np.ndarray) -> Any:
        if choice == "rtree":
            return PagedBoxIndex.bulk(rows, mins, maxs, dims=self.schema.d)
        return CellBitmapIndex.bulk(rows, mins, maxs, dims=self.schema.d, cells=self.cells)

    def _measure(self, rows: np.ndarray, mins: np.ndarray,
                 maxs: np.ndarray) -> tuple[str, Any]:
        """The faster index on these boxes, and the winner itself when it was built on all
        the rows (else None); cells below ``_CALIBRATION_MIN_ROWS`` rows.

        Both indexes are timed (median per query) on ``_CALIBRATION_QUERIES`` points spread
        over the boxes' edges (events are not known yet).  Up to ``_CALIBRATION_ROWS`` rows
        they are built on all of them; past that on two nested samples (a quarter of
        ``_CALIBRATION_ROWS``, and all of it) and each time is extrapolated linearly to
        the rows held: the bitmaps' cost grows with the rows (words to AND), an R-tree's
        with its hits, and a single small sample would favour the bitmaps (measured: d = 2,
        1M boxes, 0.1% hits: cells 0.96 ms, R-tree 0.2 ms; equal at 20,000 rows).
        """
        n, d = mins.shape
        if n < _CALIBRATION_MIN_ROWS or d == 0:
            return "cells", None
        rng = np.random.default_rng(0)
        whole = n <= _CALIBRATION_ROWS
        order = None if whole else rng.permutation(n)[:_CALIBRATION_ROWS]
        sample = (mins, maxs) if whole else (mins[order], maxs[order])
        points = _sample_points(rng, *sample, _CALIBRATION_QUERIES)
        sizes = [n] if whole else [_CALIBRATION_ROWS // 4, _CALIBRATION_ROWS]
        estimates: dict[str, float] = {}
        built: dict[str, Any] = {}
        for choice in ("cells", "rtree"):
            times = []
            for size in sizes:
                if whole:
                    index = self._build(choice, rows, mins, maxs)
                    built[choice] = index
                else:
                    pick = np.sort(order[:size])
                    index = self._build(choice, np.arange(size, dtype=np.int64),
                                        mins[pick], maxs[pick])
                times.append(_query_time(index, points))
                del index
            if whole:
                estimates[choice] = times[0]
            else:
                slope = max(times[1] - times[0], 0.0) / (sizes[1] - sizes[0])
                estimates[choice] = times[1] + slope * (n - sizes[1])
        choice = min(estimates, key=estimates.get)
        return choice, built.get(choice)

    def describe(self) -> dict[str, Any]:
        """As the R-tree engine's, without bringing the summary manager up to date:
        ``maximal`` is None while changes are pending (the next summary computes it)."""
        maximal = self._maximal
        return {**ReportingMatcher.describe(self), "dims": list(self.schema.dims),
                "rectangles": self._table.boxes, "cells": self.cells,
                "strategy": self.strategy, "index": self.choice_,
                "maximal": None if maximal.pending else maximal.maximal_count}

    # -- batches -----------------------------------------------------------------------------
    def match_points(self, points: Any, highs: Any | None = None) -> list[list[str]]:
        """For ``m`` events given as coordinates (``points`` (m, d); eCube boxes when
        ``highs`` is given): the ids of the filters whose rectangles each meets, one index
        pass for all, insertion order.  The exact answer for box filters (bulk-loaded, or
        exact rectangles met by clean events); candidates for the others."""
        lows = np.asarray(points, dtype=np.float64).reshape(-1, self.schema.d)
        highs = lows if highs is None else np.asarray(highs, dtype=np.float64).reshape(lows.shape)
        rows, counts = self._intersecting_batch(lows, highs)
        m = len(lows)
        if not len(rows):
            return [[] for _ in range(m)]
        table = self._table
        # (event, seq) keys: one sort puts each event's filters in insertion order
        # (de-duplicated for filters of several rectangles)
        stride = np.int64(max(table.next_seq, 1))
        keys = np.repeat(np.arange(m, dtype=np.int64), counts) * stride + table.owner[rows]
        keys = np.unique(keys) if table.multi else np.sort(keys)
        owner, seqs = np.divmod(keys, stride)
        ids = table.ids[seqs].tolist()
        ends = np.searchsorted(owner, np.arange(1, m + 1, dtype=np.int64)).tolist()
        return [ids[start:end] for start, end in zip([0] + ends[:-1], ends)]
