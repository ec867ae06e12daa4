"""Canonical XML of what a peer sent never fails: C14N refuses relative namespace URIs, and
such an element is keyed by its plain serialization instead."""
from __future__ import annotations

from lxml import etree

from wsframework.addressing import EndpointReference, WsaVersion
from wsframework.canonical import canonical_xml

RELATIVE = b'<p:a xmlns:p="http?//example.org/x"><p:b>1</p:b></p:a>'


def test_c14n_refuses_a_relative_namespace_and_the_plain_serialization_stands_in():
    element = etree.fromstring(RELATIVE)
    try:
        etree.tostring(element, method="c14n", exclusive=True)
    except etree.C14NError:
        pass
    else:
        raise AssertionError("libxml2 took a relative namespace URI: this fallback is moot")
    assert canonical_xml(element) == etree.tostring(element)
    assert canonical_xml(etree.fromstring(RELATIVE)) == canonical_xml(element)  # a stable key


def test_an_absolute_namespace_is_canonical_whatever_the_attribute_order():
    one = etree.fromstring(b'<a xmlns="urn:x" b="1" c="2"/>')
    other = etree.fromstring(b'<a c="2" xmlns="urn:x"  b="1"></a>')
    assert canonical_xml(one) == canonical_xml(other)


def test_an_epr_with_a_relative_namespace_in_its_reference_parameters_compares():
    wsa = WsaVersion.WSA10.namespace
    text = (f'<e xmlns:wsa="{wsa}"><wsa:Address>http://sink.test/n</wsa:Address>'
            f'<wsa:ReferenceParameters>{RELATIVE.decode()}</wsa:ReferenceParameters></e>')
    first = EndpointReference.from_element(etree.fromstring(text), WsaVersion.WSA10)
    second = EndpointReference.from_element(etree.fromstring(text), WsaVersion.WSA10)
    assert isinstance(first, EndpointReference)
    assert first == second and hash(first) == hash(second)
