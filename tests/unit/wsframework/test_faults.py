"""SoapFault: rendering per SOAP version, parsing back, and the HTTP status mapping."""

import pytest
from lxml import etree

from tests.support.xml import assert_xml_equal
from wsframework import ns
from wsframework.exceptions import (MUST_UNDERSTAND, RECEIVER, SENDER, VERSION_MISMATCH, SoapFault,
                                    receiver_fault, sender_fault)
from wsframework.soap import SoapVersion, fault_envelope

ENV = ns.SOAP12
WSA_INVALID = ns.qname(ns.WSA10, "InvalidAddressingHeader")
WSA_CARDINALITY = ns.qname(ns.WSA10, "InvalidCardinality")


def detail_item(text="d1"):
    element = etree.Element("{urn:detail}Problem", nsmap={"d": "urn:detail"})
    element.text = text
    return element


def resolve(element):
    """Resolve an element's QName text against the namespaces in scope."""
    prefix, local = element.text.split(":")
    return "{%s}%s" % (element.nsmap[prefix], local)


def on_the_wire(version, fault):
    """The Fault element as a peer reads it: rendered, enveloped, serialised and re-parsed."""
    root = etree.fromstring(fault_envelope(version, fault))
    return root.find("{%s}Body/{%s}Fault" % (version.namespace, version.namespace))


def test_unknown_code_refused():
    with pytest.raises(ValueError):
        SoapFault("Client", "SOAP 1.1 names are not codes here")


def test_helpers_and_subcode_property():
    fault = sender_fault("r", "{urn:x}A", [detail_item()], action="urn:act")
    assert (fault.code, fault.reason, fault.subcodes, fault.subcode, fault.action) == \
        (SENDER, "r", ("{urn:x}A",), "{urn:x}A", "urn:act")
    assert len(fault.detail) == 1
    assert str(fault) == "r"
    bare = receiver_fault("r")
    assert (bare.code, bare.subcodes, bare.subcode, bare.detail, bare.action) == \
        (RECEIVER, (), None, (), None)
    assert SoapFault(SENDER, "r", ["{urn:x}A", "{urn:x}B"]).subcode == "{urn:x}B"


# --- HTTP status --------------------------------------------------------------------

@pytest.mark.parametrize("code, soap12_status", [
    (SENDER, 400), (RECEIVER, 500), (VERSION_MISMATCH, 500), (MUST_UNDERSTAND, 500)])
def test_http_status_per_version(code, soap12_status):
    fault = SoapFault(code, "r")
    assert SoapVersion.SOAP12.fault_status(fault) == soap12_status
    assert SoapVersion.SOAP11.fault_status(fault) == 500


# --- SOAP 1.2 rendering -------------------------------------------------------------

def test_soap12_nests_subcodes_with_resolvable_prefixes():
    fault = SoapFault(SENDER, "bad header", [WSA_INVALID, WSA_CARDINALITY], [detail_item()])
    element = on_the_wire(SoapVersion.SOAP12, fault)
    value = element.find("{%s}Code/{%s}Value" % (ENV, ENV))
    assert resolve(value) == ns.qname(ENV, "Sender")
    first = element.find("{%s}Code/{%s}Subcode" % (ENV, ENV))
    assert resolve(first.find("{%s}Value" % ENV)) == WSA_INVALID
    second = first.find("{%s}Subcode" % ENV)
    assert resolve(second.find("{%s}Value" % ENV)) == WSA_CARDINALITY
    assert second.find("{%s}Subcode" % ENV) is None
    # Value comes before Subcode, as the schema requires
    assert [etree.QName(c).localname for c in first] == ["Value", "Subcode"]


def test_soap12_reason_detail_and_order():
    element = SoapFault(RECEIVER, "it broke", (), [detail_item("a"), detail_item("b")]).to_element(ENV)
    assert [etree.QName(c).localname for c in element] == ["Code", "Reason", "Detail"]
    text = element.find("{%s}Reason/{%s}Text" % (ENV, ENV))
    assert text.text == "it broke"
    assert text.get(ns.qname(ns.XML, "lang")) == "en"
    assert [d.text for d in element.find("{%s}Detail" % ENV)] == ["a", "b"]


def test_soap12_without_detail_has_no_detail_element():
    element = sender_fault("x").to_element(ENV)
    assert element.find("{%s}Detail" % ENV) is None
    assert element.find("{%s}Code/{%s}Subcode" % (ENV, ENV)) is None


def test_soap12_rendering_is_exactly_the_spec_shape():
    fault = SoapFault(SENDER, "bad", [WSA_INVALID], [detail_item()])
    assert_xml_equal(fault.to_element(ENV), """
        <env:Fault xmlns:env="%s" xmlns:wsa="%s">
          <env:Code><env:Value>env:Sender</env:Value>
            <env:Subcode><env:Value>wsa:InvalidAddressingHeader</env:Value></env:Subcode>
          </env:Code>
          <env:Reason><env:Text xml:lang="en">bad</env:Text></env:Reason>
          <env:Detail><d:Problem xmlns:d="urn:detail">d1</d:Problem></env:Detail>
        </env:Fault>""" % (ENV, ns.WSA10))


def test_detail_is_copied_not_moved():
    item = detail_item()
    parent = etree.Element("holder")
    parent.append(item)
    fault = sender_fault("x", detail=[item])
    fault.to_element(ENV)
    fault.to_element(ns.SOAP11)
    assert item.getparent() is parent


# --- SOAP 1.1 rendering -------------------------------------------------------------

@pytest.mark.parametrize("code, local", [
    (SENDER, "Client"), (RECEIVER, "Server"), (VERSION_MISMATCH, "VersionMismatch"),
    (MUST_UNDERSTAND, "MustUnderstand")])
def test_soap11_faultcode_without_subcode(code, local):
    element = on_the_wire(SoapVersion.SOAP11, SoapFault(code, "why"))
    assert resolve(element.find("faultcode")) == ns.qname(ns.SOAP11, local)
    assert element.find("faultstring").text == "why"
    assert element.find("detail") is None


@pytest.mark.parametrize("code", [SENDER, RECEIVER])
def test_soap11_faultcode_is_most_specific_subcode(code):
    fault = SoapFault(code, "bad", [WSA_INVALID, WSA_CARDINALITY], [detail_item()])
    element = on_the_wire(SoapVersion.SOAP11, fault)
    assert resolve(element.find("faultcode")) == WSA_CARDINALITY
    assert [etree.QName(c).localname for c in element] == ["faultcode", "faultstring", "detail"]
    assert [d.tag for d in element.find("detail")] == ["{urn:detail}Problem"]


def test_soap11_children_are_unqualified():
    element = sender_fault("x", "{urn:x}A", [detail_item()]).to_element(ns.SOAP11)
    assert element.tag == ns.qname(ns.SOAP11, "Fault")
    assert [c.tag for c in element] == ["faultcode", "faultstring", "detail"]


# --- parsing back -------------------------------------------------------------------

@pytest.mark.parametrize("fault", [
    SoapFault(SENDER, "s", [WSA_INVALID, WSA_CARDINALITY], [detail_item()]),
    SoapFault(RECEIVER, "r", ["{urn:x}Busy"]),
    SoapFault(RECEIVER, "plain"),
    SoapFault(SENDER, "plain"),
    SoapFault(VERSION_MISMATCH, "vm"),
    SoapFault(MUST_UNDERSTAND, "mu"),
], ids=repr)
def test_soap12_from_element_round_trip(fault):
    back = SoapFault.from_element(on_the_wire(SoapVersion.SOAP12, fault))
    assert (back.code, back.reason, back.subcodes) == (fault.code, fault.reason, fault.subcodes)
    assert len(back.detail) == len(fault.detail)
    for got, sent in zip(back.detail, fault.detail):
        assert_xml_equal(got, sent)


@pytest.mark.parametrize("fault, code, subcodes", [
    (SoapFault(SENDER, "s", [WSA_INVALID, WSA_CARDINALITY], [detail_item()]),
     SENDER, (WSA_CARDINALITY,)),
    (SoapFault(SENDER, "plain"), SENDER, ()),
    (SoapFault(RECEIVER, "plain"), RECEIVER, ()),
    (SoapFault(VERSION_MISMATCH, "vm"), VERSION_MISMATCH, ()),
    (SoapFault(MUST_UNDERSTAND, "mu"), MUST_UNDERSTAND, ()),
], ids=repr)
def test_soap11_from_element_round_trip(fault, code, subcodes):
    """SOAP 1.1 keeps only the most specific subcode; the code is inferred from it."""
    back = SoapFault.from_element(on_the_wire(SoapVersion.SOAP11, fault))
    assert (back.code, back.reason, back.subcodes) == (code, fault.reason, subcodes)
    assert len(back.detail) == len(fault.detail)
    for got, sent in zip(back.detail, fault.detail):
        assert_xml_equal(got, sent)


def test_from_element_of_a_foreign_soap11_fault():
    element = etree.fromstring(
        '<SOAP-ENV:Fault xmlns:SOAP-ENV="%s"><faultcode>SOAP-ENV:Server</faultcode>'
        '<faultstring>down</faultstring></SOAP-ENV:Fault>' % ns.SOAP11)
    back = SoapFault.from_element(element)
    assert (back.code, back.reason, back.subcodes) == (RECEIVER, "down", ())


def test_from_element_tolerates_missing_parts():
    back = SoapFault.from_element(etree.fromstring('<e:Fault xmlns:e="%s"/>' % ENV))
    assert back.code == RECEIVER and back.reason == "" and back.subcodes == ()
    back11 = SoapFault.from_element(etree.fromstring('<e:Fault xmlns:e="%s"/>' % ns.SOAP11))
    assert back11.reason == ""
