"""A page of a topic's subscription rectangles with the topic's schema: what a server
answers to ``ExportBoxes`` (``edn profile --from-network`` reads the live network with it)::

    <edn:Boxes xmlns:edn="urn:wsframework:edn" topic="stocks" next="9f0c...">
      <edn:Schema>...</edn:Schema>             (the topic's event schema, every page)
      <edn:Box lo="1.0 -10.0" hi="2.0 3.0"/>   (one per rectangle; a filter may have several)
    </edn:Boxes>

``next`` is the cursor of the following page (the last subscription id of this one); it is
absent on the last page. A page holds at most the subscriptions asked for, and ends early
once it holds :data:`MAX_PAGE_BOXES` rectangles. Pages go by subscription id, so a subscription renewed while a
profile pages through is neither skipped nor read twice. A filter the server could not
compile (it is refused at Subscribe, so only one stored by an older version) counts in
``unusable`` and gives no rectangle, as in the server's own engine.
"""
from __future__ import annotations

from typing import Sequence

from lxml import etree

from matchers.vocabulary import EDN
from route_manager.protocol import BOX, BOXES

from ..store import Subscription
from .moved_subscriptions import _floats, filter_boxes

__all__ = ["boxes_element", "MAX_PAGE_BOXES"]

#: rectangles in one answer, about (a filter may compile to several): the page ends after
#: the subscription that reaches it
MAX_PAGE_BOXES = 20_000


def boxes_element(topic: str, schema, page: Sequence[Subscription], *, more: bool,
                  live=lambda s: True) -> etree._Element:
    """``edn:Boxes`` of the ``live`` subscriptions of ``page`` (rows by id; ``more``: rows
    follow it). A page that reaches :data:`MAX_PAGE_BOXES` rectangles ends there, and its
    cursor says where the next one starts."""
    root = etree.Element(BOXES, nsmap={"edn": EDN})
    root.set("topic", topic)
    root.append(schema.to_element())
    unusable = count = 0
    for k, s in enumerate(page):
        if not live(s):
            continue
        boxes = filter_boxes(schema, s.filter)
        if boxes is None:
            unusable += 1
            continue
        for lo, hi in zip(*boxes):
            etree.SubElement(root, BOX, lo=_floats(lo), hi=_floats(hi))
            count += 1
        if count >= MAX_PAGE_BOXES and (more or k + 1 < len(page)):
            root.set("next", s.id)
            break
    else:
        if more and page:
            root.set("next", page[-1].id)
    if unusable:
        root.set("unusable", str(unusable))
    return root
