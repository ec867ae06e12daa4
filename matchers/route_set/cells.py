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


class CellBitmaps:
    def __init__(self, mins: np.ndarray, maxs: np.ndarray, cells: int = CELLS) -> None:
        k, d = mins.shape
        self.k, self.d, self.cells = k, d, cells
        self.mins, self.maxs = mins, maxs
        self.low = mins.min(axis=0) if k else np.zeros(d)
        high = maxs.max(axis=0) if k else np.ones(d)
        span = np.where(high > self.low, high - self.low, 1.0)
        self.scale = cells / span
        words = max(1, -(-k // 64))
        self.bits = np.zeros((d, cells, words), dtype=np.uint64)
        first, last = self._cell(mins), self._cell(maxs)
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
        for start in range(0, m, _CHUNK):
            part = points[start:start + _CHUNK]
            cells = self._cell(part)
            bits = self.bits
            acc = bits[0][cells[:, 0]]
            for j in range(1, self.d):
                acc &= bits[j][cells[:, j]]
            rows, words = np.nonzero(acc)
            if not len(rows):
                continue
            # expand each nonzero word into its 64 boxes, keep the set bits
            flags = np.unpackbits(acc[rows, words].view(np.uint8).reshape(-1, 8), axis=1,
                                  bitorder="little").astype(bool)
            which, bit = np.nonzero(flags)
            point = rows[which]
            box = words[which] * 64 + bit
            inside = np.all((self.mins[box] <= part[point]) & (self.maxs[box] >= part[point]),
                            axis=1)
            hit[start + point[inside], owner[box[inside]]] = True
        return hit
