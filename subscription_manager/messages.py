"""WS-Eventing messages of both versions: requests parsed into frozen dataclasses that
validate when built, and response bodies built from plain values. Pure; no I/O.

Request outlines (``?`` optional):

2004/08 ``Subscribe{EndTo?, Delivery@Mode?{NotifyTo}, Expires?, Filter@Dialect?}``
2011    ``Subscribe{EndTo?, Delivery{NotifyTo?}, Format@Name?, Expires@BestEffort?, Filter@Dialect?}``
both    ``Renew{Expires?}``, ``GetStatus{}``, ``Unsubscribe{}``

Responses: ``SubscribeResponse{SubscriptionManager, Expires|GrantedExpires}``,
``RenewResponse{Expires?|GrantedExpires}``, ``GetStatusResponse{Expires?|GrantedExpires}``,
``UnsubscribeResponse`` (2011; the 2004/08 reply has an empty body), and
``SubscriptionEnd{SubscriptionManager (2004 only), Status, Reason}``.
"""
from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from matchers import FilterSpec
from wsframework import ns
from wsframework.addressing import EndpointReference, WsaVersion
from wsframework.exceptions import SoapFault

from .expiry import ExpiryRequest
from .notify_when import NotifyWhen, parse_notify_when
from .versions import EventingVersion

__all__ = ["SubscribeRequest", "RenewRequest", "parse_subscribe", "parse_renew",
           "subscribe_response", "renew_response", "get_status_response",
           "unsubscribe_response", "subscription_end", "manager_epr", "subscription_id_in_path",
           "FORMATS",
           "UNWRAP", "WRAP", "OPERATIONS"]

UNWRAP = ns.WSE2011_FORMAT_UNWRAP
WRAP = ns.WSE2011_FORMAT_WRAP
FORMATS = (UNWRAP, WRAP)
# Subscription-manager operations: request local name -> response local name.
OPERATIONS = {"Renew": "RenewResponse", "GetStatus": "GetStatusResponse",
              "Unsubscribe": "UnsubscribeResponse"}

_TRUE = ("true", "1")
_FALSE = ("false", "0")


@dataclass(frozen=True)
class SubscribeRequest:
    """A validated Subscribe. ``filter`` is None when the subscriber asked for everything."""

    version: EventingVersion
    notify_to: EndpointReference
    end_to: EndpointReference | None = None
    format: str = UNWRAP
    expires: ExpiryRequest = ExpiryRequest()
    filter: FilterSpec | None = None
    notify_when: NotifyWhen | None = None  # the edn:NotifyWhen extension (.notify_when)

    def __post_init__(self):
        if not isinstance(self.notify_to, EndpointReference):
            raise TypeError("notify_to must be an EndpointReference")
        if self.format not in FORMATS:
            raise ValueError(f"unknown delivery format {self.format!r}")
        if self.version.is_2004 and self.format != UNWRAP:
            raise ValueError("2004/08 subscriptions have no Wrap format")


@dataclass(frozen=True)
class RenewRequest:
    version: EventingVersion
    expires: ExpiryRequest = ExpiryRequest()


def _children(element: etree._Element, version: EventingVersion, known: tuple[str, ...]):
    """The version's known children of ``element`` by local name; a repeated one is refused."""
    found: dict[str, etree._Element] = {}
    for child in element:
        if not isinstance(child.tag, str):
            continue
        q = etree.QName(child)
        if q.namespace == version.namespace and q.localname in known:
            if q.localname in found:
                raise version.faults.invalid_message(f"wse:{q.localname} appears more than once")
            found[q.localname] = child
    return found


def _epr(element: etree._Element, version: EventingVersion, what: str) -> EndpointReference:
    try:
        epr = EndpointReference.from_element(element, version.wsa)
    except SoapFault as fault:
        if version.is_2004 and version.wsa is WsaVersion.WSA10 \
                and element.find(WsaVersion.WSA2004.q("Address")) is not None:
            # The 2004/08 WSDL types EPRs as WS-Addressing 2004/08: a client that sends WSA
            # 1.0 headers with it (zeep's WsAddressingPlugin) writes 2004/08 EPRs in the body.
            # Its reference properties become reference parameters (WSA 1.0 has no others).
            legacy = EndpointReference.from_element(element, WsaVersion.WSA2004)
            return EndpointReference(legacy.address, legacy.reference_properties
                                     + legacy.reference_parameters)
        raise version.faults.unusable_epr(f"{what}: {fault.reason}") from None
    return epr


def _expiry(element: etree._Element | None, version: EventingVersion) -> ExpiryRequest:
    if element is None:
        return ExpiryRequest()
    text = (element.text or "").strip()
    if not text:
        raise version.faults.invalid_expiration("wse:Expires is empty")
    best_effort = False
    if not version.is_2004:
        raw = (element.get("BestEffort") or "false").strip().lower()
        if raw not in _TRUE + _FALSE:
            raise version.faults.invalid_message(f"BestEffort must be a boolean, not {raw!r}")
        best_effort = raw in _TRUE
    return ExpiryRequest(text, best_effort)


def parse_subscribe(body: etree._Element, version: EventingVersion) -> SubscribeRequest:
    """Validate a Subscribe body of ``version``; raise the version's fault when it is wrong.

    The filter is returned as a :class:`~matchers.FilterSpec` (prefixes from the filter
    element's in-scope namespaces); whether its dialect is supported and whether it compiles
    is the topic matcher's business.
    """
    faults = version.faults
    parts = _children(body, version, ("EndTo", "Delivery", "Format", "Expires", "Filter"))
    delivery = parts.get("Delivery")
    if delivery is None:
        raise (faults.invalid_message("wse:Delivery is required") if version.is_2004
               else faults.no_delivery_mechanism())
    if version.is_2004:
        mode = (delivery.get("Mode") or ns.WSE2004_PUSH_MODE).strip()
        if mode != ns.WSE2004_PUSH_MODE:
            raise faults.delivery_mode_unavailable(mode)
        if "Format" in parts:
            raise faults.invalid_message("wse:Format is not part of WS-Eventing 2004/08")
        delivery_format = UNWRAP
    else:
        format_element = parts.get("Format")
        delivery_format = UNWRAP
        if format_element is not None:
            delivery_format = (format_element.get("Name") or UNWRAP).strip()
            if delivery_format not in FORMATS:
                raise faults.delivery_format_unavailable(delivery_format)
    notify_elements = [c for c in delivery if isinstance(c.tag, str) and c.tag == version.q("NotifyTo")]
    if not notify_elements:
        raise faults.no_delivery_mechanism()
    if len(notify_elements) > 1:
        raise faults.invalid_message("wse:NotifyTo appears more than once")
    notify_to = _epr(notify_elements[0], version, "NotifyTo")
    end_to = _epr(parts["EndTo"], version, "EndTo") if "EndTo" in parts else None
    expires = _expiry(parts.get("Expires"), version)
    spec = None
    filter_element = parts.get("Filter")
    if filter_element is not None:
        spec = FilterSpec.from_element(filter_element, default_dialect=version.default_dialect)
        if not spec.expression and not len(filter_element):
            raise faults.empty_filter()
    # extension elements (after the version's own children): edn:NotifyWhen is understood;
    # another one marked mustUnderstand is refused there
    notify_when = parse_notify_when(body, version)
    return SubscribeRequest(version, notify_to, end_to, delivery_format, expires, spec,
                            notify_when)


def parse_renew(body: etree._Element, version: EventingVersion) -> RenewRequest:
    parts = _children(body, version, ("Expires",))
    return RenewRequest(version, _expiry(parts.get("Expires"), version))


# -- building ------------------------------------------------------------------------------

def _element(version: EventingVersion, local: str, text: str | None = None) -> etree._Element:
    element = etree.Element(version.q(local), nsmap={"wse": version.namespace})
    if text is not None:
        element.text = text
    return element


def _sub(parent, version: EventingVersion, local: str, text: str | None = None):
    child = etree.SubElement(parent, version.q(local))
    if text is not None:
        child.text = text
    return child


def manager_epr(version: EventingVersion, address: str, subscription_id: str) -> EndpointReference:
    """The SubscriptionManager EPR: the manager address plus the identifying reference
    parameter (2004/08: ``wse:Identifier`` as a URI; 2011: our own element), or, for a
    pairing identified by address (2004/08 with WSA 1.0), ``<manager address>/<id>`` and no
    reference parameter."""
    if version.identified_by_address:
        return EndpointReference(f"{address.rstrip('/')}/{subscription_id}")
    identifier = etree.Element(version.identifier_tag,
                               nsmap={"wse" if version.is_2004 else "evt":
                                      etree.QName(version.identifier_tag).namespace})
    identifier.text = identifier_text(version, subscription_id)
    return EndpointReference(address, (identifier,))


def identifier_text(version: EventingVersion, subscription_id: str) -> str:
    return f"urn:uuid:{subscription_id}" if version.is_2004 else subscription_id


def subscription_id_in_path(manager_path: str, path: str) -> str | None:
    """The subscription id a per-subscription manager address carries as the path segment
    after ``manager_path`` (None when ``path`` is not such an address)."""
    prefix = manager_path.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    return subscription_id_from(None, path[len(prefix):])


def subscription_id_from(version: EventingVersion | None, text: str | None) -> str | None:
    """The stored id behind an identifier header's text (None when it cannot be one)."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("urn:uuid:"):
        text = text[len("urn:uuid:"):]
    return text if 0 < len(text) <= 64 and all(c.isalnum() or c in "-_" for c in text) else None


def subscribe_response(version: EventingVersion, manager: EndpointReference,
                       granted: str | None) -> etree._Element:
    body = _expires_response(version, "SubscribeResponse", granted)
    body.insert(0, manager.to_element(version.q("SubscriptionManager"), version.wsa))
    return body


def renew_response(version: EventingVersion, granted: str | None) -> etree._Element:
    return _expires_response(version, "RenewResponse", granted)


def get_status_response(version: EventingVersion, granted: str | None,
                        extensions: tuple[etree._Element, ...] = ()) -> etree._Element:
    """``extensions`` follow the expiry (e.g. ``edn:NotifyWhenStatus``, the subscription's
    last notified value)."""
    body = _expires_response(version, "GetStatusResponse", granted)
    body.extend(extensions)
    return body


def _expires_response(version, local, granted):
    body = _element(version, local)
    if version.is_2004:
        if granted is not None:
            _sub(body, version, "Expires", granted)
    else:
        _sub(body, version, "GrantedExpires", granted)
    return body


def unsubscribe_response(version: EventingVersion) -> etree._Element | None:
    """2011 answers ``wse:UnsubscribeResponse``; 2004/08 answers an empty body."""
    return None if version.is_2004 else _element(version, "UnsubscribeResponse")


def subscription_end(version: EventingVersion, manager: EndpointReference, status: str,
                     reason: str) -> etree._Element:
    body = _element(version, "SubscriptionEnd")
    if version.is_2004:
        body.append(manager.to_element(version.q("SubscriptionManager"), version.wsa))
    _sub(body, version, "Status", version.end_status(status))
    text = _sub(body, version, "Reason", reason)
    text.set(ns.qname(ns.XML, "lang"), "en")
    return body
