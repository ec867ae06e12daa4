"""Distance-aware subscription partitioning (EDN paper III-D): the R-tree rules with event
traffic weighted by network distance.

Which distance. The paper weights a server by "the network distance" of "the paths from the
dispatcher to different servers". Here the distance is the one a placement
decision can see and a subscriber feels: from the subscription's *entry server* (where it
arrived; the subscriber is near it) to the server that would hold it. With one dispatcher
equally far from every server the paper's weights are all equal and nothing changes; the
entry-server reading is what makes placement distance-aware in a wide-area network.

Online (:class:`OnlineDistancePartitioner`): a new subscription goes to the eligible server
(load below the threshold) of least

    added_traffic(s) * (distance(entry, s) + distance_floor)

where ``added_traffic(s) = min_i |new \\ R_i|`` over that server's bounding rectangles ``R_i``
(exactly the paper's approximation: the volume of the new box outside the rectangle covering
most of it; the new box's whole volume for a server without rectangles). The floor is our
addition: the entry server is at distance 0 from itself, and the paper's bare product would
then keep every subscription where it arrived (cost 0) whatever its fit. With the floor (by
default the smallest non-zero distance given: "one near hop") the entry server is weighted
like a server one near hop away, so a near server beats it only by fitting better.
``distance_floor=0`` gives the bare product. Equal distances (a row of one value) give the
plain least-added-traffic choice. Ties: shorter distance, then lighter load, then lower index.
The chosen server records the rectangle (as the paper's online R-tree does).

Offline (:func:`distance_partition`, :class:`OfflineDistanceRTreePartitioner`): TGS bulk
loading (:mod:`.tgs`, equal group sizes) with the ``k`` groups bound to servers. The servers
are put in a nearest-neighbour chain (from server 0, always the nearest unvisited one, ties
to the lowest index), so a contiguous range of the chain is a set of near servers, and group
``j`` goes to chain position ``j``. A cut of a node whose groups span chain positions
``[a, b]`` into ``[a, c]`` and ``[c+1, b]`` costs ("the sum of the volumes of the bounding
rectangles of the two partitions on the two sides of the cut weighted by the network
distance")

    vol(left box) * (floor + mean_left) + vol(right box) * (floor + mean_right)

where ``mean_side`` is the mean, over that side's subscriptions, of the distance from the
subscription's entry server to the nearest server of that side's chain range (exact once the
range is one server; a lower bound above). Geometric orders alone cannot separate
subscriptions by where they entered when entry and content are independent, so, as the
paper's second III-D extension suggests ("the subscriber's location as additional
dimensions"), one more candidate order sorts the subscriptions by their entry server's chain
position; the weighted cost decides whether a location cut beats a geometric one.

When every subscription is equally far from every server (e.g. an all-zero matrix, or no
``entry``), the weights are one constant and the weighted cost is a constant multiple of
TGS's: the labels are :func:`.tgs.partition`'s (computed by it, keeping its tie order).
"""
from __future__ import annotations

import numpy as np

from . import tgs
from .base import Partitioner, check_rectangles
from .tgs import SortedRects

__all__ = ["OnlineDistancePartitioner", "OfflineDistanceRTreePartitioner", "added_traffic",
           "distance_partition", "nearest_neighbour_chain"]


def added_traffic(lo, hi, mins: np.ndarray, maxs: np.ndarray) -> float:
    """``min_i |[lo, hi] \\ R_i|``: the volume of the box outside the rectangle that covers
    most of it (its whole volume when there is no rectangle)."""
    volume = float(np.prod(np.asarray(hi) - np.asarray(lo)))
    if len(mins) == 0:
        return volume
    inter = np.clip(np.minimum(maxs, hi) - np.maximum(mins, lo), 0.0, None)
    return max(volume - float(np.prod(inter, axis=1).max()), 0.0)


def _check_distances(values: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{what} must be finite and >= 0")


def _floor(distances: np.ndarray, floor: float | None) -> float:
    """The explicit floor, else the smallest non-zero distance (1.0 when all are zero: any
    positive constant then gives the same choices)."""
    if floor is not None:
        if not np.isfinite(floor) or floor < 0:
            raise ValueError("distance_floor must be finite and >= 0")
        return float(floor)
    positive = distances[distances > 0]
    return float(positive.min()) if positive.size else 1.0


class _GrowingBoxes:
    """One server's rectangles, appended in amortised O(d)."""

    def __init__(self, mins: np.ndarray, maxs: np.ndarray):
        self.lo, self.hi, self.n = mins.copy(), maxs.copy(), len(mins)

    def add(self, lo, hi) -> None:
        if self.n == len(self.lo):
            grow = max(self.n, 8)
            self.lo = np.vstack([self.lo, np.empty((grow, self.lo.shape[1]))])
            self.hi = np.vstack([self.hi, np.empty((grow, self.hi.shape[1]))])
        self.lo[self.n], self.hi[self.n] = lo, hi
        self.n += 1

    def added_traffic(self, lo, hi) -> float:
        return added_traffic(lo, hi, self.lo[:self.n], self.hi[:self.n])


class OnlineDistancePartitioner(Partitioner):
    """Online least-added-traffic-times-distance routing (see the module docstring).

    Live use: ``fit`` (possibly on empty arrays with a ``capacity``), ``update_server(s, mins,
    maxs, load)`` with a peer's summary, ``set_distances(row)`` with the entry server's
    distances to every server, then ``assign(lo, hi)``. Before any ``set_distances`` every
    distance is 0 (pure least added traffic)."""

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None,
                 distance_floor: float | None = None):
        self.load_factor = load_factor
        self.capacity = capacity
        self.distance_floor = distance_floor

    def _fit(self, mins, maxs):
        self._start_empty(mins.shape[1])
        labels = np.empty(len(mins), dtype=np.int64)
        for j in range(len(mins)):
            labels[j] = self._assign_one(mins[j], maxs[j])
            self.loads_[labels[j]] += 1
        self.labels_ = labels

    def _start_empty(self, d: int) -> None:
        empty = np.empty((0, d))
        self._boxes = [_GrowingBoxes(empty, empty) for _ in range(self.n_servers_)]
        self.distances_ = np.zeros(self.n_servers_)

    def set_distances(self, distances) -> "OnlineDistancePartitioner":
        """The distances (ms) from the next subscriptions' entry server to every server."""
        distances = np.asarray(distances, dtype=np.float64).reshape(-1)
        if distances.shape != (self.n_servers_,):
            raise ValueError(f"expected {self.n_servers_} distances")
        _check_distances(distances, "distances")
        self.distances_ = distances
        return self

    def update_server(self, server: int, mins, maxs, load: int) -> "OnlineDistancePartitioner":
        """Replace ``server``'s rectangles (a peer's summary) and load."""
        mins, maxs = check_rectangles(np.asarray(mins, dtype=np.float64).reshape(
            -1, self.n_features_in_), np.asarray(maxs, dtype=np.float64).reshape(
            -1, self.n_features_in_))
        self._boxes[server] = _GrowingBoxes(mins, maxs)
        self.loads_[server] = int(load)
        return self

    def costs(self, lo, hi) -> np.ndarray:
        """Every server's ``added_traffic * (distance + floor)`` for ``[lo, hi]`` (eligible or
        not): the figure the choice minimises."""
        floor = _floor(self.distances_, self.distance_floor)
        traffic = np.array([boxes.added_traffic(lo, hi) for boxes in self._boxes])
        return traffic * (self.distances_ + floor)

    def _assign_one(self, lo, hi) -> int:
        eligible = np.flatnonzero(self.loads_ < self.capacity_)
        cost = self.costs(lo, hi)[eligible]
        order = np.lexsort((eligible, self.loads_[eligible], self.distances_[eligible], cost))
        server = int(eligible[order[0]])
        self._boxes[server].add(lo, hi)
        return server


def nearest_neighbour_chain(latency: np.ndarray) -> np.ndarray:
    """Servers ordered from 0, each next one the nearest unvisited to the previous (symmetric
    latency: the larger direction; ties to the lowest index)."""
    latency = np.maximum(latency, latency.T)
    n = len(latency)
    chain = [0]
    left = np.ones(n, dtype=bool)
    left[0] = False
    while left.any():
        row = np.where(left, latency[chain[-1]], np.inf)
        nxt = int(np.argmin(row))
        chain.append(nxt)
        left[nxt] = False
    return np.asarray(chain, dtype=np.int64)


def distance_partition(mins, maxs, entry, latency, distance_floor: float | None = None
                       ) -> np.ndarray:
    """Server per subscription: distance-weighted TGS (module docstring); ``latency`` is the
    (k, k) server matrix (ms, finite, >= 0), ``entry`` each subscription's entry server
    (0..k-1)."""
    mins, maxs = check_rectangles(mins, maxs)
    latency = np.asarray(latency, dtype=np.float64)
    if latency.ndim != 2 or latency.shape[0] != latency.shape[1] or len(latency) < 1:
        raise ValueError("latency must be a non-empty square (k, k) matrix")
    _check_distances(latency, "latencies")
    k, n = len(latency), len(mins)
    entry = np.asarray(entry)
    if entry.shape != (n,) or not (entry.dtype.kind in "iu" or n == 0):
        raise ValueError("entry must hold one integer server index per subscription")
    entry = entry.astype(np.int64)
    if n and (entry.min() < 0 or entry.max() >= k):
        raise ValueError(f"entry servers must be in 0..{k - 1}")
    chain = nearest_neighbour_chain(latency)
    to_chain = latency[entry][:, chain]  # (n, k): entry server -> chain position
    if n == 0 or k == 1 or k >= n or np.all(to_chain == to_chain.flat[0]):
        # No distance information (or nothing to cut): TGS's labels, on the chain.
        return chain[tgs.partition(mins, maxs, k)]
    floor = _floor(latency.ravel(), distance_floor)
    rank = np.empty(k, dtype=np.int64)
    rank[chain] = np.arange(k)
    where_entered = rank[entry].astype(np.float64)
    positions = np.empty(n, dtype=np.int64)
    rects = SortedRects(mins, maxs)
    bounds = np.rint(np.arange(1, k) * (n / k)).astype(np.int64)
    stack = [(np.arange(n), bounds, 0)]
    while stack:
        idx, cuts, first = stack.pop()
        if cuts.size == 0:
            positions[idx] = first
            continue
        ordered, p = _weighted_cut(rects, where_entered, idx, cuts,
                                   to_chain[:, first:first + cuts.size + 1], floor)
        j = int(np.searchsorted(cuts, p))
        stack.append((ordered[:p], cuts[:j], first))
        stack.append((ordered[p:], cuts[j + 1:] - p, first + j + 1))
    return chain[positions]


def _weighted_cut(rects: SortedRects, where_entered, idx, cuts, distances, floor):
    """The cheapest cut of ``idx`` over the 3d geometric orders and the entry order, at the
    candidate positions ``cuts``; ``distances`` (n, groups) from each subscription's entry to
    each of this node's groups' servers."""
    # Distance to the nearest server of the left / right chain range, per cut j.
    prefix = np.minimum.accumulate(distances, axis=1)[:, :-1]            # (n, cuts)
    suffix = np.flip(np.minimum.accumulate(np.flip(distances, 1), axis=1), 1)[:, 1:]
    keys = np.vstack([rects.keys[:, idx], where_entered[idx]])
    orders = idx[np.argsort(keys, axis=1, kind="stable")]                 # (3d + 1, m)
    m = len(idx)
    best = (np.inf, None, None)
    for order in orders:
        lo, hi = rects.lo[:, order], rects.hi[:, order]                    # (d, m)
        pre_vol = np.prod(np.maximum.accumulate(hi, axis=1) - np.minimum.accumulate(lo, axis=1),
                          axis=0)
        suf_vol = np.prod(np.flip(np.maximum.accumulate(np.flip(hi, 1), axis=1), 1)
                          - np.flip(np.minimum.accumulate(np.flip(lo, 1), axis=1), 1), axis=0)
        left_sum = np.cumsum(prefix[order], axis=0)                        # (m, cuts)
        right_sum = np.cumsum(np.flip(suffix[order], 0), axis=0)
        for j, p in enumerate(cuts):
            w_left = floor + left_sum[p - 1, j] / p
            w_right = floor + right_sum[m - p - 1, j] / (m - p)
            cost = pre_vol[p - 1] * w_left + suf_vol[p] * w_right
            if cost < best[0]:
                best = (cost, order, int(p))
    return best[1], best[2]


class OfflineDistanceRTreePartitioner(OnlineDistancePartitioner):
    """Offline distance-weighted TGS; parameters as the online one plus ``latency`` (k, k)
    and ``entry`` (the entry server of each subscription given to ``fit``). Without them
    (either None) it is plain TGS (:class:`~.rtree.OfflineRTreePartitioner`'s groups).
    ``assign`` continues online by least added traffic times distance over the offline
    groups' rectangles (``set_distances`` first)."""

    def __init__(self, latency=None, entry=None, load_factor: float = 2.0,
                 capacity: int | None = None, distance_floor: float | None = None):
        self.latency = latency
        self.entry = entry
        self.load_factor = load_factor
        self.capacity = capacity
        self.distance_floor = distance_floor

    def _fit(self, mins, maxs):
        k = self.n_servers_
        if self.latency is None or self.entry is None:
            self.labels_ = tgs.partition(mins, maxs, k)
        else:
            if np.shape(self.latency) != (k, k):
                raise ValueError(f"latency must be ({k}, {k}) for {k} servers")
            self.labels_ = distance_partition(mins, maxs, self.entry, self.latency,
                                              self.distance_floor)
        self.distances_ = np.zeros(k)
        self._boxes = [_GrowingBoxes(mins[self.labels_ == s], maxs[self.labels_ == s])
                       for s in range(k)]
