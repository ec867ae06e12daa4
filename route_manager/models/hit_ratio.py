"""Hit ratio of summary-based event routing (paper III-B, III-C).

R = events forwarded / (events x servers), an event being forwarded to a server iff one of
that server's summary boxes contains it (``SearchAnyContaining``). With precise summaries the
boxes are the server's rectangles (or their maximal subset: the same region); with a
depth-limited summary, the node boxes of an R-tree at that depth::

    from route_manager.models import hit_ratio, workloads
    from route_manager.partitioning import OfflineRTreePartitioner

    mins, maxs = workloads.uniform_rectangles(100_000, 4, seed=1)
    labels = OfflineRTreePartitioner().fit(mins, maxs, 10).labels_
    events = workloads.uniform_events(10_000, 4, seed=2)
    hit_ratio.hit_ratio(events, hit_ratio.precise_summaries(mins, maxs, labels, 10))
    hit_ratio.hit_ratio(events, hit_ratio.depth_summaries(mins, maxs, labels, 10, depth=2))

"Does any box contain this point" is answered by :class:`ContainmentIndex` with slab
bitsets: each dimension is cut into slabs; per slab one bitset of the boxes that contain the
whole slab ("certain") and one of those that touch it ("possible"). AND-ing a point's slab rows
across dimensions decides almost every point at once (a certain bit: hit; no possible bit:
miss); the few left, near box faces, are checked exactly against their candidate boxes. This
stays fast both for wide boxes (hits found at once, where an R-tree returns thousands of
containing boxes) and for narrow ones (misses decided without a scan).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..partitioning.tgs import rtree_summary

__all__ = [
    "ContainmentIndex",
    "any_contains_brute_force",
    "forwarding_matrix",
    "hit_ratio",
    "precise_summaries",
    "depth_summaries",
]

Boxes = tuple[np.ndarray, np.ndarray]


def any_contains_brute_force(points: np.ndarray, mins: np.ndarray, maxs: np.ndarray,
                             chunk: int = 256) -> np.ndarray:
    """Reference: bool per point, True iff some box [mins, maxs] contains it (closed)."""
    out = np.zeros(len(points), dtype=bool)
    for s in range(0, len(points), chunk):
        p = points[s:s + chunk, None, :]
        out[s:s + chunk] = ((mins[None] <= p) & (maxs[None] >= p)).all(axis=2).any(axis=1)
    return out


class ContainmentIndex:
    """A static box set answering "is this point inside any box" for many points."""

    def __init__(self, mins: np.ndarray, maxs: np.ndarray, slabs: int = 64):
        self.mins = np.ascontiguousarray(mins, dtype=np.float64)
        self.maxs = np.ascontiguousarray(maxs, dtype=np.float64)
        m, d = self.mins.shape
        self.m, self.d, self.slabs = m, d, slabs
        if m == 0:
            return
        self._low = self.mins.min(axis=0)
        high = self.maxs.max(axis=0)
        self._high = high
        width = np.where(high > self._low, (high - self._low) / slabs, 1.0)
        self._width = width
        # edges[i, k] for k = 0..slabs; the same stored floats are used by every comparison
        self._edges = self._low[:, None] + width[:, None] * np.arange(slabs + 1)[None, :]
        self._edges[:, -1] = np.maximum(self._edges[:, -1], high)
        words = (m + 63) // 64
        self._certain = np.empty((d, slabs, words), dtype=np.uint64)
        self._possible = np.empty((d, slabs, words), dtype=np.uint64)
        pad = words * 64 - m
        for i in range(d):
            lo, hi = self.mins[:, i], self.maxs[:, i]
            e0, e1 = self._edges[i, :-1, None], self._edges[i, 1:, None]
            for target, member in ((self._certain, (lo <= e0) & (hi >= e1)),
                                   (self._possible, (lo <= e1) & (hi >= e0))):
                if pad:
                    member = np.hstack([member, np.zeros((slabs, pad), dtype=bool)])
                target[i] = np.packbits(member, axis=1, bitorder="little").view(np.uint64)

    def _slab_of(self, points: np.ndarray) -> np.ndarray:
        """Slab index per point and dimension, such that edges[k] <= x <= edges[k+1]."""
        k = np.floor((points - self._low) / self._width).astype(np.int64)
        k = np.clip(k, 0, self.slabs - 1)
        dims = np.arange(self.d)
        # Repair rounding against the stored edges.
        below = points < self._edges[dims, k]
        k = np.where(below, np.maximum(k - 1, 0), k)
        above = points > self._edges[dims, k + 1]
        return np.where(above, np.minimum(k + 1, self.slabs - 1), k)

    def any_contains(self, points: np.ndarray, chunk: int = 1024) -> np.ndarray:
        """Bool per point: True iff some box contains it."""
        points = np.asarray(points, dtype=np.float64)
        out = np.zeros(len(points), dtype=bool)
        if self.m == 0 or len(points) == 0:
            return out
        inside = ((points >= self._low) & (points <= self._high)).all(axis=1)
        todo = np.flatnonzero(inside)
        dims = np.arange(self.d)[None, :]
        for s in range(0, len(todo), chunk):
            idx = todo[s:s + chunk]
            k = self._slab_of(points[idx])
            certain = np.bitwise_and.reduce(self._certain[dims, k], axis=1)
            hit = certain.any(axis=1)
            possible = np.bitwise_and.reduce(self._possible[dims, k], axis=1)
            undecided = ~hit & possible.any(axis=1)
            out[idx[hit]] = True
            if undecided.any():
                out[idx[undecided]] = self._check(points[idx[undecided]], possible[undecided])
        return out

    def _check(self, points: np.ndarray, candidate_words: np.ndarray,
               max_pairs: int = 1 << 22) -> np.ndarray:
        """Exact test of each point against its candidate boxes."""
        out = np.zeros(len(points), dtype=bool)
        per_point = max(1, candidate_words.shape[1] * 64)
        step = max(1, max_pairs // per_point)
        for s in range(0, len(points), step):
            words = candidate_words[s:s + step]
            bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")
            row, box = np.nonzero(bits[:, : self.m])
            p = points[s:s + step][row]
            ok = ((self.mins[box] <= p) & (self.maxs[box] >= p)).all(axis=1)
            out[s:s + step] = np.bincount(row[ok], minlength=len(words)) > 0
        return out


def forwarding_matrix(events: np.ndarray, summaries: Sequence[Boxes]) -> np.ndarray:
    """Bool ``(n_events, n_servers)``: True where the event is forwarded to the server."""
    events = np.asarray(events, dtype=np.float64)
    out = np.zeros((len(events), len(summaries)), dtype=bool)
    for s, (mins, maxs) in enumerate(summaries):
        out[:, s] = ContainmentIndex(mins, maxs).any_contains(events)
    return out


def hit_ratio(events: np.ndarray, summaries: Sequence[Boxes]) -> float:
    """R = forwarded / (events x servers)."""
    if len(events) == 0 or len(summaries) == 0:
        raise ValueError("need at least one event and one server")
    return float(forwarding_matrix(events, summaries).mean())


def precise_summaries(mins: np.ndarray, maxs: np.ndarray, labels: np.ndarray,
                      n_servers: int) -> list[Boxes]:
    """Each server's own rectangles (the region of its maximal rectangles)."""
    return [(mins[labels == s], maxs[labels == s]) for s in range(n_servers)]


def depth_summaries(mins: np.ndarray, maxs: np.ndarray, labels: np.ndarray, n_servers: int,
                    depth: int, fanout: int = 8) -> list[Boxes]:
    """Each server's node boxes at ``depth`` of a TGS R-tree over its rectangles."""
    return [rtree_summary(mins[labels == s], maxs[labels == s], depth, fanout)
            for s in range(n_servers)]
