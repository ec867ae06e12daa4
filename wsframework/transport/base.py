from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..exceptions import WsFrameworkError


class TransportError(WsFrameworkError):
    """The peer could not be reached or did not answer in time.

    ``unsent``: the message certainly never reached the peer (no connection could be made,
    or the URL was refused before connecting), so the peer cannot have acted on it. Otherwise
    (a reset or a timeout after the request went out) it may have: a client that sends the
    message elsewhere may have it acted on twice (:class:`wsframework.publisher.FailoverPublisher`).
    """

    def __init__(self, message: str = "", *, unsent: bool = False):
        super().__init__(message)
        self.unsent = unsent


@dataclass(frozen=True)
class TransportResponse:
    status: int
    content_type: str | None
    body: bytes


class Transport(Protocol):
    """Sends one SOAP message and returns the answer, whatever its status; raises
    :class:`TransportError` when the peer cannot be reached (or, for a transport with
    timeouts, does not answer in time)."""

    def post(self, url: str, payload: bytes, content_type: str,
             soap_action: str | None = None) -> TransportResponse: ...

    def close(self) -> None: ...


def soap_http_headers(content_type: str, soap_action: str | None) -> dict[str, str]:
    """HTTP headers for a SOAP message: SOAP 1.1 carries the action in SOAPAction, SOAP 1.2
    in the content type's action parameter."""
    if content_type.startswith("text/xml"):
        return {"Content-Type": "text/xml; charset=utf-8", "SOAPAction": f'"{soap_action or ""}"'}
    ct = "application/soap+xml; charset=utf-8"
    if soap_action:
        ct += f'; action="{soap_action}"'
    return {"Content-Type": ct}
