"""Routing summaries: the boxes a subscription server ships to the dispatcher, and the
summary manager that keeps the maximal rectangles they are cut from::

    from matchers.summary import MaximalRectangles, Summary, summary_target

    manager = MaximalRectangles(d=2)
    manager.add(0, [0, 0], [5, 5])          # row 0 is maximal
    manager.add(1, [1, 1], [2, 2])          # covered by row 0: filed under it
    mins, maxs = manager.boxes_at(summary_target(0.5, len(manager)))
    summary = Summary(("x", "y"), mins, maxs)
    Summary.from_text(summary.to_text()) == summary   # the wire form is exact

Modules: :mod:`.model` (:class:`Summary` and its ``edn:Summary`` wire form), :mod:`.cuts`
(:func:`summary_target`, :func:`str_groups`: a summary at a box budget), :mod:`.maximal`
(:class:`MaximalRectangles`), :mod:`.union` (sub-tree summaries: :func:`union`, :func:`cut`),
:mod:`.bloom` (:class:`BloomFilter`: a summary's filter of the values of an attribute tested by
equality) and :mod:`.equality` (when and how a server's summary uses one).
"""

from .bloom import BloomFilter
from .cuts import str_groups, summary_target
from .maximal import MaximalRectangles
from .model import MAX_SUMMARY_BOXES, SUMMARY_DIALECT, Summary
from .union import cut, cut_to_bytes, union

__all__ = [
    "SUMMARY_DIALECT",
    "MAX_SUMMARY_BOXES",
    "Summary",
    "BloomFilter",
    "MaximalRectangles",
    "str_groups",
    "summary_target",
    "union",
    "cut",
    "cut_to_bytes",
]
