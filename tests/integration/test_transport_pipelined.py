"""HTTP/1.1 pipelining in the lean client (opt-in): many POSTs on one connection in one
write, answers matched in order; a peer that closes midway leaves the rest as errors."""
from __future__ import annotations

import socket
import threading

import pytest

from edn.sink import FastSink
from wsframework.transport import LeanHttpTransport, TransportError, TransportResponse


def test_pipelined_posts_share_one_connection_and_one_round_trip():
    with FastSink(record=True, answer_delay_ms=100) as sink:
        transport = LeanHttpTransport()
        answers = transport.post_pipelined(
            [(f"{sink.url}/n/{i}", b"<e i='%d'/>" % i, "application/soap+xml", "urn:a")
             for i in range(20)])
        assert [a.status for a in answers] == [202] * 20
        assert transport.connections_opened == 1
        assert [m.path for m in sink.messages] == [f"/n/{i}" for i in range(20)]
        again = transport.post_pipelined([(f"{sink.url}/x", b"<a/>", "text/xml", None)] * 3)
        assert [a.status for a in again] == [202] * 3 and transport.connections_opened == 1
        transport.close()


def test_requests_to_other_connections_are_refused():
    transport = LeanHttpTransport()
    with pytest.raises(ValueError):
        transport.post_pipelined([("http://127.0.0.1:1/a", b"", "text/xml", None),
                                  ("http://127.0.0.1:2/a", b"", "text/xml", None)])
    assert transport.post_pipelined([]) == []


def test_a_peer_that_closes_midway_leaves_the_rest_unanswered():
    """The peer answers two requests, the second with Connection: close, then closes."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve():
        connection, _ = server.accept()
        with connection:
            data = b""
            while data.count(b"POST ") < 5 or not data.endswith(b"<a/>"):
                data += connection.recv(65536)
            connection.sendall(b"HTTP/1.1 202 A\r\nContent-Length: 0\r\n\r\n"
                               b"HTTP/1.1 202 A\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    transport = LeanHttpTransport(timeout=(3.0, 5.0))
    answers = transport.post_pipelined(
        [(f"http://127.0.0.1:{port}/n", b"<a/>", "application/soap+xml", None)] * 5)
    thread.join(5)
    server.close()
    assert [type(a) for a in answers] == [TransportResponse] * 2 + [TransportError] * 3
    assert "not answered" in str(answers[2])
    assert transport._idle == {}  # the closed connection was not kept
