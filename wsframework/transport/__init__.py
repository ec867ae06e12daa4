"""Client transports: a tiny interface with three implementations.

``post(url, payload, content_type, soap_action=None) -> TransportResponse``

* :class:`HttpTransport` — real HTTP on ``requests`` with pooled keep-alive sessions and
  timeouts (one session per thread: ``requests.Session`` is not documented thread-safe).
* :class:`LeanHttpTransport` (``socket_http``) — HTTP/1.1 written directly on sockets, a
  blocking keep-alive client for many small one-way POSTs (notification delivery): a tenth of requests' CPU per POST or less, the same
  URL-policy pinning, timeouts and bounded answers (its module docstring says why).
* :class:`InProcessTransport` — hands the bytes to a local service through the same WSGI
  edge, called in process, so protocol tests run without sockets.

All pass one conformance suite (``tests/support/transport_conformance.py``): every status
is a response, an unreachable peer a :class:`TransportError`, the action travels as
SOAPAction (SOAP 1.1) or the content type's ``action`` parameter (SOAP 1.2).
"""
from .base import Transport, TransportError, TransportResponse
from .http import HttpTransport
from .inprocess import InProcessTransport
from .socket_http import LeanHttpTransport

__all__ = ["Transport", "TransportError", "TransportResponse", "HttpTransport",
           "InProcessTransport", "LeanHttpTransport"]
