"""Client transports: a tiny interface with two implementations.

``post(url, payload, content_type, soap_action=None) -> TransportResponse``

* :class:`HttpTransport` — real HTTP on ``requests`` with pooled keep-alive sessions and
  timeouts (one session per thread: ``requests.Session`` is not documented thread-safe).
* :class:`InProcessTransport` — hands the bytes straight to a local service's WSGI-free entry
  point, so protocol tests run without sockets.
"""
from .base import Transport, TransportError, TransportResponse
from .http import HttpTransport
from .inprocess import InProcessTransport

__all__ = ["Transport", "TransportError", "TransportResponse", "HttpTransport",
           "InProcessTransport"]
