"""The range-aggregate dialect (``urn:wsframework:dialects:range-aggregate``): ``MIN(y)`` or
``MAX(y)`` over the tuples of a published table with ``x1 <= x <= x2``, carried by a stateless
network through Chandramouli's S-CN reformulation (section 4.2.4).

A subscription travels as the text of ``wse:Filter``::

    <wse:Filter Dialect="urn:wsframework:dialects:range-aggregate">MIN(per) WHERE risk IN [20, 60]</wse:Filter>

Grammar (keywords in any case, white space free)::

    filter = ("MIN" | "MAX") "(" NAME ")" "WHERE" NAME "IN" "[" NUMBER "," NUMBER "]"

NAME and NUMBER as in :mod:`matchers.ranges`; the interval is closed, ``x1 <= x2``, both
finite; the text is at most :data:`MAX_FILTER_CHARS` characters and a name at most
:data:`MAX_NAME_CHARS`. Anything else raises :class:`InvalidFilter` (the subscription is
refused with the spec's filter fault, as every dialect's).

The topic is a table's *feed*: the publisher-side service (``subscription_manager.stateful.
table_service``) publishes one :func:`change_element` per reformulated message
``<NEW, INNER_L, INNER_R, OUTER_L, OUTER_R>``, and the topic's schema (:func:`feed_schema`)
reads from it, per aggregate, the two boxes a subscription point ``(x1, x2)`` must fall in::

    <ra:Change xmlns:ra="urn:wsframework:range-aggregate" table="stocks" seq="17">
      <ra:MinLow minExclusive="20" max="40"/>       x1 in (OUTER_L, INNER_L]
      <ra:MinHigh min="40" maxExclusive="100"/>     x2 in [INNER_R, OUTER_R)
      <ra:Result>4</ra:Result>                      the new MIN (absent: no tuple in range)
    </ra:Change>

(``ra:MaxLow``/``ra:MaxHigh`` for MAX; an unbounded outer side has no attribute.) The
subscription compiles to the range filter ``per.min.risk.low = 20 and per.min.risk.high = 60``
over that schema: a point matched against eCube events with open bounds, which every box
engine and the dispatcher's route sets already answer. A filter naming an aggregate or a
range attribute the topic's schema does not carry is refused by the binding (unknown
attribute). ``seq`` is the table's update number: a subscriber keeps the result of the
highest ``seq`` it has seen (:func:`read_change`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from lxml import etree

from matchers.vocabulary import RANGE_AGGREGATE, RANGE_AGGREGATE_DIALECT
from wsframework.matching.base import FilterSpec
from wsframework.matching.errors import InvalidFilter

from .compiled_filter import CompiledFilter
from .ranges import bind_range_filter, parse_range_filter
from .schema import Attribute, Schema
from .schema.codecs import NUMBER_PATTERN

__all__ = ["RANGE_AGGREGATE_DIALECT", "RangeAggregateQuery", "parse_range_aggregate",
           "compile_range_aggregate", "feed_schema", "change_element", "read_change",
           "MAX_FILTER_CHARS", "MAX_NAME_CHARS"]

RA = RANGE_AGGREGATE
FUNCTIONS = ("MIN", "MAX")
MAX_FILTER_CHARS = 512
MAX_NAME_CHARS = 64

_NAME = r"[A-Za-z_][\w.\-]{0,%d}" % (MAX_NAME_CHARS - 1)
_FILTER = re.compile(
    rf"\s*(?P<function>[A-Za-z]+)\s*\(\s*(?P<value>{_NAME})\s*\)\s*(?i:where)\s+"
    rf"(?P<over>{_NAME})\s+(?i:in)\s*\[\s*(?P<x1>{NUMBER_PATTERN})\s*,\s*"
    rf"(?P<x2>{NUMBER_PATTERN})\s*\]\s*", re.ASCII)


@dataclass(frozen=True)
class RangeAggregateQuery:
    function: str   # "MIN" or "MAX"
    value: str      # the aggregate attribute (y)
    over: str       # the range attribute (x)
    x1: float
    x2: float

    def range_filter(self) -> str:
        """The reformulated, stateless subscription in the ranges dialect."""
        low, high = _names(self.function, self.value, self.over)
        return f"{low} = {self.x1!r} and {high} = {self.x2!r}"


def parse_range_aggregate(text: str) -> RangeAggregateQuery:
    if not isinstance(text, str) or len(text) > MAX_FILTER_CHARS:
        raise InvalidFilter(f"a range-aggregate filter is at most {MAX_FILTER_CHARS} characters")
    found = _FILTER.fullmatch(text)
    if found is None:
        raise InvalidFilter("expected 'MIN(y) WHERE x IN [x1, x2]' (or MAX), names of at most "
                            f"{MAX_NAME_CHARS} characters, numbers")
    function = found.group("function").upper()
    if function not in FUNCTIONS:
        raise InvalidFilter(f"unknown aggregate {found.group('function')!r}: MIN or MAX")
    x1, x2 = float(found.group("x1")), float(found.group("x2"))
    if not (math.isfinite(x1) and math.isfinite(x2)):
        raise InvalidFilter("the range's bounds must be finite numbers")
    if x1 > x2:
        raise InvalidFilter(f"the range [{x1!r}, {x2!r}] is empty")
    return RangeAggregateQuery(function, found.group("value"), found.group("over"), x1, x2)


def compile_range_aggregate(spec: FilterSpec, schema: Schema) -> CompiledFilter:
    """The box engines' form of a range-aggregate filter: its reformulated range filter
    bound to the feed topic's schema."""
    query = parse_range_aggregate(spec.expression)
    return bind_range_filter(parse_range_filter(query.range_filter()), schema)


def _names(function: str, value: str, over: str) -> tuple[str, str]:
    stem = f"{value}.{function.lower()}.{over}"
    return f"{stem}.low", f"{stem}.high"


def _elements(function: str) -> tuple[str, str]:
    word = function.capitalize()
    return f"{word}Low", f"{word}High"


def feed_schema(value: str, over: str, low: float, high: float) -> Schema:
    """The schema of a table's feed topic: for MIN and MAX of ``value`` over ``over``
    (domain [low, high]), the two dimensions a subscription's point lies on."""
    attributes = []
    for function in FUNCTIONS:
        for name, element in zip(_names(function, value, over), _elements(function)):
            attributes.append(Attribute(name, "number", f"ra:{element}", (("ra", RA),),
                                        float(low), float(high)))
    return Schema(tuple(attributes))


def change_element(table: str, seq: int, function: str, new: float | None, inner_l: float,
                   inner_r: float, outer_l: float, outer_r: float) -> etree._Element:
    """One reformulated message as the event the feed topic carries."""
    change = etree.Element(f"{{{RA}}}Change", nsmap={"ra": RA})
    change.set("table", table)
    change.set("seq", str(seq))
    change.set("function", function)
    low_tag, high_tag = _elements(function)
    low = etree.SubElement(change, f"{{{RA}}}{low_tag}")
    if outer_l != -math.inf:
        low.set("minExclusive", repr(float(outer_l)))
    low.set("max", repr(float(inner_l)))
    high = etree.SubElement(change, f"{{{RA}}}{high_tag}")
    high.set("min", repr(float(inner_r)))
    if outer_r != math.inf:
        high.set("maxExclusive", repr(float(outer_r)))
    if new is not None:
        etree.SubElement(change, f"{{{RA}}}Result").text = repr(float(new))
    return change


def read_change(element: Any) -> tuple[str, int, str, float | None]:
    """``(table, seq, function, result)`` of a change a subscriber received (result None:
    no tuple in its range)."""
    if element.tag != f"{{{RA}}}Change":
        raise ValueError(f"not a range-aggregate change: {element.tag}")
    result = element.find(f"{{{RA}}}Result")
    return (element.get("table"), int(element.get("seq")), element.get("function"),
            None if result is None else float(result.text))
