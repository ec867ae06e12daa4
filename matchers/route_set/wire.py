"""A server's summary as the route set receives it: a filter of the summary dialect whose
content (or text) is an ``edn:Summary``, optionally saying how many subscription rectangles
it covers (its ``rectangles`` attribute, the denominator of precision).
"""

from __future__ import annotations

from matchers.vocabulary import EDN
from wsframework.matching.base import FilterSpec
from wsframework.matching.errors import InvalidFilter

from ..summary import Summary

__all__ = ["summary_of", "rectangles_of"]


def _summary_element(spec: FilterSpec):
    """The ``edn:Summary`` element in the filter's content (None: the text carries it)."""
    content = spec.content
    if content is not None and isinstance(getattr(content, "tag", None), str):
        if content.tag == f"{{{EDN}}}Summary":
            return content
        return content.find(f"{{{EDN}}}Summary")
    return None


def rectangles_of(spec: FilterSpec) -> int | None:
    """The ``rectangles`` attribute of the summary element (None when absent or unusable)."""
    element = _summary_element(spec)
    if element is None and spec.expression.strip():
        try:
            from wsframework.xmlparse import parse_xml
            element = parse_xml(spec.expression.encode())
        except Exception:
            return None
    text = element.get("rectangles") if element is not None else None
    try:
        value = int(text) if text is not None else None
    except ValueError:
        raise InvalidFilter("summary: 'rectangles' must be an integer") from None
    if value is not None and value < 0:
        raise InvalidFilter("summary: 'rectangles' must be >= 0")
    return value


def summary_of(spec: FilterSpec) -> Summary:
    """The summary ``spec`` carries (:class:`InvalidFilter` when it carries none or a bad one)."""
    element = _summary_element(spec)
    if element is not None:
        return Summary.from_element(element)
    if not spec.expression.strip():
        raise InvalidFilter("empty filter: a summary filter carries an edn:Summary")
    return Summary.from_text(spec.expression)
