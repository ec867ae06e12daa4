"""The bounds on a published event: at most ``event_max_elements`` elements, nested at most
``event_max_depth`` deep.

Checked before matching, separately from the body size limit: a small body can hold 100,000
empty elements, and every ``//*`` in every filter would walk them all. One predicate, in
XPath, answers both bounds inside libxml2 (cheaper than walking the element in Python):
evaluated on the event itself for a single publication, and once on the parent for the
events of an ``edn:EventBatch`` (``*[predicate]``: the cheapest of the forms measured, about
half the cost per event of evaluating it event by event); ``edn bench serverpath`` measures
the path it sits on.
"""
from __future__ import annotations

from typing import Sequence

from lxml import etree

__all__ = ["EventLimits"]

_ELEMENTS, _DEPTH = 1, 2  # the bits of the probe's answer


class EventLimits:
    """Why an event is over its bounds (:meth:`why_over`), or which events of a list are
    (:meth:`refusals`). An event's own element is at depth 1."""

    def __init__(self, max_elements: int, max_depth: int):
        if max_elements < 1 or max_depth < 1:
            raise ValueError("event limits must be at least 1")
        self.max_elements = max_elements
        self.max_depth = max_depth
        too_many = f"count(descendant-or-self::*) > {max_elements}"
        too_deep = "boolean(" + "/".join(["*"] * max_depth) + ")"  # depth max_depth + 1
        self._probe = etree.XPath(
            f"number({too_many}) * {_ELEMENTS} + number({too_deep}) * {_DEPTH}")
        self._children_over = etree.XPath(f"*[{too_many} or {too_deep}]")

    def why_over(self, event: etree._Element) -> str | None:
        """Why ``event`` is over the bounds, or None when it is within them."""
        over = int(self._probe(event))
        if not over:
            return None
        reasons = []
        if over & _ELEMENTS:
            reasons.append(f"more than {self.max_elements} elements")
        if over & _DEPTH:
            reasons.append(f"nested deeper than {self.max_depth} elements")
        return " and ".join(reasons)

    def refusals(self, events: Sequence[etree._Element]) -> dict[int, str]:
        """Index -> why, for the events of ``events`` that are over the bounds. Events that
        share a parent (a batch) are probed in one evaluation on the parent."""
        if not events:
            return {}
        parent = events[0].getparent()
        if len(events) > 1 and parent is not None and \
                all(event.getparent() is parent for event in events):
            candidates = self._children_over(parent)
            if not candidates:
                return {}
        else:
            candidates = events
        index_of = {id(event): index for index, event in enumerate(events)}
        refused = {}
        for event in candidates:
            index = index_of.get(id(event))
            why = self.why_over(event) if index is not None else None
            if why is not None:
                refused[index] = why
        return refused
