"""The one XML parser every byte from a peer goes through.

Hostile input is refused before it can cost much:

* a document type declaration is refused outright: SOAP forbids DTDs in messages, and without
  one there are no entities to expand (billion laughs) or resolve (XXE);
* libxml2 is told never to resolve entities, load DTDs or touch the network;
* the body size is capped before parsing (the transport also caps what it reads);
* element nesting depth and element count are capped (libxml2's own 256-level guard stays on
  because ``huge_tree`` is off);
* the names a peer sends cannot pile up: lxml interns every element and attribute name and
  namespace URI it parses in a dictionary of the OS thread, kept as long as the thread lives
  (a gunicorn worker's threads, or its one thread under gevent, live for the process), so
  messages full of fresh names (a fuzzer's) grew a worker by hundreds of megabytes. Each
  thread parses with a parser of its own that is replaced, with a fresh dictionary, after
  ``_RENEW_PARSES`` parses or ``_RENEW_BYTES`` bytes (:func:`_thread_parser`); an old
  dictionary is freed with the last document that uses it.

Violations raise :class:`XmlRejected`, which the messaging layer answers with a SOAP Sender
fault.
"""
from __future__ import annotations

import ctypes
import functools
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


_PARSER = _make_parser()  # for a caller without a Python thread state (never in practice)

# A thread's parser (and lxml's name dictionary) is renewed after this many parses or bytes:
# what a thread's dictionary can hold stays in the order of _RENEW_BYTES, and a renewal
# (a new dictionary and parser context, microseconds) is amortised over thousands of messages.
_RENEW_PARSES = 1000
_RENEW_BYTES = 4 * 1024 * 1024
# lxml.etree keeps a thread's dictionary in the thread state's dict under this key
# (parser.pxi, _ParserDictionaryContext._findThreadParserContext); without it, the thread's
# next parser context starts a new dictionary. If a later lxml renames it, renewing the
# parser alone is harmless (only no longer bounded).
_LXML_CONTEXT_KEY = "_ParserDictionaryContext"
_STATE_KEY = "wsframework.xmlparse"
_get_thread_dict = ctypes.pythonapi.PyThreadState_GetDict
_get_thread_dict.restype = ctypes.py_object  # ctypes takes it as a new reference ...
_get_thread_dict.argtypes = []
_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


def _thread_state_dict() -> dict | None:
    """The current OS thread's state dict (per OS thread, also under gevent), or None."""
    try:
        state = _get_thread_dict()
    except ValueError:  # NULL: no thread state
        return None
    _incref(state)  # ... but PyThreadState_GetDict returns a borrowed one
    return state


class _ThreadParser:
    __slots__ = ("parser", "parses", "size")

    def __init__(self):
        self.parser = _make_parser()
        self.parses = 0
        self.size = 0


def _thread_parser(size: int) -> etree.XMLParser:
    """This thread's parser, renewed with a fresh lxml name dictionary when it is due."""
    state_dict = _thread_state_dict()
    if state_dict is None:
        return _PARSER
    state = state_dict.get(_STATE_KEY)
    if state is None or state.parses >= _RENEW_PARSES or state.size >= _RENEW_BYTES:
        if state is not None:
            # The next parser context of this thread starts a new dictionary; a parser is
            # never reused across dictionaries (libxml2's context keeps names of its own).
            state_dict.pop(_LXML_CONTEXT_KEY, None)
        state = state_dict[_STATE_KEY] = _ThreadParser()
    state.parses += 1
    state.size += size
    return state.parser


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
    parser = _thread_parser(len(data))
    try:
        root = etree.fromstring(bytes(data), parser)
    except etree.XMLSyntaxError as exc:
        raise XmlRejected(f"malformed XML: {exc.msg or exc}") from None
    if root is None:
        raise XmlRejected("malformed XML: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        # An encoding the byte checks above cannot see (UTF-7, ...) smuggled one in.
        raise XmlRejected("document type declarations are not allowed in SOAP messages")
    _check_shape(root, limits, data)
    return root


def _check_shape(root: etree._Element, limits: ParserLimits, data: bytes) -> None:
    """Element count, nesting depth and entity references, checked by libxml2 rather than
    by a Python walk over the tree (~400 us for a 64-event batch; this costs ~10 us).

    * count: every element starts with a ``<``, which is the byte 0x3C in every encoding
      below, so ``data.count(b"<")`` bounds the element count; only a document with more
      ``<`` bytes than the limit (or in another encoding) is counted element by element;
    * depth: an XPath selecting the elements one level below the limit, evaluated in C;
    * entities: lxml's C iteration filtered to entity-reference nodes.
    """
    encoding = (root.getroottree().docinfo.encoding or "").upper().replace("_", "-")
    if data.count(b"<") > limits.max_elements or not encoding.startswith(_BOUNDED_ENCODINGS):
        count = 0
        for _ in root.iter():
            count += 1
            if count > limits.max_elements:
                raise XmlRejected(f"more than {limits.max_elements} elements")
    if _too_deep(limits.max_depth)(root):
        raise XmlRejected(f"element nesting deeper than {limits.max_depth}")
    if next(root.iter(etree.Entity), None) is not None:
        raise XmlRejected("entity references are not allowed")


# Encodings in which "<" is the byte 0x3C (alone or with zero bytes around it).
_BOUNDED_ENCODINGS = ("UTF-8", "UTF8", "US-ASCII", "ASCII", "ISO-8859-", "LATIN", "UTF-16",
                      "UTF-32", "UCS-2", "UCS-4", "WINDOWS-125")


@functools.lru_cache(maxsize=8)
def _too_deep(max_depth: int) -> etree.XPath:
    """True for a document with an element at depth ``max_depth + 1`` (the root is 1)."""
    return etree.XPath("boolean(/" + "*/" * max_depth + "*)")