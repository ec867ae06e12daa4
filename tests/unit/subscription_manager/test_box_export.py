"""ExportBoxes pages (subscription_manager.server.box_export): rectangles with the schema,
cursors that walk every subscription once, a rectangle budget per page."""
from types import SimpleNamespace

from lxml import etree

from matchers import FilterSpec
from matchers.schema import Schema
from matchers.vocabulary import RANGES_DIALECT
from route_manager import protocol
from route_manager.workloads.grid_xml import schema_element
from subscription_manager.server import box_export
from subscription_manager.server.box_export import boxes_element

SCHEMA = Schema.from_config(schema_element(2))


def subscription(sid, expression=None):
    spec = FilterSpec(RANGES_DIALECT, expression) if expression else None
    return SimpleNamespace(id=sid, filter=spec)


def test_a_page_holds_the_schema_and_each_rectangle():
    page = [subscription("a", "x0 in [1, 2] and x1 in [3, 4]"), subscription("b")]
    element = boxes_element("t", SCHEMA, page, more=False)
    assert element.tag == protocol.BOXES and element.get("next") is None
    assert Schema.from_element(element[0]) == SCHEMA
    boxes = [(b.get("lo"), b.get("hi")) for b in element[1:]]
    assert boxes[0] == ("1.0 3.0", "2.0 4.0")
    assert len(boxes) == 2  # no filter: the whole space


def test_the_cursor_is_the_last_row_whether_live_or_not():
    page = [subscription("a"), subscription("b")]
    element = boxes_element("t", SCHEMA, page, more=True, live=lambda s: s.id == "a")
    assert element.get("next") == "b" and len(element) == 2


def test_a_page_ends_at_its_rectangle_budget(monkeypatch):
    monkeypatch.setattr(box_export, "MAX_PAGE_BOXES", 2)
    page = [subscription(c) for c in "abcd"]
    element = boxes_element("t", SCHEMA, page, more=False)
    assert element.get("next") == "b" and len(element) == 3
    last = boxes_element("t", SCHEMA, page[2:], more=False)
    assert last.get("next") is None
    assert etree.tostring(last)  # serializable
