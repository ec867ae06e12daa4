"""Reading an event: each attribute's XPath evaluated once, its nodes parsed into a value
range, and the ranges mapped to the event's box in coordinate space (:class:`EventBox`).

Every selected node gives a value: an attribute or text node its string; an element its
string-value, or, when that is blank and the element has ``min`` and/or ``max`` attributes,
the *range* they give (an eCube event).  Nodes whose value does not parse are skipped; no
parseable node means the attribute is absent; several values make the event span their hull.
:class:`~matchers.schema.Schema` (``values_of``, ``event_box``, ``extract``) calls these.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from lxml import etree

from .codecs import NUMBER

__all__ = ["EventBox", "standalone", "read_values", "range_of", "to_event_box"]


def standalone(event: Any) -> Any:
    """``event`` as the root element of its own document (the element itself when it is one).

    Schema paths and filters read a relative path from the event element and an absolute
    one from the document element; range extraction relies on the two being the same
    element (``/q:quote[q:x > 1]`` constrains a relative ``q:x`` attribute). The EDN
    always matches events that way; an element inside a larger document (a SOAP body
    child, say) is matched as a copy of itself.
    """
    getparent = getattr(event, "getparent", None)
    if getparent is None or getparent() is None:
        return event
    return copy.deepcopy(event)


@dataclass(frozen=True, eq=False)
class EventBox:
    """What the index sees of one event.

    ``lo``/``hi`` (d,) are coordinates clamped into the domain (NULL where absent; a point
    event has ``lo == hi``).  ``values[i]`` is None when attribute i is absent, else the
    closed value range ``(a, b)`` (``a == b`` for a point; None bounds are unbounded).
    ``clean`` is False when some value had to be clamped into the domain: box containment
    then proves nothing about range predicates, and their candidates get the exact check.
    ``derived`` holds what exact checks build from the event once per match (see
    :func:`matchers.xpath.notification_envelope`).
    """

    lo: np.ndarray
    hi: np.ndarray
    values: tuple
    clean: bool
    # What checks derive from this event once for all filters (the SOAP envelope 2004/08
    # XPath filters are evaluated on): key -> value, for the duration of one match.
    derived: dict = field(default_factory=dict, repr=False)

    @property
    def is_point(self) -> bool:
        return bool(np.array_equal(self.lo, self.hi))


def _element_value(node: etree._Element, attribute: Any) -> tuple[Any, Any] | None:
    text = node.text or "" if len(node) == 0 else "".join(node.itertext())
    if text.strip() == "" and (node.get("min") is not None or node.get("max") is not None):
        low, high = node.get("min"), node.get("max")
        low = attribute.parse(low) if low is not None else None
        high = attribute.parse(high) if high is not None else None
        if (node.get("min") is not None and low is None) or (
                node.get("max") is not None and high is None):
            return None
        if low is not None and high is not None and low > high:
            return None
        return low, high
    value = attribute.parse(text)
    return None if value is None else (value, value)


def read_values(attributes: Sequence[Any], paths: Sequence[Any], event: Any) -> tuple:
    """Per attribute: None (absent) or the closed value range ``(a, b)``, ``paths`` being
    the attributes' compiled XPaths."""
    values = []
    for attribute, compiled in zip(attributes, paths):
        try:
            result = compiled(event)
        except (etree.Error, TypeError, ValueError):
            values.append(None)
            continue
        values.append(range_of(attribute, result))
    return tuple(values)


def range_of(attribute: Any, result: Any) -> tuple[Any, Any] | None:
    """The value range of one XPath ``result`` for ``attribute`` (None: no usable value)."""
    if isinstance(result, list):
        ranges = []
        for node in result:
            if isinstance(node, etree._Element):
                if isinstance(node.tag, str):
                    found = _element_value(node, attribute)
                else:  # comment / processing instruction
                    found = attribute.parse(node.text or "")
                    found = None if found is None else (found, found)
            else:  # attribute value or text node: a plain string
                found = attribute.parse(str(node))
                found = None if found is None else (found, found)
            if found is not None:
                ranges.append(found)
        if not ranges:
            return None
        if len(ranges) == 1:
            return ranges[0]
        lows = [r[0] for r in ranges]
        highs = [r[1] for r in ranges]
        return (None if None in lows else min(lows), None if None in highs else max(highs))
    if isinstance(result, bool):
        return None
    if isinstance(result, float):
        if attribute.type != NUMBER or not math.isfinite(result):
            return None
        return result, result
    if isinstance(result, str):
        value = attribute.parse(result)
        return None if value is None else (value, value)
    return None


def to_event_box(attributes: Sequence[Any], bounds: Sequence[tuple[float, float, float]],
                 values: tuple) -> EventBox:
    """The coordinates of already read ``values``; ``bounds`` are each attribute's
    ``(domain low, domain high, NULL)``."""
    lo, hi = [], []
    clean = True
    for attribute, value, (low, high, null) in zip(attributes, values, bounds):
        if value is None:
            lo.append(null)
            hi.append(null)
            continue
        a, b = value
        if a is None:
            ca = low
        else:
            ra = attribute.coordinate(a)
            ca = low if ra < low else high if ra > high else ra
            clean = clean and ca == ra
        if b is None:
            cb = high
        else:
            rb = attribute.coordinate(b)
            cb = low if rb < low else high if rb > high else rb
            clean = clean and cb == rb
        lo.append(ca)
        hi.append(cb)
    return EventBox(np.array(lo), np.array(hi), values, clean)
