"""The transport conformance suite (tests/support/transport_conformance.py) over HTTP:
HttpTransport against the framework's WSGI edge served by wsgiref on 127.0.0.1."""
from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from tests.support.transport_conformance import CHECKS, SLOW_SECONDS, EchoEndpoint, TransportSetup
from wsframework.transport import HttpTransport
from wsframework.wsgi import WsgiApplication


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def _refused_url() -> str:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _BrokenPeer:
    """Answers the headers and 3 of 100 promised body bytes, then stalls for a while
    (``/stall``) or closes the connection (``/cut``)."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        self.socket.settimeout(0.1)
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except (TimeoutError, OSError):
                continue
            with connection:
                request = connection.recv(65536).split(b" ", 2)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n"
                                   b"Content-Length: 100\r\n\r\nabc")
                if len(request) > 1 and request[1] == b"/stall":
                    self._stop.wait(2 * SLOW_SECONDS)

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.socket.close()


@pytest.fixture
def setup():
    endpoint = EchoEndpoint()
    server = make_server("127.0.0.1", 0, WsgiApplication(endpoint),
                         server_class=_ThreadingServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    transport = HttpTransport(timeout=(2.0, 10.0))
    broken = _BrokenPeer()
    try:
        yield TransportSetup(transport, f"http://127.0.0.1:{server.server_port}", _refused_url(),
                             endpoint, with_read_timeout=lambda t: HttpTransport(timeout=(2.0, t)),
                             broken_peer_url=broken.url)
    finally:
        transport.close()
        broken.close()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_http_transport(setup, check):
    check(setup)
