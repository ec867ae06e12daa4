"""Rank bitmaps: which of one server's boxes meet a query box, in 2d bitmap rows.

The batch strategy of :mod:`.routing` that wins where scanning (many misses) and the R-tree
(many overlapping hits) lose; see :class:`RankBitmaps`.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["MAX_BITMAP_BOXES", "RankBitmaps", "LazyBitmaps", "no_boxes"]

MAX_BITMAP_BOXES = 2048  # per server: 2d x (K+1) x K bits, ~4 MB at K = 2048, d = 4
_BITMAP_CHUNK = 8192      # points per pass (bounds the (points, words) work arrays)


class RankBitmaps:
    """Per-dimension rank bitmaps of one server's boxes.

    For dimension j, ``lo_bits[j][r]`` is the set (a bitmap over the server's boxes) of the
    boxes whose ``lo_j`` is among the ``r`` smallest, and ``hi_bits[j][r]`` of those whose
    ``hi_j`` is not among the ``r`` smallest.  The boxes meeting the query box [a, b] are

        AND over j of  lo_bits[j][#{lo_j <= b_j}]  &  hi_bits[j][#{hi_j < a_j}]

    (two binary searches and two bitmap rows per dimension), so a point costs 2d rows of K
    bits however many boxes contain it or how wide they are: the structure wins exactly
    where scanning (many misses) and the R-tree (many overlapping hits) lose.  Memory is
    2d (K+1) K / 8 bytes, hence :data:`MAX_BITMAP_BOXES`; building it costs a few ms per
    server, paid on the first batch after that server's summary changed.
    """

    def __init__(self, mins: np.ndarray, maxs: np.ndarray) -> None:
        k, d = mins.shape
        self.k = k
        words = max(1, -(-k // 64))
        limits = np.arange(k + 1)[:, None]
        self.sorted_lo, self.sorted_hi, self.lo_bits, self.hi_bits = [], [], [], []
        for j in range(d):
            for column, sorted_list, bits_list, below in (
                    (mins[:, j], self.sorted_lo, self.lo_bits, True),
                    (maxs[:, j], self.sorted_hi, self.hi_bits, False)):
                order = np.argsort(column, kind="stable")
                rank = np.empty(k, dtype=np.int64)
                rank[order] = np.arange(k)
                member = rank[None, :] < limits if below else rank[None, :] >= limits
                packed = np.packbits(member, axis=1, bitorder="little")
                padded = np.zeros((k + 1, words * 8), dtype=np.uint8)
                padded[:, :packed.shape[1]] = packed
                sorted_list.append(column[order])
                bits_list.append(padded.view(np.uint64))

    def any_hit(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """(m,) bool: does each query box [lo[i], hi[i]] meet one of the boxes?"""
        m, d = lo.shape
        if self.k == 0 or not self.sorted_lo:
            return np.full(m, self.k > 0)
        result = np.empty(m, dtype=bool)
        for start in range(0, m, _BITMAP_CHUNK):
            part_lo, part_hi = lo[start:start + _BITMAP_CHUNK], hi[start:start + _BITMAP_CHUNK]
            acc = None
            for j in range(d):
                rows = np.searchsorted(self.sorted_lo[j], part_hi[:, j], side="right")
                acc = self.lo_bits[j][rows] if acc is None else acc & self.lo_bits[j][rows]
                rows = np.searchsorted(self.sorted_hi[j], part_lo[:, j], side="left")
                acc &= self.hi_bits[j][rows]
            result[start:start + _BITMAP_CHUNK] = acc.any(axis=1)
        return result


class LazyBitmaps:
    """A server's :class:`RankBitmaps`, built on first use (only batches use them, and
    summaries may change far more often than batches arrive) and then kept, across table
    rebuilds, until that server's summary changes."""

    def __init__(self, mins: np.ndarray | None, maxs: np.ndarray | None) -> None:
        self._boxes = (mins, maxs)
        self._built: RankBitmaps | None = None
        self._lock = threading.Lock()

    @property
    def value(self) -> RankBitmaps:
        if self._built is None:
            with self._lock:
                if self._built is None:
                    mins, maxs = self._boxes
                    self._built = RankBitmaps(mins, maxs)
        return self._built


def no_boxes() -> LazyBitmaps:
    """Bitmaps of a server without a summary (it is in ``always`` instead)."""
    return LazyBitmaps(np.zeros((0, 0)), np.zeros((0, 0)))
