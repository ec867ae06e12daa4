"""HTTPS for ``edn serve``: gunicorn's TLS settings, the context every worker serves with
(:func:`wsframework.tls.server_context`: TLS 1.2+, forward-secret AEAD suites), and a bound
on every handshake.

A handshake has :data:`HANDSHAKE_TIMEOUT_S` to finish. Under the gevent worker it runs in the
connection's greenlet (:class:`BoundedHandshakes` wraps the context gevent's server calls);
under the buffered gthread worker it runs in the main loop, non-blocking, beside the
connections still sending their requests (:class:`edn.gunicorn.RequestsBufferedBeforeThreads`).
Either way a peer that stalls mid-handshake holds no thread, and is closed at the deadline.

A failed handshake (a certificate from another CA, plain HTTP to the TLS port, a stalled
peer) is logged once per kind a minute (:class:`HandshakeLog`), not once per connection.

Certificates are read when a worker starts: ``kill -HUP`` of the arbiter starts new workers
with the files as they are then, and stops the old ones gracefully: their requests in
progress are answered, and a connection whose handshake or request is still arriving is
read for up to two seconds more and answered too (``Connection: close``).
"""
from __future__ import annotations

import logging
import os
import ssl
import threading
import time

from wsframework.tls import (CLIENT_AUTH_MODES, PEER_PRINCIPAL_ENVIRON, ServerTls, peer_principal,
                             server_context)

__all__ = ["HANDSHAKE_TIMEOUT_S", "set_handshake_timeout", "handshake_timeout", "tls_options", "tls_of", "BoundedHandshakes", "HandshakeLog",
           "FailedHandshake", "handshake_log", "PeerCertificates", "verified_principal", "answer_plain_http", "PLAIN_HTTP_ANSWER"]

log = logging.getLogger("edn.tls")

HANDSHAKE_TIMEOUT_S = 10.0
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_MODES = {value: key for key, value in _CERT_REQS.items()}


def set_handshake_timeout(seconds: float) -> None:
    """How long a handshake may take in this process (``edn serve --tls-handshake-timeout``,
    set in the arbiter before its workers fork)."""
    global HANDSHAKE_TIMEOUT_S
    if not 0 < seconds <= 300:
        raise ValueError(f"a handshake timeout is more than 0 and at most 300 s, not {seconds}")
    HANDSHAKE_TIMEOUT_S = float(seconds)


def handshake_timeout() -> float:
    return HANDSHAKE_TIMEOUT_S


def tls_options(tls: ServerTls | None) -> dict:
    """gunicorn settings serving ``tls`` (none: plain HTTP)."""
    if tls is None:
        return {}
    return {"certfile": str(tls.cert), "keyfile": str(tls.key),
            "ca_certs": str(tls.ca) if tls.ca else None,
            "cert_reqs": _CERT_REQS[tls.client_auth], "ssl_context": _ssl_context,
            "do_handshake_on_connect": False}


def tls_of(cfg) -> ServerTls:
    """The :class:`ServerTls` a gunicorn config serves."""
    return ServerTls(cert=cfg.certfile, key=cfg.keyfile, ca=cfg.ca_certs or None,
                     client_auth=_MODES.get(cfg.cert_reqs, CLIENT_AUTH_MODES[0]))


def _ssl_context(conf, default_factory):
    # gunicorn's hook: the project's context instead of gunicorn's default one
    return BoundedHandshakes(server_context(tls_of(conf)))


_request_peer = threading.local()  # greenlet-local under gevent


class PeerCertificates:
    """Mixed into both worker classes: each request's WSGI environ carries the principal of
    the client certificate the connection verified (:data:`PEER_PRINCIPAL_ENVIRON`), read
    from the socket as the worker handles the request."""

    def load_wsgi(self):
        super().load_wsgi()
        application = self.wsgi

        def with_peer(environ, start_response):
            principal = getattr(_request_peer, "principal", None)
            if principal is not None:
                environ[PEER_PRINCIPAL_ENVIRON] = principal
            return application(environ, start_response)
        self.wsgi = with_peer

    def handle_request(self, *args):
        # gevent: (listener_name, req, sock, addr); gthread: (req, conn)
        sock = args[2] if len(args) == 4 else getattr(args[1], "sock", None)
        _request_peer.principal = verified_principal(sock)
        try:
            return super().handle_request(*args)
        finally:
            _request_peer.principal = None


def verified_principal(sock) -> str | None:
    """The principal of the certificate ``sock``'s peer presented, if the CA verified it."""
    if not isinstance(sock, ssl.SSLSocket):
        return None
    try:
        return peer_principal(sock.getpeercert())
    except (ValueError, OSError):
        return None


class HandshakeLog:
    """Logs a failed handshake once per kind (its exception's class and reason) a minute."""

    def __init__(self, interval: float = 60.0, clock=time.monotonic):
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def kind(exc: BaseException) -> str:
        reason = getattr(exc, "reason", None) or (exc.args[0] if exc.args else "")
        return f"{type(exc).__name__}: {str(reason)[:120]}"

    def failed(self, exc: BaseException, peer) -> bool:
        """Note a failed handshake from ``peer``; whether it was logged."""
        kind = self.kind(exc)
        now = self._clock()
        with self._lock:
            if now - self._last.get(kind, -self.interval) < self.interval:
                return False
            if len(self._last) > 256:
                self._last.clear()
            self._last[kind] = now
        peer_text = peer[0] if isinstance(peer, tuple) and peer else peer
        log.warning("TLS handshake from %s failed: %s (kinds logged once a minute)",
                    peer_text, kind)
        return True


handshake_log = HandshakeLog()


class FailedHandshake:
    """What :class:`BoundedHandshakes` gives gevent's server for a connection whose
    handshake failed: already closed; the worker's handler returns at once."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


#: the answer to a plain HTTP request on the TLS port, written before the connection closes
_PLAIN_HTTP_TEXT = b"this port speaks HTTPS: use https:// to reach it.\n"
PLAIN_HTTP_ANSWER = (b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
                     b"Content-Type: text/plain; charset=utf-8\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(_PLAIN_HTTP_TEXT) + _PLAIN_HTTP_TEXT)


def answer_plain_http(sock, exc: BaseException) -> None:
    """If ``exc`` says a plain HTTP request came instead of a handshake, tell the client so
    (best effort, never blocking)."""
    if getattr(exc, "reason", None) != "HTTP_REQUEST":
        return
    try:
        os.write(sock.fileno(), PLAIN_HTTP_ANSWER)
    except OSError:
        pass


class BoundedHandshakes:
    """A server context whose ``wrap_socket`` completes the handshake within
    :data:`HANDSHAKE_TIMEOUT_S` (gevent's server wraps each accepted socket with it in the
    connection's greenlet)."""

    def __init__(self, context: ssl.SSLContext, timeout: float | None = None):
        self.context = context
        self.timeout = HANDSHAKE_TIMEOUT_S if timeout is None else timeout

    def wrap_socket(self, sock, server_side=True, **_options):
        peer = _peer(sock)  # before the wrap takes the socket over
        sock.settimeout(self.timeout)
        wrapped = None
        try:
            wrapped = self.context.wrap_socket(sock, server_side=True,
                                               do_handshake_on_connect=False,
                                               suppress_ragged_eofs=True)
            wrapped.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            handshake_log.failed(exc, peer)
            connection = wrapped if wrapped is not None else sock
            answer_plain_http(connection, exc)
            connection.close()
            return FailedHandshake()
        wrapped.settimeout(None)
        return wrapped

    def __getattr__(self, name):
        return getattr(self.context, name)


def _peer(sock):
    try:
        return sock.getpeername()
    except OSError:
        return "?"
