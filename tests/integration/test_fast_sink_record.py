"""The recording fast sink (``edn demo``'s): every POST's path and body kept in order, read
back incrementally, pipelined and split requests included."""
from __future__ import annotations

import http.client
import socket
import time

import pytest

from edn.sink import FastSink
from edn.sink import main as sink_main
from wsframework.transport import LeanHttpTransport


def test_the_recording_fast_sink_keeps_paths_and_bodies_in_order():
    with FastSink(record=True) as sink:
        transport = LeanHttpTransport()
        for i in range(20):
            assert transport.post(f"{sink.url}/n/{i}", b"<e id='%d'/>" % i,
                                  "application/soap+xml").status == 202
        assert sink.wait_count(20, timeout=5)
        first = sink.messages
        assert [(m.path, m.body) for m in first] == [
            (f"/n/{i}", b"<e id='%d'/>" % i) for i in range(20)]
        # two pipelined requests in one write, the second split across writes
        with socket.create_connection((sink.host, sink.port)) as raw:
            one = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
            two = b"POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nde\nfg"
            raw.sendall(one + two[:20])
            raw.sendall(two[20:])
            assert sink.wait_count(22, timeout=5)
        assert [(m.path, m.body) for m in sink.messages[20:]] == [("/a", b"abc"), ("/b", b"de\nfg")]
        assert not sink.wait_count(23, timeout=0.2)
        transport.close()


def test_a_counting_fast_sink_records_nothing():
    with FastSink() as sink:
        LeanHttpTransport().post(f"{sink.url}/x", b"<a/>", "application/soap+xml")
        assert sink.wait_count(1, timeout=5) and sink.messages == []


def test_the_fast_sink_drops_a_connection_announcing_an_oversized_or_negative_body():
    with FastSink(record=True) as sink:
        for length in (b"99999999999", b"-5"):
            with socket.create_connection((sink.host, sink.port)) as raw:
                raw.sendall(b"POST /x HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\nab")
                raw.settimeout(5)
                assert raw.recv(100) == b""  # closed, no answer
        assert sink.count == 0 and sink.messages == []
        with socket.create_connection((sink.host, sink.port)) as raw:  # a bad offset reads all
            raw.sendall(b"POST /y HTTP/1.1\r\nContent-Length: 1\r\n\r\nz")
            assert sink.wait_count(1, timeout=5)
        connection = http.client.HTTPConnection(sink.host, sink.port)
        connection.request("GET", "/messages?from=x")
        assert connection.getresponse().read().endswith(b"/yz")
        connection.close()


def test_an_answer_delay_holds_each_answer_and_keeps_the_order():
    with FastSink(answer_delay_ms=150) as sink:
        transport = LeanHttpTransport()
        started = time.monotonic()
        assert transport.post(f"{sink.url}/n", b"<a/>", "application/soap+xml").status == 202
        assert time.monotonic() - started >= 0.15
        with socket.create_connection((sink.host, sink.port)) as raw:  # pipelined: in order
            raw.sendall(b"POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
                        b"GET /count HTTP/1.1\r\n\r\n")
            raw.settimeout(5)
            answers = b""
            while answers.count(b"HTTP/1.1") < 2:
                answers += raw.recv(4096)
        assert answers.startswith(b"HTTP/1.1 202")  # the POST's answer first, held
        transport.close()


@pytest.mark.parametrize("argv, message", [
    (["--answer-delay-ms", "-1"], "--answer-delay-ms must be 0..10000"),
    (["--answer-delay-ms", "10001"], "--answer-delay-ms must be 0..10000"),
    (["--port", "70000"], "--port must be 0..65535"),
])
def test_bad_fast_sink_options_are_refused_with_the_flag_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        sink_main(["--fast", *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(ValueError):
        FastSink(answer_delay_ms=10_001)
