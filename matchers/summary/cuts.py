"""Cutting a summary to a box budget: how many boxes a precision asks for
(:func:`summary_target`) and the STR groups that give that many (:func:`str_groups`).

Every cut covers its input (a group's bounding box covers its members), so a coarser
summary never withholds an event a finer one routes.
"""

from __future__ import annotations

import math

import numpy as np

from .._rtree import str_labels

__all__ = ["summary_target", "str_groups"]


def summary_target(precision: float, rectangles: int) -> int:
    """Boxes wanted at ``precision`` (in (0, 1]): ceil(precision x subscription rectangles)."""
    if not (isinstance(precision, (int, float)) and 0 < precision <= 1):
        raise ValueError(f"precision must be in (0, 1], got {precision!r}")
    return max(1, math.ceil(precision * rectangles)) if rectangles else 0


def str_groups(mins: np.ndarray, maxs: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounding boxes of ``groups`` groups of neighbouring boxes (Sort-Tile-Recursive).

    Why STR (the packing R-tree bulk loaders use, Leutenegger et al. 1997): box centres are
    sorted on the first dimension and cut into ``s = ceil(g^(1/d))`` slabs of equal counts,
    each slab is cut the same way on the next dimension, and so on, so the groups are tiles
    that are compact in *every* dimension and hold equal numbers of boxes.  A single
    space-filling-curve order (Hilbert, Z) cut into runs is as cheap but makes some runs
    straddle a jump of the curve, and their bounding boxes span far more space (more false
    positives at the dispatcher); agglomerative merging by least volume growth is better
    still on small inputs but costs O(m^2) per cut and summaries are cut often (every
    precision change of the self-tuning dispatcher).  STR is O(m log m), deterministic, and
    gives exactly ``groups`` groups when there are at least as many boxes.
    """
    m, d = mins.shape
    if groups >= m:
        return mins.copy(), maxs.copy()
    if groups < 1:
        raise ValueError("groups must be >= 1")
    labels = str_labels((mins + maxs) / 2.0, groups)
    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(labels[order]) != 0])
    group_mins = np.minimum.reduceat(mins[order], starts, axis=0)
    group_maxs = np.maximum.reduceat(maxs[order], starts, axis=0)
    return group_mins, group_maxs
