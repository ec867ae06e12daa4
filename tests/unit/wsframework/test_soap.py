"""SOAP 1.1 / 1.2 envelopes: parse, build, content types and the faults the spec names."""

import pytest
from lxml import etree

from tests.support.xml import assert_xml_equal, xml_equal
from wsframework import ns
from wsframework.exceptions import SENDER, VERSION_MISMATCH, SoapFault, receiver_fault, sender_fault
from wsframework.soap import Envelope, SoapVersion, build_envelope, fault_envelope, parse_envelope

VERSIONS = [SoapVersion.SOAP11, SoapVersion.SOAP12]


def envelope(namespace, inner):
    return ('<e:Envelope xmlns:e="%s">%s</e:Envelope>' % (namespace, inner)).encode()


def payload():
    return etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>')


def header_block(text="h1"):
    element = etree.Element("{urn:h}Token", nsmap={"h": "urn:h"})
    element.text = text
    return element


def refused(data, **kwargs) -> SoapFault:
    with pytest.raises(SoapFault) as info:
        parse_envelope(data, **kwargs)
    return info.value


# --- versions and content types -------------------------------------------------------

def test_content_types_per_version():
    assert SoapVersion.SOAP11.content_type == "text/xml"
    assert SoapVersion.SOAP12.content_type == "application/soap+xml"
    assert SoapVersion.SOAP11.namespace == ns.SOAP11
    assert SoapVersion.SOAP12.namespace == ns.SOAP12


@pytest.mark.parametrize("header, expected", [
    ("text/xml", SoapVersion.SOAP11),
    ("text/xml; charset=utf-8", SoapVersion.SOAP11),
    ("TEXT/XML;charset=UTF-8", SoapVersion.SOAP11),
    ("application/soap+xml", SoapVersion.SOAP12),
    ('application/soap+xml; charset=utf-8; action="urn:a"', SoapVersion.SOAP12),
    ("application/xml", None),
    ("text/plain", None),
    ("", None),
    (None, None),
])
def test_version_from_content_type(header, expected):
    assert SoapVersion.from_content_type(header) is expected


# --- round trips ----------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_build_then_parse_round_trip(version):
    data = build_envelope(version, payload(), [header_block("a"), header_block("b")])
    parsed = parse_envelope(data)
    assert parsed.version is version
    assert [h.text for h in parsed.headers] == ["a", "b"]
    assert all(h.tag == "{urn:h}Token" for h in parsed.headers)
    assert_xml_equal(parsed.body, payload())
    assert parsed.root.tag == ns.qname(version.namespace, "Envelope")
    assert not parsed.is_fault and parsed.fault() is None


@pytest.mark.parametrize("version", VERSIONS)
def test_built_envelope_is_what_the_spec_shows(version):
    data = build_envelope(version, payload(), [header_block()])
    assert data.startswith(b"<?xml")
    expected = envelope(version.namespace,
                        '<e:Header><h:Token xmlns:h="urn:h">h1</h:Token></e:Header>'
                        '<e:Body><q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>'
                        '</e:Body>')
    assert_xml_equal(data, expected)


@pytest.mark.parametrize("version", VERSIONS)
def test_envelope_without_headers_has_no_header_element(version):
    root = etree.fromstring(build_envelope(version, payload()))
    assert [etree.QName(c).localname for c in root] == ["Body"]


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_body_payload_round_trips_as_none(version):
    data = build_envelope(version, None)
    parsed = parse_envelope(data)
    assert parsed.body is None
    assert parsed.headers == []
    assert not parsed.is_fault
    assert_xml_equal(data, envelope(version.namespace, "<e:Body/>"))


@pytest.mark.parametrize("version", VERSIONS)
def test_whitespace_and_comments_in_body_are_not_payload(version):
    parsed = parse_envelope(envelope(version.namespace,
                                     "<e:Header>\n  <!-- c -->\n</e:Header>\n<e:Body>\n  \n</e:Body>"))
    assert parsed.body is None and parsed.headers == []


def test_first_body_child_is_the_payload():
    parsed = parse_envelope(envelope(ns.SOAP12, "<e:Body><a/><b/></e:Body>"))
    assert parsed.body.tag == "a"


def test_header_lookup_by_qname():
    parsed = parse_envelope(build_envelope(SoapVersion.SOAP12, None, [header_block("x")]))
    assert parsed.header("{urn:h}Token").text == "x"
    assert parsed.header("{urn:h}Other") is None


def test_envelope_dataclass_equality_ignores_root():
    body = payload()
    assert Envelope(SoapVersion.SOAP11, [], body) == Envelope(SoapVersion.SOAP11, [], body, root=body)


@pytest.mark.parametrize("version", VERSIONS)
def test_fault_envelope_is_recognised_as_fault(version):
    data = fault_envelope(version, sender_fault("nope", "{urn:x}Bad"))
    parsed = parse_envelope(data)
    assert parsed.is_fault
    fault = parsed.fault()
    assert fault.code == SENDER and fault.subcodes == ("{urn:x}Bad",) and fault.reason == "nope"


# --- refusals -------------------------------------------------------------------------

def test_foreign_envelope_namespace_is_version_mismatch():
    fault = refused(envelope("urn:not-soap", "<e:Body/>"))
    assert fault.code == VERSION_MISMATCH
    assert "urn:not-soap" in fault.reason


def test_envelope_without_namespace_is_version_mismatch():
    assert refused(b"<Envelope><Body/></Envelope>").code == VERSION_MISMATCH


@pytest.mark.parametrize("announced, sent", [
    (SoapVersion.SOAP11, ns.SOAP12),
    (SoapVersion.SOAP12, ns.SOAP11),
])
def test_content_type_disagreeing_with_envelope_is_version_mismatch(announced, sent):
    fault = refused(envelope(sent, "<e:Body/>"), expected=announced)
    assert fault.code == VERSION_MISMATCH
    assert announced.name in fault.reason


@pytest.mark.parametrize("version", VERSIONS)
def test_content_type_agreeing_with_envelope_parses(version):
    assert parse_envelope(envelope(version.namespace, "<e:Body/>"), expected=version).version is version


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("inner, words", [
    ("", "no Body"),
    ("<e:Header/>", "no Body"),
    ("<e:Body/><e:Body/>", "repeated SOAP Body"),
    ("<e:Header/><e:Header/><e:Body/>", "Header"),
    ('<e:Header><h xmlns="urn:h"/></e:Header><e:Header/><e:Body/>', "Header"),
    ("<e:Body/><e:Header/>", "Header"),
    ("<e:Body/><trailer/>", "unexpected element"),
    ("<e:Fault/><e:Body/>", "unexpected element"),
])
def test_structural_errors_are_sender_faults(version, inner, words):
    fault = refused(envelope(version.namespace, inner))
    assert fault.code == SENDER
    assert words in fault.reason


@pytest.mark.parametrize("version", VERSIONS)
def test_root_that_is_not_an_envelope_is_a_sender_fault(version):
    fault = refused(('<e:Body xmlns:e="%s"/>' % version.namespace).encode())
    assert fault.code == SENDER and "not a SOAP envelope" in fault.reason


def test_malformed_xml_is_a_sender_fault_not_an_exception():
    fault = refused(b"<e:Envelope xmlns:e='%s'><e:Body>" % ns.SOAP12.encode())
    assert fault.code == SENDER and "malformed" in fault.reason


# --- fault envelopes ------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("make, code", [(sender_fault, "Sender"), (receiver_fault, "Receiver")])
def test_fault_codes_survive_the_envelope(version, make, code):
    """The fault's code is QName text; its prefix must be bound in the envelope sent."""
    data = fault_envelope(version, make("why"))
    fault = parse_envelope(data).fault()
    assert fault.code == code and fault.subcodes == ()
    body = etree.fromstring(data).find(".//{%s}Fault" % version.namespace)
    code_text = body.find("faultcode") if version is SoapVersion.SOAP11 else \
        body.find("{%(e)s}Code/{%(e)s}Value" % {"e": ns.SOAP12})
    prefix, local = code_text.text.split(":")
    assert code_text.nsmap[prefix] == version.namespace
    assert local == {SoapVersion.SOAP11: {"Sender": "Client", "Receiver": "Server"},
                     SoapVersion.SOAP12: {"Sender": "Sender", "Receiver": "Receiver"}}[version][code]


@pytest.mark.parametrize("version", VERSIONS)
def test_fault_envelope_with_headers(version):
    data = fault_envelope(version, sender_fault("x"), [header_block("corr")])
    parsed = parse_envelope(data)
    assert parsed.header("{urn:h}Token").text == "corr"
    assert parsed.is_fault


def test_xml_equal_helper_ignores_prefixes_but_not_meaning():
    a = '<a:x xmlns:a="urn:1"><a:y k="v">t</a:y></a:x>'
    assert xml_equal(a, '<x xmlns="urn:1">\n  <y k="v"> t </y>\n</x>')
    assert not xml_equal(a, '<x xmlns="urn:2"><y k="v">t</y></x>')
    assert not xml_equal(a, '<a:x xmlns:a="urn:1"><a:y k="w">t</a:y></a:x>')
    assert not xml_equal(a, '<a:x xmlns:a="urn:1"><a:y k="v">u</a:y></a:x>')
    assert xml_equal('<c xmlns:p="urn:q">p:Name</c>', '<c xmlns:z="urn:q">z:Name</c>')
    assert not xml_equal('<c xmlns:p="urn:q">p:Name</c>', '<c xmlns:p="urn:r">p:Name</c>')


@pytest.mark.parametrize("version", list(SoapVersion))
def test_a_body_keeps_its_prefixes_for_the_envelope_namespace(version):
    """A body may bind the SOAP namespace under its own prefix for use in text only (a
    2004/08 filter ``/s:Envelope/s:Body/...``); the serialized envelope keeps it in scope."""
    body = etree.fromstring(
        f'<w:Subscribe xmlns:w="urn:w" xmlns:s="{version.namespace}">'
        f'<w:Filter xmlns:t="{version.namespace}">/s:Envelope/t:Body</w:Filter></w:Subscribe>')
    header = etree.fromstring(f'<h:To xmlns:h="urn:h" xmlns:u="{version.namespace}">u:x</h:To>')
    parsed = parse_envelope(build_envelope(version, body, [header]))
    assert parsed.body.find("{urn:w}Filter").nsmap["s"] == version.namespace
    assert parsed.body.find("{urn:w}Filter").nsmap["t"] == version.namespace
    assert parsed.headers[0].nsmap["u"] == version.namespace
    assert parsed.headers[0].text == "u:x"
