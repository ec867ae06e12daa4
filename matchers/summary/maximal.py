"""The summary manager of the paper: the maximal rectangles of a changing set of boxes.

:class:`MaximalRectangles` keeps the set of boxes none of which is covered by another
(identical boxes: the earliest stays maximal) current under insertions and removals.  A box
that arrives covered is filed under one maximal box that covers it; a new box that covers
maximal boxes demotes them (with everything filed under them); removing a maximal box
re-inserts what was filed under it, largest first, so the boxes it covered are promoted
again exactly when nothing else covers them.

Its R-tree indexes each maximal box ``[lo, hi]`` as the **corner point** ``(lo, -hi)`` in
``2d`` dimensions.  Then "c covers b" (``c.lo <= b.lo`` and ``c.hi >= b.hi``) is
"point(c) <= point(b)" componentwise, and both questions the manager asks, *which maximal
boxes cover b* and *which does b cover*, are box queries in that space whose answers are
exact: no candidate filtering, however much the rectangles overlap (in d-space, the
maximal boxes containing a corner of b are ~1% of all of them in the benchmark workload).

:meth:`MaximalRectangles.boxes_at` cuts a summary of any size from them
(:func:`~matchers.summary.cuts.str_groups`).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._rtree import BoxIndex
from .bulk import covering_rows, first_covering, maximal_parents
from .cuts import str_groups

__all__ = ["MaximalRectangles"]

_UNUSED, _MAXIMAL = -2, -1


class MaximalRectangles:
    """The maximal rectangles of a changing set of boxes keyed by non-negative int rows.

    Not thread-safe by itself: the owning engine serializes mutations (the matcher contract),
    and the corner-space index has its own lock for queries.
    """

    def __init__(self, d: int, boxes: Any = None) -> None:
        self.d = d
        # ``boxes``: an owner's table whose ``mins``/``maxs`` arrays hold every held row's
        # box, unchanged while it is held (the R-tree engine's filter table, keyed by the
        # same rows): read from there instead of copied here, 16 d bytes a box less.
        # Without it, the boxes are kept here.
        self._boxes = boxes
        self._own_mins = np.zeros((0, d))
        self._own_maxs = np.zeros((0, d))
        self._parent = np.zeros(0, dtype=np.int64)  # _UNUSED, _MAXIMAL or a maximal row
        self._children = _Children()
        self._tree_: BoxIndex | None = BoxIndex(2 * d)
        self._count = 0
        self._maximal = 0
        self.generation = 0  # bumped whenever the set of maximal rectangles changes

    # -- storage -----------------------------------------------------------------------------
    def _reserve(self, rows: int) -> None:
        if rows <= len(self._parent):
            return
        capacity = max(rows, 2 * len(self._parent), 16)
        grow = capacity - len(self._parent)
        if self._boxes is None:
            self._own_mins = np.vstack([self._own_mins, np.zeros((grow, self.d))])
            self._own_maxs = np.vstack([self._own_maxs, np.zeros((grow, self.d))])
        self._parent = np.concatenate([self._parent, np.full(grow, _UNUSED, dtype=np.int64)])

    @property
    def _mins(self) -> np.ndarray:
        return self._own_mins if self._boxes is None else self._boxes.mins

    @property
    def _maxs(self) -> np.ndarray:
        return self._own_maxs if self._boxes is None else self._boxes.maxs

    def _keep(self, rows: Any, mins: Any, maxs: Any) -> None:
        """Note the boxes of ``rows`` (already in the owner's table when it has one)."""
        if self._boxes is None:
            self._own_mins[rows] = mins
            self._own_maxs[rows] = maxs

    @property
    def _tree(self) -> BoxIndex:
        if self._tree_ is None:
            rows = self.maximal_rows()
            corners = np.hstack([self._mins[rows], -self._maxs[rows]])
            self._tree_ = BoxIndex.bulk(rows, corners, corners, dims=2 * self.d)
        return self._tree_

    def _corner(self, row: int) -> np.ndarray:
        return np.concatenate([self._mins[row], -self._maxs[row]])

    def __len__(self) -> int:
        return self._count

    @property
    def maximal_count(self) -> int:
        return self._maximal

    def __contains__(self, row: object) -> bool:
        return isinstance(row, (int, np.integer)) and 0 <= row < len(self._parent) and \
            self._parent[row] != _UNUSED

    def is_maximal(self, row: int) -> bool:
        return row in self and self._parent[row] == _MAXIMAL

    def maximal_rows(self) -> np.ndarray:
        return np.flatnonzero(self._parent == _MAXIMAL)

    def maximal_boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mins, maxs)`` of the maximal rectangles, in row order."""
        rows = self.maximal_rows()
        return self._mins[rows].copy(), self._maxs[rows].copy()

    # -- mutations ---------------------------------------------------------------------------
    def add(self, row: int, lo: Any, hi: Any) -> bool:
        """Add box ``row``; True if it became maximal."""
        row = int(row)
        if row in self:
            raise KeyError(f"row {row} is already held")
        self._reserve(row + 1)
        self._keep(row, lo, hi)
        self._count += 1
        return self._place(row)

    # add_many's bulk steps cost time in proportion to the maximal boxes held, and a box
    # added alone two tree queries: batches smaller than this fraction of the maximal boxes
    # are added one by one.  Above BULK_COVER_LIMIT maximal boxes, the corner tree (not
    # per-axis bitsets, which grow with them: see matchers.summary.bulk) says which held box
    # covers each new one.  Up to IN_PLACE_CHANGES promotions and demotions change the tree
    # in place; more drop it, to be rebuilt from the arrays when next needed.
    ONE_BY_ONE_BELOW = 1 / 64
    BULK_COVER_LIMIT = 1 << 17
    IN_PLACE_CHANGES = 64

    def add_many(self, rows: Iterable[int] | np.ndarray, mins: np.ndarray, maxs: np.ndarray) -> None:
        """Add boxes ``rows`` (increasing) at once, to the same maximal rectangles as
        :meth:`add` one by one: the maximal boxes held are consulted in bulk
        (:func:`~.bulk.covering_rows`), then the new boxes among themselves, then which held
        maximal boxes the new maximal ones cover, all in bulk."""
        rows = np.asarray(rows, dtype=np.int64)
        mins = np.asarray(mins, dtype=np.float64).reshape(len(rows), self.d)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(len(rows), self.d)
        if not len(rows):
            return
        if rows.min() < 0 or np.any(rows[1:] <= rows[:-1]):
            raise ValueError("rows must be increasing non-negative integers")
        held = [row for row in rows.tolist() if row in self]
        if held:
            raise KeyError(f"row {held[0]} is already held")
        maximal = self.maximal_rows()
        if len(rows) < len(maximal) * self.ONE_BY_ONE_BELOW:
            for row, lo, hi in zip(rows.tolist(), mins, maxs):
                self.add(row, lo, hi)
            return
        if len(maximal) > self.BULK_COVER_LIMIT:
            cover = first_covering(self._tree, np.hstack([mins, -maxs]))
        else:
            cover = covering_rows(maximal, self._mins[maximal], self._maxs[maximal], mins, maxs)
        self._reserve(int(rows[-1]) + 1)
        self._keep(rows, mins, maxs)
        self._count += len(rows)
        self._file_under(rows[cover >= 0], cover[cover >= 0])
        rest = np.flatnonzero(cover < 0)
        parent_of = maximal_parents(mins[rest], maxs[rest])  # positions in rest; -1: maximal
        tops = rows[rest[parent_of < 0]]
        if len(tops):
            self._promote_many(tops, maximal)
        below = parent_of >= 0
        self._file_under(rows[rest[below]], rows[rest[parent_of[below]]])

    def _promote_many(self, tops: np.ndarray, held: np.ndarray) -> None:
        """``tops``, which no box of ``held`` (the maximal rows) covers and none of which
        covers another, become maximal over the held ones they cover, found in bulk."""
        over = covering_rows(tops, self._mins[tops], self._maxs[tops], self._mins[held],
                             self._maxs[held]) if len(held) else np.zeros(0, dtype=np.int64)
        demoted = held[over >= 0]
        for row, top in zip(demoted.tolist(), over[over >= 0].tolist()):
            adopted = self._children.pop(row)
            adopted.add(row)
            self._parent[list(adopted)] = top
            self._children.update(top, adopted)
        self._parent[tops] = _MAXIMAL
        self._maximal += len(tops) - len(demoted)
        self.generation += 1
        if self._tree_ is None:
            return
        if len(tops) + len(demoted) > self.IN_PLACE_CHANGES:
            self._tree_ = None  # cheaper rebuilt from the arrays than changed box by box
            return
        for row in demoted.tolist():
            self._tree_.delete(row, self._corner(row), self._corner(row))
        for row in tops.tolist():
            self._tree_.insert(row, self._corner(row), self._corner(row))

    def _file_under(self, rows: np.ndarray, parents: np.ndarray) -> None:
        self._parent[rows] = parents
        for row, parent in zip(rows.tolist(), parents.tolist()):
            self._children.add(parent, row)

    def _place(self, row: int) -> bool:
        corner = self._corner(row)
        covering = self._tree.intersecting(np.full(2 * self.d, -np.inf), corner)
        if len(covering):
            parent = int(covering.min())
            self._parent[row] = parent
            self._children.add(parent, row)
            return False
        self._promote(row, corner)
        return True

    def _promote(self, row: int, corner: np.ndarray) -> None:
        """``row``, which no maximal box covers, becomes maximal over those it covers."""
        covered = self._tree.intersecting(corner, np.full(2 * self.d, np.inf))
        adopted: set[int] = set()
        for other in covered.tolist():
            self._tree.delete(other, self._corner(other), self._corner(other))
            self._maximal -= 1
            adopted.add(other)
            adopted |= self._children.pop(other)
        if adopted:
            self._parent[list(adopted)] = row
            self._children.update(row, adopted)  # (a box filed under another has none)
        self._tree.insert(row, corner, corner)
        self._parent[row] = _MAXIMAL
        self._maximal += 1
        self.generation += 1

    def remove(self, row: int) -> None:
        row = int(row)
        if row not in self:
            raise KeyError(f"row {row} is not held")
        parent = int(self._parent[row])
        self._parent[row] = _UNUSED
        self._count -= 1
        if parent >= 0:
            self._children.discard(parent, row)
            return
        if self._tree_ is not None:  # (one rebuilt later leaves the row out by itself)
            self._tree_.delete(row, self._corner(row), self._corner(row))
        self._maximal -= 1
        self.generation += 1
        orphans = self._children.pop(row)
        if not orphans:
            return
        orphans_array = np.fromiter(orphans, dtype=np.int64, count=len(orphans))
        extent = (self._maxs[orphans_array] - self._mins[orphans_array]).sum(axis=1)
        for orphan in orphans_array[np.lexsort((orphans_array, -extent))].tolist():
            self._place(orphan)

    def load(self, rows: Iterable[int] | np.ndarray, mins: np.ndarray, maxs: np.ndarray) -> None:
        """Replace everything with these boxes, computed in bulk (no per-box tree inserts)."""
        rows = np.asarray(rows, dtype=np.int64)
        mins = np.asarray(mins, dtype=np.float64).reshape(len(rows), self.d)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(len(rows), self.d)
        increasing = len(rows) < 2 or bool(np.all(rows[1:] > rows[:-1]))
        if (not increasing and len(np.unique(rows)) != len(rows)) or (len(rows) and rows.min() < 0):
            raise ValueError("rows must be distinct non-negative integers")
        self._own_mins = np.zeros((0, self.d))
        self._own_maxs = np.zeros((0, self.d))
        self._parent = np.zeros(0, dtype=np.int64)
        self._reserve(int(rows.max()) + 1 if len(rows) else 0)
        self._keep(rows, mins, maxs)
        self._count = len(rows)
        parent_of = maximal_parents(mins, maxs)  # positions; -1 for maximal
        is_max = parent_of < 0
        self._parent[rows] = np.where(is_max, _MAXIMAL, rows[np.maximum(parent_of, 0)])
        self._children = _Children.filed(rows[~is_max], rows[parent_of[~is_max]])
        self._tree_ = None  # built from the arrays on the first incremental change
        self._maximal = int(is_max.sum())
        self.generation += 1

    # -- summaries ---------------------------------------------------------------------------
    def boxes_at(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """About ``target`` boxes covering every rectangle: all maximal rectangles when there
        are no more than ``target`` of them, else STR groups of them."""
        mins, maxs = self.maximal_boxes()
        if target <= 0 or len(mins) == 0:
            return mins[:0], maxs[:0]
        if len(mins) <= target:
            return mins, maxs
        return str_groups(mins, maxs, target)


class _Children:
    """Maximal row -> the rows filed under it. A load files them as one array per maximal
    row (8 bytes a row, where a set took about 60 with its int objects); the first change
    to a row's children makes them a set."""

    def __init__(self) -> None:
        self._of: dict[int, set[int] | np.ndarray] = {}

    @classmethod
    def filed(cls, children: np.ndarray, parents: np.ndarray) -> "_Children":
        """``children[i]`` filed under ``parents[i]``, every i."""
        filed = cls()
        order = np.argsort(parents, kind="stable")
        parents, children = parents[order], children[order]
        starts = np.flatnonzero(np.r_[True, parents[1:] != parents[:-1]]) if len(parents) \
            else np.zeros(0, dtype=np.int64)
        ends = np.r_[starts[1:], len(parents)]
        for parent, start, end in zip(parents[starts].tolist(), starts.tolist(), ends.tolist()):
            filed._of[parent] = children[start:end]
        return filed

    def __getitem__(self, parent: int) -> set[int] | np.ndarray:
        return self._of[parent]

    def pop(self, parent: int) -> set[int]:
        """The rows filed under ``parent`` (a set of its own), no longer filed."""
        held = self._of.pop(parent, None)
        if held is None:
            return set()
        return held if isinstance(held, set) else set(held.tolist())

    def _changeable(self, parent: int) -> set[int]:
        held = self._of.get(parent)
        if held is None:
            held = self._of[parent] = set()
        elif not isinstance(held, set):
            held = self._of[parent] = set(held.tolist())
        return held

    def add(self, parent: int, row: int) -> None:
        self._changeable(parent).add(row)

    def update(self, parent: int, rows: Iterable[int]) -> None:
        self._changeable(parent).update(rows)

    def discard(self, parent: int, row: int) -> None:
        held = self._changeable(parent)
        held.discard(row)
        if not held:
            del self._of[parent]
