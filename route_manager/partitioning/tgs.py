"""Top-down greedy split (TGS) bulk loading of an R-tree, after Garcia, Lopez and Leutenegger
("A greedy algorithm for bulk loading R-trees", the paper's reference [13]).

A node holding ``m`` rectangles that will have children of fixed sizes is cut in two, again
and again: the rectangles are sorted by the minimum, the maximum and the centre coordinate of
each dimension (3d orders), every cut position that falls on an eventual child boundary is
considered, and the cut that minimises the sum of the volumes of the bounding boxes of the two
sides is taken (assuming uniform events, summed volume is the event traffic the two sides
attract). Each side is cut again until every child is on its own.

``partition(mins, maxs, k)`` forces the root to have ``k`` children of near-equal size: the
paper's offline partitioner with ``k = N_s`` servers. ``rtree_summary`` cuts the same way
level by level with a fan-out ``M`` and returns the node boxes at one depth: the paper's
depth-limited ("imprecise") summary of a server's rectangles.

For every candidate order the bounding boxes of all prefixes and suffixes come from one
cumulative min / max pass (``numpy.minimum.accumulate``), so a cut of ``m`` rectangles costs
O(d * m log m) and a million rectangles stay feasible.
"""
from __future__ import annotations

import numpy as np

__all__ = ["partition", "rtree_levels", "rtree_summary", "tree_height", "bounding_boxes"]


class SortedRects:
    """Rectangles stored dimension-major (``(d, n)``, contiguous) for fast gathers, with the
    3d sort keys and, lazily, their global orders (a subset's order is then a filter of the
    global order: O(n) instead of O(m log m) for the large nodes near the root)."""

    def __init__(self, mins: np.ndarray, maxs: np.ndarray):
        self.lo = np.ascontiguousarray(mins.T)
        self.hi = np.ascontiguousarray(maxs.T)
        self.keys = np.vstack([self.lo, self.hi, (self.lo + self.hi) * 0.5])
        self.n = self.lo.shape[1]
        self._global = None

    def is_large(self, idx: np.ndarray) -> bool:
        return len(idx) * 8 >= self.n

    def global_orders(self, idx: np.ndarray):
        if self._global is None:
            self._global = [np.argsort(k, kind="stable") for k in self.keys]
        mask = np.zeros(self.n, dtype=bool)
        mask[idx] = True
        return [g[mask[g]] for g in self._global]


def _best_cut(rects: SortedRects, idx: np.ndarray, cuts: np.ndarray):
    """The cheapest binary cut of one node holding rectangles ``idx``.

    ``cuts`` are the candidate positions (the eventual child boundaries, ascending, inside
    1..m-1): the left side gets the first ``p`` rectangles of the chosen order. The bounding
    boxes of the segments between boundaries come from one ``reduceat`` pass; prefix and
    suffix boxes from cumulative min / max over the segments. Returns ``(ordered_idx, p)``."""
    starts = np.r_[0, cuts]
    if not rects.is_large(idx):
        # All 3d orders at once: (3d, m) orders, (d, 3d, segments) boxes.
        orders = idx[np.argsort(rects.keys[:, idx], axis=1, kind="stable")]
        seg_lo = np.minimum.reduceat(rects.lo[:, orders], starts, axis=2)
        seg_hi = np.maximum.reduceat(rects.hi[:, orders], starts, axis=2)
        cost = _sides_cost(seg_lo, seg_hi, axis=2)
        k, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
        return orders[k], int(cuts[j])
    best_cost, best_order, best_p = np.inf, None, None
    for order in rects.global_orders(idx):
        seg_lo = np.minimum.reduceat(np.take(rects.lo, order, axis=1), starts, axis=1)
        seg_hi = np.maximum.reduceat(np.take(rects.hi, order, axis=1), starts, axis=1)
        cost = _sides_cost(seg_lo, seg_hi, axis=1)
        j = int(np.argmin(cost))
        if cost[j] < best_cost:
            best_cost, best_order, best_p = cost[j], order, int(cuts[j])
    return best_order, best_p


def _sides_cost(seg_lo: np.ndarray, seg_hi: np.ndarray, axis: int) -> np.ndarray:
    """Volume of the prefix box plus volume of the suffix box for each cut between segments
    (segments run along ``axis``; dimension is axis 0)."""
    def rev(a):
        return np.flip(a, axis=axis)

    def drop_last(a):
        return np.delete(a, -1, axis=axis)

    def drop_first(a):
        return np.delete(a, 0, axis=axis)

    pre = (drop_last(np.maximum.accumulate(seg_hi, axis=axis))
           - drop_last(np.minimum.accumulate(seg_lo, axis=axis)))
    suf = (drop_first(rev(np.maximum.accumulate(rev(seg_hi), axis=axis)))
           - drop_first(rev(np.minimum.accumulate(rev(seg_lo), axis=axis))))
    return np.prod(pre, axis=0) + np.prod(suf, axis=0)


def _split(rects: SortedRects, members: np.ndarray, boundaries: np.ndarray,
           labels: np.ndarray, first_label: int) -> None:
    """Cut ``members`` into ``len(boundaries) + 1`` groups whose sizes are fixed by the
    ascending ``boundaries`` (group k spans positions boundaries[k-1]..boundaries[k]); group k
    gets label ``first_label + k``."""
    stack = [(members, np.asarray(boundaries, dtype=np.int64), first_label)]
    while stack:
        idx, bounds, label = stack.pop()
        if bounds.size == 0:
            labels[idx] = label
            continue
        ordered, p = _best_cut(rects, idx, bounds)
        j = int(np.searchsorted(bounds, p))  # bounds[j] == p
        stack.append((ordered[:p], bounds[:j], label))
        stack.append((ordered[p:], bounds[j + 1:] - p, label + j + 1))


def partition(mins: np.ndarray, maxs: np.ndarray, n_parts: int) -> np.ndarray:
    """Labels 0..n_parts-1 splitting the rectangles into ``n_parts`` groups of near-equal size
    (sizes differ by at most one) by top-down greedy cuts."""
    n = len(mins)
    if n_parts < 1:
        raise ValueError("n_parts must be >= 1")
    labels = np.zeros(n, dtype=np.int64)
    if n == 0 or n_parts == 1:
        return labels
    if n_parts >= n:
        return np.arange(n, dtype=np.int64)
    bounds = np.rint(np.arange(1, n_parts) * (n / n_parts)).astype(np.int64)
    _split(SortedRects(mins, maxs), np.arange(n), bounds, labels, 0)
    return labels


def tree_height(m: int, fanout: int) -> int:
    """Levels of nodes of an R-tree over ``m`` rectangles with fan-out ``fanout``: the root is
    depth 1, leaf nodes (holding up to ``fanout`` rectangles) depth ``height``, and the
    rectangles themselves sit at depth ``height + 1``."""
    height, capacity = 1, fanout
    while capacity < m:
        height += 1
        capacity *= fanout
    return height


def rtree_levels(mins: np.ndarray, maxs: np.ndarray, fanout: int, max_depth: int):
    """Group labels per depth 1..min(max_depth, height) of a TGS R-tree: ``levels[k-1][i]`` is
    the node at depth k holding rectangle i (node numbers are contiguous per depth)."""
    if fanout < 2:
        raise ValueError("fanout must be >= 2")
    m = len(mins)
    height = tree_height(m, fanout)
    labels = np.zeros(m, dtype=np.int64)
    levels = [labels]
    rects = SortedRects(mins, maxs)
    for depth in range(2, min(max_depth, height) + 1):
        child_capacity = fanout ** (height - depth + 1)
        new = np.empty(m, dtype=np.int64)
        next_label = 0
        order = np.argsort(labels, kind="stable")
        starts = np.flatnonzero(np.r_[True, labels[order][1:] != labels[order][:-1]])
        for start, stop in zip(starts, np.r_[starts[1:], m]):
            members = order[start:stop]
            bounds = np.arange(child_capacity, len(members), child_capacity, dtype=np.int64)
            _split(rects, members, bounds, new, next_label)
            next_label += len(bounds) + 1
        labels = new
        levels.append(labels)
    return levels


def bounding_boxes(mins: np.ndarray, maxs: np.ndarray, labels: np.ndarray, n_groups=None):
    """Per-group bounding boxes ``(box_mins, box_maxs)``, groups 0..n_groups-1 (an empty group
    gets an inverted box that contains nothing)."""
    if n_groups is None:
        n_groups = int(labels.max()) + 1 if len(labels) else 0
    d = mins.shape[1]
    box_lo = np.full((n_groups, d), np.inf)
    box_hi = np.full((n_groups, d), -np.inf)
    np.minimum.at(box_lo, labels, mins)
    np.maximum.at(box_hi, labels, maxs)
    return box_lo, box_hi


def rtree_summary(mins: np.ndarray, maxs: np.ndarray, depth: int, fanout: int = 8):
    """The boxes of the nodes at ``depth`` (1 = the root) of a TGS R-tree over the rectangles;
    at or beyond the data level (``depth > tree_height``) the rectangles themselves, i.e. the
    precise summary."""
    if depth < 1:
        raise ValueError("depth must be >= 1")
    m = len(mins)
    if m == 0 or depth > tree_height(m, fanout):
        return mins.copy(), maxs.copy()
    labels = rtree_levels(mins, maxs, fanout, depth)[-1]
    return bounding_boxes(mins, maxs, labels)
