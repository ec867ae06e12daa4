"""Cell bitmaps: which boxes of the whole table may hold a point, d bitmap rows per point.

The batch and single-event strategy of :mod:`.routing` for tables of many wide boxes in
several dimensions (the throughput benchmark's 50,000 summary boxes in d = 8, each about a
third of the domain wide per dimension, ~10 of them holding a point): there the R-tree
prunes little, a scan tests every box, and rank bitmaps (:mod:`.bitmaps`) would need
gigabytes.  Measured there: cells ~5 us per event in a 64-event batch, against R-tree
~330 us, scan ~450 us, and ~130 us for one event against every box (``columns``).

Each dimension's extent (the table's boxes') is cut into :data:`CELLS` equal cells; for each
dimension and cell one bitmap over all boxes of the table marks those overlapping the cell.
A point's candidates are the AND of its d cells' bitmaps; each candidate is then checked
exactly against the point (two comparisons per dimension), so the answer is exact.  A box
holding the point overlaps the point's cell in every dimension: cells are computed with the
same monotone formula for box bounds and for points (:meth:`CellBitmaps._cell`), so
rounding cannot separate a point from a box holding it.  Memory is d x CELLS x K / 8 bytes
(25 MB at K = 50,000, d = 8), built on a table's first use (~0.1 s at that size).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CELLS", "CellBitmaps"]

CELLS = 64       # per dimension: candidates ~ prod_j (width_j + cell) / extent_j
_CHUNK = 1024    # points per pass (bounds the (points, words) work arrays)
_DENSE_DIMENSIONS = 5  # ANDed over every word; then only the nonzero words (measured:
# with boxes ordered by centre, ~8% of words are nonzero after 5 of 8 dimensions)


class CellBitmaps:
    def __init__(self, mins: np.ndarray, maxs: np.ndarray, cells: int = CELLS) -> None:
        k, d = mins.shape
        self.k, self.d, self.cells = k, d, cells
        self.low = mins.min(axis=0) if k else np.zeros(d)
        high = maxs.max(axis=0) if k else np.ones(d)
        span = np.where(high > self.low, high - self.low, 1.0)
        self.scale = cells / span
        # Boxes in the order of their centres' cells (dimension 0, then 1, then 2): boxes
        # sharing a 64-bit word then lie near each other, so after a few dimensions most
        # words of a point's candidates are zero and the rest is gathered sparsely.
        centre = self._cell((mins + maxs) / 2)
        self.order = (np.lexsort(tuple(centre[:, j] for j in reversed(range(min(d, 3)))))
                      if k and d else np.arange(k))
        self.mins, self.maxs = mins[self.order], maxs[self.order]
        words = max(1, -(-k // 64))
        self.bits = np.zeros((d, cells, words), dtype=np.uint64)
        first, last = self._cell(self.mins), self._cell(self.maxs)
        index = np.arange(cells)[:, None]
        for j in range(d):
            member = (first[None, :, j] <= index) & (last[None, :, j] >= index)  # (cells, k)
            packed = np.packbits(member, axis=1, bitorder="little")
            row = np.zeros((cells, words * 8), dtype=np.uint8)
            row[:, :packed.shape[1]] = packed
            self.bits[j] = row.view(np.uint64)

    def _cell(self, values: np.ndarray) -> np.ndarray:
        """Cell of each coordinate (clipped to the extent's cells): monotone in the value."""
        raw = np.floor((values - self.low) * self.scale)
        return np.clip(raw, 0, self.cells - 1).astype(np.intp)

    def hits(self, points: np.ndarray, owner: np.ndarray, servers: int) -> np.ndarray:
        """(m, servers) bool: does a box of each server hold each point (m, d)?"""
        m = points.shape[0]
        hit = np.zeros((m, servers), dtype=bool)
        if self.k == 0 or m == 0:
            return hit
        bits = self.bits
        for start in range(0, m, _CHUNK):
            part = points[start:start + _CHUNK]
            cells = self._cell(part)
            dense = min(self.d, _DENSE_DIMENSIONS)
            acc = bits[0][cells[:, 0]]
            for j in range(1, dense):
                acc &= bits[j][cells[:, j]]
            rows, words = np.nonzero(acc)
            values = acc[rows, words]
            for j in range(dense, self.d):  # only the words still nonzero
                values &= bits[j, cells[rows, j], words]
                keep = values != 0
                rows, words, values = rows[keep], words[keep], values[keep]
            if not len(rows):
                continue
            # expand each nonzero word into its 64 boxes, keep the set bits
            flags = np.unpackbits(values.view(np.uint8).reshape(-1, 8), axis=1,
                                  bitorder="little").astype(bool)
            which, bit = np.nonzero(flags)
            point = rows[which]
            box = words[which] * 64 + bit
            inside = np.all((self.mins[box] <= part[point]) & (self.maxs[box] >= part[point]),
                            axis=1)
            hit[start + point[inside], owner[self.order[box[inside]]]] = True
        return hit
