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

The index (:class:`CellBitmapIndex`) cuts each dimension ``j`` into at most ``cells`` cells
(equi-depth over the rectangles' inner edges, so that every cell holds about as many edges)
and keeps, per ``(j, cell)``, one bit per rectangle row (numpy ``uint64`` words): set when
the rectangle's side on ``j`` meets the cell.  A point event picks one cell per dimension;
the AND of those ``d`` bitmaps holds every rectangle containing the point, plus a few that
only meet its cells; those candidates are then checked exactly against the rectangles'
coordinates, so the index answers exactly the rectangles meeting the query, as the R-tree
does.  A query side spanning several cells ORs them (up to a few) or skips that dimension:
the exact check keeps the answer right either way.

Rows are the engine's rectangle rows (bit ``r`` is row ``r``), so adding a rectangle sets
its bits in place (the words grow by doubling) and removing one clears its column.  Cells
are re-cut from all rows when the rows outnumber twice those they were cut for (the engine
repacks, amortized as for the R-tree's pages).

Measured on HEM's workload at 1M subscriptions (``benchmarks/hem.py``, this 2-core
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

from ._rtree import PagedBoxIndex
from .rtree_engine import RTreeMatchingEngine
from .summary import MaximalRectangles, str_groups

__all__ = ["CELL_BITMAP_URI", "CellBitmapEngine", "CellBitmapIndex"]

CELL_BITMAP_URI = MATCHER_CELL_BITMAP

_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.setflags(write=False)
_OR_LIMIT = 4        # a query side spanning more cells than this skips its dimension
_BATCH_CHECK = 256   # candidates of one query of a batch beyond which they are checked alone
_MIN_RECUT = 1024    # rows below which cells are not re-cut (a scan of them is cheap)
_CUT_SAMPLE = 65_536  # rows whose edges place the cuts
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


def _cell_cuts(mins: np.ndarray, maxs: np.ndarray, cells: int) -> np.ndarray:
    """(d, cells - 1) ascending inner cell boundaries, +inf padded.

    Equi-depth over the rectangles' edges (a sample of them past ``_CUT_SAMPLE`` rows),
    leaving out edges at the column's extremes (unconstrained sides: they cut nothing), so
    each cell holds about as many edges and so about as many rectangles that meet it
    without containing the whole cell.  Any cuts give exact answers; these keep the
    candidates few.
    """
    d = mins.shape[1]
    cuts = np.full((d, max(cells - 1, 0)), np.inf)
    if not len(mins) or cells < 2:
        return cuts
    if len(mins) > _CUT_SAMPLE:
        sample = np.random.default_rng(0).choice(len(mins), _CUT_SAMPLE, replace=False)
        mins, maxs = mins[sample], maxs[sample]
    quantiles = np.linspace(0.0, 1.0, cells + 1)[1:-1]
    for j in range(d):
        edges = np.concatenate([mins[:, j], maxs[:, j]])
        low, high = edges.min(), edges.max()
        inner = edges[(edges > low) & (edges < high)]
        if not len(inner):
            inner = np.array([low, high]) if low < high else inner
        if not len(inner):
            continue
        column = np.unique(np.quantile(inner, quantiles, method="inverted_cdf"))
        cuts[j, :len(column)] = column
    return cuts


class CellBitmapIndex:
    """Rows of boxes in ``dims`` dimensions, queried by per-dimension cell bitmaps.

    The interface of :class:`~matchers._rtree.PagedBoxIndex` (``bulk``, ``insert``,
    ``delete``, ``intersecting``, ``needs_repack``) plus :meth:`intersecting_batch`.  Rows
    are small non-negative integers (the engine's rectangle rows), each held at most once.
    Queries only read: concurrent ones are safe (each thread has its own scratch words);
    mutations are the caller's to serialize.
    """

    def __init__(self, dims: int, *, cells: int = 64, cuts: np.ndarray | None = None) -> None:
        if dims < 0 or cells < 1:
            raise ValueError("dims must be >= 0 and cells >= 1")
        self.dims = dims
        self.cells = cells
        self._cuts = np.full((dims, max(cells - 1, 0)), np.inf) if cuts is None else cuts
        self._cuts_list = [self._cuts[j] for j in range(dims)]
        self._words = 0
        self._bits = np.zeros((dims, cells, 0), dtype=np.uint64)
        self._mins = np.zeros((0, dims))
        self._maxs = np.zeros((0, dims))
        self._live = np.zeros(0, dtype=bool)
        self._count = 0
        self._cut_for = 0   # rows the cells were cut for
        self._top = 0       # 1 + highest row ever held (rows above are empty)
        self._scratch = threading.local()

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def bulk(cls, rows: np.ndarray, mins: np.ndarray, maxs: np.ndarray, *, dims: int,
             cells: int = 64) -> CellBitmapIndex:
        """An index holding ``rows`` (n,) with boxes ``mins``/``maxs`` (n, dims), cells cut
        for them."""
        rows = np.asarray(rows, dtype=np.int64)
        mins = np.asarray(mins, dtype=np.float64).reshape(len(rows), dims)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(len(rows), dims)
        if len(rows) and not np.all(mins <= maxs):
            raise ValueError("a box has a minimum above its maximum (or a NaN)")
        index = cls(dims, cells=cells, cuts=_cell_cuts(mins, maxs, cells))
        index._cut_for = len(rows)
        if not len(rows):
            return index
        top = int(rows.max()) + 1
        index._reserve(top + top // 8 + 64)  # headroom: the next adds do not copy it all
        dense = top == len(rows) and bool(np.all(rows[1:] > rows[:-1]))  # rows 0 .. n - 1
        where = slice(0, top) if dense else rows
        index._mins[where] = mins
        index._maxs[where] = maxs
        index._live[where] = True
        index._count = len(rows)
        index._top = top
        # one bool column per (j, cell) over rows 0 .. top - 1, packed 64 to a word
        small = np.uint8 if cells <= 255 else np.int32
        flags = np.zeros(index._words * 64, dtype=bool)
        above = np.empty(top, dtype=bool)
        for j in range(dims):
            first = np.full(top, cells, dtype=small)  # rows not held: in no cell
            last = np.zeros(top, dtype=small)
            first[where] = index._cell_of(j, mins[:, j])
            last[where] = index._cell_of(j, maxs[:, j])
            for cell in range(int(first.min()), int(last.max()) + 1):
                np.less_equal(first, cell, out=flags[:top])
                np.greater_equal(last, cell, out=above)
                flags[:top] &= above
                index._bits[j, cell] = np.packbits(flags, bitorder="little").view(np.uint64)
        return index

    def _cell_of(self, j: int, values: Any) -> Any:
        return np.searchsorted(self._cuts_list[j], values, side="right")

    def _reserve(self, rows: int) -> None:
        """Room for rows 0 .. rows - 1 (capacity doubles)."""
        words = -(-rows // 64)
        if words <= self._words:
            return
        words = max(words, 2 * self._words, 1)
        bits = np.zeros((self.dims, self.cells, words), dtype=np.uint64)
        bits[:, :, :self._words] = self._bits
        self._bits = bits
        held = len(self._live)
        mins, maxs = np.zeros((words * 64, self.dims)), np.zeros((words * 64, self.dims))
        mins[:held], maxs[:held] = self._mins, self._maxs
        live = np.zeros(words * 64, dtype=bool)
        live[:held] = self._live
        self._mins, self._maxs, self._live = mins, maxs, live
        self._words = words

    # -- mutations ---------------------------------------------------------------------------
    def insert(self, row: int, lo: np.ndarray, hi: np.ndarray) -> None:
        row = int(row)
        lo = np.asarray(lo, dtype=np.float64).reshape(self.dims)
        hi = np.asarray(hi, dtype=np.float64).reshape(self.dims)
        if not np.all(lo <= hi):
            raise ValueError(f"box {row}: a minimum is above its maximum (or NaN)")
        if row < 0:
            raise ValueError("rows are non-negative")
        self._reserve(row + 1)
        if self._live[row]:
            raise ValueError(f"row {row} is already held")
        word, bit = divmod(row, 64)
        mask = np.uint64(1 << bit)
        firsts, lasts = self._cells(lo[None, :], hi[None, :])
        bits = self._bits
        for j, (first, last) in enumerate(zip(firsts[0], lasts[0])):
            column = bits[j, first:last + 1, word]
            column |= mask
        self._mins[row], self._maxs[row] = lo, hi
        self._live[row] = True
        self._count += 1
        self._top = max(self._top, row + 1)

    def delete(self, row: int, lo: Any = None, hi: Any = None) -> None:
        """Forget ``row`` (``lo``/``hi`` are accepted for the R-tree's signature)."""
        row = int(row)
        if row >= len(self._live) or not self._live[row]:
            raise ValueError(f"row {row} is not held")
        word, bit = divmod(row, 64)
        self._bits[:, :, word] &= np.uint64(~(1 << bit) & 0xFFFFFFFFFFFFFFFF)
        self._live[row] = False
        self._count -= 1

    def needs_repack(self) -> bool:
        """True once rows outnumber twice those the cells were cut for."""
        return self._count > 2 * max(self._cut_for, _MIN_RECUT // 2)

    # -- queries -----------------------------------------------------------------------------
    def _cells(self, lows: np.ndarray, highs: np.ndarray) -> tuple[list, list]:
        """The first and last cell each of ``m`` query boxes (m, d) meets on each dimension,
        as lists of lists (the count of cuts at or below a value: ``searchsorted(...,
        "right")``, as the bits were set, for all queries and dimensions at once)."""
        cuts = self._cuts[None, :, :]
        first = (cuts <= lows[:, :, None]).sum(axis=2)
        if lows is highs or np.array_equal(lows, highs):
            listed = first.tolist()
            return listed, listed
        return first.tolist(), (cuts <= highs[:, :, None]).sum(axis=2).tolist()

    def _candidates_of(self, first: list, last: list, acc: np.ndarray) -> np.ndarray:
        """Rows whose bits survive the AND of the cells a query meets (a superset of its
        answer): ``first``/``last`` its cells per dimension, ``acc`` scratch words."""
        bits = self._bits
        words = len(acc)
        started = False
        for j, (low, high) in enumerate(zip(first, last)):
            if low == high:
                cell = bits[j, low, :words]
            elif high - low < _OR_LIMIT:
                cell = np.bitwise_or.reduce(bits[j, low:high + 1, :words], axis=0)
            else:
                continue  # wide on this dimension: the exact check decides
            if started:
                np.bitwise_and(acc, cell, out=acc)
            else:
                np.copyto(acc, cell)
                started = True
        if not started:
            return np.flatnonzero(self._live[:self._top])
        hit = np.flatnonzero(acc)
        if not len(hit):
            return _NO_ROWS
        flags = np.unpackbits(acc[hit].view(np.uint8), bitorder="little").reshape(len(hit), 64)
        which, bit = np.nonzero(flags)
        return hit[which] * 64 + bit

    def _scratch_words(self) -> np.ndarray:
        words = -(-self._top // 64)
        acc = getattr(self._scratch, "acc", None)
        if acc is None or len(acc) < words:
            acc = self._scratch.acc = np.empty(max(words, 1), dtype=np.uint64)
        return acc[:words]

    def intersecting(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Rows whose boxes meet [lo, hi] (closed), ascending."""
        if not self._count:
            return _NO_ROWS
        lo = np.asarray(lo, dtype=np.float64).reshape(1, self.dims)
        hi = lo if hi is None else np.asarray(hi, dtype=np.float64).reshape(1, self.dims)
        first, last = self._cells(lo, hi)
        rows = self._candidates_of(first[0], last[0], self._scratch_words())
        return rows[self._inside(rows, lo, hi)] if len(rows) else rows

    def intersecting_batch(self, mins: np.ndarray, maxs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``m`` query boxes ``(m, d)``: their hit rows concatenated query by query (each
        query's ascending) and the number of hits of each (``(rows, counts)``, as the
        R-tree's batch query)."""
        mins = np.asarray(mins, dtype=np.float64)
        maxs = np.asarray(maxs, dtype=np.float64)
        if mins.ndim != 2 or mins.shape != maxs.shape or mins.shape[1] != self.dims:
            raise ValueError(f"batch queries want (m, {self.dims}) arrays; got {mins.shape}")
        m = len(mins)
        counts = np.zeros(m, dtype=np.int64)
        if not self._count or not m:
            return _NO_ROWS, counts
        acc = self._scratch_words()
        firsts, lasts = self._cells(mins, maxs)
        found, checked = [], np.zeros(m, dtype=bool)
        for query, (first, last) in enumerate(zip(firsts, lasts)):
            rows = self._candidates_of(first, last, acc)
            if len(rows) > _BATCH_CHECK:  # many: checked now, while they are in cache
                rows = rows[self._inside(rows, mins[query], maxs[query])]
                checked[query] = True
            found.append(rows)
        sizes = np.fromiter(map(len, found), dtype=np.int64, count=m)
        if not sizes.any():
            return _NO_ROWS, counts
        rows = np.concatenate(found)
        owner = np.repeat(np.arange(m, dtype=np.int64), sizes)
        # the other queries' few candidates checked at once, each against its own box
        keep = np.repeat(checked, sizes)
        todo = np.flatnonzero(~keep)
        if len(todo):
            rows_todo, owner_todo = rows[todo], owner[todo]
            inside = np.all(self._mins[rows_todo] <= maxs[owner_todo], axis=1)
            inside &= np.all(self._maxs[rows_todo] >= mins[owner_todo], axis=1)
            keep[todo] = inside
        counts = np.bincount(owner[keep], minlength=m).astype(np.int64)
        return rows[keep], counts

    def _inside(self, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Mask of the ``rows`` whose boxes meet [lo, hi]."""
        inside = np.all(self._mins[rows] <= hi, axis=1)
        inside &= np.all(self._maxs[rows] >= lo, axis=1)
        return inside

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return int(self._bits.nbytes + self._mins.nbytes + self._maxs.nbytes)

    def __repr__(self) -> str:
        return f"<CellBitmapIndex d={self.dims} cells={self.cells} rows={self._count}>"

    def __reduce__(self):
        raise TypeError("an index cannot be pickled; rebuild it from its arrays")


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
        if len(rows) >= self._table.boxes - len(rows):
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
