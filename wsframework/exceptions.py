"""Errors, and the single place they become SOAP faults.

Inside the framework code raises precise exceptions; the messaging layer's boundary turns
them into the fault the governing spec names. :class:`SoapFault` carries everything a fault
needs (code, subcodes, reason, detail, the WS-Addressing action to send it with) and renders
itself in the form each SOAP version requires:

* SOAP 1.2: ``env:Code/env:Value`` + nested ``env:Subcode/env:Value``, ``env:Reason/env:Text
  xml:lang``, ``env:Detail``.
* SOAP 1.1: ``faultcode`` is the most specific subcode when there is one (the WS-Addressing
  and WS-Eventing SOAP 1.1 bindings say so), otherwise ``soap:Client``/``soap:Server``;
  ``faultstring``; ``detail``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from lxml import etree

from . import ns
from .elements import detached

SENDER = "Sender"
RECEIVER = "Receiver"
VERSION_MISMATCH = "VersionMismatch"
MUST_UNDERSTAND = "MustUnderstand"

_SOAP11_CODES = {SENDER: "Client", RECEIVER: "Server", VERSION_MISMATCH: "VersionMismatch",
                 MUST_UNDERSTAND: "MustUnderstand"}


class WsFrameworkError(Exception):
    """Root of the framework's own exceptions."""


class AccessDenied(WsFrameworkError):
    """A message without a valid credential (answered ``adm:AccessDenied``, see
    :mod:`wsframework.admin`). Its fault goes back on the HTTP response only, never to the
    message's ReplyTo or FaultTo: an unauthenticated peer cannot make the service send."""


class SoapFault(WsFrameworkError):
    """A fault to send to (or received from) a peer.

    ``subcodes`` are Clark-notation QNames, outermost first. ``detail`` is a sequence of lxml
    elements placed inside the Detail element. ``action`` is the wsa:Action of the fault
    message; when None the addressing version's generic fault action is used.
    """

    def __init__(self, code: str, reason: str, subcodes: Sequence[str] = (),
                 detail: Iterable[etree._Element] = (), action: str | None = None):
        if code not in _SOAP11_CODES:
            raise ValueError(f"unknown SOAP fault code {code!r}")
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.subcodes = tuple(subcodes)
        self.detail = tuple(detail)
        self.action = action

    @property
    def subcode(self) -> str | None:
        """The most specific subcode (what SOAP 1.1 puts in faultcode)."""
        return self.subcodes[-1] if self.subcodes else None

    @property
    def http_status(self) -> int:
        # SOAP 1.2 HTTP binding: Sender -> 400, everything else -> 500. SOAP 1.1 always uses
        # 500; the envelope layer picks the right one per version.
        return 400 if self.code == SENDER else 500

    def __repr__(self) -> str:
        return f"SoapFault({self.code!r}, {self.reason!r}, subcodes={self.subcodes!r})"

    # -- rendering -------------------------------------------------------------------------
    def to_element(self, soap_ns: str) -> etree._Element:
        if soap_ns == ns.SOAP12:
            return self._soap12()
        return self._soap11()

    def _soap12(self) -> etree._Element:
        env = ns.SOAP12
        fault = etree.Element(ns.qname(env, "Fault"), nsmap={"env": env})
        code = etree.SubElement(fault, ns.qname(env, "Code"))
        etree.SubElement(code, ns.qname(env, "Value")).text = f"env:{self.code}"
        parent = code
        for sub in self.subcodes:
            subcode = etree.SubElement(parent, ns.qname(env, "Subcode"))
            _set_qname_text(etree.SubElement(subcode, ns.qname(env, "Value")), sub)
            parent = subcode
        reason = etree.SubElement(fault, ns.qname(env, "Reason"))
        text = etree.SubElement(reason, ns.qname(env, "Text"))
        text.set(ns.qname(ns.XML, "lang"), "en")
        text.text = self.reason
        if self.detail:
            detail = etree.SubElement(fault, ns.qname(env, "Detail"))
            for item in self.detail:
                detail.append(detached(item))
        return fault

    def _soap11(self) -> etree._Element:
        env = ns.SOAP11
        fault = etree.Element(ns.qname(env, "Fault"), nsmap={"soap": env})
        faultcode = etree.SubElement(fault, "faultcode")
        if self.subcode and self.code in (SENDER, RECEIVER):
            _set_qname_text(faultcode, self.subcode)
        else:
            faultcode.text = f"soap:{_SOAP11_CODES[self.code]}"
        etree.SubElement(fault, "faultstring").text = self.reason
        if self.detail:
            detail = etree.SubElement(fault, "detail")
            for item in self.detail:
                detail.append(detached(item))
        return fault

    # -- parsing (client side) -------------------------------------------------------------
    @classmethod
    def from_element(cls, fault: etree._Element) -> "SoapFault":
        """Rebuild a fault from a received ``Fault`` element of either SOAP version."""
        if fault.tag == ns.qname(ns.SOAP12, "Fault"):
            env = ns.SOAP12
            value = fault.find(f"{{{env}}}Code/{{{env}}}Value")
            code = _resolve_qname(value).split("}")[-1] if value is not None else RECEIVER
            subcodes = []
            node = fault.find(f"{{{env}}}Code")
            while node is not None:
                node = node.find(f"{{{env}}}Subcode")
                if node is not None:
                    subcodes.append(_resolve_qname(node.find(f"{{{env}}}Value")))
            text = fault.find(f"{{{env}}}Reason/{{{env}}}Text")
            detail = fault.find(f"{{{env}}}Detail")
        else:
            raw = _resolve_qname(fault.find("faultcode"))
            local = raw.split("}")[-1]
            reverse = {v: k for k, v in _SOAP11_CODES.items()}
            if raw.startswith("{%s}" % ns.SOAP11) and local in reverse:
                code, subcodes = reverse[local], []
            else:
                code, subcodes = SENDER, [raw]
            text = fault.find("faultstring")
            detail = fault.find("detail")
        if code not in _SOAP11_CODES:
            code = RECEIVER
        reason = (text.text or "") if text is not None else ""
        return cls(code, reason, subcodes, list(detail) if detail is not None else ())


def sender_fault(reason: str, subcode: str | None = None, detail=(), action=None) -> SoapFault:
    return SoapFault(SENDER, reason, (subcode,) if subcode else (), detail, action)


def receiver_fault(reason: str, subcode: str | None = None, detail=(), action=None) -> SoapFault:
    return SoapFault(RECEIVER, reason, (subcode,) if subcode else (), detail, action)


def _set_qname_text(element: etree._Element, clark: str) -> None:
    """Write a QName as element text, declaring a prefix for its namespace on the element."""
    if not clark.startswith("{"):
        element.text = clark
        return
    uri, local = clark[1:].split("}", 1)
    for prefix, bound in (element.nsmap or {}).items():
        if bound == uri and prefix:
            element.text = f"{prefix}:{local}"
            return
    # Re-create the element with the extra namespace declared (lxml nsmaps are read-only).
    holder = element.getparent()
    replacement = etree.Element(element.tag, nsmap={"fc": uri})
    replacement.text = f"fc:{local}"
    holder.replace(element, replacement)


def _resolve_qname(element) -> str:
    if element is None or not element.text:
        return ""
    text = element.text.strip()
    if ":" in text:
        prefix, local = text.split(":", 1)
        uri = (element.nsmap or {}).get(prefix)
        return "{%s}%s" % (uri, local) if uri else local
    uri = (element.nsmap or {}).get(None)
    return "{%s}%s" % (uri, text) if uri else text
