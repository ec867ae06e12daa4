"""Summaries of attributes tested by equality: boxes widened on those dimensions, and a
Bloom filter of the values there (paper II; the filter is :mod:`.bloom`).

Why
    A server holding ``symbol = S and price in [a, b]`` for 5,000 symbols S has thousands of
    maximal rectangles that are single points on the symbol dimension; a precision cut
    (STR groups) then merges neighbouring symbols' boxes into boxes spanning every symbol
    between them.  With the symbol dimension widened to the attribute's whole range the
    price ranges merge across symbols into few maximal rectangles, and the Bloom filter
    answers the symbol test at the cost of its false-positive rate.

When (:func:`bloom_parts`)
    Only for attributes whose schema asks for it (``summary="bloom"``,
    :class:`~matchers.schema.Attribute`), and only while **every** rectangle a server holds
    is degenerate there (``lo == hi``: an equality test, or a range too narrow for the
    coordinate's 6 bytes to tell apart).  A subscription that tests the attribute by a range,
    or not at all, makes the summary plain boxes again on that dimension (checking the
    maximal rectangles suffices: a rectangle spanning an interval there is covered only by
    rectangles that span it too).  Every coordinate an event matching a degenerate rectangle
    can have is that rectangle's one value, so the summary never misses an event.

Precision
    Precision cuts (:func:`~.cuts.str_groups`) reduce the widened boxes and keep the Bloom
    filters unchanged: on a Bloom dimension precision is the filter's false-positive rate
    (``falsePositiveRate`` of the attribute), whatever the box budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..schema import Schema
from ..schema.model import BLOOM
from .bloom import BloomFilter
from .cuts import str_groups
from .maximal import MaximalRectangles

__all__ = ["BloomParts", "bloom_dimensions", "bloom_parts"]


@dataclass(frozen=True, eq=False)
class BloomParts:
    """The maximal rectangles of a server's rectangles widened on the Bloom dimensions
    (``mins``/``maxs``) and the filter of each such dimension's values (``blooms``)."""

    mins: np.ndarray
    maxs: np.ndarray
    blooms: Mapping[str, BloomFilter]

    def boxes_at(self, target: int) -> tuple[np.ndarray, np.ndarray]:
        """About ``target`` boxes covering them, as :meth:`MaximalRectangles.boxes_at`."""
        if target <= 0 or not len(self.mins):
            return self.mins[:0], self.maxs[:0]
        if len(self.mins) <= target:
            return self.mins, self.maxs
        return str_groups(self.mins, self.maxs, target)


def bloom_dimensions(schema: Schema, mins: np.ndarray, maxs: np.ndarray) -> tuple[int, ...]:
    """The dimensions that ask for a Bloom summary and on which every box is degenerate
    (none without boxes: there is nothing to summarize)."""
    if not len(mins):
        return ()
    return tuple(j for j, attribute in enumerate(schema.attributes)
                 if attribute.summary == BLOOM and np.array_equal(mins[:, j], maxs[:, j]))


def bloom_parts(schema: Schema, mins: np.ndarray, maxs: np.ndarray) -> BloomParts | None:
    """From a server's maximal rectangles ``mins``/``maxs``: its :class:`BloomParts`, or None
    when no dimension qualifies (:func:`bloom_dimensions`)."""
    dims = bloom_dimensions(schema, mins, maxs)
    if not dims:
        return None
    blooms = {}
    wide_mins, wide_maxs = mins.copy(), maxs.copy()
    for j in dims:
        attribute = schema.attributes[j]
        blooms[attribute.name] = BloomFilter.of(mins[:, j], attribute.false_positive_rate)
        # the attribute's range, and any value outside it (a bulk-loaded box at NULL)
        wide_mins[:, j] = min(schema.domain_lo[j], mins[:, j].min())
        wide_maxs[:, j] = max(schema.domain_hi[j], maxs[:, j].max())
    keep = _maximal(wide_mins, wide_maxs, [j for j in range(schema.d) if j not in dims])
    return BloomParts(wide_mins[keep], wide_maxs[keep], blooms)


def _maximal(mins: np.ndarray, maxs: np.ndarray, free: list[int]) -> np.ndarray:
    """Positions of the maximal boxes (the first of identical ones) when the boxes agree on
    every dimension but ``free``: only those decide who covers whom."""
    n = len(mins)
    if not free:
        return np.zeros(1, dtype=np.int64)
    if len(free) == 1:
        # Intervals: sorted by low end, longest first, an interval is covered exactly when
        # one before it reaches as high (O(n log n), where the general search below pairs
        # each box with every box whose low end lies in its window: ~150 ms at 5,000).
        lows, highs = mins[:, free[0]], maxs[:, free[0]]
        order = np.lexsort((np.arange(n), -highs, lows))
        reach = np.maximum.accumulate(highs[order])
        covered = np.r_[False, reach[:-1] >= highs[order][1:]]
        return np.sort(order[~covered])
    maximal = MaximalRectangles(len(free))
    maximal.load(np.arange(n), mins[:, free], maxs[:, free])
    return maximal.maximal_rows()
