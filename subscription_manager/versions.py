"""The two WS-Eventing versions: their vocabulary and the faults each one names.

A request's version is chosen by the namespace of its body element, and each version is
paired with one WS-Addressing version (2004/08 eventing with WSA 2004/08, 2011 with WSA 1.0);
a request that mixes them is refused (:func:`check_pairing`).

Faults (code / subcode), as raised by :class:`Faults`:

=============================  =================================  ==============================
situation                      2004/08 submission                 2011 Recommendation
=============================  =================================  ==============================
malformed request              Sender wse:InvalidMessage          Sender (no subcode: 2011
                                                                  dropped InvalidMessage for
                                                                  plain SOAP faults)
bad / past / zero expiry       Sender wse:InvalidExpirationTime   Sender wse:UnsupportedExpira-
                                                                  tionValue
expiry outside policy          (clamped, never a fault)           Sender wse:UnsupportedExpira-
                                                                  tionValue (without BestEffort)
dateTime refused by policy     Sender wse:UnsupportedExpiration-  same
                               Type
unknown filter dialect         Sender wse:FilteringRequested-     same
                               Unavailable + SupportedDialect*
filter does not compile        Sender wse:InvalidMessage          Sender wse:CannotProcessFilter
empty filter                   Sender wse:InvalidMessage          Sender wse:EmptyFilter
delivery mode other than Push  Sender wse:DeliveryModeRequested-  --
                               Unavailable + SupportedDelivery-
                               Mode
format other than Wrap/Unwrap  --                                 Sender wse:DeliveryFormat-
                                                                  RequestedUnavailable +
                                                                  SupportedDeliveryFormat*
no NotifyTo                    Sender wse:InvalidMessage          Sender wse:NoDeliveryMechanism-
                                                                  Established
NotifyTo/EndTo refused         Sender wse:InvalidMessage          Sender wse:UnusableEPR
(address policy, no Address)
unknown / ended subscription   Renew: Receiver wse:UnableToRenew  Sender wse:UnknownSubscription
                               others: Sender wse:InvalidMessage
unexpected internal failure    Receiver wse:EventSourceUnable-    Receiver (no subcode)
                               ToProcess
=============================  =================================  ==============================

Every eventing fault is sent with the version's fault action ``<wse ns>/fault``; faults of
WS-Addressing itself (DestinationUnreachable, ActionNotSupported) keep the addressing
version's own fault action.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from lxml import etree

from wsframework import ns
from wsframework.addressing import WsaVersion
from wsframework.exceptions import RECEIVER, SENDER, SoapFault

__all__ = ["EventingVersion", "V2004", "V2011", "VERSIONS", "version_of", "check_pairing",
           "Faults", "END_DELIVERY_FAILURE", "END_SHUTTING_DOWN", "END_CANCELLING"]

# SubscriptionEnd status local names (the URI is ``<wse ns>/<name>`` in both versions).
END_DELIVERY_FAILURE = "DeliveryFailure"
END_SHUTTING_DOWN = "SourceShuttingDown"
END_CANCELLING = "SourceCancelling"


@dataclass(frozen=True)
class EventingVersion:
    name: str
    namespace: str
    wsa: WsaVersion
    default_dialect: str
    identifier_tag: str

    def q(self, local: str) -> str:
        return ns.qname(self.namespace, local)

    def action(self, local: str) -> str:
        return f"{self.namespace}/{local}"

    @property
    def fault_action(self) -> str:
        return f"{self.namespace}/fault"

    def end_status(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    @property
    def faults(self) -> "Faults":
        return Faults(self)

    def __str__(self) -> str:
        return f"WS-Eventing {self.name}"


V2004 = EventingVersion("2004", ns.WSE2004, WsaVersion.WSA2004, ns.XPATH10_DIALECT_2004,
                        ns.qname(ns.WSE2004, "Identifier"))
V2011 = EventingVersion("2011", ns.WSE2011, WsaVersion.WSA10, ns.XPATH10_DIALECT_2011,
                        ns.qname(ns.EVENTING, "SubscriptionId"))
VERSIONS = {V2004.name: V2004, V2011.name: V2011}
_BY_NAMESPACE = {V2004.namespace: V2004, V2011.namespace: V2011}


def version_of(element: etree._Element | None) -> EventingVersion | None:
    """The WS-Eventing version a body element belongs to (None: not an eventing element)."""
    if element is None or not isinstance(element.tag, str):
        return None
    return _BY_NAMESPACE.get(etree.QName(element).namespace)


def check_pairing(version: EventingVersion, wsa_version: WsaVersion | None) -> None:
    """Refuse a request whose WS-Addressing version is not the one ``version`` pairs with."""
    if wsa_version is None:
        problem = etree.Element(version.wsa.q("ProblemHeaderQName"),
                                nsmap={"wsa": version.wsa.namespace})
        problem.text = "wsa:Action"
        raise SoapFault(SENDER, f"{version} requires WS-Addressing headers "
                        f"({version.wsa.namespace})", (version.wsa.header_required_fault,),
                        (problem,), version.wsa.fault_action)
    if wsa_version is not version.wsa:
        raise SoapFault(SENDER, f"{version} is used with WS-Addressing {version.wsa.namespace}, "
                        f"not {wsa_version.namespace}", (wsa_version.invalid_header_fault,), (),
                        wsa_version.fault_action)


def _uri_elements(tag: str, uris: Iterable[str], prefix: str, namespace: str):
    out = []
    for uri in sorted(uris):
        element = etree.Element(tag, nsmap={prefix: namespace})
        element.text = uri
        out.append(element)
    return out


class Faults:
    """The fault each situation calls for, in one version's vocabulary."""

    def __init__(self, version: EventingVersion):
        self.v = version

    def _fault(self, code: str, reason: str, local: str | None, detail=()) -> SoapFault:
        subcodes = (self.v.q(local),) if local else ()
        return SoapFault(code, reason, subcodes, detail, self.v.fault_action)

    @property
    def _is_2004(self) -> bool:
        return self.v.name == "2004"

    def invalid_message(self, reason: str) -> SoapFault:
        return self._fault(SENDER, reason, "InvalidMessage" if self._is_2004 else None)

    def invalid_expiration(self, reason: str) -> SoapFault:
        return self._fault(SENDER, reason, "InvalidExpirationTime" if self._is_2004
                           else "UnsupportedExpirationValue")

    def ungrantable_expiration(self, reason: str) -> SoapFault:
        return self._fault(SENDER, reason, "InvalidExpirationTime" if self._is_2004
                           else "UnsupportedExpirationValue")

    def unsupported_expiration_type(self, reason: str) -> SoapFault:
        return self._fault(SENDER, reason, "UnsupportedExpirationType")

    def filtering_requested_unavailable(self, dialect: str, supported: Iterable[str]) -> SoapFault:
        """``supported``: the dialects of the topic's matcher, listed as SupportedDialect."""
        detail = _uri_elements(self.v.q("SupportedDialect"), set(supported), "wse",
                               self.v.namespace)
        return self._fault(SENDER, f"the filter dialect {dialect!r} is not supported here",
                           "FilteringRequestedUnavailable", detail)

    def cannot_process_filter(self, reason: str) -> SoapFault:
        return self._fault(SENDER, f"cannot process the filter: {reason}",
                           "InvalidMessage" if self._is_2004 else "CannotProcessFilter")

    def empty_filter(self) -> SoapFault:
        return self._fault(SENDER, "the filter is empty",
                           "InvalidMessage" if self._is_2004 else "EmptyFilter")

    def delivery_mode_unavailable(self, mode: str) -> SoapFault:
        detail = _uri_elements(self.v.q("SupportedDeliveryMode"), [ns.WSE2004_PUSH_MODE], "wse",
                               self.v.namespace)
        return self._fault(SENDER, f"the delivery mode {mode!r} is not supported",
                           "DeliveryModeRequestedUnavailable", detail)

    def delivery_format_unavailable(self, name: str) -> SoapFault:
        detail = _uri_elements(self.v.q("SupportedDeliveryFormat"),
                               [ns.WSE2011_FORMAT_UNWRAP, ns.WSE2011_FORMAT_WRAP], "wse",
                               self.v.namespace)
        return self._fault(SENDER, f"the delivery format {name!r} is not supported",
                           "DeliveryFormatRequestedUnavailable", detail)

    def no_delivery_mechanism(self) -> SoapFault:
        return self._fault(SENDER, "the subscription has no NotifyTo",
                           "InvalidMessage" if self._is_2004 else "NoDeliveryMechanismEstablished")

    def unusable_epr(self, reason: str) -> SoapFault:
        return self._fault(SENDER, reason, "InvalidMessage" if self._is_2004 else "UnusableEPR")

    def unknown_subscription(self, operation: str) -> SoapFault:
        reason = "the subscription is unknown, expired or ended"
        if not self._is_2004:
            return self._fault(SENDER, reason, "UnknownSubscription")
        if operation == "Renew":
            return self._fault(RECEIVER, reason, "UnableToRenew")
        return self._fault(SENDER, reason, "InvalidMessage")

    def unable_to_process(self, reason: str) -> SoapFault:
        return self._fault(RECEIVER, reason, "EventSourceUnableToProcess" if self._is_2004 else None)
