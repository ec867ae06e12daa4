"""A small SOAP client over an injected transport: build a request with WS-Addressing
headers, send it, and return the reply envelope or raise the fault it carried."""
from __future__ import annotations

from typing import Iterable

from lxml import etree

from .addressing import EndpointReference, WsaVersion, request_headers
from .exceptions import SoapFault, receiver_fault
from .soap import Envelope, SoapVersion, build_envelope, parse_envelope
from .transport import HttpTransport, TransportError
from .xmlparse import ParserLimits


class SoapClient:
    def __init__(self, transport=None, *, soap_version: SoapVersion = SoapVersion.SOAP12,
                 wsa_version: WsaVersion = WsaVersion.WSA10,
                 limits: ParserLimits = ParserLimits(max_bytes=64 * 1024 * 1024)):
        self.transport = transport or HttpTransport()
        self.soap_version = soap_version
        self.wsa_version = wsa_version
        self.limits = limits

    def envelope(self, to: EndpointReference | str, action: str, body: etree._Element | None,
                 headers: Iterable[etree._Element] = (),
                 reply_to: EndpointReference | None = None, *,
                 message_id: str | None = None) -> bytes:
        blocks = request_headers(self.wsa_version, to, action, reply_to=reply_to,
                                 message_id=message_id) + list(headers)
        return build_envelope(self.soap_version, body, blocks)

    def call(self, to: EndpointReference | str, action: str, body: etree._Element | None,
             headers: Iterable[etree._Element] = ()) -> Envelope:
        """Request-reply; returns the reply envelope, raises :class:`SoapFault` on a fault."""
        address = to.address if isinstance(to, EndpointReference) else to
        payload = self.envelope(to, action, body, headers)
        response = self.transport.post(address, payload, self.soap_version.content_type, action)
        if not response.body:
            raise receiver_fault(f"empty HTTP {response.status} reply from {address}")
        try:
            reply = parse_envelope(response.body, self.limits)
        except SoapFault as exc:
            raise receiver_fault(f"unreadable reply (HTTP {response.status}) from {address}: "
                                 f"{exc.reason}") from None
        fault = reply.fault()
        if fault is not None:
            raise fault
        return reply

    def send(self, to: EndpointReference | str, action: str | None, body: etree._Element | None,
             headers: Iterable[etree._Element] = (), *, message_id: str | None = None) -> int:
        """One-way message; returns the HTTP status. Faults in the response are raised.
        ``message_id``: the wsa:MessageID (default: a new one), kept by a client that sends
        the same message again elsewhere."""
        address = to.address if isinstance(to, EndpointReference) else to
        payload = (self.envelope(to, action, body, headers, message_id=message_id) if action
                   else build_envelope(self.soap_version, body, list(headers)))
        response = self.transport.post(address, payload, self.soap_version.content_type, action)
        if response.status >= 300 and response.body:
            try:
                fault = parse_envelope(response.body, self.limits).fault()
            except SoapFault:
                fault = None
            if fault is not None:
                raise fault
        return response.status


__all__ = ["SoapClient", "TransportError"]
