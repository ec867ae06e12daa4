"""LeanHttpTransport over loopback: the transport conformance suite against the framework's
WSGI edge, and real peers that reuse, close, stall and oversize; then the Deliverer with
the lean client, where a slow sink must not hold up a fast one."""
from __future__ import annotations

import socket
import threading
from wsgiref.simple_server import make_server

import pytest

from edn.sink import FastSink, NotificationSink
from subscription_manager.delivery import Delivery, Deliverer, DeliveryPolicy
from tests.integration.test_transport_http import (_BrokenPeer, _QuietHandler, _refused_url,
                                                   _ThreadingServer)
from tests.support.transport_conformance import CHECKS, EchoEndpoint, TransportSetup
from wsframework.transport import LeanHttpTransport, TransportError
from wsframework.urlpolicy import UrlPolicy
from wsframework.wsgi import WsgiApplication

SOAP12 = "application/soap+xml; charset=utf-8"
OK = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


@pytest.fixture
def setup():
    endpoint = EchoEndpoint()
    server = make_server("127.0.0.1", 0, WsgiApplication(endpoint),
                         server_class=_ThreadingServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    transport = LeanHttpTransport(timeout=(2.0, 10.0), max_response_bytes=8 * 1024 * 1024)
    broken = _BrokenPeer()
    try:
        yield TransportSetup(
            transport, f"http://127.0.0.1:{server.server_port}", _refused_url(), endpoint,
            with_read_timeout=lambda t: LeanHttpTransport(timeout=(2.0, t)),
            broken_peer_url=broken.url)
    finally:
        transport.close()
        broken.close()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_lean_transport_conformance(setup, check):
    check(setup)


class ScriptedPeer:
    """A raw HTTP/1.1 peer: reads each request (head and Content-Length body), answers
    ``answer(request_number)`` and closes the connection after it when ``close_after`` says
    so. ``hold`` (an Event) makes every answer wait for it. Counts connections and
    requests, and keeps each request's head."""

    def __init__(self, answer=lambda n: OK, close_after=lambda n: False, hold=None):
        self.answer, self.close_after, self.hold = answer, close_after, hold
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self.requests = 0
        self.heads: list[bytes] = []
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self.open.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection):
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = connection.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length:")))
                while len(buffer) < length:
                    buffer += connection.recv(65536)
                buffer = buffer[length:]
                with self.lock:
                    number = self.requests
                    self.requests += 1
                    self.heads.append(head)
                if self.hold is not None:
                    self.hold.wait(10)
                connection.sendall(self.answer(number))
                if self.close_after(number):
                    connection.close()
                    return
        except OSError:
            return

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for connection in self.open:
                try:
                    connection.close()
                except OSError:
                    pass
        self.thread.join(5)


@pytest.fixture
def peers():
    made: list[ScriptedPeer] = []

    def make(**kwargs) -> ScriptedPeer:
        made.append(ScriptedPeer(**kwargs))
        return made[-1]
    yield make
    for peer in made:
        peer.close()


def post(transport, url, payload=b"<e/>"):
    return transport.post(url + "/n", payload, SOAP12, "urn:a")


def test_keep_alive_reuses_one_connection(peers):
    peer = peers()
    transport = LeanHttpTransport()
    for _ in range(30):
        assert post(transport, peer.url).status == 202
    assert (peer.connections, peer.requests, transport.connections_opened) == (1, 30, 1)
    transport.close()


def test_a_peer_that_closes_after_each_answer(peers):
    peer = peers(answer=lambda n: b"HTTP/1.1 202 A\r\nConnection: close\r\nContent-Length: 0"
                                  b"\r\n\r\n", close_after=lambda n: True)
    transport = LeanHttpTransport()
    for _ in range(5):
        assert post(transport, peer.url).status == 202
    assert peer.connections == 5 and peer.requests == 5
    transport.close()


def test_a_peer_that_silently_closes_kept_alive_connections(peers):
    """No Connection: close, yet the peer closes after every second answer: the request on
    the closed connection goes once more on a new one, and nothing fails."""
    peer = peers(close_after=lambda n: n % 2 == 1)
    transport = LeanHttpTransport()
    for _ in range(10):
        assert post(transport, peer.url).status == 202
    assert peer.requests == 10 and peer.connections == 5
    transport.close()


def test_an_oversized_answer_is_refused_and_the_next_post_works(peers):
    big = b"x" * 2_000_000
    peer = peers(answer=lambda n: (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big)
                                   + big) if n == 0 else OK)
    transport = LeanHttpTransport(max_response_bytes=1024 * 1024)
    with pytest.raises(TransportError, match="exceeds"):
        post(transport, peer.url)
    assert post(transport, peer.url).status == 202
    assert transport.connections_opened == 2
    transport.close()


def test_a_chunked_answer_over_a_real_connection(peers):
    peer = peers(answer=lambda n: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  b"3\r\nabc\r\n0\r\n\r\n")
    transport = LeanHttpTransport()
    assert post(transport, peer.url).body == b"abc"
    assert post(transport, peer.url).body == b"abc"
    assert peer.connections == 1
    transport.close()


def test_the_approved_address_is_connected_with_the_name_in_host(peers):
    peer = peers()
    policy = UrlPolicy(resolver=lambda host, port, *a: [(2, 1, 6, "", ("127.0.0.1", port))])
    approved = policy.approve(f"http://sink.test:{peer.port}/notify")
    transport = LeanHttpTransport()
    assert transport.post(approved, b"<e/>", SOAP12, "urn:a").status == 202
    assert peer.heads[0].startswith(b"POST /notify HTTP/1.1\r\nHost: sink.test:%d\r\n" % peer.port)
    transport.close()


def test_a_slow_sink_does_not_hold_up_deliveries_to_a_fast_one(peers):
    hold = threading.Event()
    slow = peers(hold=hold)
    transport = LeanHttpTransport(timeout=(2.0, 10.0))
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=2, retries=0))
    try:
        with NotificationSink(keep_bodies=False) as fast:
            deliverer.submit_many([Delivery(slow.url + "/n", SOAP12, "urn:a", payload=b"<e/>")
                                   for _ in range(20)])
            deliverer.submit_many([Delivery(fast.url + "/n", SOAP12, "urn:a", payload=b"<e/>")
                                   for _ in range(100)])
            fast.wait_for(100, timeout=10)
            assert slow.requests <= 2  # two workers wait there; none more
            hold.set()
            assert deliverer.drain(10)
        assert deliverer.stats()["delivered"] == 120 and slow.requests == 20
    finally:
        hold.set()
        deliverer.close()
        transport.close()


def test_the_fast_sink_counts_and_answers_waits():
    with FastSink() as sink:
        transport = LeanHttpTransport()
        for _ in range(50):
            assert post(transport, sink.url).status == 202
        assert sink.count == 50
        assert sink.wait_for(50, timeout=5) == 50
        with pytest.raises(AssertionError):
            sink.wait_for(51, timeout=0.2)
        transport.close()


def test_tls_to_the_approved_address_checks_the_urls_name(tmp_path):
    """https: the connection goes to the approved IP; SNI and the certificate check use the
    URL's name (a certificate for that name is accepted, for another name refused)."""
    import shutil
    import ssl
    import subprocess
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=pinned.test", "-addext", "subjectAltName=DNS:pinned.test",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    names = []
    server_context.sni_callback = lambda sock, name, ctx: names.append(name) or None
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    served = []

    def serve():
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            raw.settimeout(5)
            try:
                with server_context.wrap_socket(raw, server_side=True) as connection:
                    for _ in range(2):  # two requests on one kept-alive connection
                        data = b""
                        while not data.endswith(b"<x/>"):
                            data += connection.recv(65536)
                        served.append(data)
                        connection.sendall(OK)
            except (ssl.SSLError, OSError):  # the refused certificate ends the handshake
                raw.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    policy = UrlPolicy(resolver=lambda host, port, *a: [(2, 1, 6, "", ("127.0.0.1", port))])
    transport = LeanHttpTransport(timeout=(3.0, 5.0),
                                  ssl_context=ssl.create_default_context(cafile=str(cert)))
    try:
        for _ in range(2):
            response = transport.post(policy.approve(f"https://pinned.test:{port}/n"), b"<x/>",
                                      SOAP12)
            assert response.status == 202
        assert transport.connections_opened == 1
        with pytest.raises(TransportError, match="connect"):
            transport.post(policy.approve(f"https://other.test:{port}/n"), b"<x/>", SOAP12)
    finally:
        transport.close()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)
    assert names[:2] == ["pinned.test", "other.test"]
    assert served[0].startswith(b"POST /n HTTP/1.1\r\nHost: pinned.test:%d\r\n" % port)
