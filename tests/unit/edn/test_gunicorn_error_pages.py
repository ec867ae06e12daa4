"""What the launcher answers for HTTP that gunicorn refuses before the application runs:
a SOAP fault, never gunicorn's HTML error page."""
from __future__ import annotations

import socket

import pytest
from gunicorn.http import errors as http_errors

from edn.gunicorn import SoapErrorPages, error_response, worker_class
from wsframework.exceptions import RECEIVER, SENDER
from wsframework.soap import parse_envelope


def _split(data: bytes):
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    assert int(headers[b"Content-Length"]) == len(body)
    return status, headers, body


@pytest.mark.parametrize("exc, status", [
    (http_errors.InvalidRequestLine("GARBAGE"), 400),
    (http_errors.InvalidHeader("CONTENT-LENGTH"), 400),  # a duplicate Content-Length
    (http_errors.LimitRequestHeaders("Request Header Fields Too Large"), 431),
    (http_errors.LimitRequestLine(9000, 8190), 414),
    (http_errors.InvalidChunkSize(b"zz"), 400),
    (http_errors.NoMoreData(b""), 400),
    (http_errors.UnsupportedTransferCoding("gzip"), 501),
])
def test_malformed_http_is_a_sender_fault_without_html(exc, status):
    answered, data = error_response(exc)
    code, headers, body = _split(data)
    assert answered == code == status
    assert headers[b"Content-Type"].startswith(b"text/xml")
    assert headers[b"Connection"] == b"close"
    assert b"<html" not in data.lower()
    assert parse_envelope(body).fault().code == SENDER


def test_our_own_errors_are_a_receiver_fault_in_the_requests_soap_version():
    answered, data = error_response(RuntimeError("boom"), "application/soap+xml")
    code, headers, body = _split(data)
    assert code == 500 and headers[b"Content-Type"].startswith(b"application/soap+xml")
    fault = parse_envelope(body).fault()
    assert fault.code == RECEIVER and "boom" not in fault.reason


@pytest.mark.parametrize("name", ["gthread", "gevent"])
def test_worker_classes_carry_the_soap_error_pages(name):
    if name == "gevent":
        pytest.importorskip("gevent")
    cls = worker_class(name)
    assert issubclass(cls, SoapErrorPages)
    assert cls.handle_error is SoapErrorPages.handle_error
    if name == "gevent":  # a graceful stop does not wait out idle keep-alive connections
        from edn.gunicorn import IdleConnectionsEndAtExit
        assert issubclass(cls, IdleConnectionsEndAtExit)
    with pytest.raises(ValueError):
        worker_class("tornado")


def test_handle_error_writes_the_fault_to_the_client():
    class Log:
        def __init__(self):
            self.lines = []

        def warning(self, *args):
            self.lines.append(args)

        exception = debug = warning

    worker = SoapErrorPages()
    worker.log = Log()
    ours, theirs = socket.socketpair()
    try:
        worker.handle_error(None, ours, ("127.0.0.1", 1), http_errors.InvalidRequestLine("x"))
        ours.close()
        data = b"".join(iter(lambda: theirs.recv(65536), b""))
    finally:
        theirs.close()
    assert data.startswith(b"HTTP/1.1 400 ") and b"<html" not in data.lower()


def test_default_worker_classes_per_role():
    pytest.importorskip("gevent")
    from edn.gunicorn import default_worker_class
    assert default_worker_class("source") == "gevent"
    assert default_worker_class("server") == "gevent"
    assert default_worker_class("dispatcher") == "gthread"
