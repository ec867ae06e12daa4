"""A stock SOAP client (zeep) against a real ``edn serve source``: the WSDL is fetched from
``?wsdl``, zeep subscribes, the sink receives notifications, and the subscription is
managed through the returned EPR.

zeep adds WS-Addressing 1.0 headers by itself when the WSDL names ``wsam:Action`` (2011);
for 2004/08 and for reference parameters a small plugin adds what is missing.
"""
from __future__ import annotations

import copy
import uuid

import pytest
import requests
import zeep
from lxml import etree
from zeep.plugins import Plugin
from zeep.transports import Transport
from zeep.wsdl.utils import get_or_create_header

from tests.support.processes import ServerProcess
from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.publisher import publish

Q = "urn:quotes"


class EventingHeaders(Plugin):
    """What zeep does not do by itself for WS-Eventing:

    * WS-Addressing 2004/08 headers (zeep only knows 1.0);
    * echo the subscription manager's reference parameters on manager operations;
    * declare the prefixes a filter expression uses on ``wse:Filter`` (a text value cannot
      carry namespace declarations through zeep's object model).
    """

    def __init__(self, wsa_2004: bool, filter_namespaces: dict[str, str] | None = None):
        self.wsa_2004 = wsa_2004
        self.filter_namespaces = filter_namespaces or {}
        self.reference_parameters: list[etree._Element] = []

    def egress(self, envelope, http_headers, operation, binding_options):
        header = get_or_create_header(envelope)
        if self.wsa_2004:
            wsa = ns.WSA2004
            for name, value in (("Action", operation.soapaction),
                                ("MessageID", f"urn:uuid:{uuid.uuid4()}"),
                                ("To", binding_options["address"])):
                etree.SubElement(header, f"{{{wsa}}}{name}").text = value
            reply_to = etree.SubElement(header, f"{{{wsa}}}ReplyTo")
            etree.SubElement(reply_to, f"{{{wsa}}}Address").text = ns.WSA2004_ANONYMOUS
        if operation.name == "SubscribeOp":
            old = envelope.find("{*}Body/{*}Subscribe/{*}Filter")
            if old is not None and self.filter_namespaces:
                new = etree.Element(old.tag, attrib=dict(old.attrib),
                                    nsmap={**old.nsmap, **self.filter_namespaces})
                new.text = old.text
                old.getparent().replace(old, new)
        else:
            for parameter in self.reference_parameters:
                header.append(copy.deepcopy(parameter))
        return envelope, http_headers


def load(base_url: str, path: str, version: str, tmp_path, plugin) -> zeep.Client:
    response = requests.get(f"{base_url}{path}?wsdl&version={version}", timeout=5)
    assert response.status_code == 200
    document = tmp_path / f"{path.strip('/').replace('/', '-')}-{version}.wsdl"
    document.write_bytes(response.content)
    return zeep.Client(str(document), transport=Transport(timeout=10), plugins=[plugin])


@pytest.fixture
def source(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source") as server:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        yield server


def text(value):
    """zeep reads simple content with attributes (AttributedURI, MiniExpirationType) as an
    object whose ``_value_1`` is the text."""
    return getattr(value, "_value_1", value)


def as_element(parameter):
    """zeep hands back unknown reference parameters as elements, but decodes the 2004/08
    ``wse:Identifier`` (declared in the WSDL's schema, processContents lax) to its value."""
    if isinstance(parameter, etree._Element):
        return parameter
    element = etree.Element(ns.qname(ns.WSE2004, "Identifier"), nsmap={"wse": ns.WSE2004})
    element.text = str(parameter)
    return element


def granted(reply, version):
    return text(reply.GrantedExpires if version == "2011" else reply.Expires)


def quote(price):
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')


@pytest.mark.parametrize("port", ["Soap11", "Soap12"])
@pytest.mark.parametrize("version", ["2011", "2004"])
def test_zeep_subscribes_manages_and_the_sink_is_notified(source, sink, tmp_path, version, port):
    plugin = EventingHeaders(wsa_2004=version == "2004", filter_namespaces={"q": Q})
    event_source = load(source.base_url, "/topics/stocks", version, tmp_path, plugin)
    options = {"Delivery": {"NotifyTo": {"Address": sink.url + "/zeep"}}, "Expires": "PT1H",
               "Filter": {"_value_1": "//q:quote[q:price > 30]"}}
    if version == "2011":
        options["Format"] = {"Name": ns.WSE2011_FORMAT_UNWRAP}
    reply = event_source.bind("EventSource", f"EventSource{port}Port").SubscribeOp(**options)
    assert granted(reply, version) == "PT1H"
    manager = reply.SubscriptionManager
    assert text(manager.Address) == source.base_url + "/subscriptions"
    plugin.reference_parameters = [as_element(p) for p in manager.ReferenceParameters._value_1]

    publish(source.base_url, "stocks", quote(10))
    publish(source.base_url, "stocks", quote(40))
    [message] = sink.wait_for(1, path="/zeep")
    assert message.envelope.body.find(f"{{{Q}}}price").text == "40"

    manager_client = load(source.base_url, "/subscriptions", version, tmp_path, plugin)
    manage = manager_client.bind("SubscriptionManager", f"SubscriptionManager{port}Port")
    assert granted(manage.RenewOp(Expires="PT2H"), version) == "PT2H"
    assert granted(manage.GetStatusOp(), version).startswith("PT")
    manage.UnsubscribeOp()
    with pytest.raises(zeep.exceptions.Fault):
        manage.GetStatusOp()


@pytest.mark.parametrize("port", ["Soap11", "Soap12"])
def test_zeep_addressing_plugin_on_the_2004_wsdl(source, sink, tmp_path, port):
    """zeep's own WS-Addressing plugin (WSA 1.0 headers) on the 2004/08 WSDL: the DPWS
    pairing. The WSDL types body EPRs as WSA 2004/08 (NotifyTo is read either way); the
    answer's SubscriptionManager is a WSA 1.0 EPR (zeep hands it over as an element) whose
    address identifies the subscription, so nothing needs echoing."""
    from zeep.wsa import WsAddressingPlugin
    plugin = EventingHeaders(wsa_2004=False, filter_namespaces={"q": Q})
    event_source = load(source.base_url, "/topics/stocks", "2004", tmp_path, plugin)
    event_source.plugins.insert(0, WsAddressingPlugin())
    reply = event_source.bind("EventSource", f"EventSource{port}Port").SubscribeOp(
        Delivery={"NotifyTo": {"Address": sink.url + "/zeep-wsa"}}, Expires="PT1H",
        Filter={"_value_1": "//q:quote[q:price > 30]"})
    assert text(reply.Expires) == "PT1H"
    [address] = [e for e in reply.SubscriptionManager._value_1
                 if e.tag == ns.qname(ns.WSA10, "Address")]
    assert address.text.startswith(source.base_url + "/subscriptions/")

    publish(source.base_url, "stocks", quote(10))
    publish(source.base_url, "stocks", quote(40))
    [message] = sink.wait_for(1, path="/zeep-wsa")
    assert message.envelope.header(ns.qname(ns.WSA10, "To")).text == sink.url + "/zeep-wsa"

    manager_client = load(source.base_url, "/subscriptions", "2004", tmp_path, plugin)
    manager_client.plugins.insert(0, WsAddressingPlugin())
    manage = manager_client.create_service(
        f"{{{ns.WSE2004}}}SubscriptionManager{port}Binding", address.text)
    assert text(manage.RenewOp(Expires="PT2H").Expires) == "PT2H"
    assert text(manage.GetStatusOp().Expires).startswith("PT")
    manage.UnsubscribeOp()
    with pytest.raises(zeep.exceptions.Fault):
        manage.GetStatusOp()
