"""One conformance suite for every client transport (``wsframework.transport``); this module
holds no tests.

A transport promises (``Transport`` in :mod:`wsframework.transport.base`): ``post(url,
payload, content_type, soap_action=None)`` answers a :class:`TransportResponse` (status,
content type, body) whatever the status; a peer that cannot be reached is a
:class:`TransportError`; the SOAP action travels as the peer's HTTP edge expects it
(SOAPAction for SOAP 1.1, the content type's ``action`` parameter for SOAP 1.2); ``close()``
may be called twice. A transport with a read timeout (``HttpTransport``) honours it.

Every check is a function of a :class:`TransportSetup`: the transport, the base URL at which
an :class:`EchoEndpoint` is reachable through it, a URL nobody answers, and optionally a
factory for the same transport with a short read timeout and a peer that breaks off
mid-answer (checks that need what a setup lacks are skipped). ``tests/unit/wsframework/
test_transport_conformance.py`` runs them over the in-process transport (no sockets),
``tests/integration/test_transport_http.py`` over HTTP against a real server on loopback.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import pytest

from wsframework.messaging import Outcome
from wsframework.soap import SoapVersion
from wsframework.transport import TransportError
from wsframework.xmlparse import ParserLimits

SOAP11 = SoapVersion.SOAP11.content_type
SOAP12 = SoapVersion.SOAP12.content_type
ENVELOPE = (b'<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope">'
            b"<env:Body/></env:Envelope>")
SLOW_SECONDS = 1.5


@dataclass(frozen=True)
class Arrival:
    """What the endpoint saw of one request."""

    path: str
    content_type: str | None
    soap_action: str | None
    body: bytes


class EchoEndpoint:
    """A service-shaped endpoint (``handle_request``, ``config.limits``), mounted in process
    or served over HTTP by the WSGI edge. By path: ``/oneway`` answers 202, ``/fail`` 500
    with a body, ``/slow`` answers after :data:`SLOW_SECONDS`, ``/boom`` raises; anything
    else echoes the request body with 200."""

    def __init__(self):
        self.config = SimpleNamespace(limits=ParserLimits(max_bytes=8 * 1024 * 1024),
                                      role="conformance")
        self.arrivals: list[Arrival] = []
        self._lock = threading.Lock()

    def handle_request(self, data: bytes, *, path: str = "/", content_type: str | None = None,
                       soap_action: str | None = None, remote_addr: str | None = None,
                       peer_principal: str | None = None, authorization: str | None = None) -> Outcome:
        with self._lock:
            self.arrivals.append(Arrival(path, content_type, soap_action, data))
        if path == "/oneway":
            return Outcome.accepted()
        if path == "/fail":
            return Outcome(500, SOAP12, b"<failed/>")
        if path == "/slow":
            time.sleep(SLOW_SECONDS)
        if path == "/boom":
            raise RuntimeError("the endpoint broke")
        return Outcome(200, SOAP12, b"echo:" + data)

    def wsdl_for(self, path, query=None):
        return None

    def last(self) -> Arrival:
        with self._lock:
            return self.arrivals[-1]


@dataclass
class TransportSetup:
    transport: object
    base_url: str
    unreachable_url: str
    endpoint: EchoEndpoint
    # The same kind of transport with a short read timeout, when the kind promises one.
    with_read_timeout: Callable[[float], object] | None = None
    # A peer that answers the headers and part of the body, then stalls (``/stall``) or
    # closes the connection (``/cut``): only a transport over a network can meet one.
    broken_peer_url: str | None = None


# -- the checks --------------------------------------------------------------------------------

def check_post_returns_status_content_type_and_body(t: TransportSetup) -> None:
    response = t.transport.post(t.base_url + "/echo", ENVELOPE, SOAP12, "urn:echo")
    assert response.status == 200
    assert response.content_type == SOAP12
    assert response.body == b"echo:" + ENVELOPE
    assert t.endpoint.last().body == ENVELOPE


def check_one_way_is_202_without_body(t: TransportSetup) -> None:
    response = t.transport.post(t.base_url + "/oneway", ENVELOPE, SOAP12, "urn:note")
    assert (response.status, response.content_type, response.body) == (202, None, b"")


def check_error_status_is_a_response_not_an_exception(t: TransportSetup) -> None:
    response = t.transport.post(t.base_url + "/fail", ENVELOPE, SOAP12, "urn:x")
    assert (response.status, response.content_type, response.body) == (500, SOAP12, b"<failed/>")


def check_endpoint_failure_is_a_receiver_fault(t: TransportSetup) -> None:
    """An endpoint that raises is answered by its edge (a Receiver fault), not re-raised in
    the caller: over HTTP there is no other way to hear about it."""
    response = t.transport.post(t.base_url + "/boom", ENVELOPE, SOAP12, "urn:x")
    assert response.status == 500
    assert response.content_type == SOAP12
    assert b"Receiver" in response.body and b"the endpoint broke" not in response.body


def check_unreachable_peer_is_a_transport_error(t: TransportSetup) -> None:
    with pytest.raises(TransportError) as caught:
        t.transport.post(t.unreachable_url + "/echo", ENVELOPE, SOAP12, "urn:x")
    assert caught.value.unsent  # never connected: a client may send it elsewhere safely


def check_soap11_action_arrives_as_soapaction(t: TransportSetup) -> None:
    t.transport.post(t.base_url + "/echo", ENVELOPE, SOAP11, "urn:act")
    arrival = t.endpoint.last()
    assert arrival.content_type == "text/xml; charset=utf-8"
    assert arrival.soap_action == '"urn:act"'
    t.transport.post(t.base_url + "/echo", ENVELOPE, SOAP11)
    assert t.endpoint.last().soap_action == '""'


def check_soap12_action_arrives_in_the_content_type(t: TransportSetup) -> None:
    t.transport.post(t.base_url + "/echo", ENVELOPE, SOAP12, "urn:act")
    arrival = t.endpoint.last()
    assert arrival.content_type == 'application/soap+xml; charset=utf-8; action="urn:act"'
    assert arrival.soap_action is None
    t.transport.post(t.base_url + "/echo", ENVELOPE, SOAP12)
    assert t.endpoint.last().content_type == "application/soap+xml; charset=utf-8"


def check_the_path_arrives_decoded_without_the_query(t: TransportSetup) -> None:
    t.transport.post(t.base_url + "/topics/a%20b/c?x=1", ENVELOPE, SOAP12, "urn:x")
    assert t.endpoint.last().path == "/topics/a b/c"
    t.transport.post(t.base_url, ENVELOPE, SOAP12, "urn:x")
    assert t.endpoint.last().path == "/"


def check_large_bodies_arrive_intact(t: TransportSetup) -> None:
    payload = ENVELOPE.replace(b"<env:Body/>", b"<env:Body>" + b"x" * 2_000_000 + b"</env:Body>")
    response = t.transport.post(t.base_url + "/echo", payload, SOAP12, "urn:x")
    assert response.body == b"echo:" + payload


def check_concurrent_posts_get_their_own_answers(t: TransportSetup) -> None:
    answers: dict[int, bytes] = {}

    def post(i: int) -> None:
        body = ENVELOPE.replace(b"<env:Body/>", b"<env:Body>%d</env:Body>" % i)
        answers[i] = (body, t.transport.post(t.base_url + "/echo", body, SOAP12, "urn:x").body)
    threads = [threading.Thread(target=post, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(answers) == list(range(8))
    assert all(answer == b"echo:" + sent for sent, answer in answers.values())


def check_read_timeout_is_honoured(t: TransportSetup) -> None:
    if t.with_read_timeout is None:
        pytest.skip("this transport promises no timeout")
    transport = t.with_read_timeout(0.2)
    try:
        started = time.monotonic()
        with pytest.raises(TransportError):
            transport.post(t.base_url + "/slow", ENVELOPE, SOAP12, "urn:x")
        assert time.monotonic() - started < SLOW_SECONDS
    finally:
        transport.close()


def check_a_peer_stalling_mid_answer_is_a_transport_error(t: TransportSetup) -> None:
    if t.with_read_timeout is None or t.broken_peer_url is None:
        pytest.skip("this transport promises no timeout")
    transport = t.with_read_timeout(0.2)
    try:
        started = time.monotonic()
        with pytest.raises(TransportError):
            transport.post(t.broken_peer_url + "/stall", ENVELOPE, SOAP12, "urn:x")
        assert time.monotonic() - started < SLOW_SECONDS
    finally:
        transport.close()


def check_a_peer_breaking_off_mid_answer_is_a_transport_error(t: TransportSetup) -> None:
    if t.broken_peer_url is None:
        pytest.skip("no peer of this transport can break off mid-answer")
    with pytest.raises(TransportError):
        t.transport.post(t.broken_peer_url + "/cut", ENVELOPE, SOAP12, "urn:x")


def check_close_twice(t: TransportSetup) -> None:
    t.transport.close()
    t.transport.close()


CHECKS = [
    check_post_returns_status_content_type_and_body,
    check_one_way_is_202_without_body,
    check_error_status_is_a_response_not_an_exception,
    check_endpoint_failure_is_a_receiver_fault,
    check_unreachable_peer_is_a_transport_error,
    check_soap11_action_arrives_as_soapaction,
    check_soap12_action_arrives_in_the_content_type,
    check_the_path_arrives_decoded_without_the_query,
    check_large_bodies_arrive_intact,
    check_concurrent_posts_get_their_own_answers,
    check_read_timeout_is_honoured,
    check_a_peer_stalling_mid_answer_is_a_transport_error,
    check_a_peer_breaking_off_mid_answer_is_a_transport_error,
    check_close_twice,
]
