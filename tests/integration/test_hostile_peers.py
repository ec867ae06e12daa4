"""A real ``edn serve source`` against hostile peers: malformed HTTP that gunicorn refuses
before the application runs gets a SOAP fault (never HTML, never a 500), and idle or slow
connections do not stop it from answering."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
import requests

from tests.support.processes import ServerProcess
from wsframework.exceptions import SENDER
from wsframework.soap import parse_envelope

_MALFORMED = {
    "duplicate Content-Length": (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\n"
                                 b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello"),
    "9 KB header": (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9 * 1024
                    + b"\r\n\r\n"),
    "bad chunk size": (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/xml\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
    "bad request line": b"GARBAGE\r\n\r\n",
    "Content-Length and chunked": (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    # as a fuzzer sends it: the body is Content-Length bytes, never a last chunk
    "Content-Length and chunked, a plain body": (b"POST /topics/x HTTP/1.1\r\nHost: x\r\n"
                                                 b"Transfer-Encoding: chunked\r\n"
                                                 b"Content-Length: 11\r\n\r\n<s:Envelope"),
    "Transfer-Encoding not chunked": (b"POST /topics/x HTTP/1.1\r\nHost: x\r\n"
                                      b"Transfer-Encoding: gzip\r\n\r\n<s:Envelope"),
}


# Sent, then the client stops sending (shutdown of its write side) with the request unfinished.
_TRUNCATED = {
    "body shorter than Content-Length": (b"POST /topics/x HTTP/1.1\r\nHost: x\r\n"
                                         b"Content-Type: application/soap+xml\r\n"
                                         b"Content-Length: 500\r\n\r\n<s:Envelope"),
    "chunked body without its last chunk": (b"POST /topics/x HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Type: application/soap+xml\r\n"
                                            b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"),
}


@pytest.fixture(params=["source", "dispatcher"])
def role_server(request, tmp_path):
    """Each worker model: the source runs gevent, the dispatcher buffered gthread."""
    with ServerProcess(request.param, data_dir=tmp_path / request.param) as server:
        yield server


def _exchange(port: int, data: bytes, *, stop_sending: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        if stop_sending:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk


@pytest.mark.parametrize("request_bytes,stop_sending",
                         [(data, False) for data in _MALFORMED.values()]
                         + [(data, True) for data in _TRUNCATED.values()],
                         ids=list(_MALFORMED) + list(_TRUNCATED))
def test_malformed_http_gets_a_sender_fault_not_html_nor_500(role_server, request_bytes,
                                                             stop_sending):
    answer = _exchange(role_server.port, request_bytes, stop_sending=stop_sending)
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert 400 <= status < 500, head
    assert b"html" not in answer.lower()
    assert parse_envelope(body).fault().code == SENDER
    assert requests.get(role_server.base_url + "/health", timeout=5).status_code == 200


def test_health_answers_promptly_with_200_idle_connections_open(source_server):
    idle = [socket.create_connection(("127.0.0.1", source_server.port), timeout=5)
            for _ in range(200)]
    try:
        time.sleep(0.3)
        latencies = []
        for _ in range(20):
            started = time.perf_counter()
            response = requests.get(source_server.base_url + "/health", timeout=5)
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200
        assert max(latencies) < 1.0, latencies
    finally:
        for sock in idle:
            sock.close()


def test_bench_slowclients_quick():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "slowclients", "--quick",
                             "--json"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["idle_connections"] == 200 and figures["server_alive"]
    assert figures["failed"] == 0, figures
    assert {"p95_ms", "p99_ms", "baseline_p95_ms", "slowloris", "slow_bodies"} <= set(figures)
