"""Publication and the notifications it sends, both versions, in process (no sockets)."""
from __future__ import annotations

import pytest
from lxml import etree

from subscription_manager.versions import V2004, V2011
from tests.support.eventing import BASE, SINK, Harness, quote
from wsframework import ns
from wsframework.addressing import EndpointReference, WsaVersion, request_headers
from wsframework.exceptions import SENDER
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

VERSIONS = {"2004": V2004, "2011": V2011}
Q = "urn:quotes"


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


def test_publication_is_accepted_without_body_and_matched(harness):
    harness.subscribe("2011", filter="/q:quote[q:price > 30]", namespaces={"q": "urn:quotes"})
    cheap = harness.publish(quote(10))
    dear = harness.publish(quote(42))
    assert (cheap.status, cheap.body) == (202, b"")
    assert (dear.status, dear.body) == (202, b"")
    harness.drain()
    [notification] = harness.sink.envelopes("/notify")
    assert notification.body.find("{urn:quotes}price").text == "42"


def test_notification_action_is_the_publishers_or_the_topic_default(harness):
    harness.subscribe("2011")
    harness.publish(quote(1))  # PUBLISH_ACTION -> topic default
    harness.publish(quote(2), action="urn:example:QuoteChanged")
    harness.drain()
    actions = sorted(e.header(ns.qname(ns.WSA10, "Action")).text for e in harness.sink.envelopes())
    assert actions == [BASE + "/topics/stocks/Event", "urn:example:QuoteChanged"]


def test_plain_soap_publication_without_addressing(harness):
    harness.subscribe("2004")
    response = harness.post("/topics/stocks", build_envelope(SoapVersion.SOAP11,
                                                             etree.fromstring(quote(5))),
                            SoapVersion.SOAP11)
    assert response.status == 202
    harness.drain()
    [notification] = harness.sink.envelopes()
    assert notification.header(ns.qname(ns.WSA2004, "Action")).text == BASE + "/topics/stocks/Event"


def test_empty_publication_is_a_sender_fault(harness):
    headers = request_headers(WsaVersion.WSA10, BASE + "/topics/stocks", "urn:x")
    response = harness.post("/topics/stocks", build_envelope(SoapVersion.SOAP12, None, headers))
    assert parse_envelope(response.body).fault().code == SENDER


@pytest.mark.parametrize("name,soap", [("2004", SoapVersion.SOAP11), ("2004", SoapVersion.SOAP12),
                                       ("2011", SoapVersion.SOAP11), ("2011", SoapVersion.SOAP12)])
def test_notification_speaks_the_subscriptions_versions(harness, name, soap):
    version = VERSIONS[name]
    param = etree.Element("{urn:app}Key", nsmap={"app": "urn:app"})
    param.text = "k-42"
    harness.client(name, soap).subscribe(f"{BASE}/topics/stocks",
                                         EndpointReference(SINK + "/notify", (param,)))
    harness.publish(quote(3), soap=SoapVersion.SOAP12 if soap is SoapVersion.SOAP11 else SoapVersion.SOAP11)
    harness.drain()
    [(url, payload, content_type, _)] = harness.sink.messages
    envelope = parse_envelope(payload)
    assert envelope.version is soap
    assert content_type.startswith(soap.content_type)
    assert envelope.header(version.wsa.q("To")).text == SINK + "/notify"
    assert envelope.header(version.wsa.q("MessageID")).text.startswith("urn:uuid:")
    key = envelope.header("{urn:app}Key")
    assert key is not None and key.text == "k-42"
    marked = key.get(ns.qname(ns.WSA10, "IsReferenceParameter"))
    assert marked == ("true" if version is V2011 else None)
    assert envelope.body.tag == "{urn:quotes}quote"


def test_2004_reference_properties_are_copied_too(harness):
    prop = etree.Element("{urn:app}Prop")
    prop.text = "p"
    harness.client("2004").subscribe(f"{BASE}/topics/stocks",
                                     EndpointReference(SINK + "/notify", (), (prop,)))
    harness.publish(quote(3))
    harness.drain()
    [envelope] = harness.sink.envelopes()
    assert envelope.header("{urn:app}Prop").text == "p"


def test_wrap_format(harness):
    harness.subscribe("2011", format=ns.WSE2011_FORMAT_WRAP)
    harness.subscribe("2011", format=ns.WSE2011_FORMAT_UNWRAP, notify_path="/plain")
    harness.publish(quote(7), action="urn:example:Quote")
    harness.drain()
    [wrapped] = harness.sink.envelopes("/notify")
    assert wrapped.header(ns.qname(ns.WSA10, "Action")).text == ns.WSE2011_NOTIFY_ACTION
    assert wrapped.body.tag == ns.qname(ns.WSE2011, "Notify")
    assert wrapped.body.get("actionURI") == "urn:example:Quote"
    assert wrapped.body[0].tag == "{urn:quotes}quote"
    [plain] = harness.sink.envelopes("/plain")
    assert plain.header(ns.qname(ns.WSA10, "Action")).text == "urn:example:Quote"
    assert plain.body.tag == "{urn:quotes}quote"


def test_filters_of_every_dialect(harness):
    harness.subscribe("2011", notify_path="/x1", filter="/q:quote[q:price > 30]",
                      namespaces={"q": Q})
    # 2004/08: the context node is the notification's envelope (see test_hostile_filters)
    harness.subscribe("2004", notify_path="/x1-2004", filter="/env:Envelope/env:Body/q:quote/q:price > 30",
                      namespaces={"q": Q, "env": ns.SOAP12})
    harness.subscribe("2011", notify_path="/x2", dialect=ns.XPATH20_DIALECT_2011,
                      filter="xs:decimal(/q:quote/q:price) gt 30", namespaces={"q": Q,
                      "xs": "http://www.w3.org/2001/XMLSchema"})
    harness.subscribe("2011", notify_path="/action", dialect=ns.ACTION_DIALECT_DPWS11,
                      filter="urn:example:quotes")
    harness.subscribe("2011", notify_path="/all")
    harness.publish(quote(42), action="urn:example:quotes/changed")
    harness.publish(quote(10), action="urn:example:other")
    harness.drain()
    counts = {path: len(harness.sink.at(path)) for path in ("/x1", "/x1-2004", "/x2", "/action", "/all")}
    assert counts == {"/x1": 1, "/x1-2004": 1, "/x2": 1, "/action": 1, "/all": 2}


def test_subscription_without_filter_does_not_enter_the_matcher(harness):
    harness.subscribe("2011")
    assert len(harness.service.topics.get("stocks").matcher) == 0
    harness.subscribe("2011", filter="true()")
    assert len(harness.service.topics.get("stocks").matcher) == 1


def test_counters(harness):
    harness.subscribe("2011")
    harness.subscribe("2004")
    harness.publish(quote(1))
    harness.drain()
    counters = harness.manager.counters
    assert counters["queued"] == 2 and counters["delivered"] == 2
    assert counters["subscriptions"] == 2 and counters["published"] == 1
    assert counters["dropped"] == counters["failed"] == counters["retries"] == 0
