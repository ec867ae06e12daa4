"""The two WS-Eventing versions: their vocabulary and the faults each one names.

A request's version is chosen by the namespace of its body element and the WS-Addressing
version of its headers. Three pairings are served (:func:`check_pairing` picks one, or refuses):

==================  ===================  ============================================
pairing (``name``)  WS-Addressing        subscription identified by
==================  ===================  ============================================
``2004``            2004/08              ``wse:Identifier`` reference parameter
``2004-wsa10``      1.0 (the DPWS 1.1    its own manager address, ``<manager>/<id>``
                    pairing)             (no reference parameter: DPWS clients such as
                                         sdc11073 mark echoed parameters
                                         ``wsa:IsReferenceParameter``, which their
                                         schema forbids on ``wse:Identifier``)
``2011``            1.0                  our own reference parameter
==================  ===================  ============================================

A pairing is an :class:`EventingVersion`; a subscription stores the pairing it was made in
(by ``name``), so its responses, notifications and SubscriptionEnd use the addressing
version it used. ``family`` ('2004' or '2011') is the WS-Eventing vocabulary.

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

__all__ = ["EventingVersion", "V2004", "V2004_WSA10", "V2011", "VERSIONS", "version_of", "check_pairing",
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
    family: str
    # The subscription id is the last path segment of the manager address (no reference
    # parameter) rather than a reference parameter of the manager EPR.
    identified_by_address: bool = False

    @property
    def is_2004(self) -> bool:
        """Whether this pairing speaks the 2004/08 submission's eventing vocabulary."""
        return self.family == "2004"

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
        if self.wsa is not _PRIMARY_WSA[self.family]:
            return f"WS-Eventing {self.family} with WS-Addressing {self.wsa.namespace}"
        return f"WS-Eventing {self.name}"


_PRIMARY_WSA = {"2004": WsaVersion.WSA2004, "2011": WsaVersion.WSA10}

V2004 = EventingVersion("2004", ns.WSE2004, WsaVersion.WSA2004, ns.XPATH10_DIALECT_2004,
                        ns.qname(ns.WSE2004, "Identifier"), "2004")
# WS-Eventing 2004/08 with WS-Addressing 1.0: the pairing DPWS 1.1 (and so sdc11073) uses.
V2004_WSA10 = EventingVersion("2004-wsa10", ns.WSE2004, WsaVersion.WSA10,
                              ns.XPATH10_DIALECT_2004, ns.qname(ns.WSE2004, "Identifier"),
                              "2004", identified_by_address=True)
V2011 = EventingVersion("2011", ns.WSE2011, WsaVersion.WSA10, ns.XPATH10_DIALECT_2011,
                        ns.qname(ns.EVENTING, "SubscriptionId"), "2011")
VERSIONS = {v.name: v for v in (V2004, V2004_WSA10, V2011)}
_BY_NAMESPACE = {V2004.namespace: V2004, V2011.namespace: V2011}
_PAIRINGS = {(v.namespace, v.wsa): v for v in VERSIONS.values()}


def version_of(element: etree._Element | None) -> EventingVersion | None:
    """The WS-Eventing version a body element belongs to (None: not an eventing element)."""
    if element is None or not isinstance(element.tag, str):
        return None
    return _BY_NAMESPACE.get(etree.QName(element).namespace)


def check_pairing(version: EventingVersion, wsa_version: WsaVersion | None) -> EventingVersion:
    """The pairing a request of ``version``'s eventing namespace is served in, given its
    WS-Addressing version; a request without addressing headers is refused (in the
    addressing version its eventing version names first), as is a pairing not served."""
    version = _BY_NAMESPACE[version.namespace]
    if wsa_version is None:
        problem = etree.Element(version.wsa.q("ProblemHeaderQName"),
                                nsmap={"wsa": version.wsa.namespace})
        problem.text = "wsa:Action"
        raise SoapFault(SENDER, f"{version} requires WS-Addressing headers "
                        f"({version.wsa.namespace})", (version.wsa.header_required_fault,),
                        (problem,), version.wsa.fault_action)
    pairing = _PAIRINGS.get((version.namespace, wsa_version))
    if pairing is None:
        raise SoapFault(SENDER, f"{version} is not served with WS-Addressing "
                        f"{wsa_version.namespace}", (wsa_version.invalid_header_fault,), (),
                        wsa_version.fault_action)
    return pairing


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
        return self.v.is_2004

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
