"""K-means subscription partitioning (paper III-A), each rectangle represented by its centre.

Offline: K = n_servers centroids started from K distinct random centres (the paper's
"arbitrary initial cluster assignment"), Lloyd iterations until the summed distance between
old and new centroids is below ``delta`` (1 in the paper) or ``max_iter``; then the load
threshold is enforced: while some cluster holds more than the capacity, its members with the
smallest extra distance to their nearest centroid that still has room move there, and the
cluster is closed to further moves (each cluster closes at most once, so this ends).

Online: a new subscription goes to the eligible server whose subscriptions' centroid is
nearest its centre (ties: lowest index), and that centroid is updated as a running mean. A
server holding no subscription has no centroid yet: an empty eligible server is taken first
(lowest index), which seeds the K centroids with the first K subscriptions.
"""
from __future__ import annotations

import numpy as np

from .base import Partitioner, as_generator

__all__ = ["KMeansPartitioner", "OnlineKMeansPartitioner", "padded_centroids"]


def _sq_distances(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Squared distances (n, k) as |p|^2 - 2 p.c + |c|^2 (one matrix product); a centroid
    that does not exist yet (non-finite) is infinitely far."""
    finite = np.isfinite(centroids).all(axis=1)
    c = np.where(finite[:, None], centroids, 0.0)
    d2 = (points * points).sum(axis=1)[:, None] - 2.0 * points @ c.T + (c * c).sum(axis=1)
    np.maximum(d2, 0.0, out=d2)
    d2[:, ~finite] = np.inf
    return d2


def padded_centroids(centroids: np.ndarray, k: int) -> np.ndarray:
    """``centroids`` with rows of +inf up to ``k``: the servers they stand for are nearest to
    no subscription, so they stay empty."""
    missing = k - len(centroids)
    if missing <= 0:
        return centroids
    return np.vstack([centroids, np.full((missing, centroids.shape[1]), np.inf)])


def _nearest(points: np.ndarray, centroids: np.ndarray, chunk: int = 65536) -> np.ndarray:
    out = np.empty(len(points), dtype=np.int64)
    for s in range(0, len(points), chunk):
        out[s:s + chunk] = np.argmin(_sq_distances(points[s:s + chunk], centroids), axis=1)
    return out


def _enforce_capacity(points, centroids, labels, capacity):
    """Move overflow to the next-nearest centroids with room (see the module docstring)."""
    k = len(centroids)
    loads = np.bincount(labels, minlength=k)
    closed = np.zeros(k, dtype=bool)
    while (loads > capacity).any():
        c = int(np.argmax(loads - capacity))
        closed[c] = True
        members = np.flatnonzero(labels == c)
        excess = loads[c] - capacity
        dist = np.sqrt(_sq_distances(points[members], centroids))
        moved = 0
        while moved < excess:
            open_ = ~closed & (loads < capacity)
            if not open_.any():
                raise RuntimeError("no room left for the overflow")  # cannot happen: n <= k*cap
            alt = np.where(open_[None, :], dist, np.inf)
            target = np.argmin(alt, axis=1)
            penalty = alt[np.arange(len(members)), target] - dist[:, c]
            still = labels[members] == c
            penalty[~still] = np.inf
            # Move the cheapest members, but no more than the room of their targets allows in
            # this round (a target filling up is re-evaluated next round).
            order = np.argsort(penalty, kind="stable")[: excess - moved]
            room = np.where(open_, capacity - loads, 0)
            take = []
            for j in order:
                t = target[j]
                if room[t] > 0:
                    room[t] -= 1
                    take.append(j)
            take = np.asarray(take, dtype=np.int64)
            labels[members[take]] = target[take]
            np.add.at(loads, target[take], 1)
            loads[c] -= len(take)
            moved += len(take)
    return labels


class KMeansPartitioner(Partitioner):
    """Offline K-means with a load threshold; ``assign`` continues online (nearest centroid
    among servers below the threshold, running-mean update).

    Learned: ``labels_``, ``loads_``, ``capacity_``, ``n_servers_``, ``cluster_centers_``
    (centroid of each server's subscriptions), ``n_iter_``.
    """

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None,
                 delta: float = 1.0, max_iter: int = 300, random_state=None):
        self.load_factor = load_factor
        self.capacity = capacity
        self.delta = delta
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit(self, mins, maxs):
        rng = as_generator(self.random_state)
        points = (mins + maxs) * 0.5
        n, k = len(points), self.n_servers_
        self.n_iter_ = 0
        if n == 0:
            self.labels_ = np.empty(0, dtype=np.int64)
            self._set_centroids(points, self.labels_)
            return
        # fewer subscriptions than servers: the extra servers stay empty
        centroids = padded_centroids(points[rng.choice(n, size=min(k, n), replace=False)], k)
        labels = _nearest(points, centroids)
        for it in range(1, self.max_iter + 1):
            new = centroids.copy()
            counts = np.bincount(labels, minlength=k)
            sums = np.zeros_like(centroids)
            np.add.at(sums, labels, points)
            filled = counts > 0
            new[filled] = sums[filled] / counts[filled, None]
            finite = np.isfinite(new).all(axis=1) & np.isfinite(centroids).all(axis=1)
            shift = float(np.linalg.norm(new[finite] - centroids[finite], axis=1).sum())
            centroids = new
            labels = _nearest(points, centroids)
            self.n_iter_ = it
            if shift < self.delta:
                break
        self._finish(points, centroids, labels)

    def _finish(self, points, centroids, labels=None):
        """From fitted ``centroids`` (``k`` rows): labels under the load threshold and the
        servers' centroids (for subclasses that fit the centroids some other way)."""
        if labels is None:
            labels = _nearest(points, centroids)
        self.labels_ = _enforce_capacity(points, centroids, labels, self.capacity_)
        self._set_centroids(points, self.labels_)

    def _set_centroids(self, points, labels):
        k = self.n_servers_
        d = points.shape[1] if points.ndim == 2 else self.n_features_in_
        self._sums = np.zeros((k, d))
        np.add.at(self._sums, labels, points)
        self._counts = np.bincount(labels, minlength=k).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.cluster_centers_ = self._sums / self._counts[:, None]

    def _assign_one(self, lo, hi) -> int:
        point = (lo + hi) * 0.5
        eligible = self._eligible()
        empty = eligible & (self._counts == 0)
        if empty.any():
            server = int(np.argmax(empty))
        else:
            dist = ((self.cluster_centers_ - point) ** 2).sum(axis=1)
            dist[~eligible] = np.inf
            server = int(np.argmin(dist))
        self._sums[server] += point
        self._counts[server] += 1
        self.cluster_centers_[server] = self._sums[server] / self._counts[server]
        return server


class OnlineKMeansPartitioner(KMeansPartitioner):
    """Online K-means: every subscription given to ``fit`` is routed in order, as ``assign``
    would."""

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None):
        self.load_factor = load_factor
        self.capacity = capacity

    def _fit(self, mins, maxs):
        self.n_iter_ = 0
        k, d = self.n_servers_, mins.shape[1]
        self._sums = np.zeros((k, d))
        self._counts = np.zeros(k)
        self.cluster_centers_ = np.full((k, d), np.nan)
        labels = np.empty(len(mins), dtype=np.int64)
        for j in range(len(mins)):
            server = self._assign_one(mins[j], maxs[j])
            self.loads_[server] += 1
            labels[j] = server
        self.labels_ = labels
