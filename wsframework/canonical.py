"""Exclusive canonical XML of what a peer sent, for comparing and hashing it.

C14N 1.0 refuses a document with a relative namespace URI (``xmlns:wsa="http?//..."``,
one flipped bit from the real one): libxml2 raises ``C14NError``. Such a namespace is legal
XML and comes from a peer, so it must not become an internal error. Where C14N refuses an
element, its plain serialization stands in: the same for the same bytes received, which is
all a key or an equality needs; the message then gets the fault its content earns.
"""
from __future__ import annotations

from lxml import etree

__all__ = ["canonical_xml"]


def canonical_xml(element: etree._Element, **options) -> bytes:
    """``element`` in exclusive C14N (``options`` as for ``etree.tostring``, e.g.
    ``inclusive_ns_prefixes``), else its plain serialization."""
    try:
        return etree.tostring(element, method="c14n", exclusive=True, **options)
    except etree.C14NError:
        return etree.tostring(element)
