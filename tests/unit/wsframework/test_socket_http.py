"""LeanHttpTransport without sockets: a fake connection scripted with the peer's bytes checks
the request it writes, the answers it reads (Content-Length, chunked, until close, 1xx),
what it refuses (oversized, malformed, header injection), keep-alive reuse and the one
retry on a connection the peer closed while idle. Real sockets: tests/integration/
test_transport_lean.py."""
from __future__ import annotations

import ipaddress

import pytest

from wsframework.transport import LeanHttpTransport, TransportError
from wsframework.transport.socket_http import _Connection
from wsframework.urlpolicy import ApprovedUrl, parse_url

SOAP12 = "application/soap+xml; charset=utf-8"
OK = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


class FakeSocket:
    """Answers each request written to it with the next scripted list of reads (bytes, or an
    exception to raise); b"" is the peer closing."""

    def __init__(self, answers):
        self.answers = [list(a) for a in answers]
        self.sent: list[bytes] = []
        self.reads: list = []
        self.closed = False

    def settimeout(self, timeout):
        pass

    def sendall(self, data):
        if self.closed:
            raise BrokenPipeError("closed")
        if not self.sent or self.sent[-1].endswith(b"\r\n\r\n") or not self.reads:
            self.reads = self.answers.pop(0) if self.answers else [b""]
        self.sent.append(bytes(data))

    def recv(self, size):
        if not self.reads:
            return b""
        item = self.reads.pop(0)
        if isinstance(item, BaseException):
            raise item
        if len(item) > size:
            self.reads.insert(0, item[size:])
            item = item[:size]
        return item

    def close(self):
        self.closed = True


class Scripted(LeanHttpTransport):
    """Each new connection is the next FakeSocket of ``sockets``."""

    def __init__(self, *sockets, **kwargs):
        super().__init__(**kwargs)
        self.sockets = list(sockets)
        self.connected: list[tuple] = []

    def _connect(self, key, url):
        self.connected.append(key)
        self.connections_opened += 1
        return _Connection(self.sockets.pop(0))


def post(transport, url="http://sink.test:8080/notify?x=1", payload=b"<e/>",
         content_type=SOAP12, action="urn:a"):
    return transport.post(url, payload, content_type, action)


def test_request_is_one_write_with_host_type_action_and_length():
    sock = FakeSocket([[OK]])
    response = post(Scripted(sock), payload=b"<env/>")
    assert (response.status, response.content_type, response.body) == (202, None, b"")
    [request] = sock.sent
    assert request == (b"POST /notify?x=1 HTTP/1.1\r\nHost: sink.test:8080\r\n"
                       b'Content-Type: application/soap+xml; charset=utf-8; action="urn:a"\r\n'
                       b"Content-Length: 6\r\n\r\n<env/>")


def test_soap11_action_travels_as_soapaction():
    sock = FakeSocket([[OK]])
    post(Scripted(sock), content_type="text/xml", action="urn:b")
    assert b'SOAPAction: "urn:b"\r\n' in sock.sent[0]
    assert b"Content-Type: text/xml; charset=utf-8\r\n" in sock.sent[0]


def test_approved_url_connects_to_the_checked_address_with_the_name_in_host():
    parsed = parse_url("http://sink.test/n")
    approved = ApprovedUrl("http://sink.test/n", parsed, "93.184.216.34")
    sock = FakeSocket([[OK]])
    transport = Scripted(sock)
    transport.post(approved, b"<e/>", SOAP12, "urn:a")
    assert transport.connected == [("http", "93.184.216.34", 80, "sink.test")]
    assert b"Host: sink.test\r\n" in sock.sent[0]
    assert parsed.ip is None and ipaddress.ip_address(approved.address)


def test_keep_alive_reuses_one_connection():
    sock = FakeSocket([[OK]] * 5)
    transport = Scripted(sock)
    for _ in range(5):
        assert post(transport).status == 202
    assert transport.connections_opened == 1 and len(sock.sent) == 5


def test_connection_close_is_not_reused():
    first = FakeSocket([[b"HTTP/1.1 202 A\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"]])
    second = FakeSocket([[OK]])
    transport = Scripted(first, second)
    post(transport)
    post(transport)
    assert first.closed and transport.connections_opened == 2


def test_an_idle_connection_the_peer_closed_is_retried_once_on_a_new_one():
    stale = FakeSocket([[OK], [b""]])  # answers once, then the peer has closed it
    fresh = FakeSocket([[OK]])
    transport = Scripted(stale, fresh)
    post(transport)
    assert post(transport).status == 202
    assert transport.connections_opened == 2 and len(fresh.sent) == 1


def test_a_new_connection_closed_before_the_answer_is_an_error_not_a_retry():
    transport = Scripted(FakeSocket([[b""]]), FakeSocket([[OK]]))
    with pytest.raises(TransportError, match="closed"):
        post(transport)
    assert transport.connections_opened == 1


def test_body_split_across_reads_and_content_type():
    body = b"<answer>" + b"x" * 100 + b"</answer>"
    head = b"HTTP/1.1 500 Error\r\nContent-Type: text/xml\r\nContent-Length: %d\r\n\r\n" % len(body)
    sock = FakeSocket([[head[:10], head[10:] + body[:5], body[5:50], body[50:]]])
    response = post(Scripted(sock))
    assert (response.status, response.content_type, response.body) == (500, "text/xml", body)


def test_chunked_answer_is_read_and_the_connection_kept():
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
    sock = FakeSocket([[answer], [OK]])
    transport = Scripted(sock)
    assert post(transport).body == b"hello world"
    assert post(transport).status == 202 and transport.connections_opened == 1


def test_answer_without_length_is_read_until_close_and_not_reused():
    sock = FakeSocket([[b"HTTP/1.1 200 OK\r\n\r\nsome", b" body", b""]])
    transport = Scripted(sock, FakeSocket([[OK]]))
    assert post(transport).body == b"some body"
    assert sock.closed
    post(transport)
    assert transport.connections_opened == 2


def test_interim_100_continue_is_skipped():
    sock = FakeSocket([[b"HTTP/1.1 100 Continue\r\n\r\n" + OK]])
    assert post(Scripted(sock)).status == 202


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + b"x" * 2000,
    b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 2000,
], ids=["content-length", "chunked", "until-close"])
def test_oversized_answers_are_refused_and_the_connection_dropped(answer):
    sock = FakeSocket([[answer]])
    with pytest.raises(TransportError, match="exceeds 1000 bytes"):
        post(Scripted(sock, max_response_bytes=1000))
    assert sock.closed


def test_oversized_headers_are_refused():
    sock = FakeSocket([[b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 5000]])
    with pytest.raises(TransportError, match="headers"):
        post(Scripted(sock, max_header_bytes=4096))


@pytest.mark.parametrize("answer", [
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nbad header line\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
])
def test_malformed_answers_are_transport_errors(answer):
    sock = FakeSocket([[answer]])
    with pytest.raises(TransportError):
        post(Scripted(sock))
    assert sock.closed


def test_bytes_after_the_answer_drop_the_connection():
    sock = FakeSocket([[OK + b"HTTP/1.1 200 smuggled\r\n\r\n"]])
    transport = Scripted(sock, FakeSocket([[OK]]))
    assert post(transport).status == 202
    assert sock.closed
    post(transport)
    assert transport.connections_opened == 2


def test_a_read_error_mid_answer_is_a_transport_error():
    sock = FakeSocket([[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
                        ConnectionResetError("reset")]])
    with pytest.raises(TransportError, match="reset"):
        post(Scripted(sock))


def test_a_timeout_is_a_transport_error():
    sock = FakeSocket([[TimeoutError("timed out")]])
    with pytest.raises(TransportError, match="within"):
        post(Scripted(sock))


@pytest.mark.parametrize("action", ['urn:a"\r\nX-Injected: 1', "urn:a\nb", "urn:\0"])
def test_header_injection_through_the_action_is_refused(action):
    sock = FakeSocket([[OK]])
    with pytest.raises(TransportError, match="CR, LF or NUL"):
        post(Scripted(sock), action=action)
    with pytest.raises(TransportError, match="CR, LF or NUL"):
        post(Scripted(FakeSocket([[OK]])), content_type="text/xml", action=action)
    assert sock.sent == []


@pytest.mark.parametrize("url", ["http://user:pw@sink.test/", "http://a\\@b/", "ftp://x/",
                                 "http://169.254.169.254 /"])
def test_urls_the_strict_grammar_refuses_are_transport_errors(url):
    with pytest.raises(TransportError, match="refused"):
        post(Scripted(), url=url)


def test_idle_pool_is_bounded_per_target_and_in_all():
    transport = LeanHttpTransport(pool_size=2, max_idle=3)
    connections = [_Connection(FakeSocket([])) for _ in range(5)]
    for connection in connections[:3]:
        transport._give_back(("http", "a", 80, "a"), connection)
    for connection in connections[3:]:
        transport._give_back(("http", "b", 80, "b"), connection)
    assert connections[2].sock.closed and connections[4].sock.closed
    assert sum(not c.sock.closed for c in connections) == 3
    transport.close()
    assert all(c.sock.closed for c in connections)
    transport.close()
