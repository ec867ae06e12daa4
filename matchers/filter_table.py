"""The R-tree engine's filters and their rectangles, held in numpy arrays.

:class:`FilterTable` maps filter ids to sequence numbers (insertion order) and each filter
to its rectangle rows (``mins``/``maxs``, ``owner``); the filtering index and the summary
manager store rows. ``kind`` says how a filter's candidates are confirmed.
"""

from __future__ import annotations

import numpy as np

from .id_index import IdIndex


__all__ = ["ALWAYS", "BOX", "IF_UNCLEAN", "FilterTable"]

# How a filter's candidates are confirmed (per filter, vectorised over candidates):
BOX = 0         # bulk-loaded box: the box is the filter
IF_UNCLEAN = 1  # exact rectangles: check only events with clamped values
ALWAYS = 2      # strings, open bounds, XPath: always check


class FilterTable:
    """Filters in insertion order (ids <-> sequence numbers) and their rectangles (rows).

    Sequence numbers only grow, so sorting candidate sequence numbers restores insertion
    order; a replaced filter keeps its number.  Rows of removed rectangles are reused.
    """

    def __init__(self, d: int) -> None:
        self.d = d
        self.seq_of = IdIndex(self)  # id -> its sequence number
        self.ids = np.empty(16, dtype=object)
        self.kind = np.zeros(16, dtype=np.int8)
        # seq -> its CompiledFilter, or the FilterSpec it compiles from again when needed, or
        # None (an array beside ``ids``: a dictionary's entry and key took ~80 bytes a filter)
        self.compiled = np.empty(16, dtype=object)
        self.row_of = np.full(16, -1, dtype=np.int64)  # seq -> its row, for one-rectangle filters
        self.rows_multi: dict[int, np.ndarray] = {}     # seq -> rows, for the others
        self.next_seq = 0
        self.mins = np.zeros((16, d))
        self.maxs = np.zeros((16, d))
        self.owner = np.full(16, -1, dtype=np.int64)
        self.free: list[int] = []
        self.used_rows = 0  # rows ever handed out (high-water mark)
        self.boxes = 0
        self.multi = 0  # filters with other than one rectangle (need de-duplication)
        # the sum of the centres of the filters' bounding boxes, and how many filters it
        # counts (those with a rectangle): K-means placement's centroid, kept as filters
        # come and go
        self.centre_sum = np.zeros(d)
        self.centred = 0

    def new_seqs(self, ids: list[str]) -> np.ndarray:
        """Sequence numbers for new filter ids (registered in ``seq_of``)."""
        first = self.next_seq
        self.next_seq += len(ids)
        if self.next_seq > len(self.ids):
            grow = max(self.next_seq, 2 * len(self.ids)) - len(self.ids)
            self.ids = np.concatenate([self.ids, np.empty(grow, dtype=object)])
            self.compiled = np.concatenate([self.compiled, np.empty(grow, dtype=object)])
            self.kind = np.concatenate([self.kind, np.zeros(grow, dtype=np.int8)])
            self.row_of = np.concatenate([self.row_of, np.full(grow, -1, dtype=np.int64)])
        self.ids[first:self.next_seq] = ids
        self.seq_of.add(ids, first)
        return np.arange(first, self.next_seq, dtype=np.int64)

    def rows(self, seq: int) -> np.ndarray:
        row = int(self.row_of[seq])
        return np.array([row], dtype=np.int64) if row >= 0 else self.rows_multi[seq]

    def take_rows(self, count: int) -> np.ndarray:
        reused = [self.free.pop() for _ in range(min(count, len(self.free)))]
        fresh = count - len(reused)
        rows = np.array(reused + list(range(self.used_rows, self.used_rows + fresh)), dtype=np.int64)
        self.used_rows += fresh
        if self.used_rows > len(self.owner):
            capacity = max(self.used_rows, 2 * len(self.owner))
            grow = capacity - len(self.owner)
            self.mins = np.vstack([self.mins, np.zeros((grow, self.d))])
            self.maxs = np.vstack([self.maxs, np.zeros((grow, self.d))])
            self.owner = np.concatenate([self.owner, np.full(grow, -1, dtype=np.int64)])
        return rows

    def set_rows(self, seq: int, rows: np.ndarray, mins: np.ndarray, maxs: np.ndarray) -> None:
        self.mins[rows] = mins
        self.maxs[rows] = maxs
        self.owner[rows] = seq
        if len(rows) == 1:
            self.row_of[seq] = rows[0]
        else:
            self.rows_multi[seq] = rows
            self.multi += 1
        self.boxes += len(rows)
        if len(rows):
            self.centre_sum += (self.mins[rows].min(axis=0) + self.maxs[rows].max(axis=0)) / 2
            self.centred += 1

    def set_single_rows(self, seqs: np.ndarray, rows: np.ndarray, mins: np.ndarray,
                        maxs: np.ndarray) -> None:
        """:meth:`set_rows` for many filters of one rectangle each (``rows`` theirs, in
        order), at once."""
        self.row_of[seqs] = rows
        self.mins[rows] = mins
        self.maxs[rows] = maxs
        self.owner[rows] = seqs
        self.boxes += len(seqs)
        if len(seqs):
            self.centre_sum += ((mins + maxs) / 2).sum(axis=0)
            self.centred += len(seqs)

    def drop_rows(self, seq: int) -> np.ndarray:
        rows = self.rows(seq)
        if len(rows):
            self.centre_sum -= (self.mins[rows].min(axis=0) + self.maxs[rows].max(axis=0)) / 2
            self.centred -= 1
            if not self.centred:  # nothing left to count: no rounding left over either
                self.centre_sum[:] = 0.0
        if self.row_of[seq] >= 0:
            self.row_of[seq] = -1
        else:
            del self.rows_multi[seq]
        self.owner[rows] = -1
        self.free.extend(rows.tolist())
        self.boxes -= len(rows)
        if len(rows) != 1:
            self.multi -= 1
        return rows

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.owner[:self.used_rows] >= 0)
