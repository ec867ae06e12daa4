"""Element helpers shared by the messaging layer and the services."""
from __future__ import annotations

from lxml import etree

__all__ = ["detached"]


def detached(element: etree._Element) -> etree._Element:
    """A copy of ``element`` as the root of its own document that keeps every namespace
    declaration in scope (``copy.deepcopy`` drops the unused ones, which QName values and
    prefixes inside XPath filter text may still need)."""
    return etree.fromstring(etree.tostring(element))
