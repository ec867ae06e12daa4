"""The EDN's admin messages: declared with the base registry, in the admin namespace, with
the wire form they always had."""

import pytest
from lxml import etree

from route_manager import protocol
from wsdl.admin import admin_wsdl
from wsframework import admin
from wsframework import ns
from wsframework.admin import (action_for, element_qname, parse_request,
                               parse_response, render, reset_contracts)

WSDL = "http://schemas.xmlsoap.org/wsdl/"
NAMES = [name for name, _, _ in protocol.OPERATIONS]


def adm(local):
    return "{%s}%s" % (ns.ADMIN, local)


def xml(text):
    return etree.fromstring(text)


def test_every_message_is_declared_in_the_admin_namespace():
    assert {"CreateRoute", "UpdateSummary", "RegisterServer"} <= set(NAMES)
    for name, request, response in protocol.OPERATIONS:
        assert element_qname(request) == adm(name)
        assert element_qname(response) == adm(name + "Response")
        assert action_for(name) == f"urn:wsframework:admin/{name}"
    assert protocol.FAULT_UNKNOWN_SERVER == adm("UnknownServer")


def test_base_contracts_stay_base():
    base = [name for name, _, _ in admin.OPERATIONS]
    assert not set(base) & set(NAMES)
    assert not {adm(name) for name in NAMES} & set(admin.REQUEST_ACTIONS)


def test_reset_keeps_the_edn_messages():
    reset_contracts()
    message = protocol.RegisterServer(Name="s1", Address="http://s1.test")
    assert parse_request(render(message)) == message


SUMMARY = '<edn:Summary xmlns:edn="urn:wsframework:edn" encoding="x">AA==</edn:Summary>'

WIRE = [  # exactly what travelled before the EDN messages left wsframework
    (protocol.RegisterServer(Name="s1", Address="http://s1.test"),
     b'<adm:RegisterServer xmlns:adm="urn:wsframework:admin"><adm:Name>s1</adm:Name>'
     b'<adm:Address>http://s1.test</adm:Address></adm:RegisterServer>'),
    (protocol.UpdateSummary(Server="s1", Route="grid", Generation=3, Load=2,
                            Summary=xml(SUMMARY)),
     b'<adm:UpdateSummary xmlns:adm="urn:wsframework:admin"><adm:Server>s1</adm:Server>'
     b'<adm:Route>grid</adm:Route><adm:Generation>3</adm:Generation><adm:Load>2</adm:Load>'
     b'<adm:Summary>' + SUMMARY.encode() + b'</adm:Summary></adm:UpdateSummary>'),
    (protocol.MoveSubscriptions(Topic="t", Target="http://s2.test", Id=["a", "b"]),
     b'<adm:MoveSubscriptions xmlns:adm="urn:wsframework:admin"><adm:Topic>t</adm:Topic>'
     b'<adm:Target>http://s2.test</adm:Target><adm:Id>a</adm:Id><adm:Id>b</adm:Id>'
     b'</adm:MoveSubscriptions>'),
    (protocol.RepartitionResponse(Moved=4, Figure=[admin.Figure(Name="servers", Value="2")]),
     b'<adm:RepartitionResponse xmlns:adm="urn:wsframework:admin"><adm:Moved>4</adm:Moved>'
     b'<adm:Figure><adm:Name>servers</adm:Name><adm:Value>2</adm:Value></adm:Figure>'
     b'</adm:RepartitionResponse>'),
    (protocol.ListRoutesResponse(Route=[protocol.RouteInfo(
        Name="grid", Matcher="urn:m", Address="http://d/topics/grid", Servers=2)]),
     b'<adm:ListRoutesResponse xmlns:adm="urn:wsframework:admin"><adm:Route>'
     b'<adm:Name>grid</adm:Name><adm:Matcher>urn:m</adm:Matcher>'
     b'<adm:Address>http://d/topics/grid</adm:Address><adm:Servers>2</adm:Servers>'
     b'</adm:Route></adm:ListRoutesResponse>'),
]


@pytest.mark.parametrize("message, wire", WIRE, ids=lambda v: type(v).__name__)
def test_wire_form(message, wire):
    assert etree.tostring(render(message)) == wire
    parse = parse_request if element_qname(message) in {adm(n) for n in NAMES} else parse_response
    assert parse(xml(wire)) == message


def test_an_edn_role_describes_base_and_edn_operations():
    document = etree.fromstring(admin_wsdl("http://d.test/admin", protocol.ADMIN_OPERATIONS))
    names = document.xpath("w:portType/w:operation/@name", namespaces={"w": WSDL})
    assert names == [name for name, _, _ in admin.OPERATIONS] + NAMES
