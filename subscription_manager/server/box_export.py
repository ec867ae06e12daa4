"""A page of a topic's subscription rectangles with the topic's schema: what a server
answers to ``ExportBoxes`` (``edn profile --from-network`` reads the live network with it)::

    <edn:Boxes xmlns:edn="urn:wsframework:edn" topic="stocks" next="9f0c...">
      <edn:Schema>...</edn:Schema>             (the topic's event schema, every page)
      <edn:Box lo="1.0 -10.0" hi="2.0 3.0"/>   (one per rectangle; a filter may have several)
    </edn:Boxes>

``next`` is the cursor of the following page (the last subscription id of this one); it is
absent on the last page. Pages go by subscription id, so a subscription renewed while a
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
from .moved_subscriptions import filter_boxes

__all__ = ["boxes_element"]


def _floats(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def boxes_element(topic: str, schema, subscriptions: Sequence[Subscription],
                  next_cursor: str | None) -> etree._Element:
    """``edn:Boxes`` of ``subscriptions``, one page (``next_cursor``: where the next one
    starts; None on the last)."""
    root = etree.Element(BOXES, nsmap={"edn": EDN})
    root.set("topic", topic)
    root.append(schema.to_element())
    unusable = 0
    for s in subscriptions:
        boxes = filter_boxes(schema, s.filter)
        if boxes is None:
            unusable += 1
            continue
        for lo, hi in zip(*boxes):
            etree.SubElement(root, BOX, lo=_floats(lo), hi=_floats(hi))
    if unusable:
        root.set("unusable", str(unusable))
    if next_cursor is not None:
        root.set("next", next_cursor)
    return root
