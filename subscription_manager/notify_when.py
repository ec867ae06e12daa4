"""Notification conditions: the ``edn:NotifyWhen`` Subscribe extension (Chandramouli's
richer subscriptions, section 5).

A subscriber that only wants to hear when a number in the events "changed enough" adds, as
a child of ``wse:Subscribe`` (both WS-Eventing versions allow extension elements there,
after the version's own children)::

    <edn:NotifyWhen xmlns:edn="urn:wsframework:edn" xmlns:q="urn:quotes">
      <edn:Value>/q:quote/q:price</edn:Value>   <!-- XPath 1.0 to a number in the event -->
      <edn:ChangedBy>5</edn:ChangedBy>           <!-- delta: absolute, or "2%" of L -->
      <edn:Tolerance>1</edn:Tolerance>           <!-- t, optional: 0 <= t <= delta -->
    </edn:NotifyWhen>

Semantics (sections 5.2 and 5.4), with L the last value notified to the subscription: an
event that matches the subscription's filter and whose value v lies outside
(L - delta, L + delta) **must** be notified; one outside (L - delta + t, L + delta - t)
**may** be; nothing else is. L starts at the first matching value (that event is notified).
A relative ``N%`` gives delta = N/100 * |L| (and the tolerance, then also written ``M%``,
t = M/100 * |L|). An event whose Value gives no finite number (no node, text that is not a
number, NaN, an evaluation error) is **not** notified to the subscription, L stays, and the
source counts it (``notify_when_unnumbered``).

What the source does in the "may" band is :meth:`NotifyWhen.thresholds`: with a tolerance
(absolute), the thresholds snap inward to a grid of spacing t, so subscriptions with the
same t share thresholds and entries of the index (:mod:`.notify_index`) whatever their
delta and L; without one, they are exactly L - delta and L + delta.

Extensions the source does not know are ignored, unless marked with the SOAP
``mustUnderstand`` attribute (either SOAP version's, value ``true`` or ``1``): then the
Subscribe is refused with a ``MustUnderstand`` fault, since the subscriber said the
subscription means nothing without it. ``edn:NotifyWhen`` is understood, marked or not.

Everything a peer sends is bounded here: the Value XPath like a filter (length, nesting,
steps, no regular expressions; :func:`~wsframework.matching.limits.check_filter_limits`)
and compiled once; numbers finite, at most :data:`MAX_NUMBER_TEXT` characters and
:data:`MAX_MAGNITUDE`; a percentage in (0, :data:`MAX_PERCENT`]; a tolerance of at most
delta. Refusals are the version's ``InvalidMessage`` fault.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from lxml import etree

from wsframework import ns
from matchers.vocabulary import EDN
from wsframework.exceptions import MUST_UNDERSTAND, SoapFault
from wsframework.matching.base import FilterSpec, used_namespaces
from wsframework.matching.errors import InvalidFilter
from wsframework.matching.limits import FilterLimits, check_filter_limits

from .versions import EventingVersion

__all__ = ["NotifyWhen", "parse_notify_when", "notify_when_element", "status_element",
           "last_notified_of", "NOTIFY_WHEN", "MAX_VALUE_LENGTH", "MAX_NUMBER_TEXT",
           "MAX_MAGNITUDE", "MAX_PERCENT"]

NOTIFY_WHEN = ns.qname(EDN, "NotifyWhen")
#: the GetStatusResponse extension that shows L (absent LastNotified: nothing notified yet)
STATUS = ns.qname(EDN, "NotifyWhenStatus")
LAST_NOTIFIED = ns.qname(EDN, "LastNotified")
_VALUE, _CHANGED_BY, _TOLERANCE = (ns.qname(EDN, n) for n in ("Value", "ChangedBy", "Tolerance"))

MAX_VALUE_LENGTH = 1024
MAX_NUMBER_TEXT = 64
MAX_MAGNITUDE = 1e15
MAX_PERCENT = 100.0
_VALUE_LIMITS = FilterLimits(max_length=MAX_VALUE_LENGTH, max_depth=16, max_steps=64)
_MUST_UNDERSTAND = tuple(ns.qname(env, "mustUnderstand") for env in (ns.SOAP11, ns.SOAP12))
_TRUE = ("true", "1")
_GRID_LIMIT = 2.0 ** 52  # grid points a float still tells apart
_PROBE = etree.Element("probe")  # compiled expressions are tried once on it (unknown prefix...)


@dataclass(frozen=True)
class NotifyWhen:
    """One subscription's notification condition; validates when built.

    ``changed_by`` and ``tolerance`` are absolute amounts, or percentages of |L| when
    ``relative``."""

    value: str
    namespaces: tuple[tuple[str, str], ...]
    changed_by: float
    relative: bool = False
    tolerance: float = 0.0
    _compiled: etree.XPath = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        for name in ("changed_by", "tolerance"):
            number = getattr(self, name)
            if not isinstance(number, (int, float)) or not math.isfinite(number):
                raise ValueError(f"{name} must be a finite number")
        if not 0 < self.changed_by <= (MAX_PERCENT if self.relative else MAX_MAGNITUDE):
            raise ValueError("ChangedBy must be above 0 and at most "
                             + (f"{MAX_PERCENT:g}%" if self.relative else f"{MAX_MAGNITUDE:g}"))
        if not 0 <= self.tolerance <= self.changed_by:
            raise ValueError("Tolerance must be between 0 and ChangedBy")
        try:
            check_filter_limits(FilterSpec(ns.XPATH10_DIALECT_2011, self.value, self.namespaces),
                                _VALUE_LIMITS)
            compiled = etree.XPath(f"number(({self.value}))", namespaces=dict(self.namespaces))
            compiled(_PROBE)
        except (InvalidFilter, etree.XPathError) as exc:
            raise ValueError(f"the Value XPath is not usable: {exc}") from None
        object.__setattr__(self, "_compiled", compiled)

    # -- the rule ---------------------------------------------------------------------------
    def bounds(self, last: float) -> tuple[float, float]:
        """(delta, t) as amounts at ``last``."""
        if self.relative:
            scale = abs(last) / 100.0
            return self.changed_by * scale, self.tolerance * scale
        return self.changed_by, self.tolerance

    def must_notify(self, last: float | None, value: float) -> bool:
        if last is None:
            return True
        delta, _ = self.bounds(last)
        return value <= last - delta or value >= last + delta

    def may_notify(self, last: float | None, value: float) -> bool:
        if last is None:
            return True
        delta, t = self.bounds(last)
        return value <= last - delta + t or value >= last + delta - t

    def thresholds(self, last: float) -> tuple[float, float]:
        """(lo, hi): the source notifies ``v`` exactly when ``v <= lo or v >= hi``.

        lo lies in [L - delta, L - delta + t] and hi in [L + delta - t, L + delta], so every
        "must" is notified and nothing outside "may" is. With an absolute tolerance both
        snap inward to a grid of spacing t (section 5.4's partition into sub-intervals of size
        t): lo = ceil((L - delta) / t) * t, hi = floor((L + delta) / t) * t, clamped into
        those ranges against rounding. Subscriptions with the same t then share thresholds
        whatever their delta and L, and the index holds at most one key per grid point."""
        delta, t = self.bounds(last)
        lo, hi = last - delta, last + delta
        # a grid finer than a float can count (t tiny against L) snaps nothing: exact keys
        if t > 0 and not self.relative and max(abs(lo), abs(hi)) / t < _GRID_LIMIT:
            lo = min(max(math.ceil(lo / t) * t, lo), lo + t)
            hi = max(min(math.floor(hi / t) * t, hi), hi - t)
        return lo, hi

    def fires(self, last: float | None, value: float) -> bool:
        """The source's decision for one matching event's value (the plain rule)."""
        if last is None:
            return True
        lo, hi = self.thresholds(last)
        return value <= lo or value >= hi

    def notified(self, values, last: float | None = None) -> list[float]:
        """The values of a sequence of matching events the subscription is notified of
        (each notified one becomes L): the reference the tests and benchmarks compare with."""
        out = []
        for value in values:
            if self.fires(last, value):
                out.append(value)
                last = value
        return out

    # -- the event --------------------------------------------------------------------------
    @property
    def value_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Subscriptions whose Value is the same expression read the same number."""
        return self.value, self.namespaces

    def value_of(self, event: etree._Element) -> float | None:
        """The event's number, or None when it gives no finite number."""
        try:
            number = self._compiled(event)
        except etree.XPathError:
            return None
        if not isinstance(number, float) or not math.isfinite(number):
            return None
        return number

    # -- storage ----------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({"value": self.value, "namespaces": [list(p) for p in self.namespaces],
                           "changed_by": self.changed_by, "relative": self.relative,
                           "tolerance": self.tolerance})

    @classmethod
    def from_json(cls, text: str) -> "NotifyWhen":
        data = json.loads(text)
        return cls(data["value"], tuple(tuple(p) for p in data["namespaces"]),
                   float(data["changed_by"]), bool(data["relative"]), float(data["tolerance"]))


# == parsing =================================================================================

def parse_notify_when(body: etree._Element, version: EventingVersion) -> NotifyWhen | None:
    """The Subscribe body's ``edn:NotifyWhen`` (None without one). Other extension elements
    are ignored unless marked mustUnderstand (then the MustUnderstand fault)."""
    found = None
    for child in body:
        if not isinstance(child.tag, str) or etree.QName(child).namespace == version.namespace:
            continue
        if child.tag == NOTIFY_WHEN:
            if found is not None:
                raise version.faults.invalid_message("edn:NotifyWhen appears more than once")
            found = _condition(child, version)
        elif any((child.get(attr) or "").strip() in _TRUE for attr in _MUST_UNDERSTAND):
            raise SoapFault(MUST_UNDERSTAND,
                            f"the extension {etree.QName(child).text} is marked mustUnderstand "
                            f"and this event source does not understand it",
                            action=version.fault_action)
    return found


def _condition(element: etree._Element, version: EventingVersion) -> NotifyWhen:
    invalid = version.faults.invalid_message
    parts: dict[str, etree._Element] = {}
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag not in (_VALUE, _CHANGED_BY, _TOLERANCE):
            raise invalid(f"edn:NotifyWhen does not take {etree.QName(child).text}")
        if child.tag in parts:
            raise invalid(f"{etree.QName(child).localname} appears more than once in edn:NotifyWhen")
        if len(child):
            raise invalid(f"edn:{etree.QName(child).localname} holds text, not elements")
        parts[child.tag] = child
    if _VALUE not in parts or _CHANGED_BY not in parts:
        raise invalid("edn:NotifyWhen needs edn:Value and edn:ChangedBy")
    value_element = parts[_VALUE]
    expression = (value_element.text or "").strip()
    if not expression:
        raise invalid("edn:Value is empty")
    if len(expression) > MAX_VALUE_LENGTH:
        raise invalid(f"edn:Value is longer than {MAX_VALUE_LENGTH} characters")
    changed_by, relative = _amount(parts[_CHANGED_BY], invalid)
    tolerance, tolerance_relative = 0.0, relative
    if _TOLERANCE in parts:
        tolerance, tolerance_relative = _amount(parts[_TOLERANCE], invalid, allow_zero=True)
    if tolerance_relative != relative:
        raise invalid("edn:Tolerance must be written as ChangedBy is (both N% or both absolute)")
    namespaces = used_namespaces(expression, value_element.nsmap)
    try:
        return NotifyWhen(expression, namespaces, changed_by, relative, tolerance)
    except ValueError as exc:
        raise invalid(f"edn:NotifyWhen: {exc}") from None


def _amount(element: etree._Element, invalid, *, allow_zero: bool = False) -> tuple[float, bool]:
    name = etree.QName(element).localname
    text = (element.text or "").strip()
    if not text or len(text) > MAX_NUMBER_TEXT:
        raise invalid(f"edn:{name} must be a number of at most {MAX_NUMBER_TEXT} characters")
    relative = text.endswith("%")
    digits = text[:-1].strip() if relative else text
    try:
        number = float(digits)
    except ValueError:
        raise invalid(f"edn:{name} is not a number: {text[:MAX_NUMBER_TEXT]!r}") from None
    # float() takes "inf", "nan" and "1_0"; the schema's xs:double-like text does not
    if not math.isfinite(number) or "_" in digits:
        raise invalid(f"edn:{name} must be a finite number")
    if number < 0 or (number == 0 and not allow_zero):
        raise invalid(f"edn:{name} must be above 0" + (" or 0" if allow_zero else ""))
    return number, relative


# == building (clients, GetStatus) ===========================================================

def notify_when_element(value: str, changed_by: str, tolerance: str | None = None, *,
                        namespaces: dict[str, str] | None = None) -> etree._Element:
    """An ``edn:NotifyWhen`` element to append to a Subscribe body."""
    nsmap = {"edn": EDN, **(namespaces or {})}
    element = etree.Element(NOTIFY_WHEN, nsmap=nsmap)
    for tag, text in ((_VALUE, value), (_CHANGED_BY, changed_by), (_TOLERANCE, tolerance)):
        if text is not None:
            etree.SubElement(element, tag).text = text
    return element


def status_element(last: float | None) -> etree._Element:
    """``edn:NotifyWhenStatus{edn:LastNotified?}`` for a GetStatusResponse."""
    element = etree.Element(STATUS, nsmap={"edn": EDN})
    if last is not None:
        etree.SubElement(element, LAST_NOTIFIED).text = repr(float(last))
    return element


def last_notified_of(status_body: etree._Element) -> tuple[bool, float | None]:
    """From a GetStatusResponse body: (has a NotifyWhen status, L or None)."""
    status = status_body.find(STATUS)
    if status is None:
        return False, None
    last = status.find(LAST_NOTIFIED)
    return True, (float(last.text) if last is not None else None)
