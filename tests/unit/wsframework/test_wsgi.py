"""The WSGI edge, called directly with environ dicts: every POST answer is a SOAP envelope (or
an empty 202), oversized bodies are refused without being held in memory."""

import gc
import io
import json
import types

import pytest
from wsdl.admin import serve_admin_wsdl
from lxml import etree

from wsframework import admin as contracts
from wsframework import memory
from wsframework.addressing import AddressingHeaders, WsaVersion, request_headers
from wsframework.exceptions import RECEIVER, SENDER, sender_fault
from wsframework.messaging import MessageFilter, Reply
from wsframework.service import Service, ServiceConfig
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.transport import InProcessTransport
from wsframework import wsgi
from wsframework.wsgi import WsgiApplication
from wsframework.xmlparse import ParserLimits

BASE = "http://edn.example"
TOKEN = "t0ken"
LIMIT = 16 * 1024
DRAIN_CHUNK = 64 * 1024
WSDL_NS = "http://schemas.xmlsoap.org/wsdl/"


class ZeroStream:
    """A wsgi.input that serves ``size`` zero bytes lazily and records every read."""

    def __init__(self, size):
        self.remaining = size
        self.reads = []

    def read(self, n=-1):
        if n is None or n < 0:
            n = self.remaining
        n = min(n, self.remaining)
        self.reads.append(n)
        self.remaining -= n
        return b"\0" * n

    @property
    def total(self):
        return sum(self.reads)


@pytest.fixture
def service(tmp_path):
    transport = InProcessTransport()
    service = Service(ServiceConfig(base_url=BASE, data_dir=tmp_path, admin_token=TOKEN,
                                    limits=ParserLimits(max_bytes=LIMIT)), transport=transport)
    serve_admin_wsdl(service)
    service.messaging.route("echo", MessageFilter(action="urn:echo"),
                            lambda m: Reply("urn:echo/response", etree.fromstring("<ok/>")))
    service.messaging.route("one-way", MessageFilter(action="urn:notify"), lambda m: None)
    yield service
    service.close()


@pytest.fixture
def app(service):
    return WsgiApplication(service)


class Response:
    def __init__(self, app, environ):
        self.started = []
        chunks = app(environ, lambda status, headers: self.started.append((status, headers)))
        self.body = b"".join(chunks)
        (self.status_line, header_list), = self.started
        self.status = int(self.status_line.split()[0])
        self.headers = dict(header_list)

    @property
    def content_type(self):
        return self.headers.get("Content-Type")

    def envelope(self):
        return parse_envelope(self.body)


def environ(method="POST", path="/", body=b"", content_type=None, length="auto", stream=None,
            **extra):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "",
           "wsgi.input": stream if stream is not None else io.BytesIO(body),
           "REMOTE_ADDR": "127.0.0.1"}
    if content_type:
        env["CONTENT_TYPE"] = content_type
    if length == "auto":
        env["CONTENT_LENGTH"] = str(len(body))
    elif length is not None:
        env["CONTENT_LENGTH"] = length
    env.update(extra)
    return env


def message(soap, action="urn:echo", to=BASE + "/"):
    return build_envelope(soap, etree.fromstring("<ping/>"),
                          request_headers(WsaVersion.WSA10, to, action))


def post(app, soap, body, **kwargs):
    return Response(app, environ(body=body, content_type=soap.content_type + "; charset=utf-8",
                                 **kwargs))


# --- POST ---------------------------------------------------------------------------

@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12])
def test_post_soap_gets_an_envelope(app, soap):
    response = post(app, soap, message(soap))
    assert response.status == 200 and response.status_line == "200 OK"
    assert response.content_type == soap.content_type + "; charset=utf-8"
    assert response.headers["Content-Length"] == str(len(response.body))
    reply = response.envelope()
    assert reply.version is soap and reply.body.tag == "ok"
    assert AddressingHeaders.parse(reply.headers).action == "urn:echo/response"


def test_soap11_action_from_the_soapaction_header(app):
    data = build_envelope(SoapVersion.SOAP11, etree.fromstring("<ping/>"))
    response = post(app, SoapVersion.SOAP11, data, HTTP_SOAPACTION='"urn:echo"')
    assert response.status == 200 and response.envelope().body.tag == "ok"


def test_one_way_gets_an_empty_202(app):
    response = post(app, SoapVersion.SOAP12, message(SoapVersion.SOAP12, "urn:notify"))
    assert (response.status, response.body) == (202, b"")
    assert response.headers["Content-Length"] == "0"
    assert "Content-Type" not in response.headers


@pytest.mark.parametrize("soap, status", [(SoapVersion.SOAP11, 500), (SoapVersion.SOAP12, 400)])
@pytest.mark.parametrize("body", [b"", b"not xml", b"<?xml version='1.0'?><!DOCTYPE x><x/>"])
def test_bad_bodies_get_sender_faults(app, soap, status, body):
    response = post(app, soap, body)
    assert response.status == status
    assert response.content_type.startswith(soap.content_type)
    assert response.envelope().fault().code == SENDER


def test_request_without_content_type_is_answered_in_soap11(app):
    response = Response(app, environ(body=b"junk"))
    assert response.status == 500 and response.content_type.startswith("text/xml")
    assert response.envelope().fault().code == SENDER


def test_unparseable_content_length_reads_up_to_the_limit(app):
    data = message(SoapVersion.SOAP12)
    response = post(app, SoapVersion.SOAP12, data, length="twelve")
    assert response.status == 200


# --- oversized bodies ------------------------------------------------------------------

@pytest.mark.parametrize("soap, status", [(SoapVersion.SOAP11, 500), (SoapVersion.SOAP12, 400)])
def test_declared_oversize_is_refused_and_drained_in_chunks(app, soap, status):
    size = 5 * 1024 * 1024
    stream = ZeroStream(size)
    response = Response(app, environ(stream=stream, length=str(size),
                                     content_type=soap.content_type))
    assert response.status == status
    assert response.content_type == soap.content_type
    assert response.headers.get("Connection") == "close"
    fault = response.envelope().fault()
    assert fault.code == SENDER and str(LIMIT) in fault.reason
    assert max(stream.reads) <= DRAIN_CHUNK
    assert stream.total == size  # drained, so the client can read the answer
    assert len(stream.reads) >= size // DRAIN_CHUNK


def test_content_length_just_over_the_limit(app):
    stream = ZeroStream(LIMIT + 1)
    response = Response(app, environ(stream=stream, length=str(LIMIT + 1),
                                     content_type="application/soap+xml"))
    assert response.status == 400
    assert max(stream.reads) <= DRAIN_CHUNK


def test_body_at_the_limit_is_parsed(app):
    data = message(SoapVersion.SOAP12)
    padded = data.replace(b"<ping/>", b"<ping>" + b"x" * (LIMIT - len(data) - 6) + b"</ping>")
    assert len(padded) == LIMIT
    assert post(app, SoapVersion.SOAP12, padded).status == 200


def test_free_heap_is_returned_after_a_large_body_is_answered_and_not_after_others(
        app, monkeypatch):
    trims = []
    monkeypatch.setattr(memory, "LARGE_REQUEST_BYTES", 8 * 1024)
    monkeypatch.setattr(memory, "return_free_memory", lambda: trims.append(1) or True)
    data = message(SoapVersion.SOAP12)
    assert post(app, SoapVersion.SOAP12, data).status == 200
    assert trims == []
    large = data.replace(b"<ping/>", b"<ping>" + b"<x>1</x>" * 1200 + b"</ping>")
    assert 8 * 1024 <= len(large) <= LIMIT
    assert post(app, SoapVersion.SOAP12, large).status == 200
    assert trims == [1]
    assert post(app, SoapVersion.SOAP12, large, length="twelve").status == 200  # read to the limit
    assert trims == [1, 1]
    refused = Response(app, environ(stream=ZeroStream(LIMIT + 1), length=str(LIMIT + 1),
                                    content_type="application/soap+xml"))
    assert refused.status == 400 and trims == [1, 1]  # drained, never parsed


@pytest.mark.parametrize("length", [None, "", "-1"])
def test_oversize_without_usable_length_is_refused_in_chunks(app, length):
    size = 3 * 1024 * 1024
    stream = ZeroStream(size)
    response = Response(app, environ(stream=stream, length=length,
                                     content_type="application/soap+xml"))
    assert response.status == 400
    assert response.envelope().fault().code == SENDER
    assert max(stream.reads) <= DRAIN_CHUNK
    assert stream.reads[0] <= LIMIT + 1


# --- GET and other methods -------------------------------------------------------------

@pytest.mark.parametrize("query", ["wsdl", "WSDL", "wsdl="])
def test_get_wsdl_at_admin(app, query):
    response = Response(app, environ("GET", "/admin", QUERY_STRING=query, length=None))
    assert response.status == 200
    assert response.content_type.startswith("text/xml")
    document = etree.fromstring(response.body)
    assert document.tag == "{%s}definitions" % WSDL_NS
    assert (BASE + "/admin").encode() in response.body
    assert contracts.action_for("CreateTopic").encode() in response.body


def test_get_wsdl_where_there_is_none(app):
    response = Response(app, environ("GET", "/nothing", QUERY_STRING="wsdl", length=None))
    assert response.status == 404


def test_health(app, service):
    response = Response(app, environ("GET", "/health", length=None))
    assert response.status == 200 and response.content_type == "application/json"
    assert json.loads(response.body) == {"status": "ok", "role": service.config.role}


def test_head_has_no_body(app):
    response = Response(app, environ("HEAD", "/health", length=None))
    assert response.status == 200 and response.body == b""


def test_other_get_is_404_text(app):
    response = Response(app, environ("GET", "/", length=None))
    assert response.status == 404 and response.content_type == "text/plain"


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_405(app, method):
    response = Response(app, environ(method, "/admin", body=b"x"))
    assert response.status == 405 and response.status_line == "405 Method Not Allowed"
    assert response.headers["Allow"] == "GET, POST"


# --- failures inside ---------------------------------------------------------------------

@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12])
def test_exception_inside_the_service_is_a_soap_receiver_fault(app, service, monkeypatch, soap):
    def explode(*args, **kwargs):
        raise RuntimeError("database on fire at /secret/path.py")
    monkeypatch.setattr(service, "handle_request", explode)
    response = post(app, soap, message(soap))
    assert response.status == 500
    assert response.content_type.startswith(soap.content_type)
    assert b"<html" not in response.body.lower()
    assert b"secret" not in response.body and b"Traceback" not in response.body
    assert response.envelope().fault().code == RECEIVER


def test_connections_go_back_even_when_making_changes_durable_fails_unexpectedly(
        app, monkeypatch):
    released = []

    def broken():
        raise RuntimeError("a bug below the edge")
    monkeypatch.setattr(wsgi, "make_changes_durable", broken)
    monkeypatch.setattr(wsgi, "release_connections", lambda: released.append(1))
    with pytest.raises(RuntimeError):
        post(app, SoapVersion.SOAP12, message(SoapVersion.SOAP12))
    assert released == [1]


def test_connections_go_back_before_the_wait_for_the_sync(app, monkeypatch):
    """A worker's requests wait for a sync together; holding their store connections meanwhile
    meant opening as many again for the next requests."""
    steps = []
    monkeypatch.setattr(wsgi, "make_changes_durable", lambda: steps.append("sync"))
    monkeypatch.setattr(wsgi, "release_connections", lambda: steps.append("release"))
    post(app, SoapVersion.SOAP12, message(SoapVersion.SOAP12))
    assert steps == ["release", "sync"]


def _cycles_left_by(request) -> list:
    """The frames and parsed elements that only the cycle collector would free after
    ``request()``."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        request()
        gc.collect()
        return [o for o in gc.garbage if isinstance(o, (types.FrameType, etree._Element))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_a_fault_answered_by_the_messaging_layer_leaves_no_cycle_holding_the_request(app):
    def request():
        response = post(app, SoapVersion.SOAP12, message(SoapVersion.SOAP12, "urn:unknown"))
        assert response.status == 400 and response.envelope().fault().code == SENDER
    assert _cycles_left_by(request) == []


def test_a_fault_raised_to_the_wsgi_edge_leaves_no_cycle_holding_the_request(
        app, service, monkeypatch):
    def refuse(data, **kwargs):
        parsed = etree.fromstring(data)
        raise sender_fault(f"refused {len(parsed)} parts")
    monkeypatch.setattr(service, "handle_request", refuse)

    def request():
        response = post(app, SoapVersion.SOAP12, message(SoapVersion.SOAP12))
        assert response.status == 400 and "refused 2 parts" in response.envelope().fault().reason
    assert _cycles_left_by(request) == []


def test_exception_while_serving_get_is_not_html(app, service, monkeypatch):
    monkeypatch.setattr(service, "wsdl_for", lambda path: 1 / 0)
    response = Response(app, environ("GET", "/admin", QUERY_STRING="wsdl", length=None))
    assert response.status == 500
    assert response.envelope().fault().code == RECEIVER


def test_admin_round_trip_over_wsgi(app):
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = TOKEN
    headers = request_headers(WsaVersion.WSA10, BASE + "/admin", contracts.action_for("CreateTopic"))
    data = build_envelope(SoapVersion.SOAP12, contracts.render(contracts.CreateTopic(Name="w/t")),
                          headers + [token])
    response = Response(app, environ(path="/admin", body=data, content_type="application/soap+xml"))
    assert response.status == 200
    created = contracts.parse_response(response.envelope().body)
    assert created.Address == BASE + "/topics/w/t"


# --- a body the HTTP server cannot read --------------------------------------------------

class InvalidChunkSize(Exception):
    """Stands in for gunicorn.http.errors.InvalidChunkSize (the edge must not care which)."""


class BrokenChunkedStream:
    def __init__(self, error):
        self.error = error

    def read(self, n=-1):
        raise self.error


@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12])
@pytest.mark.parametrize("error", [InvalidChunkSize("Invalid chunk size: 'zz'"),
                                   OSError("connection reset"), ValueError("bad length")],
                         ids=["chunk-size", "os-error", "value-error"])
def test_a_body_that_cannot_be_read_is_a_sender_fault_with_400(app, soap, error):
    response = Response(app, environ(stream=BrokenChunkedStream(error), length=None,
                                     content_type=soap.content_type,
                                     HTTP_TRANSFER_ENCODING="chunked"))
    assert response.status == 400  # never 500, in SOAP 1.1 too: SOAP processing never began
    assert response.content_type.startswith(soap.content_type)
    assert response.headers["Connection"] == "close"
    fault = response.envelope().fault()
    assert fault.code == SENDER
    assert type(error).__name__ in fault.reason


def test_a_body_that_breaks_while_draining_is_a_sender_fault(app):
    class BreaksLater(ZeroStream):
        def read(self, n=-1):
            if self.reads:
                raise InvalidChunkSize("bad chunk")
            return super().read(n)
    response = Response(app, environ(stream=BreaksLater(LIMIT * 2), length=None,
                                     content_type="application/soap+xml"))
    assert response.status == 400 and response.envelope().fault().code == SENDER


# --- plain HTTP routes (wsframework.http_routes) -------------------------------------------

def test_a_route_answers_its_prefix_and_below_but_not_a_lookalike(app, service):
    from wsframework.http_routes import text
    seen = []
    service.http_routes.add("/console", lambda request: seen.append(request) or
                            text(200, f"page {request.path}"), methods=("GET", "POST"))
    assert Response(app, environ("GET", "/console")).body == b"page /console"
    assert Response(app, environ("GET", "/console/app.js")).body == b"page /console/app.js"
    assert Response(app, environ("GET", "/consoles")).status == 404   # not a child of /console
    got = Response(app, environ("POST", "/console/login", body=b"user=x",
                                HTTP_COOKIE="session=abc", content_type="application/x-www-form-urlencoded"))
    assert got.status == 200
    request = seen[-1]
    assert (request.body, request.headers["cookie"], request.headers["content-type"]) == (
        b"user=x", "session=abc", "application/x-www-form-urlencoded")
    assert Response(app, environ("HEAD", "/console")).body == b""


def test_a_route_refuses_other_methods_large_bodies_and_hides_its_errors(app, service):
    from wsframework.http_routes import MAX_ROUTE_BODY, text
    service.http_routes.add("/metrics", lambda request: text(200, "ok"))
    assert Response(app, environ("POST", "/metrics", body=b"x")).status == 405
    service.http_routes.add("/form", lambda request: text(200, "ok"), methods=("POST",))
    stream = ZeroStream(MAX_ROUTE_BODY + 1)
    big = Response(app, environ("POST", "/form", stream=stream, length=str(MAX_ROUTE_BODY + 1)))
    assert big.status == 413 and stream.total == 0   # refused without reading it
    assert Response(app, environ("POST", "/form", length="nonsense")).status == 413

    def broken(request):
        raise RuntimeError("secret detail")
    service.http_routes.add("/broken", broken)
    failed = Response(app, environ("GET", "/broken"))
    assert failed.status == 500 and b"secret" not in failed.body


def test_route_prefixes_are_checked_and_unique(service):
    from wsframework.http_routes import text
    for bad in ("console", "/console/"):
        with pytest.raises(ValueError):
            service.http_routes.add(bad, lambda request: text(200, ""))
    service.http_routes.add("/a", lambda request: text(200, ""))
    with pytest.raises(ValueError):
        service.http_routes.add("/a", lambda request: text(200, ""))
