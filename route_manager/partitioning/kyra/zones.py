"""Content zones (Kyra III-B): a box domain cut into ``k`` non-overlapping continuous zones of
balanced load, by recursive median cuts over sample points (subscription centres).

A cut splits the box along the dimension where the points spread most (the box's widest
dimension when there are none) at the point quantile that gives each side a share of the
points proportional to the zones it will hold, so ``k`` need not be a power of two. Zones are
closed boxes that share only their faces; a point on a face belongs to the first zone that
contains it (:func:`zone_of`), so every point of the domain has exactly one owner."""
from __future__ import annotations

import numpy as np

__all__ = ["median_zones", "zone_of", "overlaps"]


def median_zones(points: np.ndarray, lo, hi, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` zones tiling ``[lo, hi]``, as ``(mins, maxs)`` of shape ``(k, d)``."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if int(k) < 1:
        raise ValueError("k must be >= 1")
    if lo.shape != hi.shape or lo.ndim != 1 or np.any(hi < lo):
        raise ValueError("the domain must be a box with lo <= hi")
    points = np.asarray(points, dtype=np.float64).reshape(-1, len(lo))
    mins: list[np.ndarray] = []
    maxs: list[np.ndarray] = []
    _split(points, lo, hi, int(k), mins, maxs)
    return np.vstack(mins), np.vstack(maxs)


def _split(points, lo, hi, k, mins, maxs) -> None:
    if k == 1:
        mins.append(lo)
        maxs.append(hi)
        return
    left_k = k // 2
    share = left_k / k
    inside = points[np.all((points >= lo) & (points <= hi), axis=1)]
    if len(inside) >= 2:
        dim = int(np.argmax(inside.max(axis=0) - inside.min(axis=0)))
        cut = float(np.quantile(inside[:, dim], share))
    else:
        dim = int(np.argmax(hi - lo))
        cut = lo[dim] + share * (hi[dim] - lo[dim])
    cut = min(max(cut, lo[dim]), hi[dim])
    left_hi, right_lo = hi.copy(), lo.copy()
    left_hi[dim] = right_lo[dim] = cut
    side = inside[:, dim] <= cut
    _split(inside[side], lo, left_hi, left_k, mins, maxs)
    _split(inside[~side], right_lo, hi, k - left_k, mins, maxs)


def zone_of(point, mins: np.ndarray, maxs: np.ndarray) -> int:
    """The index of the first zone containing ``point`` (ValueError outside every zone)."""
    point = np.asarray(point, dtype=np.float64)
    inside = np.all((mins <= point) & (point <= maxs), axis=1)
    hits = np.flatnonzero(inside)
    if hits.size == 0:
        raise ValueError(f"point {point.tolist()} lies outside the content domain")
    return int(hits[0])


def overlaps(lo, hi, mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
    """Which of the closed boxes ``(mins, maxs)`` intersect the closed box ``[lo, hi]``."""
    return np.all((mins <= hi) & (lo <= maxs), axis=-1)
