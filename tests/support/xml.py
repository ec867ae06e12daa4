"""XML equality for tests: compare documents by meaning, not by spelling.

Two documents are equal when they have the same elements (by namespace URI and local name),
the same attributes (namespace declarations excluded) and the same non-blank text, in the
same order. Prefixes, namespace declaration placement, whitespace between elements,
comments and processing instructions do not count. Text of the form ``prefix:local`` whose
prefix is bound in scope (a QName in content, as SOAP fault codes are) is compared as
``{uri}local``, so ``soap:Client`` equals ``s:Client`` when both prefixes name the same
namespace::

    assert_xml_equal(reply_bytes, '<e:Envelope xmlns:e="...">...</e:Envelope>')
"""
from __future__ import annotations

import re
from typing import Union

from lxml import etree

XmlLike = Union[bytes, str, etree._Element, etree._ElementTree]

_QNAME_TEXT = re.compile(r"^([A-Za-z_][\w.-]*):([A-Za-z_][\w.-]*)$")
_PARSER = etree.XMLParser(remove_blank_text=True, remove_comments=True, remove_pis=True,
                          resolve_entities=False, no_network=True)


def to_element(value: XmlLike) -> etree._Element:
    if isinstance(value, etree._ElementTree):
        return value.getroot()
    if isinstance(value, etree._Element):
        return value
    if isinstance(value, str):
        value = value.encode("utf-8")
    return etree.fromstring(value, _PARSER)


def _text(element: etree._Element, text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    text = text.strip()
    match = _QNAME_TEXT.match(text)
    if match:
        uri = (element.nsmap or {}).get(match.group(1))
        if uri:
            return "{%s}%s" % (uri, match.group(2))
    return text


def canonical(value: XmlLike):
    """A nested tuple that equals another's exactly when the documents mean the same."""
    return _canonical(to_element(value))


def _canonical(element: etree._Element):
    children = [child for child in element if isinstance(child.tag, str)]
    tails = tuple(_text(element, child.tail) for child in children)
    return (
        element.tag,
        tuple(sorted(element.attrib.items())),
        _text(element, element.text),
        tuple(_canonical(child) for child in children),
        tails if any(tails) else (),
    )


def xml_equal(left: XmlLike, right: XmlLike) -> bool:
    return canonical(left) == canonical(right)


def pretty(value: XmlLike) -> str:
    element = to_element(value)
    return etree.tostring(element, pretty_print=True).decode()


def assert_xml_equal(actual: XmlLike, expected: XmlLike) -> None:
    if not xml_equal(actual, expected):
        raise AssertionError("XML differs\n--- actual\n%s--- expected\n%s"
                             % (pretty(actual), pretty(expected)))
