"""Sub-tree summaries (paper II): a dispatcher in a dispatch tree "combines all summaries [of
its children] into a sub-tree summary and reports it to the parent node".

:func:`union` covers the union of its inputs (every event any input routes, the union
routes); :func:`cut` brings a summary down to a box budget with the STR groups every
precision cut uses (:func:`~.cuts.str_groups`), so it still covers its input. Together they
keep the tree's invariant: a parent's summary of a child covers the child's whole subtree.

Bloom dimensions (:mod:`.bloom`)
    A dimension keeps a Bloom filter in the union when every input either has one there or
    has only degenerate boxes there (``lo == hi``: equality tests): the filters are ORed
    (:func:`~.bloom.union_of`), the point values of the others inserted, and every box
    widened on that dimension to the inputs' whole extent there (what the Bloom inputs'
    boxes already span).  When some input has a box spanning an interval there, the union
    has no filter on it and the boxes stay as they are: the filters' boxes alone cover what
    the filters did (correct, less precise).  :func:`cut` keeps the filters as they are.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from lxml import etree

from .bloom import BloomFilter, union_of
from .cuts import str_groups
from .model import Summary

__all__ = ["union", "cut", "cut_to_bytes"]


def union(summaries: Sequence[Summary]) -> Summary:
    """One summary covering every one of ``summaries`` (all over the same dimensions; the
    first schema carried is kept). ValueError for none or for differing dimensions."""
    if not summaries:
        raise ValueError("a union needs at least one summary")
    dims = summaries[0].dims
    if any(s.dims != dims for s in summaries):
        raise ValueError("summaries over different dimensions cannot be combined")
    schema = next((s.schema for s in summaries if s.schema is not None), None)
    mins = np.concatenate([s.mins for s in summaries], axis=0)
    maxs = np.concatenate([s.maxs for s in summaries], axis=0)
    blooms: dict[str, BloomFilter] = {}
    for name in dims:
        if not any(name in s.blooms for s in summaries):
            continue
        j = dims.index(name)
        combined = _bloom_union(summaries, name, j)
        if combined is not None and len(mins):
            blooms[name] = combined
            mins[:, j], maxs[:, j] = mins[:, j].min(), maxs[:, j].max()
    return Summary(dims, mins, maxs, schema, blooms)


def _bloom_union(summaries: Sequence[Summary], name: str, j: int) -> BloomFilter | None:
    """The filter on dimension ``j`` (named ``name``) of the union, or None when some input
    without a filter there has a box spanning an interval on it."""
    filters, points = [], []
    for summary in summaries:
        if name in summary.blooms:
            filters.append(summary.blooms[name])
        elif np.array_equal(summary.mins[:, j], summary.maxs[:, j]):
            points.append(summary.mins[:, j])
        else:
            return None
    return union_of(filters, np.concatenate(points) if points else ())


def cut(summary: Summary, boxes: int) -> Summary:
    """``summary`` with at most ``boxes`` boxes (at least one when it has any), covering it;
    its Bloom filters unchanged."""
    if len(summary) <= boxes:
        return summary
    mins, maxs = str_groups(summary.mins, summary.maxs, max(1, boxes))
    return Summary(summary.dims, mins, maxs, summary.schema, summary.blooms)


SUMMARY_OVERHEAD = 512  # bytes of an edn:Summary element besides boxes, filters and schema


def cut_to_bytes(summary: Summary, max_bytes: int) -> Summary:
    """``summary`` cut (:func:`cut`) so its ``edn:Summary`` text (boxes, Bloom filters, schema)
    fits in ``max_bytes``: a summary larger than the receiver's body limit would be refused
    whole and leave the sender without routes, while a coarser one still covers it."""
    # base64 float64 coordinates: 2 x d x 8 bytes x 4/3 per box; the Bloom filters' base64
    # bits and the schema take their share first; the element's own tags and attributes
    # (SUMMARY_OVERHEAD) are reserved
    filters = sum(bloom.bits // 6 + 256 for bloom in summary.blooms.values())
    schema = (len(etree.tostring(summary.schema.to_element()))
              if summary.schema is not None else 0)
    room = max(0, int(max_bytes) - filters - schema - SUMMARY_OVERHEAD)
    fits = room * 3 // (64 * max(1, summary.d))
    return cut(summary, max(1, fits)) if len(summary) > fits else summary
