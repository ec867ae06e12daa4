"""The bounds on a published event: at most ``event_max_elements`` elements, nested at most
``event_max_depth`` deep.

Checked before matching, separately from the body size limit: a small body can hold 100,000
empty elements, and every ``//*`` in every filter would walk them all. One compiled XPath
per event answers both bounds inside libxml2 (cheaper than walking the element in Python,
``edn bench serverpath`` measures the path it sits on); the same check serves a single
publication and every event of an ``edn:EventBatch``.
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
        deeper = "/".join(["*"] * max_depth)  # an element at depth max_depth + 1
        self._probe = etree.XPath(
            f"number(count(descendant-or-self::*) > {max_elements}) * {_ELEMENTS}"
            f" + number(boolean({deeper})) * {_DEPTH}")

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
        """Index -> why, for the events of ``events`` that are over the bounds."""
        refused = {}
        for index, event in enumerate(events):
            why = self.why_over(event)
            if why is not None:
                refused[index] = why
        return refused
