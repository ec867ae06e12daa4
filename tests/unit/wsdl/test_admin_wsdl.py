"""The admin WSDL, as a stock SOAP client (zeep) sees it. No network: the document is a
local file and zeep resolves nothing else."""

import pytest
import zeep
from lxml import etree

from wsdl.admin import admin_wsdl
from wsframework import ns
from wsframework.admin import ADMIN_TOKEN_QNAME, action_for, parse_request

ADDRESS = "http://127.0.0.1:8080/admin"
WSDL = "http://schemas.xmlsoap.org/wsdl/"
SOAP11 = "http://schemas.xmlsoap.org/wsdl/soap/"
SOAP12 = "http://schemas.xmlsoap.org/wsdl/soap12/"
WSAM = "http://www.w3.org/2007/05/addressing/metadata"
WSAW = "http://www.w3.org/2006/05/addressing/wsdl"
NS = {"wsdl": WSDL, "s11": SOAP11, "s12": SOAP12, "xs": "http://www.w3.org/2001/XMLSchema"}
from wsframework.admin import OPERATIONS as _CONTRACT_OPERATIONS

# Every admin operation the contracts define, in WSDL order; the topic operations at least.
OPERATIONS = [name for name, _, _ in _CONTRACT_OPERATIONS]
assert OPERATIONS[:3] == ["CreateTopic", "DeleteTopic", "ListTopics"]


@pytest.fixture(scope="module")
def document():
    return etree.fromstring(admin_wsdl(ADDRESS))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path = tmp_path_factory.mktemp("wsdl") / "admin.wsdl"
    path.write_bytes(admin_wsdl(ADDRESS))
    return zeep.Client(wsdl=str(path))


def body_child(envelope):
    body = [c for c in envelope if etree.QName(c).localname == "Body"][0]
    return body[0]


def test_cached_per_address():
    assert admin_wsdl(ADDRESS) is admin_wsdl(ADDRESS)
    other = admin_wsdl("http://example.org/x/admin")
    assert b"http://example.org/x/admin" in other and ADDRESS.encode() not in other


def test_one_port_type_two_bindings_two_ports(document):
    assert document.xpath("wsdl:portType/@name", namespaces=NS) == ["AdminPortType"]
    assert document.xpath("wsdl:portType/wsdl:operation/@name", namespaces=NS) == OPERATIONS
    bindings = document.xpath("wsdl:binding", namespaces=NS)
    assert [b.get("type") for b in bindings] == ["tns:AdminPortType"] * 2
    assert document.xpath("wsdl:binding/s11:binding/@transport", namespaces=NS) == \
        ["http://schemas.xmlsoap.org/soap/http"]
    assert document.xpath("wsdl:binding/s12:binding/@transport", namespaces=NS) == \
        ["http://schemas.xmlsoap.org/soap/http"]
    assert document.xpath("wsdl:service/wsdl:port/s11:address/@location", namespaces=NS) == \
        [ADDRESS]
    assert document.xpath("wsdl:service/wsdl:port/s12:address/@location", namespaces=NS) == \
        [ADDRESS]


def test_soap_actions(document):
    for prefix in ("s11", "s12"):
        actions = document.xpath(
            "wsdl:binding/wsdl:operation/%s:operation/@soapAction" % prefix, namespaces=NS)
        assert actions == [action_for(op) for op in OPERATIONS]


def test_addressing_actions_on_the_port_type(document):
    for operation in document.xpath("wsdl:portType/wsdl:operation", namespaces=NS):
        name = operation.get("name")
        input_, output = operation.find("{%s}input" % WSDL), operation.find("{%s}output" % WSDL)
        for namespace in (WSAM, WSAW):
            assert input_.get("{%s}Action" % namespace) == action_for(name)
            assert output.get("{%s}Action" % namespace) == action_for(name + "Response")


def test_admin_token_header_is_declared(document):
    assert document.xpath("wsdl:types/xs:schema/xs:element[@name='AdminToken']/@type",
                          namespaces=NS) == ["tns:AdminToken"]
    headers = document.xpath("wsdl:binding/wsdl:operation/wsdl:input/*[local-name()='header']",
                             namespaces=NS)
    assert len(headers) == 2 * len(OPERATIONS) and {h.get("part") for h in headers} == {"AdminToken"}


def test_zeep_sees_the_operations(client):
    for port in ("AdminSoap11Port", "AdminSoap12Port"):
        service = client.bind("AdminService", port)
        assert sorted(service._binding._operations) == sorted(OPERATIONS)
        for name in OPERATIONS:
            operation = service._binding._operations[name]
            assert operation.soapaction == action_for(name)
            assert operation.abstract.wsa_action == action_for(name)


def test_zeep_builds_a_create_topic_the_contracts_parse(client):
    envelope = client.create_message(client.service, "CreateTopic", Name="a/b",
                                     Matcher="urn:m", _soapheaders={"AdminToken": "s3cret"})
    element = body_child(envelope)
    assert element.tag == "{%s}CreateTopic" % ns.ADMIN
    assert [c.tag for c in element] == ["{%s}Name" % ns.ADMIN, "{%s}Matcher" % ns.ADMIN]
    header = [c for c in envelope if etree.QName(c).localname == "Header"][0]
    assert header.findtext(ADMIN_TOKEN_QNAME) == "s3cret"
    message = parse_request(element)
    assert (message.Name, message.Matcher, message.Options) == ("a/b", "urn:m", None)


def test_zeep_sends_options_as_xml(client):
    options = etree.fromstring('<cfg xmlns="urn:engine"><dims>8</dims></cfg>')
    service = client.bind("AdminService", "AdminSoap12Port")
    envelope = client.create_message(service, "CreateTopic", Name="t",
                                     Options={"_value_1": options})
    assert etree.QName(envelope).namespace == "http://www.w3.org/2003/05/soap-envelope"
    message = parse_request(body_child(envelope))
    assert message.Options.tag == "{urn:engine}cfg"
    assert message.Options.findtext("{urn:engine}dims") == "8"


@pytest.mark.parametrize("operation, kwargs", [("DeleteTopic", {"Name": "a"}),
                                               ("ListTopics", {}),
                                               ("ListTopics", {"Prefix": "a/"})])
def test_zeep_builds_the_other_requests(client, operation, kwargs):
    element = body_child(client.create_message(client.service, operation, **kwargs))
    assert element.tag == "{%s}%s" % (ns.ADMIN, operation)
    message = parse_request(element)
    for key, value in kwargs.items():
        assert getattr(message, key) == value


def test_zeep_enforces_the_required_name(client):
    with pytest.raises(zeep.exceptions.ValidationError, match="Name"):
        client.create_message(client.service, "DeleteTopic")
