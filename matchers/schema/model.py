"""The schema itself: :class:`Attribute` (one typed dimension) and :class:`Schema` (the
attributes in dimension order, their domains and NULL coordinates, intervals to boxes, and
the ``edn:Schema`` XML form).  Reading events is :mod:`.extraction`; values are :mod:`.codecs`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from lxml import etree

from matchers.vocabulary import EDN
from wsframework.matching.errors import InvalidMatcherOptions

from .codecs import (
    DATETIME,
    NUMBER,
    STRING,
    STRING_MAX,
    TYPES,
    format_datetime,
    parse_datetime,
    parse_number,
    string_coordinate,
)
from .extraction import EventBox, EventBoxes, read_boxes, read_values, simple_step, to_event_box
from .intervals import Interval

__all__ = ["InvalidSchema", "Attribute", "Schema", "RESERVED_NAMES", "BLOOM", "SUMMARY_KINDS"]

BLOOM = "bloom"                   # an attribute summarized by a Bloom filter (Attribute.summary)
SUMMARY_KINDS = (None, BLOOM)
DEFAULT_FALSE_POSITIVE_RATE = 0.01  # of Attribute.false_positive_rate and Bloom summaries

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
RESERVED_NAMES = frozenset({"and", "or", "in", "exists", "not"})  # the range dialect's keywords


class InvalidSchema(InvalidMatcherOptions):
    """An event schema (or the matcher options carrying it) that cannot be used."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid event schema: {reason}")


@dataclass(frozen=True)
class Attribute:
    """One event attribute: a dimension of the box space.

    ``min``/``max`` are values (float for numbers, int microseconds for dateTimes; None for
    strings).  ``namespaces`` are sorted ``(prefix, uri)`` pairs for ``xpath``.

    ``summary``: how a server summarizes this attribute for routing.  None: boxes, as every
    attribute.  ``"bloom"`` (strings only; XML ``summary="bloom"``, with an optional
    ``falsePositiveRate``, default 0.01): when every subscription of a server tests the
    attribute by equality, its summary holds the values in a Bloom filter and its boxes
    span the attribute's whole range (:meth:`matchers.RTreeMatchingEngine.summary`).  Both
    are hints on how summaries are made, not on how events are read: they take no part in
    equality, so a dispatcher and a server whose schemas differ only there still agree.
    """

    name: str
    type: str
    xpath: str
    namespaces: tuple[tuple[str, str], ...] = ()
    min: float | int | None = None
    max: float | int | None = None
    summary: str | None = field(default=None, compare=False)
    false_positive_rate: float = field(default=DEFAULT_FALSE_POSITIVE_RATE, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InvalidSchema(f"attribute name {self.name!r} is not a name "
                                "(letters, digits, '_', '.', '-'; starting with a letter or '_')")
        if self.name in RESERVED_NAMES:
            raise InvalidSchema(f"attribute name {self.name!r} is a reserved word of the range "
                                "filter dialect")
        if self.type not in TYPES:
            raise InvalidSchema(f"attribute {self.name!r}: type {self.type!r} is not one of "
                                f"{', '.join(TYPES)}")
        if not self.xpath or not self.xpath.strip():
            raise InvalidSchema(f"attribute {self.name!r} has no xpath")
        object.__setattr__(self, "namespaces", tuple(sorted(self.namespaces)))
        self._check_summary()
        if self.type == STRING:
            if self.min is not None or self.max is not None:
                raise InvalidSchema(f"attribute {self.name!r}: string attributes take no min/max "
                                    "(their domain is implied by the mapping)")
            return
        if self.min is None or self.max is None:
            raise InvalidSchema(f"attribute {self.name!r}: {self.type} attributes need min and max")
        if self.type == NUMBER:
            low, high = float(self.min), float(self.max)
            if not (math.isfinite(low) and math.isfinite(high)):
                raise InvalidSchema(f"attribute {self.name!r}: min and max must be finite")
            object.__setattr__(self, "min", low)
            object.__setattr__(self, "max", high)
        if not self.min < self.max:
            raise InvalidSchema(f"attribute {self.name!r}: min must be below max")

    def _check_summary(self) -> None:
        if self.summary not in SUMMARY_KINDS:
            raise InvalidSchema(f"attribute {self.name!r}: summary {self.summary!r} is not one of "
                                f"{', '.join(k for k in SUMMARY_KINDS if k)}")
        if self.summary == BLOOM and self.type != STRING:
            raise InvalidSchema(f"attribute {self.name!r}: only string attributes take "
                                "summary=\"bloom\"")
        rate = self.false_positive_rate
        if not (isinstance(rate, (int, float)) and 0.0 < rate < 1.0):
            raise InvalidSchema(f"attribute {self.name!r}: falsePositiveRate must be in (0, 1)")
        object.__setattr__(self, "false_positive_rate", float(rate))

    # value -> coordinate (unclamped)
    def coordinate(self, value: Any) -> float:
        if self.type == NUMBER:
            return float(value)
        if self.type == STRING:
            return string_coordinate(value)
        return value / 1e6

    def parse(self, text: str) -> Any:
        """The value of ``text`` for this attribute, or None if it does not parse."""
        if self.type == NUMBER:
            return parse_number(text)
        if self.type == STRING:
            return text
        return parse_datetime(text)

    def format(self, value: Any) -> str:
        if self.type == NUMBER:
            return repr(float(value))
        if self.type == DATETIME:
            return format_datetime(value)
        return value

    @property
    def domain(self) -> tuple[float, float]:
        """[min, max] of the coordinates of present values."""
        if self.type == STRING:
            return 0.0, STRING_MAX
        return self.coordinate(self.min), self.coordinate(self.max)

    @property
    def null(self) -> float:
        """The coordinate of "absent": one domain width below the domain."""
        low, high = self.domain
        return low - (high - low)


@dataclass(frozen=True)
class Schema:
    """The attributes of a topic's events, in dimension order (see :mod:`matchers.schema`)."""

    attributes: tuple[Attribute, ...] = ()
    _compiled: tuple = field(default=(), init=False, repr=False, compare=False)
    _index: Mapping[str, int] = field(default=None, init=False, repr=False, compare=False)
    null: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    domain_lo: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    domain_hi: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    _bounds: tuple = field(default=(), init=False, repr=False, compare=False)
    _steps: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        attributes = tuple(self.attributes)
        object.__setattr__(self, "attributes", attributes)
        names = [a.name for a in attributes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidSchema(f"attribute names must be unique; repeated: {', '.join(duplicates)}")
        compiled = []
        for attribute in attributes:
            try:
                compiled.append(etree.XPath(attribute.xpath, namespaces=dict(attribute.namespaces),
                                            smart_strings=False))
            except (etree.XPathError, TypeError, ValueError) as exc:
                raise InvalidSchema(f"attribute {attribute.name!r}: xpath {attribute.xpath!r}: "
                                    f"{exc}") from None
        object.__setattr__(self, "_compiled", tuple(compiled))
        object.__setattr__(self, "_index", {name: i for i, name in enumerate(names)})
        for name, values in (("null", [a.null for a in attributes]),
                             ("domain_lo", [a.domain[0] for a in attributes]),
                             ("domain_hi", [a.domain[1] for a in attributes])):
            array = np.array(values, dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        object.__setattr__(self, "_bounds", tuple((a.domain[0], a.domain[1], a.null)
                                                  for a in attributes))
        object.__setattr__(self, "_steps", tuple(simple_step(a.xpath, a.namespaces)
                                                 for a in attributes))

    # -- shape -------------------------------------------------------------------------------
    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def d(self) -> int:
        return len(self.attributes)

    def __len__(self) -> int:
        return len(self.attributes)

    def dim(self, name: str) -> int:
        """The dimension of attribute ``name`` (KeyError if there is none)."""
        return self._index[name]

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def everything(self) -> tuple[np.ndarray, np.ndarray]:
        """The box of the whole coordinate space (absent values included)."""
        return self.null.copy(), self.domain_hi.copy()

    # -- intervals -> boxes ------------------------------------------------------------------
    def box(self, constraints: Mapping[int, Interval | None]) -> tuple[np.ndarray, np.ndarray, bool]:
        """The coordinate box covering ``constraints`` (dim -> interval; an unbounded interval
        means "present"), and whether the box is exact for clean events."""
        lo, hi = self.everything()
        exact = True
        for dim, interval in constraints.items():
            attribute = self.attributes[dim]
            low, high = attribute.domain
            lo[dim], hi[dim] = low, high
            if interval is None or interval.unbounded:
                continue
            if attribute.type != NUMBER or interval.lo_open or interval.hi_open:
                exact = False
            if interval.lo is not None:
                coordinate = attribute.coordinate(interval.lo)
                exact = exact and low <= coordinate <= high
                lo[dim] = min(max(coordinate, low), high)
            if interval.hi is not None:
                coordinate = attribute.coordinate(interval.hi)
                exact = exact and low <= coordinate <= high
                hi[dim] = min(max(coordinate, low), high)
            if lo[dim] > hi[dim]:  # an empty interval: keep a valid (if useless) box
                hi[dim] = lo[dim]
        return lo, hi, exact

    # -- events (see :mod:`.extraction`) ----------------------------------------------------
    def values_of(self, event: Any) -> tuple:
        """Per attribute: None (absent) or the closed value range ``(a, b)``."""
        return read_values(self.attributes, self._compiled, event)

    def event_box(self, values: tuple) -> EventBox:
        """The coordinates of already extracted ``values`` (see :meth:`values_of`)."""
        return to_event_box(self.attributes, self._bounds, values)

    def extract(self, event: Any) -> EventBox:
        """Read ``event`` (an lxml element): its box in coordinate space and its values."""
        return self.event_box(self.values_of(event))

    def extract_many(self, events: Any) -> EventBoxes:
        """The boxes of many events at once (arrays, see :func:`.extraction.read_boxes`):
        row ``i`` is what :meth:`extract` gives for ``events[i]``."""
        return read_boxes(self.attributes, self._compiled, self._steps, self._bounds,
                          list(events))

    def point(self, event: Any) -> np.ndarray:
        """The event's coordinates, for point events (the box's low corner otherwise)."""
        return self.extract(event).lo

    # -- XML ---------------------------------------------------------------------------------
    @classmethod
    def from_element(cls, element: Any) -> "Schema":
        if not isinstance(getattr(element, "tag", None), str) or element.tag != f"{{{EDN}}}Schema":
            raise InvalidSchema(f"expected an {{{EDN}}}Schema element, got "
                                f"{getattr(element, 'tag', type(element).__name__)!r}")
        attributes = []
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag != f"{{{EDN}}}Attribute":
                raise InvalidSchema(f"unexpected element {child.tag!r} in the schema")
            kind = child.get("type", NUMBER)
            name = child.get("name") or ""
            xpath = child.get("xpath") or ""
            namespaces = tuple(sorted((p, u) for p, u in child.nsmap.items()
                                      if p is not None and _uses_prefix(xpath, p)))
            low, high = child.get("min"), child.get("max")
            if kind == NUMBER:
                low = _parse_bound(name, "min", low, parse_number)
                high = _parse_bound(name, "max", high, parse_number)
            elif kind == DATETIME:
                low = _parse_bound(name, "min", low, parse_datetime)
                high = _parse_bound(name, "max", high, parse_datetime)
            attributes.append(Attribute(name, kind, xpath, namespaces, low, high,
                                        *_summary_hint(name, child)))
        return cls(tuple(attributes))

    def to_element(self, tag: str | None = None) -> etree._Element:
        root = etree.Element(tag or f"{{{EDN}}}Schema", nsmap={"edn": EDN})
        for attribute in self.attributes:
            nsmap = {p: u for p, u in attribute.namespaces if p != "edn" or u == EDN}
            child = etree.SubElement(root, f"{{{EDN}}}Attribute", nsmap=nsmap)
            child.set("name", attribute.name)
            child.set("type", attribute.type)
            child.set("xpath", attribute.xpath)
            if attribute.min is not None:
                child.set("min", attribute.format(attribute.min))
                child.set("max", attribute.format(attribute.max))
            if attribute.summary is not None:
                child.set("summary", attribute.summary)
                child.set("falsePositiveRate", repr(attribute.false_positive_rate))
        return root

    @classmethod
    def from_config(cls, config: Any) -> "Schema":
        """The schema a matcher's ``config`` carries.

        ``None`` and non-XML objects mean no schema (an empty one); a :class:`Schema` is used
        as is; an element is an ``edn:Schema`` or contains one as a child (``adm:Options``).
        """
        if isinstance(config, Schema):
            return config
        if config is None or not isinstance(getattr(config, "tag", None), str):
            return cls()
        if config.tag == f"{{{EDN}}}Schema":
            return cls.from_element(config)
        found = config.find(f"{{{EDN}}}Schema")
        if found is None:
            raise InvalidSchema(f"the matcher options ({config.tag}) carry no "
                                f"{{{EDN}}}Schema element")
        return cls.from_element(found)


def _uses_prefix(xpath: str, prefix: str) -> bool:
    """Does ``xpath`` (probably) use ``prefix``?  Keeps only the bindings an attribute needs,
    so a schema compares equal whatever else was in scope where it was written (a literal
    that happens to contain ``prefix:`` merely keeps one binding too many)."""
    return re.search(rf"(?<![\w.\-]){re.escape(prefix)}:", xpath) is not None


def _summary_hint(name: str, element: Any) -> tuple[str | None, float]:
    """``(summary, false_positive_rate)`` of an ``edn:Attribute`` element."""
    summary = element.get("summary")
    text = element.get("falsePositiveRate")
    if text is None:
        return summary, DEFAULT_FALSE_POSITIVE_RATE
    if summary != BLOOM:
        raise InvalidSchema(f"attribute {name!r}: falsePositiveRate needs summary=\"bloom\"")
    rate = parse_number(text)
    if rate is None:
        raise InvalidSchema(f"attribute {name!r}: falsePositiveRate={text!r} does not parse")
    return summary, rate


def _parse_bound(name: str, which: str, text: str | None, parse: Callable[[str], Any]) -> Any:
    if text is None:
        return None
    value = parse(text)
    if value is None:
        raise InvalidSchema(f"attribute {name!r}: {which}={text!r} does not parse")
    return value
