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
        <edn:Box lo="1.0 -10.0" hi="2.0 3.0"/>      (the filter's rectangles, for partitioners)
      </edn:Subscription>
    </edn:Subscriptions>

``expires`` and ``created`` are epoch seconds (absent: never expires), numbers written with
``repr`` so they come back bit for bit. EPRs use the WS-Addressing version of the
subscription's eventing version. A subscription keeps its identifier wherever it goes.
"""
from __future__ import annotations

import math
import re
from typing import Sequence

from lxml import etree

from matchers import FilterSpec
from matchers.box_filters import compile_filter
from route_manager.edn_wire import (BOX, END_TO, EXPRESSION, FILTER, NAMESPACE, NOTIFY_TO,
                                    SUBSCRIPTION, SUBSCRIPTIONS)
from wsframework import ns
from wsframework.addressing import EndpointReference
from wsframework.exceptions import SoapFault
from wsframework.matching.errors import MatcherError
from wsframework.soap import SoapVersion

from ..messages import FORMATS
from ..store import Subscription
from ..versions import VERSIONS

__all__ = ["subscriptions_element", "parse_subscriptions", "filter_boxes"]


_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def _floats(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def subscriptions_element(topic: str, subscriptions: Sequence[Subscription],
                          boxes_of=None) -> etree._Element:
    """The ``edn:Subscriptions`` element of ``subscriptions``; ``boxes_of(subscription)``
    gives its rectangles as ``(mins, maxs)`` arrays (omitted when None)."""
    root = etree.Element(SUBSCRIPTIONS, nsmap={"edn": ns.EDN})
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
        if s.filter is not None:
            spec = etree.SubElement(element, FILTER)
            spec.set("dialect", s.filter.dialect)
            etree.SubElement(spec, EXPRESSION).text = s.filter.expression
            for prefix, uri in s.filter.namespaces:
                etree.SubElement(spec, NAMESPACE, prefix=prefix, uri=uri)
        element.append(s.notify_to.to_element(NOTIFY_TO, s.version.wsa))
        if s.end_to is not None:
            element.append(s.end_to.to_element(END_TO, s.version.wsa))
        if boxes_of is not None:
            boxes = boxes_of(s)
            if boxes is not None:
                for lo, hi in zip(*boxes):
                    etree.SubElement(element, BOX, lo=_floats(lo), hi=_floats(hi))
    return root


def _number(element, name: str, *, required: bool = True) -> float | None:
    text = element.get(name)
    if text is None:
        if required:
            raise ValueError(f"missing {name}")
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite")
    return value


def parse_subscriptions(element, *, topic: str, topic_uid: str) -> list[Subscription]:
    """Subscriptions from an ``edn:Subscriptions`` element, bound to the local topic;
    ``ValueError`` (with the reason) for anything malformed. Boxes are ignored."""
    if getattr(element, "tag", None) != SUBSCRIPTIONS:
        raise ValueError(f"expected {SUBSCRIPTIONS}")
    out: list[Subscription] = []
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
            namespaces = tuple(sorted((n.get("prefix", ""), n.get("uri", ""))
                                      for n in filter_element.findall(NAMESPACE)))
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
        out.append(Subscription(
            id=subscription_id, topic=topic, topic_uid=topic_uid, version=version,
            soap_version=soap, filter=spec, notify_to=notify_to, end_to=end_to,
            format=delivery_format, expires=_number(child, "expires", required=False),
            expires_kind=child.get("expiresKind") or "duration",
            created=_number(child, "created", required=False) or 0.0))
    return out


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

