"""A WS-Eventing subscriber client for both versions (tests, benchmarks, applications)::

    client = EventingClient("2011")                     # or "2004", "2004-wsa10" (DPWS)
    sub = client.subscribe(base + "/topics/stocks", "http://me:9000/notify",
                           filter="/q:quote[q:price > 30]", namespaces={"q": "urn:quotes"},
                           expires="PT1H", end_to="http://me:9000/end")
    client.renew(sub, "PT2H"); client.get_status(sub); client.unsubscribe(sub)

Faults come back as :class:`~wsframework.exceptions.SoapFault`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from lxml import etree

from wsframework.addressing import EndpointReference
from wsframework.client import SoapClient
from wsframework.soap import SoapVersion

from .messages import subscription_id_from
from .versions import VERSIONS, EventingVersion

__all__ = ["EventingClient", "SubscriptionHandle", "subscribe_body"]


@dataclass(frozen=True)
class SubscriptionHandle:
    version: EventingVersion
    manager: EndpointReference
    expires: str | None

    @property
    def id(self) -> str | None:
        if self.version.identified_by_address:
            return subscription_id_from(self.version, self.manager.address.rsplit("/", 1)[-1])
        return subscription_id_from(self.version,
                                    self.manager.reference_parameter(self.version.identifier_tag))


def _epr(version: EventingVersion, tag: str, epr: EndpointReference | str) -> etree._Element:
    if isinstance(epr, str):
        epr = EndpointReference(epr)
    return epr.to_element(version.q(tag), version.wsa)


def subscribe_body(version: EventingVersion | str, notify_to: EndpointReference | str | None, *,
                   end_to: EndpointReference | str | None = None, expires: str | None = None,
                   best_effort: bool | None = None, filter: str | None = None,
                   dialect: str | None = None, namespaces: Mapping[str, str] | None = None,
                   format: str | None = None, mode: str | None = None,
                   extensions: Sequence[etree._Element] = ()) -> etree._Element:
    """A ``wse:Subscribe`` body; every part optional so tests can build wrong ones too.
    ``extensions`` (e.g. :func:`~subscription_manager.notify_when.notify_when_element`) go
    last, after the version's own children."""
    v = VERSIONS[version] if isinstance(version, str) else version
    nsmap = {"wse": v.namespace, "wsa": v.wsa.namespace}
    nsmap.update(namespaces or {})
    body = etree.Element(v.q("Subscribe"), nsmap=nsmap)
    if end_to is not None:
        body.append(_epr(v, "EndTo", end_to))
    delivery = etree.SubElement(body, v.q("Delivery"))
    if mode is not None:
        delivery.set("Mode", mode)
    if notify_to is not None:
        delivery.append(_epr(v, "NotifyTo", notify_to))
    if format is not None:
        etree.SubElement(body, v.q("Format"), Name=format)
    if expires is not None:
        element = etree.SubElement(body, v.q("Expires"))
        element.text = expires
        if best_effort is not None:
            element.set("BestEffort", "true" if best_effort else "false")
    if filter is not None:
        element = etree.SubElement(body, v.q("Filter"))
        element.text = filter
        if dialect is not None:
            element.set("Dialect", dialect)
    body.extend(extensions)
    return body


class EventingClient:
    def __init__(self, version: str = "2011", *, transport=None,
                 soap_version: SoapVersion = SoapVersion.SOAP12, headers=()):
        """``headers``: SOAP header blocks sent with every request (a function returning
        them is called per request: a wsse:UsernameToken with a fresh nonce, for one)."""
        self.version = VERSIONS[version]
        self.soap = SoapClient(transport, soap_version=soap_version, wsa_version=self.version.wsa)
        self._headers = headers

    def headers(self) -> list:
        return list(self._headers() if callable(self._headers) else self._headers)

    def subscribe(self, topic_address: str, notify_to: EndpointReference | str, **options) -> SubscriptionHandle:
        body = subscribe_body(self.version, notify_to, **options)
        return self.subscribe_raw(topic_address, body)

    def subscribe_raw(self, topic_address: str, body: etree._Element) -> SubscriptionHandle:
        v = self.version
        reply = self.soap.call(topic_address, v.action("Subscribe"), body, self.headers())
        manager = EndpointReference.from_element(reply.body.find(v.q("SubscriptionManager")), v.wsa)
        expires = reply.body.find(v.q("Expires" if v.is_2004 else "GrantedExpires"))
        return SubscriptionHandle(v, manager, expires.text if expires is not None else None)

    def renew(self, subscription: SubscriptionHandle | EndpointReference,
              expires: str | None = None, best_effort: bool | None = None) -> str | None:
        body = etree.Element(self.version.q("Renew"), nsmap={"wse": self.version.namespace})
        if expires is not None:
            element = etree.SubElement(body, self.version.q("Expires"))
            element.text = expires
            if best_effort is not None:
                element.set("BestEffort", "true" if best_effort else "false")
        return self._expires_of(self._manage(subscription, "Renew", body))

    def get_status(self, subscription: SubscriptionHandle | EndpointReference) -> str | None:
        body = etree.Element(self.version.q("GetStatus"), nsmap={"wse": self.version.namespace})
        return self._expires_of(self._manage(subscription, "GetStatus", body))

    def unsubscribe(self, subscription: SubscriptionHandle | EndpointReference) -> None:
        body = etree.Element(self.version.q("Unsubscribe"), nsmap={"wse": self.version.namespace})
        self._manage(subscription, "Unsubscribe", body)

    def _manage(self, subscription, operation: str, body):
        manager = subscription.manager if isinstance(subscription, SubscriptionHandle) else subscription
        return self.soap.call(manager, self.version.action(operation), body, self.headers())

    def _expires_of(self, reply) -> str | None:
        if reply.body is None:
            return None
        element = reply.body.find(self.version.q("Expires" if self.version.is_2004 else "GrantedExpires"))
        return element.text if element is not None else None
