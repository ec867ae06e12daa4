"""The synthetic grid workload (:mod:`route_manager.workloads.synthetic`) as XML: a topic schema of
``d`` numeric attributes ``x0..x{d-1}``, events carrying one value per attribute, and range
filters for rectangles. The demo, the benchmarks, the Spark inputs and the tests share them.
"""
from __future__ import annotations

from lxml import etree

from matchers.vocabulary import EDN
from wsframework import ns

GRID_EVENTS = "urn:edn-demo:events"  # the namespace of the grid workload's events


def schema_element(d: int, low: float = 0.0, high: float = 10.0) -> etree._Element:
    """An ``edn:Schema`` of ``d`` numeric attributes x0..x{d-1} in [low, high]."""
    root = etree.Element(ns.qname(EDN, "Schema"),
                         nsmap={"edn": EDN, "e": GRID_EVENTS})
    for i in range(d):
        etree.SubElement(root, ns.qname(EDN, "Attribute"), name=f"x{i}", type="number",
                         xpath=f"e:x{i}", min=repr(low), max=repr(high))
    return root


def event_element(values, event_id: int) -> etree._Element:
    event = etree.Element(f"{{{GRID_EVENTS}}}event", nsmap={"e": GRID_EVENTS})
    event.set("id", str(event_id))
    for i, v in enumerate(values):
        etree.SubElement(event, f"{{{GRID_EVENTS}}}x{i}").text = repr(float(v))
    return event


def range_filter(lo, hi) -> str:
    return " and ".join(f"x{k} in [{float(a)!r}, {float(b)!r}]" for k, (a, b) in enumerate(zip(lo, hi)))
