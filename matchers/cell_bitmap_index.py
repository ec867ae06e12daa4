"""CellBitmapIndex: rows of boxes queried by per-dimension cell bitmaps (the filtering index
of :class:`~matchers.cell_bitmap.CellBitmapEngine`).

The index cuts each dimension ``j`` into at most ``cells`` cells (equi-depth over the
rectangles' inner edges, so that every cell holds about as many edges) and keeps, per ``(j, cell)``, one bit per rectangle row (numpy ``uint64`` words): set when
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
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["CellBitmapIndex"]

_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.setflags(write=False)
_OR_LIMIT = 4        # a query side spanning more cells than this skips its dimension
_BATCH_CHECK = 256   # candidates of one query of a batch beyond which they are checked alone
_MIN_RECUT = 1024    # rows below which cells are not re-cut (a scan of them is cheap)
_CUT_SAMPLE = 65_536  # rows whose edges place the cuts


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

    The interface of :class:`~matchers.paged_index.PagedBoxIndex` (``bulk``, ``insert``,
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
