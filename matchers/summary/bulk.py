"""The maximal rectangles of many boxes at once (a load or a restart), in numpy.

:func:`maximal_parents` tells, for each box, whether it is maximal (no other box covers it;
of identical boxes, the first) and otherwise one maximal box that covers it.  It chooses
between three algorithms by the boxes' overlap, estimated on a sample:

* **Windows** (:func:`_window_parents`), for boxes that overlap little: a box's coverers
  have their low side in a window on every axis, a sorted search lists the boxes in the
  window on the narrowest axis, and numpy checks those pairs.  The pairs grow with the
  square of the boxes when they overlap heavily (78 s for 100,000 uniform boxes in 4
  dimensions).
* **The corner R-tree** (:func:`_corner_tree_parents`), when the windows hold too many
  pairs but few boxes cover each box and the boxes are thin: every box asks the R-tree of
  all boxes' corners for its coverers.  Thin boxes' corners lie near a d-dimensional sheet
  of the 2d-dimensional corner space, where the tree prunes well; wide boxes' corners fill
  it, and the tree's orthant queries visit most of its nodes.
* **Sort-filter** (:func:`_sorted_filter_parents`), for boxes that overlap heavily: boxes
  are visited so that every box comes after its coverers, and only the maximal boxes found
  so far are consulted (0.5 s for 100,000 uniform boxes, 3.7 s for 1,000,000).

In each, "c covers b" is "corner(c) <= corner(b) on every axis" with corner = (lo, -hi).
"""
from __future__ import annotations

import numpy as np

from .._rtree import BoxIndex
from .corner_bits import CornerBits

__all__ = ["choose_algorithm", "covering_rows", "first_covering", "maximal_parents"]

# Window pairs checked in all, at most (40-120 ns a pair).
_WINDOW_PAIRS = 32_000_000
# Coverers per box from which sort-filtering beats asking the corner R-tree of all boxes for
# every box's coverers.  Measured, 4 dimensions: 1,000,000 boxes of side 0.1% (all maximal,
# no coverers) 24 s by the tree, 103 s sort-filtering; 200,000 boxes of sides up to 30%
# (about one coverer each) 23 s by the tree, 15 s sort-filtering; 1,000,000 uniform boxes
# (hundreds of coverers each) 4.6 s sort-filtering, far slower by the tree.
_SORT_FILTER_COVERERS = 1
# Sides (a box's mean side over the spread of the boxes, averaged over the axes) from which
# sort-filtering beats the corner R-tree even when no box covers another.  Measured at
# 100,000 boxes with every side uniform in [0, s] of a unit range (mean side s/2): in 4
# dimensions s = 0.01 took 2.6 s by the tree and 5.6 s sort-filtering, s = 0.1 5.8 s and 5.3
# s, s = 0.2 12.6 s and 5.1 s; in 8 dimensions s = 0.01 3.4 s and 8.9 s, s = 0.1 7.6 s and
# 10.2 s, s = 0.2 14.9 s and 9.9 s, s = 0.3 28.8 s and 10.3 s.  The paper's uniform boxes in
# 8 dimensions (mean side a third of the range): 100,000 sort-filter in 7.9 s, 20,000 by the
# tree in 8.7 s against 1.4 s.
_CORNER_TREE_SIDE = 0.06


def maximal_parents(mins: np.ndarray, maxs: np.ndarray, *, block: int = 2048,
                    leaders: int = 256, leader_stage: int = 32, bits_limit: int = 1 << 17,
                    window_pairs: int = _WINDOW_PAIRS,
                    sort_filter_coverers: float = _SORT_FILTER_COVERERS,
                    corner_tree_side: float = _CORNER_TREE_SIDE) -> np.ndarray:
    """For each box (by position): -1 if maximal, else the position of a maximal box covering
    it.  Identical boxes: the first position is the maximal one.  The keywords tune (and let
    tests force) the choice of algorithm (:func:`choose_algorithm`)."""
    n, d = mins.shape
    parents = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parents
    if d == 0:
        parents[1:] = 0
        return parents
    algorithm, axis = choose_algorithm(mins, maxs, window_pairs=window_pairs,
                                       sort_filter_coverers=sort_filter_coverers,
                                       corner_tree_side=corner_tree_side)
    if algorithm == "windows":
        return _window_parents(mins, maxs, axis)
    if algorithm == "corner-tree":
        return _corner_tree_parents(mins, maxs)
    return _sorted_filter_parents(mins, maxs, block=block, leaders=leaders,
                                  leader_stage=leader_stage, bits_limit=bits_limit)


def choose_algorithm(mins: np.ndarray, maxs: np.ndarray, *, window_pairs: int = _WINDOW_PAIRS,
                     sort_filter_coverers: float = _SORT_FILTER_COVERERS,
                     corner_tree_side: float = _CORNER_TREE_SIDE) -> tuple[str, int]:
    """``("windows", axis)``, ``("corner-tree", -1)`` or ``("sort-filter", -1)`` for boxes of
    at least one axis, by their overlap and width estimated on samples."""
    axis, pairs = _narrowest_window_axis(mins, maxs)
    if pairs <= window_pairs:
        return "windows", axis
    if (_relative_side(mins, maxs) < corner_tree_side
            and _coverers_per_box(mins, maxs) < sort_filter_coverers):
        return "corner-tree", -1
    return "sort-filter", -1


def _relative_side(mins: np.ndarray, maxs: np.ndarray) -> float:
    """The boxes' mean side over their spread (highest max less lowest min), averaged over
    the axes; an axis where every box is one point counts as 0."""
    spread = maxs.max(axis=0) - mins.min(axis=0)
    sides = (maxs - mins).mean(axis=0)
    ratio = np.divide(sides, spread, out=np.zeros_like(sides), where=spread > 0)
    return float(ratio.mean())


def _coverers_per_box(mins: np.ndarray, maxs: np.ndarray, sample: int = 512,
                      against: int = 4096) -> float:
    """About how many boxes cover a box: a sample of boxes checked against another."""
    n = len(mins)
    queries, others = _sample(n, sample), _sample(n, against, seed=1)
    corners = np.hstack([mins, -maxs])
    covering = _dominated(corners[others], corners[queries])
    covering &= queries[:, None] != others[None, :]
    return float(covering.mean()) * (n - 1)


def _sample(n: int, size: int, *, seed: int = 0) -> np.ndarray:
    """All of ``range(n)``, or ``size`` of them drawn at random (always the same ones)."""
    if n <= size:
        return np.arange(n)
    return np.random.default_rng(seed).choice(n, size, replace=False)


# -- windows ---------------------------------------------------------------------------------

def _widest(mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
    widest = (maxs - mins).max(axis=0)
    return widest * (1 + 1e-9) + 1e-300


def _narrowest_window_axis(mins: np.ndarray, maxs: np.ndarray) -> tuple[int, int]:
    """The axis whose windows hold the fewest boxes, and about how many pairs they hold in
    all (estimated on a sample of the boxes)."""
    n, d = mins.shape
    widest = _widest(mins, maxs)
    sample = _sample(n, 4096)
    best_axis, best_total = 0, None
    for j in range(d):
        ordered = np.sort(mins[:, j])
        total = int((np.searchsorted(ordered, mins[sample, j], side="right")
                     - np.searchsorted(ordered, maxs[sample, j] - widest[j], side="left")).sum())
        if best_total is None or total < best_total:
            best_axis, best_total = j, total
    return best_axis, best_total * n // len(sample)


def _window_parents(mins: np.ndarray, maxs: np.ndarray, j: int, *,
                    budget: int = 4_000_000) -> np.ndarray:
    """Coverers of b have ``lo_j`` in ``[hi_j(b) - S_j, lo_j(b)]`` (S_j: the widest side on
    axis j): list them by a sorted search on axis ``j``, check them in chunks of ``budget``
    pairs."""
    n = len(mins)
    widest = _widest(mins, maxs)
    order = np.argsort(mins[:, j], kind="stable")
    ordered = mins[order, j]
    left = _search(ordered, maxs[:, j] - widest[j], "left")
    right = _search(ordered, mins[:, j], "right")
    counts = right - left
    pairs_q: list[np.ndarray] = []
    pairs_c: list[np.ndarray] = []
    start = 0
    while start < n:
        stop = int(np.searchsorted(np.cumsum(counts[start:]), budget, side="right")) + start
        chunk = np.arange(start, min(max(stop, start + 1), n))
        c_counts = counts[chunk]
        q = np.repeat(chunk, c_counts)
        offsets = np.arange(len(q)) - np.repeat(np.cumsum(c_counts) - c_counts, c_counts)
        c = order[np.repeat(left[chunk], c_counts) + offsets]
        keep = _covers(mins, maxs, c, q)
        pairs_q.append(q[keep])
        pairs_c.append(c[keep])
        start = int(chunk[-1]) + 1
    return _parents_of_pairs(mins, maxs, pairs_q, pairs_c)


def _corner_tree_parents(mins: np.ndarray, maxs: np.ndarray, *, step: int = 50_000) -> np.ndarray:
    """Every box's coverers from the corner-space R-tree of all boxes, in batches."""
    n, d = mins.shape
    corners = np.hstack([mins, -maxs])
    tree = BoxIndex.bulk(np.arange(n), corners, corners, dims=2 * d)
    pairs_q: list[np.ndarray] = []
    pairs_c: list[np.ndarray] = []
    for start in range(0, n, step):
        stop = min(start + step, n)
        ids, counts = tree.intersecting_batch(np.full((stop - start, 2 * d), -np.inf),
                                              corners[start:stop])
        q = np.repeat(np.arange(start, stop), counts.astype(np.int64))
        keep = ids != q
        pairs_q.append(q[keep])
        pairs_c.append(ids[keep])
    return _parents_of_pairs(mins, maxs, pairs_q, pairs_c)


def _parents_of_pairs(mins: np.ndarray, maxs: np.ndarray, pairs_q: list[np.ndarray],
                      pairs_c: list[np.ndarray]) -> np.ndarray:
    """Parents from every covering pair (box c covers box q, c is not q)."""
    n = len(mins)
    q = np.concatenate(pairs_q) if pairs_q else np.zeros(0, dtype=np.int64)
    c = np.concatenate(pairs_c) if pairs_c else np.zeros(0, dtype=np.int64)
    # c covers q.  It dominates q unless the boxes are identical and q comes first.
    identical = np.all(mins[c] == mins[q], axis=1) & np.all(maxs[c] == maxs[q], axis=1)
    dominates = ~identical | (c < q)
    q, c = q[dominates], c[dominates]
    is_max = np.ones(n, dtype=bool)
    is_max[q] = False
    parents = np.full(n, -1, dtype=np.int64)
    # Some maximal box covers every dominated box (the top of its chain): pick the first.
    via_max = is_max[c]
    q, c = q[via_max], c[via_max]
    order = np.lexsort((c, q))
    q, c = q[order], c[order]
    first = np.r_[True, q[1:] != q[:-1]] if len(q) else np.zeros(0, dtype=bool)
    parents[q[first]] = c[first]
    return parents


def _search(ordered: np.ndarray, needles: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted`` with the needles sorted first (3-5x faster on a million: the
    binary searches then walk the array in order instead of jumping around the cache)."""
    order = np.argsort(needles, kind="stable")
    found = np.empty(len(needles), dtype=np.int64)
    found[order] = np.searchsorted(ordered, needles[order], side=side)
    return found


def _covers(mins: np.ndarray, maxs: np.ndarray, c: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Mask of pairs where box c covers box q and c is not q."""
    keep = c != q
    for j in range(mins.shape[1]):
        keep &= mins[c, j] <= mins[q, j]
        keep &= maxs[c, j] >= maxs[q, j]
    return keep


# -- sort-filter -----------------------------------------------------------------------------

def _sorted_filter_parents(mins: np.ndarray, maxs: np.ndarray, *, block: int, leaders: int,
                           leader_stage: int, bits_limit: int) -> np.ndarray:
    """Boxes visited in an order where each comes after all boxes that cover it
    (:func:`_cover_order`): a box is maximal exactly when no maximal box found before it
    covers it (a cover of a cover covers).  Blocks of boxes are checked, all at once,
    against the first ``leaders`` maximal boxes (the widest: they cover most boxes),
    ``leader_stage`` leaders at a time, each group against the boxes no earlier group
    covered (a quarter less time at a million than all at once), then the rest against
    every earlier maximal box (:class:`_EarlierMaximal`), then against
    each other."""
    n = len(mins)
    parents = np.full(n, -1, dtype=np.int64)
    corners = np.hstack([mins, -maxs])
    order = _cover_order(mins, maxs, corners)
    sample = _sample(n, 65536)
    earlier = _EarlierMaximal(corners, CornerBits(corners[sample]), bits_limit)
    lead_rows = np.zeros(0, dtype=np.int64)
    for start in range(0, n, block):
        chunk = order[start:start + block]
        chunk_corners = corners[chunk]
        open_ = np.arange(len(chunk))
        for first in range(0, len(lead_rows), leader_stage):
            if not len(open_):
                break
            stage = lead_rows[first:first + leader_stage]
            covering = _dominated(corners[stage], chunk_corners[open_])
            hit = covering.any(axis=1)
            parents[chunk[open_[hit]]] = stage[covering[hit].argmax(axis=1)]
            open_ = open_[~hit]
        if len(open_):
            found = earlier.first_covering(chunk_corners[open_])
            parents[chunk[open_[found >= 0]]] = found[found >= 0]
            open_ = open_[found < 0]
        if not len(open_):
            continue
        # the rest against each other, in visiting order: the first that covers one is maximal
        covering = _dominated(chunk_corners[open_], chunk_corners[open_])
        covering &= np.tri(len(open_), k=-1, dtype=bool)
        covered = covering.any(axis=1)
        parents[chunk[open_[covered]]] = chunk[open_[covering[covered].argmax(axis=1)]]
        new = chunk[open_[~covered]]
        earlier.add(new)
        if len(lead_rows) < leaders:
            lead_rows = np.concatenate([lead_rows, new[:leaders - len(lead_rows)]])
    return parents


def _cover_order(mins: np.ndarray, maxs: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Positions such that a box comes after every box that covers it.  A box covering
    another is at least as wide in total, and the sum of its low sides is at most the
    other's (in floating point too: rounding is monotone); among boxes equal on both, its
    corner is lexicographically smaller; among identical ones, the first position comes
    first.  Two sort keys, then every key only for the boxes that tie on both (a few
    hundred of a million boxes on a 0.001 grid): 0.3 s at a million against 1.4 s for one
    lexicographic sort over every key."""
    extent = (maxs - mins).sum(axis=1)
    low = mins.sum(axis=1)
    order = np.lexsort((low, -extent))  # stable: positions in order within a tie
    extent, low = extent[order], low[order]
    same_as_next = (extent[1:] == extent[:-1]) & (low[1:] == low[:-1])
    slots = np.flatnonzero(np.r_[same_as_next, False] | np.r_[False, same_as_next])
    if len(slots):
        group = np.cumsum(np.r_[True, ~same_as_next])[slots]
        tied = order[slots]
        keys = [tied] + [corners[tied, j] for j in reversed(range(corners.shape[1]))]
        order[slots] = tied[np.lexsort(keys + [group])]
    return order


def _dominated(by: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(len(points), len(by))`` mask: ``by[i] <= points[p]`` in every coordinate (all
    true for points of no coordinates)."""
    if not points.shape[1]:
        return np.ones((len(points), len(by)), dtype=bool)
    mask = by[None, :, 0] <= points[:, None, 0]
    for j in range(1, points.shape[1]):
        mask &= by[None, :, j] <= points[:, None, j]
    return mask


class _EarlierMaximal:
    """The maximal boxes found so far, by corner: per-axis bitsets while there are at most
    ``bits_limit`` of them, then the corner-space R-tree (whose queries are cheap when that
    many boxes are maximal: they overlap little)."""

    def __init__(self, corners: np.ndarray, bits: CornerBits, bits_limit: int) -> None:
        self._corners = corners
        self._bits: CornerBits | None = bits
        self._tree: BoxIndex | None = None
        self._rows: list[np.ndarray] = []
        self._limit = bits_limit

    def add(self, rows: np.ndarray) -> None:
        if self._tree is not None:
            for row in rows.tolist():
                self._tree.insert(row, self._corners[row], self._corners[row])
            return
        self._rows.append(rows)
        if len(self._bits) + len(rows) <= self._limit:
            self._bits.add(rows, self._corners[rows])
            return
        self._bits = None
        held = np.concatenate(self._rows)
        self._tree = BoxIndex.bulk(held, self._corners[held], self._corners[held],
                                   dims=self._corners.shape[1])

    def first_covering(self, corners: np.ndarray) -> np.ndarray:
        """Per corner: a maximal row whose corner is <= it everywhere, or -1."""
        if self._tree is None:
            return self._bits.first_below(corners)
        return first_covering(self._tree, corners)


def first_covering(tree: BoxIndex, corners: np.ndarray) -> np.ndarray:
    """Per corner: the id of one point of the corner-space ``tree`` that is <= it
    everywhere (a box covering that corner's box), or -1."""
    found = np.full(len(corners), -1, dtype=np.int64)
    if len(tree) and len(corners):
        ids, counts = tree.intersecting_batch(np.full(corners.shape, -np.inf), corners)
        hit = counts > 0
        found[hit] = ids[(np.cumsum(counts) - counts)[hit].astype(np.int64)]
    return found


def covering_rows(rows: np.ndarray, mins: np.ndarray, maxs: np.ndarray, new_mins: np.ndarray,
                  new_maxs: np.ndarray, *, leaders: int = 256, block: int = 2048) -> np.ndarray:
    """Per new box: one of the boxes ``rows`` (``mins``/``maxs``) that covers it, or -1.
    The widest boxes are checked first, all at once; the rest through
    :class:`~.corner_bits.CornerBits` of every box."""
    found = np.full(len(new_mins), -1, dtype=np.int64)
    if not len(rows) or not len(new_mins):
        return found
    corners = np.hstack([mins, -maxs])
    new_corners = np.hstack([new_mins, -new_maxs])
    widest = np.argsort(-(maxs - mins).sum(axis=1), kind="stable")[:leaders]
    sample = _sample(len(rows), 65536)
    bits = CornerBits(corners[sample])
    bits.add(rows, corners)
    for start in range(0, len(new_corners), block):
        chunk = new_corners[start:start + block]
        covering = _dominated(corners[widest], chunk)
        hit = covering.any(axis=1)
        found[start + np.flatnonzero(hit)] = rows[widest][covering[hit].argmax(axis=1)]
        open_ = np.flatnonzero(~hit)
        if len(open_):
            found[start + open_] = bits.first_below(chunk[open_])
    return found
