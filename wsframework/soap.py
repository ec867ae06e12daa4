"""SOAP 1.1 and 1.2 envelopes: parse, build, and the per-version details (content type, fault
status). Pure functions over bytes and lxml elements; no I/O."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lxml import etree

from . import ns
from .exceptions import SoapFault, VERSION_MISMATCH, sender_fault
from .xmlparse import DEFAULT_LIMITS, ParserLimits, XmlRejected, parse_xml


class SoapVersion(enum.Enum):
    SOAP11 = ns.SOAP11
    SOAP12 = ns.SOAP12

    @property
    def namespace(self) -> str:
        return self.value

    @property
    def content_type(self) -> str:
        return "text/xml" if self is SoapVersion.SOAP11 else "application/soap+xml"

    def fault_status(self, fault: SoapFault) -> int:
        return 500 if self is SoapVersion.SOAP11 else fault.http_status

    @classmethod
    def from_content_type(cls, content_type: str | None) -> "SoapVersion | None":
        if not content_type:
            return None
        media = content_type.split(";", 1)[0].strip().lower()
        if media == "application/soap+xml":
            return cls.SOAP12
        if media == "text/xml":
            return cls.SOAP11
        return None


@dataclass
class Envelope:
    """A parsed (or to-be-sent) SOAP message: header blocks and the body's payload."""

    version: SoapVersion
    headers: list[etree._Element] = field(default_factory=list)
    body: etree._Element | None = None
    # The parsed root, kept so filters can be evaluated over the whole envelope.
    root: etree._Element | None = field(default=None, repr=False, compare=False)

    def header(self, tag: str) -> etree._Element | None:
        for element in self.headers:
            if element.tag == tag:
                return element
        return None

    @property
    def is_fault(self) -> bool:
        return self.body is not None and self.body.tag == ns.qname(self.version.namespace, "Fault")

    def fault(self) -> SoapFault | None:
        return SoapFault.from_element(self.body) if self.is_fault else None

    def to_element(self) -> etree._Element:
        env = self.version.namespace
        prefix = "s" if self.version is SoapVersion.SOAP11 else "env"
        if self.body is not None and etree.QName(self.body).namespace == env and self.body.prefix:
            # A Fault's code is QName *text* ("soap:Client"). lxml drops the Fault's own
            # declaration of the envelope namespace when the Fault is appended here, so the
            # envelope must bind the prefix that text uses.
            prefix = self.body.prefix
        root = etree.Element(ns.qname(env, "Envelope"), nsmap={prefix: env})
        if self.headers:
            header = etree.SubElement(root, ns.qname(env, "Header"))
            for block in self.headers:
                header.append(block)
        body = etree.SubElement(root, ns.qname(env, "Body"))
        if self.body is not None:
            body.append(self.body)
        return root

    def to_bytes(self) -> bytes:
        """The envelope as UTF-8 bytes, each header block and the body serialized as its own
        element. Not through :meth:`to_element`: lxml drops a moved element's declarations
        of a namespace its new ancestors already bind, under any prefix, so a prefix used
        only in text (``s:`` in a filter ``/s:Envelope/s:Body/...`` while the envelope binds
        ``env:``) would be lost."""
        env = self.version.namespace
        prefix = "s" if self.version is SoapVersion.SOAP11 else "env"
        parts = [b"<?xml version='1.0' encoding='utf-8'?>\n<%s:Envelope xmlns:%s=\"%s\">"
                 % (prefix.encode(), prefix.encode(), env.encode())]
        if self.headers:
            parts.append(b"<%s:Header>" % prefix.encode())
            parts.extend(etree.tostring(block, encoding="utf-8", xml_declaration=False,
                                        with_tail=False) for block in self.headers)
            parts.append(b"</%s:Header>" % prefix.encode())
        if self.body is None:
            parts.append(b"<%s:Body/>" % prefix.encode())
        else:
            parts.append(b"<%s:Body>" % prefix.encode())
            parts.append(etree.tostring(self.body, encoding="utf-8", xml_declaration=False,
                                        with_tail=False))
            parts.append(b"</%s:Body>" % prefix.encode())
        parts.append(b"</%s:Envelope>" % prefix.encode())
        return b"".join(parts)


def build_envelope(version: SoapVersion, body: etree._Element | None,
                   headers: Iterable[etree._Element] = ()) -> bytes:
    return Envelope(version, list(headers), body).to_bytes()


def fault_envelope(version: SoapVersion, fault: SoapFault,
                   headers: Sequence[etree._Element] = ()) -> bytes:
    return build_envelope(version, fault.to_element(version.namespace), headers)


def parse_envelope(data: bytes, limits: ParserLimits = DEFAULT_LIMITS,
                   expected: SoapVersion | None = None) -> Envelope:
    """Parse bytes into an :class:`Envelope`, raising the SOAP fault the spec names.

    ``expected`` is the version announced by the HTTP content type, if any; an envelope in
    another namespace is a VersionMismatch.
    """
    try:
        root = parse_xml(data, limits)
    except XmlRejected as exc:
        raise sender_fault(exc.reason) from None
    local = etree.QName(root).localname
    namespace = etree.QName(root).namespace
    if local != "Envelope":
        raise sender_fault("the message is not a SOAP envelope")
    try:
        version = SoapVersion(namespace)
    except ValueError:
        raise SoapFault(VERSION_MISMATCH, f"unsupported SOAP envelope namespace {namespace!r}") from None
    if expected is not None and expected is not version:
        raise SoapFault(VERSION_MISMATCH,
                        f"content type announces {expected.name} but the envelope is {version.name}")
    headers: list[etree._Element] = []
    body_payload = None
    seen_body = seen_header = False
    for child in root:
        if not isinstance(child.tag, str):
            continue
        if child.tag == ns.qname(namespace, "Header"):
            if seen_body or seen_header:
                raise sender_fault("misplaced or repeated SOAP Header")
            seen_header = True
            headers = [h for h in child if isinstance(h.tag, str)]
        elif child.tag == ns.qname(namespace, "Body"):
            if seen_body:
                raise sender_fault("repeated SOAP Body")
            seen_body = True
            payload = [b for b in child if isinstance(b.tag, str)]
            body_payload = payload[0] if payload else None
        else:
            raise sender_fault(f"unexpected element {child.tag} in the SOAP envelope")
    if not seen_body:
        raise sender_fault("the SOAP envelope has no Body")
    return Envelope(version, headers, body_payload, root)
