"""Subscriptions as they travel between servers: the ``edn:Subscriptions`` element of
``ExportSubscriptionsResponse.Subscriptions`` and ``ImportSubscriptions.Subscriptions``
(offline partitioning, :mod:`.moves`; the dispatcher reads the boxes,
:mod:`route_manager.repartition`)::

    <edn:Subscriptions xmlns:edn="urn:wsframework:edn" topic="stocks">
      <edn:Subscription id="9f0c..." version="2011" soap="http://www.w3.org/2003/05/soap-envelope"
                        format="http://www.w3.org/2011/03/ws-evt/DeliveryFormats/Unwrap"
                        expires="1767225600.0" expiresKind="duration" created="1767220000.5">
        <edn:Filter dialect="urn:wsframework:dialects:ranges">
          <edn:Expression>x in [1, 2] and y &lt; 3</edn:Expression>
          <edn:Namespace prefix="q" uri="urn:quotes"/>
        </edn:Filter>
        <edn:NotifyTo><wsa:Address>http://sink/1</wsa:Address>...</edn:NotifyTo>
        <edn:EndTo>...</edn:EndTo>
        <edn:NotifyWhen changedBy="5.0" tolerance="1.0" relative="false"
                        lastNotified="101.5" unnumbered="2">   (its edn:NotifyWhen, if any)
          <edn:Value>/q:quote/q:price</edn:Value>
          <edn:Namespace prefix="q" uri="urn:quotes"/>
        </edn:NotifyWhen>
        <edn:Box lo="1.0 -10.0" hi="2.0 3.0"/>      (the filter's rectangles, for partitioners)
      </edn:Subscription>
    </edn:Subscriptions>

``expires`` and ``created`` are epoch seconds (absent: never expires), numbers written with
``repr`` so they come back bit for bit. EPRs use the WS-Addressing version of the
subscription's eventing version. A subscription keeps its identifier wherever it goes.

A subscription with a notification condition (:mod:`..notify_when`) carries it as stored
(the Value, every namespace it was compiled with, ChangedBy and Tolerance as absolute
amounts or percentages) and its state: ``lastNotified`` is L (absent: nothing notified
yet) and ``unnumbered`` the events it matched that gave no number (absent: 0). On the
receiving side they are peer input like the rest: bounded, checked, compiled by
:class:`~..notify_when.NotifyWhen` (which validates as for a Subscribe), L finite; anything
else refuses the whole element.
"""
from __future__ import annotations

import math
import re
from typing import Mapping, Sequence

from lxml import etree

from matchers import FilterSpec
from matchers.box_filters import compile_filter
from route_manager.protocol import (BOX, END_TO, EXPRESSION, FILTER, NAMESPACE, NOTIFY_TO,
                                    SUBSCRIPTION, SUBSCRIPTIONS)
from wsframework import ns
from matchers.vocabulary import EDN
from wsframework.access.store import AccessRefused, check_principal
from wsframework.addressing import EndpointReference
from wsframework.exceptions import SoapFault
from wsframework.matching.errors import MatcherError
from wsframework.soap import SoapVersion

from ..messages import FORMATS
from ..notify_when import MAX_NUMBER_TEXT, MAX_VALUE_LENGTH, NOTIFY_WHEN, NotifyWhen
from ..store import Subscription
from ..versions import VERSIONS

__all__ = ["subscriptions_element", "parse_subscriptions", "parse_import", "filter_boxes",
           "NotifyWhenState"]


_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
VALUE = ns.qname(EDN, "Value")
#: bounds of a carried condition's namespaces (the XML parser bounds the whole message)
MAX_NAMESPACES = 1024
MAX_PREFIX = 256
MAX_URI = 2048
_COUNT = re.compile(r"[0-9]{1,18}\Z")

#: a subscription's edn:NotifyWhen state as it travels: (L or None, events without a number)
NotifyWhenState = tuple[float | None, int]


def _floats(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def subscriptions_element(topic: str, subscriptions: Sequence[Subscription],
                          boxes_of=None,
                          notified: Mapping[str, NotifyWhenState] | None = None) -> etree._Element:
    """The ``edn:Subscriptions`` element of ``subscriptions``; ``boxes_of(subscription)``
    gives its rectangles as ``(mins, maxs)`` arrays (omitted when None); ``notified``
    the edn:NotifyWhen state of those with a condition (id -> (L, unnumbered); absent:
    nothing notified yet)."""
    notified = notified or {}
    root = etree.Element(SUBSCRIPTIONS, nsmap={"edn": EDN})
    root.set("topic", topic)
    for s in subscriptions:
        element = etree.SubElement(root, SUBSCRIPTION)
        element.set("id", s.id)
        element.set("version", s.version.name)
        element.set("soap", s.soap_version)
        element.set("format", s.format)
        if s.expires is not None:
            element.set("expires", repr(float(s.expires)))
        element.set("expiresKind", s.expires_kind)
        element.set("created", repr(float(s.created)))
        if s.owner is not None:  # its principal (wsframework.access) moves with it
            element.set("owner", s.owner)
        if s.filter is not None:
            spec = etree.SubElement(element, FILTER)
            spec.set("dialect", s.filter.dialect)
            etree.SubElement(spec, EXPRESSION).text = s.filter.expression
            for prefix, uri in s.filter.namespaces:
                etree.SubElement(spec, NAMESPACE, prefix=prefix, uri=uri)
        element.append(s.notify_to.to_element(NOTIFY_TO, s.version.wsa))
        if s.end_to is not None:
            element.append(s.end_to.to_element(END_TO, s.version.wsa))
        if s.notify_when is not None:
            element.append(_notify_when_element(s.notify_when, notified.get(s.id, (None, 0))))
        if boxes_of is not None:
            boxes = boxes_of(s)
            if boxes is not None:
                for lo, hi in zip(*boxes):
                    etree.SubElement(element, BOX, lo=_floats(lo), hi=_floats(hi))
    return root


def _number(element, name: str, *, required: bool = True) -> float | None:
    """A finite number attribute, written as ``repr`` writes floats: at most
    ``MAX_NUMBER_TEXT`` characters, no ``_`` (``float`` would take "1_0")."""
    text = element.get(name)
    if text is None:
        if required:
            raise ValueError(f"missing {name}")
        return None
    if len(text) > MAX_NUMBER_TEXT or "_" in text:
        raise ValueError(f"{name} is not a number of at most {MAX_NUMBER_TEXT} characters")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite")
    return value


def parse_subscriptions(element, *, topic: str, topic_uid: str) -> list[Subscription]:
    """Subscriptions from an ``edn:Subscriptions`` element, bound to the local topic;
    ``ValueError`` (with the reason) for anything malformed. Boxes are ignored."""
    return parse_import(element, topic=topic, topic_uid=topic_uid)[0]


def parse_import(element, *, topic: str, topic_uid: str
                 ) -> tuple[list[Subscription], dict[str, NotifyWhenState]]:
    """:func:`parse_subscriptions`, and the edn:NotifyWhen state (id -> (L, unnumbered))
    of each subscription with a condition, for the store to adopt with them."""
    if getattr(element, "tag", None) != SUBSCRIPTIONS:
        raise ValueError(f"expected {SUBSCRIPTIONS}")
    out: list[Subscription] = []
    notified: dict[str, NotifyWhenState] = {}
    seen: set[str] = set()
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag != SUBSCRIPTION:
            raise ValueError(f"unexpected element {child.tag}")
        subscription_id = child.get("id") or ""
        if not _ID.match(subscription_id) or subscription_id in seen:
            raise ValueError(f"invalid or repeated subscription id {subscription_id!r}")
        seen.add(subscription_id)
        try:
            version = VERSIONS[child.get("version", "")]
            soap = SoapVersion(child.get("soap", "")).value
        except (KeyError, ValueError):
            raise ValueError(f"subscription {subscription_id}: unknown eventing or SOAP "
                             "version") from None
        delivery_format = child.get("format", "")
        if delivery_format not in FORMATS:
            raise ValueError(f"subscription {subscription_id}: unknown format")
        spec = None
        filter_element = child.find(FILTER)
        if filter_element is not None:
            expression = filter_element.find(EXPRESSION)
            namespaces = _namespaces_of(filter_element)
            spec = FilterSpec(filter_element.get("dialect", ""),
                              (expression.text or "") if expression is not None else "",
                              namespaces)
        notify = child.find(NOTIFY_TO)
        if notify is None:
            raise ValueError(f"subscription {subscription_id}: no NotifyTo")
        end = child.find(END_TO)
        try:
            notify_to = EndpointReference.from_element(notify, version.wsa)
            end_to = EndpointReference.from_element(end, version.wsa) if end is not None else None
        except SoapFault as fault:
            raise ValueError(f"subscription {subscription_id}: {fault.reason}") from None
        condition = None
        conditions = child.findall(NOTIFY_WHEN)
        if len(conditions) > 1:
            raise ValueError(f"subscription {subscription_id}: edn:NotifyWhen appears more "
                             "than once")
        if conditions:
            try:
                condition, notified[subscription_id] = _parse_notify_when(conditions[0])
            except ValueError as exc:
                raise ValueError(f"subscription {subscription_id}: edn:NotifyWhen: {exc}") from None
        owner = child.get("owner")
        if owner is not None:
            try:
                check_principal(owner)
            except AccessRefused as exc:
                raise ValueError(f"subscription {subscription_id}: owner: {exc}") from None
        out.append(Subscription(
            id=subscription_id, topic=topic, topic_uid=topic_uid, version=version,
            soap_version=soap, filter=spec, notify_to=notify_to, end_to=end_to,
            format=delivery_format, expires=_number(child, "expires", required=False),
            expires_kind=child.get("expiresKind") or "duration",
            created=_number(child, "created", required=False) or 0.0,
            notify_when=condition, owner=owner))
    return out, notified


def _namespaces_of(element) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((n.get("prefix", ""), n.get("uri", ""))
                        for n in element.findall(NAMESPACE)))


# -- edn:NotifyWhen as it travels ----------------------------------------------------------

def _notify_when_element(condition: NotifyWhen, state: NotifyWhenState) -> etree._Element:
    last, unnumbered = state
    element = etree.Element(NOTIFY_WHEN)
    element.set("changedBy", repr(float(condition.changed_by)))
    element.set("tolerance", repr(float(condition.tolerance)))
    element.set("relative", "true" if condition.relative else "false")
    if last is not None:
        element.set("lastNotified", repr(float(last)))
    if unnumbered:
        element.set("unnumbered", str(int(unnumbered)))
    etree.SubElement(element, VALUE).text = condition.value
    for prefix, uri in condition.namespaces:
        etree.SubElement(element, NAMESPACE, prefix=prefix, uri=uri)
    return element


def _parse_notify_when(element) -> tuple[NotifyWhen, NotifyWhenState]:
    """The condition and its state from one carried ``edn:NotifyWhen``; ``ValueError``."""
    values = []
    namespaces = []
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag == VALUE:
            values.append(child)
        elif child.tag == NAMESPACE:
            namespaces.append(child)
        else:
            raise ValueError(f"unexpected element {child.tag}")
    if len(values) != 1 or len(values[0]):
        raise ValueError("needs exactly one edn:Value holding text")
    expression = (values[0].text or "").strip()
    if not expression or len(expression) > MAX_VALUE_LENGTH:
        raise ValueError(f"edn:Value must hold 1 to {MAX_VALUE_LENGTH} characters")
    if len(namespaces) > MAX_NAMESPACES:
        raise ValueError(f"more than {MAX_NAMESPACES} namespaces")
    pairs = _namespaces_of(element)
    for prefix, uri in pairs:
        if not 0 < len(prefix) <= MAX_PREFIX or not 0 < len(uri) <= MAX_URI:
            raise ValueError(f"a namespace needs a prefix of 1 to {MAX_PREFIX} characters and "
                             f"a uri of 1 to {MAX_URI}")
    if len({prefix for prefix, _ in pairs}) != len(pairs):
        raise ValueError("a namespace prefix is declared twice")
    relative = element.get("relative")
    if relative not in ("true", "false"):
        raise ValueError("relative must be true or false")
    unnumbered = element.get("unnumbered", "0")
    if not _COUNT.match(unnumbered):
        raise ValueError("unnumbered must be a count")
    try:  # the constructor validates as a Subscribe's condition is (bounds, XPath limits)
        condition = NotifyWhen(expression, pairs, _number(element, "changedBy"),
                               relative == "true", _number(element, "tolerance"))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None
    return condition, (_number(element, "lastNotified", required=False), int(unnumbered))


def filter_boxes(schema, spec):
    """All rectangles of a filter (for the partitioners)."""
    if spec is None or schema.d == 0:
        lo, hi = schema.everything()
        return [lo], [hi]
    try:
        compiled = compile_filter(spec, schema)
    except MatcherError:
        return None
    if len(compiled.mins) == 0:
        lo, hi = schema.everything()
        return [lo], [hi]
    return compiled.mins, compiled.maxs

