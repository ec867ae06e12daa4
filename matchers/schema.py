"""Event schemas: the named, typed attributes of a topic's events and where they live in XML.

A topic that routes on content declares its schema when it is created; the creation message's
``Options`` element (handed to the matcher as ``config``) carries it::

    <edn:Schema xmlns:edn="urn:wsframework:edn" xmlns:q="urn:quotes">
      <edn:Attribute name="price"  type="number"   xpath="/q:quote/q:price" min="0" max="1000"/>
      <edn:Attribute name="symbol" type="string"   xpath="/q:quote/q:symbol"/>
      <edn:Attribute name="time"   type="dateTime" xpath="/q:quote/@time"
                     min="2000-01-01T00:00:00Z" max="2100-01-01T00:00:00Z"/>
    </edn:Schema>

Prefixes in ``xpath`` come from the declarations in scope at each ``edn:Attribute``.  Numbers
and dateTimes need a domain (``min`` < ``max``); strings have an implied one (below).

Theory of operation
    Each attribute is one dimension of a box space.  A value has two forms:

    * its **value** (exact checks): ``float`` for numbers, ``str`` for strings, ``int``
      microseconds since 1970-01-01T00:00:00Z for dateTimes (naive times are taken as UTC);
    * its **coordinate** (the R-tree): the number itself; a dateTime's seconds as a float;
      a string's first :data:`STRING_PREFIX_BYTES` UTF-8 bytes read as a base-256 fraction
      in [0, 1).  Every mapping is order-preserving (``a <= b`` implies
      ``coord(a) <= coord(b)``; UTF-8 byte order is code point order, which is Python's
      ``str`` order), so every interval of values maps onto an interval of coordinates.
      Strings sharing their first 6 bytes collide on one coordinate: candidates from the
      index are always confirmed by an exact check, so a collision costs a comparison, never
      a missed event.  Six bytes keep the fraction exact in a float64 (48 of 53 bits).

    Coordinates are clamped into the attribute's domain [min, max]; an event whose value had
    to be clamped is *unclean* and all its candidates get the exact check.  Below the domain
    sits one extra coordinate, **NULL** = min - (max - min), for "the event has no such
    attribute": a filter that does not mention an attribute spans [NULL, max] there, one that
    constrains it (or asks ``exists``) stays inside [min, max], so events lacking an attribute
    are pruned by the index instead of by exact checks.

Reading an event (:meth:`Schema.extract`)
    Each attribute's XPath is evaluated once, compiled, with the event element as the context
    node (as filters are).  Every selected node gives a value: an attribute or text node its
    string; an element its string-value, or, when that is blank and the element has ``min``
    and/or ``max`` attributes, the *range* they give (a hypercube event, eCube: see below).
    Numbers must look like numbers (``[+-]digits[.digits][e[+-]digits]``, surrounding white
    space allowed); strings are taken verbatim, white space included, as XPath compares them.
    Nodes whose value does not parse are skipped; no parseable node means the attribute is
    absent.  Several values make the event span their hull [smallest, largest].

Hypercube events (eCube)
    ``<q:price min="10" max="20"/>`` makes the event a box on that dimension (a missing bound
    is unbounded); a filter then matches when its rectangle *intersects* the event's box.
    Point subscriptions (``price = 15``) against range events give the symmetric case
    ("event notifications contain subscriptions"); both are one intersection query.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping

import numpy as np
from lxml import etree

from wsframework.matching.errors import MatcherError
from wsframework import ns

__all__ = [
    "EDN_NS",
    "NUMBER",
    "STRING",
    "DATETIME",
    "TYPES",
    "STRING_PREFIX_BYTES",
    "InvalidSchema",
    "Attribute",
    "Schema",
    "EventBox",
    "Interval",
    "CompiledFilter",
    "string_coordinate",
    "prefix_upper_bound",
    "parse_number",
    "parse_datetime",
    "format_datetime",
    "standalone",
]


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

EDN_NS = ns.EDN
NUMBER, STRING, DATETIME = "number", "string", "dateTime"
TYPES = (NUMBER, STRING, DATETIME)
STRING_PREFIX_BYTES = 6
_STRING_SCALE = float(256 ** STRING_PREFIX_BYTES)
_STRING_MAX = (256 ** STRING_PREFIX_BYTES - 1) / _STRING_SCALE
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
RESERVED_NAMES = frozenset({"and", "or", "in", "exists", "not"})
_MAX_CODE_POINT = 0x10FFFF


class InvalidSchema(MatcherError):
    """An event schema (or the matcher options carrying it) that cannot be used."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid event schema: {reason}")


# -- value <-> coordinate -------------------------------------------------------------------

def parse_number(text: str) -> float | None:
    """A finite float from ``text`` (number syntax only, white space around), else None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_datetime(text: str) -> int | None:
    """Microseconds since the epoch for an xs:dateTime-like string (naive = UTC), else None."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MICROSECOND


def format_datetime(micros: int) -> str:
    moment = _EPOCH + timedelta(microseconds=micros)
    return moment.isoformat().replace("+00:00", "Z")


def string_coordinate(text: str) -> float:
    """The order-preserving coordinate of a string: its first 6 UTF-8 bytes as a fraction."""
    head = text.encode("utf-8", "surrogatepass")[:STRING_PREFIX_BYTES]
    return int.from_bytes(head.ljust(STRING_PREFIX_BYTES, b"\0"), "big") / _STRING_SCALE


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: none is).

    ``t.startswith(p)`` is exactly ``p <= t < prefix_upper_bound(p)``.
    """
    chars = list(prefix)
    while chars and ord(chars[-1]) == _MAX_CODE_POINT:
        chars.pop()
    if not chars:
        return None
    chars[-1] = chr(ord(chars[-1]) + 1)
    return "".join(chars)


# -- intervals of values --------------------------------------------------------------------

def _lower(a: Any, a_open: bool, b: Any, b_open: bool) -> tuple[Any, bool]:
    """The larger of two lower bounds (None = unbounded)."""
    if a is None:
        return b, b_open
    if b is None or a > b:
        return a, a_open
    if b > a:
        return b, b_open
    return a, a_open or b_open


def _upper(a: Any, a_open: bool, b: Any, b_open: bool) -> tuple[Any, bool]:
    """The smaller of two upper bounds (None = unbounded)."""
    if a is None:
        return b, b_open
    if b is None or a < b:
        return a, a_open
    if b < a:
        return b, b_open
    return a, a_open or b_open


def _nonempty(lo: Any, lo_open: bool, hi: Any, hi_open: bool) -> bool:
    if lo is None or hi is None:
        return True
    return lo < hi or (lo == hi and not lo_open and not hi_open)


@dataclass(frozen=True)
class Interval:
    """A set of values ``lo (<|<=) v (<|<=) hi``; ``None`` bounds are unbounded.

    Values are those of one attribute type (float, str or int microseconds).  Event values are
    closed ranges ``[a, b]`` (a point is ``a == b``); a filter interval matches an event value
    when they intersect.
    """

    lo: Any = None
    lo_open: bool = False
    hi: Any = None
    hi_open: bool = False

    def intersect(self, other: "Interval") -> "Interval":
        lo, lo_open = _lower(self.lo, self.lo_open, other.lo, other.lo_open)
        hi, hi_open = _upper(self.hi, self.hi_open, other.hi, other.hi_open)
        return Interval(lo, lo_open, hi, hi_open)

    @property
    def empty(self) -> bool:
        return not _nonempty(self.lo, self.lo_open, self.hi, self.hi_open)

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None

    def overlaps(self, a: Any, b: Any) -> bool:
        """Does the closed event range [a, b] (None = unbounded) meet this interval?"""
        lo, lo_open = _lower(self.lo, self.lo_open, a, False)
        hi, hi_open = _upper(self.hi, self.hi_open, b, False)
        return _nonempty(lo, lo_open, hi, hi_open)


# -- schema ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attribute:
    """One event attribute: a dimension of the box space.

    ``min``/``max`` are values (float for numbers, int microseconds for dateTimes; None for
    strings).  ``namespaces`` are sorted ``(prefix, uri)`` pairs for ``xpath``.
    """

    name: str
    type: str
    xpath: str
    namespaces: tuple[tuple[str, str], ...] = ()
    min: float | int | None = None
    max: float | int | None = None

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
            return 0.0, _STRING_MAX
        return self.coordinate(self.min), self.coordinate(self.max)

    @property
    def null(self) -> float:
        """The coordinate of "absent": one domain width below the domain."""
        low, high = self.domain
        return low - (high - low)


@dataclass(frozen=True, eq=False)
class EventBox:
    """What the index sees of one event.

    ``lo``/``hi`` (d,) are coordinates clamped into the domain (NULL where absent; a point
    event has ``lo == hi``).  ``values[i]`` is None when attribute i is absent, else the
    closed value range ``(a, b)`` (``a == b`` for a point; None bounds are unbounded).
    ``clean`` is False when some value had to be clamped into the domain: box containment
    then proves nothing about range predicates, and their candidates get the exact check.
    """

    lo: np.ndarray
    hi: np.ndarray
    values: tuple
    clean: bool

    @property
    def is_point(self) -> bool:
        return bool(np.array_equal(self.lo, self.hi))


@dataclass(frozen=True, eq=False)
class CompiledFilter:
    """A filter as the box engines store it: its boxes, and the exact check behind them.

    ``mins``/``maxs`` (b, d) are coordinates; the filter can only match events whose box
    intersects one of them.  ``check(event, event_box, variables)`` is the exact answer.
    When ``box_exact`` is true, intersection with a *clean* event box already is the exact
    answer, and engines skip ``check``.  (A bulk-loaded box filter has no CompiledFilter:
    its box is its meaning, clean event or not.)
    """

    mins: np.ndarray
    maxs: np.ndarray
    box_exact: bool
    check: Callable[[Any, EventBox, Mapping[str, Any] | None], bool]


def _element_value(node: etree._Element, attribute: Attribute) -> tuple[Any, Any] | None:
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


@dataclass(frozen=True)
class Schema:
    """The attributes of a topic's events, in dimension order (see the module docstring)."""

    attributes: tuple[Attribute, ...] = ()
    _compiled: tuple = field(default=(), init=False, repr=False, compare=False)
    _index: Mapping[str, int] = field(default=None, init=False, repr=False, compare=False)
    null: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    domain_lo: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    domain_hi: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    _bounds: tuple = field(default=(), init=False, repr=False, compare=False)

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

    # -- events ------------------------------------------------------------------------------
    def values_of(self, event: Any) -> tuple:
        """Per attribute: None (absent) or the closed value range ``(a, b)``."""
        values = []
        for attribute, compiled in zip(self.attributes, self._compiled):
            try:
                result = compiled(event)
            except (etree.Error, TypeError, ValueError):
                values.append(None)
                continue
            values.append(self._range_of(attribute, result))
        return tuple(values)

    @staticmethod
    def _range_of(attribute: Attribute, result: Any) -> tuple[Any, Any] | None:
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

    def event_box(self, values: tuple) -> EventBox:
        """The coordinates of already extracted ``values`` (see :meth:`values_of`)."""
        lo, hi = [], []
        clean = True
        for attribute, value, (low, high, null) in zip(self.attributes, values, self._bounds):
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

    def extract(self, event: Any) -> EventBox:
        """Read ``event`` (an lxml element): its box in coordinate space and its values."""
        return self.event_box(self.values_of(event))

    def point(self, event: Any) -> np.ndarray:
        """The event's coordinates, for point events (the box's low corner otherwise)."""
        return self.extract(event).lo

    # -- XML ---------------------------------------------------------------------------------
    @classmethod
    def from_element(cls, element: Any) -> "Schema":
        if not isinstance(getattr(element, "tag", None), str) or element.tag != f"{{{EDN_NS}}}Schema":
            raise InvalidSchema(f"expected an {{{EDN_NS}}}Schema element, got "
                                f"{getattr(element, 'tag', type(element).__name__)!r}")
        attributes = []
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag != f"{{{EDN_NS}}}Attribute":
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
            attributes.append(Attribute(name, kind, xpath, namespaces, low, high))
        return cls(tuple(attributes))

    def to_element(self, tag: str | None = None) -> etree._Element:
        root = etree.Element(tag or f"{{{EDN_NS}}}Schema", nsmap={"edn": EDN_NS})
        for attribute in self.attributes:
            nsmap = {p: u for p, u in attribute.namespaces if p != "edn" or u == EDN_NS}
            child = etree.SubElement(root, f"{{{EDN_NS}}}Attribute", nsmap=nsmap)
            child.set("name", attribute.name)
            child.set("type", attribute.type)
            child.set("xpath", attribute.xpath)
            if attribute.min is not None:
                child.set("min", attribute.format(attribute.min))
                child.set("max", attribute.format(attribute.max))
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
        if config.tag == f"{{{EDN_NS}}}Schema":
            return cls.from_element(config)
        found = config.find(f"{{{EDN_NS}}}Schema")
        if found is None:
            raise InvalidSchema(f"the matcher options ({config.tag}) carry no "
                                f"{{{EDN_NS}}}Schema element")
        return cls.from_element(found)


def _uses_prefix(xpath: str, prefix: str) -> bool:
    """Does ``xpath`` (probably) use ``prefix``?  Keeps only the bindings an attribute needs,
    so a schema compares equal whatever else was in scope where it was written (a literal
    that happens to contain ``prefix:`` merely keeps one binding too many)."""
    return re.search(rf"(?<![\w.\-]){re.escape(prefix)}:", xpath) is not None


def _parse_bound(name: str, which: str, text: str | None, parse: Callable[[str], Any]) -> Any:
    if text is None:
        return None
    value = parse(text)
    if value is None:
        raise InvalidSchema(f"attribute {name!r}: {which}={text!r} does not parse")
    return value
