"""Sub-tree summaries (paper II): a dispatcher in a dispatch tree "combines all summaries [of
its children] into a sub-tree summary and reports it to the parent node".

:func:`union` covers the union of its inputs (every event any input routes, the union
routes); :func:`cut` brings a summary down to a box budget with the STR groups every
precision cut uses (:func:`~.cuts.str_groups`), so it still covers its input. Together they
keep the tree's invariant: a parent's summary of a child covers the child's whole subtree.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .cuts import str_groups
from .model import Summary

__all__ = ["union", "cut"]


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
    return Summary(dims, mins, maxs, schema)


def cut(summary: Summary, boxes: int) -> Summary:
    """``summary`` with at most ``boxes`` boxes (at least one when it has any), covering it."""
    if len(summary) <= boxes:
        return summary
    mins, maxs = str_groups(summary.mins, summary.maxs, max(1, boxes))
    return Summary(summary.dims, mins, maxs, summary.schema)
