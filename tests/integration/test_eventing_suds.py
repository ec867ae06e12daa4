"""suds (suds-community) against a real ``edn serve source``, on the 2011 WSDL served at
``{topic}?wsdl`` and ``/subscriptions?wsdl``, as a suds user would drive it.

suds knows no WS-Addressing: like its users, the test adds the headers with a
:class:`suds.plugin.MessagePlugin` (Action from the body element, MessageID, To) and echoes
the subscription manager's reference parameters, which it copies from the raw
SubscribeResponse (suds decodes them to values, losing their element names). suds binds the
SOAP 1.1 ports.
"""
from __future__ import annotations

import copy
import uuid

import pytest
from lxml import etree

suds_client = pytest.importorskip("suds.client")

from suds import WebFault  # noqa: E402
from suds.plugin import MessagePlugin  # noqa: E402

from tests.support.processes import ServerProcess  # noqa: E402
from wsframework import ns  # noqa: E402
from wsframework.admin import AdminClient  # noqa: E402
from wsframework.publisher import publish  # noqa: E402

Q = "urn:quotes"
WSE = ns.WSE2011
WSA = ns.WSA10


class WsAddressing(MessagePlugin):
    """WS-Addressing 1.0 headers for suds; ``to`` and ``reference_parameters`` are set per
    target (the event source, then the subscription manager)."""

    def __init__(self):
        self.to: str | None = None
        self.reference_parameters: list[etree._Element] = []
        self.last_reply: bytes | None = None

    def sending(self, context):
        envelope = etree.fromstring(context.envelope)
        soap = etree.QName(envelope).namespace
        header = envelope.find(f"{{{soap}}}Header")
        if header is None:
            header = etree.Element(f"{{{soap}}}Header")
            envelope.insert(0, header)
        body = envelope.find(f"{{{soap}}}Body")[0]
        request = etree.QName(body)
        for name, value in (("Action", f"{request.namespace}/{request.localname}"),
                            ("MessageID", uuid.uuid4().urn), ("To", self.to)):
            etree.SubElement(header, f"{{{WSA}}}{name}").text = value
        for parameter in self.reference_parameters:
            block = copy.deepcopy(parameter)
            block.set(f"{{{WSA}}}IsReferenceParameter", "true")
            header.append(block)
        context.envelope = etree.tostring(envelope)

    def received(self, context):
        self.last_reply = context.reply

    def manager_from_last_reply(self) -> tuple[str, list[etree._Element]]:
        manager = etree.fromstring(self.last_reply).find(f".//{{{WSE}}}SubscriptionManager")
        parameters = manager.find(f"{{{WSA}}}ReferenceParameters")
        return (manager.findtext(f"{{{WSA}}}Address"),
                [copy.deepcopy(p) for p in parameters] if parameters is not None else [])


@pytest.fixture
def source(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source") as server:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        yield server


def quote(price):
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')


def test_suds_subscribes_manages_and_the_sink_is_notified(source, sink):
    addressing = WsAddressing()
    topic = source.base_url + "/topics/stocks"
    event_source = suds_client.Client(topic + "?wsdl", plugins=[addressing],
                                      port="EventSourceSoap11Port")
    notify_to = event_source.factory.create(f"{{{WSA}}}EndpointReferenceType")
    notify_to.Address = sink.url + "/suds"
    end_to = event_source.factory.create(f"{{{WSA}}}EndpointReferenceType")
    end_to.Address = sink.url + "/suds-end"
    delivery = event_source.factory.create(f"{{{WSE}}}DeliveryType")
    delivery.NotifyTo = notify_to
    addressing.to = topic
    reply = event_source.service.SubscribeOp(
        EndTo=end_to, Delivery=delivery, Expires="PT1H",
        Filter="//*[local-name() = 'price' and . > 30]")
    assert reply.GrantedExpires == "PT1H"
    assert reply.SubscriptionManager.Address == source.base_url + "/subscriptions"
    manager_address, parameters = addressing.manager_from_last_reply()
    assert parameters

    publish(source.base_url, "stocks", quote(10))
    publish(source.base_url, "stocks", quote(40))
    [message] = sink.wait_for(1, path="/suds")
    assert message.envelope.body.find(f"{{{Q}}}price").text == "40"

    manager = suds_client.Client(manager_address + "?wsdl", plugins=[addressing],
                                 port="SubscriptionManagerSoap11Port")
    addressing.to, addressing.reference_parameters = manager_address, parameters
    assert manager.service.RenewOp(Expires="PT2H").GrantedExpires == "PT2H"
    assert manager.service.GetStatusOp().GrantedExpires.startswith("PT")
    manager.service.UnsubscribeOp()
    with pytest.raises(WebFault) as info:
        manager.service.GetStatusOp()
    assert "UnknownSubscription" in str(info.value.fault.faultcode)


def test_suds_hears_a_fault_it_can_read(source):
    addressing = WsAddressing()
    topic = source.base_url + "/topics/stocks"
    event_source = suds_client.Client(topic + "?wsdl", plugins=[addressing],
                                      port="EventSourceSoap11Port")
    notify_to = event_source.factory.create(f"{{{WSA}}}EndpointReferenceType")
    notify_to.Address = "http://127.0.0.1:9/notify"
    delivery = event_source.factory.create(f"{{{WSE}}}DeliveryType")
    delivery.NotifyTo = notify_to
    addressing.to = topic
    with pytest.raises(WebFault) as info:
        event_source.service.SubscribeOp(Delivery=delivery, Expires="not-a-duration")
    assert "UnsupportedExpirationValue" in str(info.value.fault.faultcode)
