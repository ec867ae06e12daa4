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

import numpy as np

from ..schema import Schema
from ..schema.model import BLOOM
from .bloom import BloomFilter
from .maximal import MaximalRectangles

__all__ = ["bloom_dimensions", "bloom_parts"]


def bloom_dimensions(schema: Schema, mins: np.ndarray, maxs: np.ndarray) -> tuple[int, ...]:
    """The dimensions that ask for a Bloom summary and on which every box is degenerate
    (none without boxes: there is nothing to summarize)."""
    if not len(mins):
        return ()
    return tuple(j for j, attribute in enumerate(schema.attributes)
                 if attribute.summary == BLOOM and np.array_equal(mins[:, j], maxs[:, j]))


def bloom_parts(schema: Schema, mins: np.ndarray, maxs: np.ndarray
                ) -> tuple[MaximalRectangles, dict[str, BloomFilter]] | None:
    """From a server's maximal rectangles ``mins``/``maxs``: the maximal rectangles of the
    boxes widened on every Bloom dimension, and a filter of the values per such dimension;
    None when no dimension qualifies (:func:`bloom_dimensions`)."""
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
    maximal = MaximalRectangles(schema.d)
    maximal.load(np.arange(len(mins)), wide_mins, wide_maxs)
    return maximal, blooms
