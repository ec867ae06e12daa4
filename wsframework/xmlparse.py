"""The one XML parser every byte from a peer goes through.

Hostile input is refused before it can cost much:

* a document type declaration is refused outright: SOAP forbids DTDs in messages, and without
  one there are no entities to expand (billion laughs) or resolve (XXE);
* libxml2 is told never to resolve entities, load DTDs or touch the network;
* the body size is capped before parsing (the transport also caps what it reads);
* element nesting depth and element count are capped (libxml2's own 256-level guard stays on
  because ``huge_tree`` is off).

Violations raise :class:`XmlRejected`, which the messaging layer answers with a SOAP Sender
fault.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

from .exceptions import WsFrameworkError


class XmlRejected(WsFrameworkError):
    """The bytes are not an acceptable XML document; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ParserLimits:
    max_bytes: int = 4 * 1024 * 1024
    max_depth: int = 100
    max_elements: int = 100_000

    def __post_init__(self):
        if min(self.max_bytes, self.max_depth, self.max_elements) <= 0:
            raise ValueError("parser limits must be positive")


DEFAULT_LIMITS = ParserLimits()

# Any DOCTYPE, wherever it sits in the prolog. Checked on raw bytes so a hostile internal
# subset never reaches libxml2.
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
# The same marker in the other encodings libxml2 detects on its own (with or without a BOM).
_WIDE_DOCTYPES = tuple("<!DOCTYPE".encode(codec) for codec in
                       ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))


def _make_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=True,
                           remove_pis=True, collect_ids=False)


_PARSER = _make_parser()


def parse_xml(data: bytes, limits: ParserLimits = DEFAULT_LIMITS) -> etree._Element:
    """Parse ``data`` into an element, enforcing ``limits``; raise :class:`XmlRejected`."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("parse_xml takes bytes")
    if len(data) > limits.max_bytes:
        raise XmlRejected(f"message of {len(data)} bytes exceeds the limit of {limits.max_bytes}")
    if not data.strip():
        raise XmlRejected("empty message")
    if _DOCTYPE.search(data) or any(marker in data for marker in _WIDE_DOCTYPES):
        raise XmlRejected("document type declarations are not allowed in SOAP messages")
    try:
        # lxml parsers are not thread-safe to share across threads while parsing, but
        # fromstring with a parser argument is documented safe in lxml >= 2 because each call
        # gets its own parser context; entity/DTD options are what matter here.
        root = etree.fromstring(bytes(data), _PARSER)
    except etree.XMLSyntaxError as exc:
        raise XmlRejected(f"malformed XML: {exc.msg or exc}") from None
    if root is None:
        raise XmlRejected("malformed XML: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        # An encoding the byte checks above cannot see (UTF-7, ...) smuggled one in.
        raise XmlRejected("document type declarations are not allowed in SOAP messages")
    _check_shape(root, limits)
    return root


def _check_shape(root: etree._Element, limits: ParserLimits) -> None:
    count = 0
    stack = [(root, 1)]
    while stack:
        element, depth = stack.pop()
        count += 1
        if depth > limits.max_depth:
            raise XmlRejected(f"element nesting deeper than {limits.max_depth}")
        if count > limits.max_elements:
            raise XmlRejected(f"more than {limits.max_elements} elements")
        if isinstance(element.tag, str):
            stack.extend((child, depth + 1) for child in element)
        if element.tag is etree.Entity:
            raise XmlRejected("entity references are not allowed")
