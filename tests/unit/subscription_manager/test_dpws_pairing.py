"""WS-Eventing 2004/08 with WS-Addressing 1.0 (the DPWS 1.1 pairing) next to the two pure
pairings: each subscription is answered, notified and ended in the addressing version it was
made in; a 2004/08 request without addressing gets 2004/08 addressing around its fault; the
reference parameters of an anonymous ReplyTo come back as reply headers. In process."""
from __future__ import annotations

import pytest
from lxml import etree

from subscription_manager.client import subscribe_body
from subscription_manager.versions import V2004, V2004_WSA10, V2011, VERSIONS, check_pairing
from tests.support.eventing import BASE, SINK, Harness, quote
from wsframework import ns
from wsframework.addressing import AddressingHeaders, EndpointReference, WsaVersion, request_headers
from wsframework.exceptions import SENDER, SoapFault
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

WSA10, WSA2004 = WsaVersion.WSA10, WsaVersion.WSA2004
IS_REF = ns.qname(ns.WSA10, "IsReferenceParameter")


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, settings={"max_expires": "P1D"})
    yield h
    h.close()


def post(harness, path, action, body, wsa, *, to=None, reply_to=None, soap=SoapVersion.SOAP12):
    headers = request_headers(wsa, to or BASE + path, action, reply_to=reply_to)
    response = harness.post(path, build_envelope(soap, body, headers), soap)
    return response, parse_envelope(response.body) if response.body else None


def addressing_of(envelope) -> AddressingHeaders:
    return AddressingHeaders.parse(envelope.headers)


# == the pairings =============================================================================

def test_check_pairing_picks_the_pairing_of_the_request():
    assert check_pairing(V2004, WSA2004) is V2004
    assert check_pairing(V2004, WSA10) is V2004_WSA10
    assert check_pairing(V2004_WSA10, WSA2004) is V2004
    assert check_pairing(V2011, WSA10) is V2011
    with pytest.raises(SoapFault) as info:
        check_pairing(V2011, WSA2004)
    assert info.value.subcode == WSA2004.invalid_header_fault
    assert VERSIONS["2004-wsa10"] is V2004_WSA10
    assert (V2004_WSA10.family, V2004_WSA10.wsa, V2004_WSA10.is_2004) == ("2004", WSA10, True)


def test_dpws_pairing_lifecycle(harness):
    client = harness.client("2004-wsa10")
    sub = client.subscribe(f"{BASE}/topics/stocks", SINK + "/notify", expires="PT1H")
    # identified by its own manager address: no wse:Identifier to echo
    assert sub.manager.address == f"{BASE}/subscriptions/{sub.id}"
    assert sub.manager.reference_parameters == () and len(sub.id) >= 32
    stored = harness.manager.store.get(sub.id)
    assert stored.version is V2004_WSA10
    assert sub.expires == "PT1H"
    assert client.get_status(sub).startswith("PT")
    assert client.renew(sub, "PT2H") == "PT2H"
    client.unsubscribe(sub)
    with pytest.raises(SoapFault) as info:
        client.get_status(sub)
    assert info.value.subcode == V2004.q("InvalidMessage")
    with pytest.raises(SoapFault) as info:
        client.renew(sub, "PT1H")
    assert info.value.subcode == V2004.q("UnableToRenew")


def test_dpws_replies_are_in_wsa10_with_2004_bodies(harness):
    body = subscribe_body(V2004_WSA10, SINK + "/n", expires="PT1H")
    response, reply = post(harness, "/topics/stocks", V2004.action("Subscribe"), body, WSA10)
    assert response.status == 200
    headers = addressing_of(reply)
    assert headers.version is WSA10 and headers.action == V2004.action("SubscribeResponse")
    manager_element = reply.body.find(V2004.q("SubscriptionManager"))
    assert manager_element.find(WSA10.q("Address")) is not None
    manager = EndpointReference.from_element(manager_element, WSA10)
    for operation, answer in (("GetStatus", "GetStatusResponse"), ("Renew", "RenewResponse"),
                              ("Unsubscribe", "UnsubscribeResponse")):
        op = etree.Element(V2004.q(operation), nsmap={"wse": V2004.namespace})
        path = manager.address[len(BASE):]
        response, reply = post(harness, path, V2004.action(operation), op, WSA10,
                               to=manager.address)
        assert response.status == 200, reply
        assert addressing_of(reply).version is WSA10
        assert addressing_of(reply).action == V2004.action(answer)


def test_identifier_header_without_marker_also_identifies(harness):
    """A DPWS client that keeps wse:Identifier (without IsReferenceParameter) is understood."""
    sub = harness.client("2004-wsa10").subscribe(f"{BASE}/topics/stocks", SINK + "/n",
                                                 expires="PT1H")
    identifier = etree.Element(V2004.identifier_tag, nsmap={"wse": V2004.namespace})
    identifier.text = f"urn:uuid:{sub.id}"
    headers = request_headers(WSA10, BASE + "/subscriptions", V2004.action("GetStatus")) + [identifier]
    op = etree.Element(V2004.q("GetStatus"), nsmap={"wse": V2004.namespace})
    response = harness.post("/subscriptions", build_envelope(SoapVersion.SOAP12, op, headers))
    reply = parse_envelope(response.body)
    assert not reply.is_fault and reply.body.tag == V2004.q("GetStatusResponse")


@pytest.mark.parametrize("path", ["/subscriptions/not-a-subscription", "/subscriptions/a/b",
                                  "/subscriptions/" + "x" * 65])
def test_unknown_per_subscription_address(harness, path):
    op = etree.Element(V2004.q("GetStatus"), nsmap={"wse": V2004.namespace})
    response, reply = post(harness, path, V2004.action("GetStatus"), op, WSA10)
    assert reply.fault().subcode == V2004.q("InvalidMessage")
    assert addressing_of(reply).version is WSA10


@pytest.mark.parametrize("name, wsa", [("2004", WSA2004), ("2004-wsa10", WSA10), ("2011", WSA10)])
def test_notifications_and_subscription_end_use_the_subscriptions_addressing(harness, name, wsa):
    ctx = etree.Element("{urn:sink}Ctx", nsmap={"s": "urn:sink"})
    ctx.text = "mine"
    sub = harness.client(name).subscribe(
        f"{BASE}/topics/stocks", EndpointReference(SINK + "/notify", (ctx,)),
        end_to=SINK + "/end", expires="PT1H")
    harness.publish(quote(42))
    harness.drain()
    notification, = harness.sink.envelopes("/notify")
    headers = addressing_of(notification)
    assert headers.version is wsa and headers.to == SINK + "/notify"
    block = notification.header("{urn:sink}Ctx")
    assert block.text == "mine"
    assert block.get(IS_REF) == ("true" if wsa is WSA10 else None)
    harness.admin.delete_topic("stocks")
    harness.drain()
    end, = harness.sink.envelopes("/end")
    assert addressing_of(end).version is wsa
    assert addressing_of(end).action == VERSIONS[name].action("SubscriptionEnd")
    if VERSIONS[name].is_2004:
        manager = EndpointReference.from_element(
            end.body.find(V2004.q("SubscriptionManager")), wsa)
        assert manager == sub.manager


def test_the_pairing_survives_a_restart(tmp_path):
    first = Harness(tmp_path)
    sub = first.client("2004-wsa10").subscribe(f"{BASE}/topics/stocks", SINK + "/n",
                                               expires="PT1H")
    # No close(): the process "dies" here, as with kill -9.
    second = Harness(tmp_path)
    try:
        assert second.manager.store.get(sub.id).version is V2004_WSA10
        assert second.client("2004-wsa10").renew(sub, "PT2H") == "PT2H"
        second.publish(quote(1))
        second.drain()
        assert addressing_of(second.sink.envelopes("/n")[0]).version is WSA10
    finally:
        second.close()
        first.close()


# == faults of requests without addressing ===================================================

@pytest.mark.parametrize("version, wsa", [(V2004, WSA2004), (V2011, WSA10)])
def test_unaddressed_request_gets_a_fault_in_its_versions_addressing(harness, version, wsa):
    body = subscribe_body(version, SINK + "/n", expires="PT1H")
    response = harness.post("/topics/stocks", build_envelope(SoapVersion.SOAP12, body),
                            action=version.action("Subscribe"))
    reply = parse_envelope(response.body)
    fault = reply.fault()
    assert (fault.code, fault.subcode) == (SENDER, wsa.header_required_fault)
    headers = addressing_of(reply)
    assert headers.version is wsa and headers.action == wsa.fault_action
    assert harness.manager.store.count() == 0


# == reference parameters of an anonymous ReplyTo (WSA 1.0 Core 3.4) ==========================

@pytest.mark.parametrize("name", ["2004", "2004-wsa10", "2011"])
def test_anonymous_reply_to_parameters_come_back_on_replies_and_faults(harness, name):
    version = VERSIONS[name]
    ctx = etree.Element("{urn:client}MySubscription", nsmap={"c": "urn:client"})
    ctx.text = "ctx-1"
    reply_to = EndpointReference(version.wsa.anonymous, (ctx,))
    body = subscribe_body(version, SINK + "/n", expires="PT1H")
    _, reply = post(harness, "/topics/stocks", version.action("Subscribe"), body, version.wsa,
                    reply_to=reply_to)
    assert not reply.is_fault
    block = reply.header("{urn:client}MySubscription")
    assert block.text == "ctx-1"
    assert block.get(IS_REF) == ("true" if version.wsa is WSA10 else None)
    bad = subscribe_body(version, SINK + "/n", expires="nonsense")
    _, reply = post(harness, "/topics/stocks", version.action("Subscribe"), bad, version.wsa,
                    reply_to=reply_to)
    assert reply.is_fault
    assert reply.header("{urn:client}MySubscription").text == "ctx-1"


def test_dpws_subscribe_reads_a_2004_08_notify_to(harness):
    """The 2004/08 WSDL types NotifyTo as a WSA 2004/08 EPR; a client sending WSA 1.0 headers
    with it (zeep's WsAddressingPlugin) is understood. Reference properties become reference
    parameters, marked in the notifications."""
    a = WSA2004.namespace
    body = etree.fromstring(f"""
        <wse:Subscribe xmlns:wse="{V2004.namespace}" xmlns:wsa="{a}" xmlns:s="urn:sink">
          <wse:Delivery><wse:NotifyTo><wsa:Address>{SINK}/legacy</wsa:Address>
            <wsa:ReferenceProperties><s:Prop>p</s:Prop></wsa:ReferenceProperties>
            <wsa:ReferenceParameters><s:Param>q</s:Param></wsa:ReferenceParameters>
          </wse:NotifyTo></wse:Delivery>
          <wse:Expires>PT1H</wse:Expires>
        </wse:Subscribe>""")
    _, reply = post(harness, "/topics/stocks", V2004.action("Subscribe"), body, WSA10)
    assert not reply.is_fault
    harness.publish(quote(1))
    harness.drain()
    notification, = harness.sink.envelopes("/legacy")
    assert addressing_of(notification).version is WSA10
    for tag, value in (("{urn:sink}Prop", "p"), ("{urn:sink}Param", "q")):
        block = notification.header(tag)
        assert block.text == value and block.get(IS_REF) == "true"


def test_a_notify_to_without_any_address_is_still_refused(harness):
    body = etree.fromstring(f"""
        <wse:Subscribe xmlns:wse="{V2004.namespace}" xmlns:wsa="{WSA10.namespace}">
          <wse:Delivery><wse:NotifyTo><wsa:ReferenceParameters/></wse:NotifyTo></wse:Delivery>
        </wse:Subscribe>""")
    _, reply = post(harness, "/topics/stocks", V2004.action("Subscribe"), body, WSA10)
    assert reply.fault().subcode == V2004.q("InvalidMessage")
