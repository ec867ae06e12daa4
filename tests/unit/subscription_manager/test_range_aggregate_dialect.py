"""The range-aggregate dialect (matchers.range_aggregate): parsing and refusals, open eCube
bounds in the box engines, Figure 1's messages routed by a real engine, and Subscribe's faults
for bad range-aggregate filters (in process)."""

import pytest
from lxml import etree

from matchers import BruteForceMatcher, FilterSpec, RTreeMatchingEngine
from matchers.range_aggregate import (
    MAX_FILTER_CHARS, RANGE_AGGREGATE_DIALECT, change_element, compile_range_aggregate,
    feed_schema, parse_range_aggregate, read_change)
from matchers.schema import Attribute, Schema
from subscription_manager.stateful.range_min_table import RangeMinTable, matches
from tests.support.eventing import Harness
from matchers.vocabulary import MATCHER_RTREE_ENGINE, RANGES_DIALECT, RANGE_AGGREGATE
from wsframework.exceptions import SENDER, SoapFault
from wsframework.matching import InvalidFilter

SCHEMA = feed_schema("per", "risk", 0, 100)
FIGURE_1 = {"t1": (100, 3), "t2": (20, 2), "t3": (30, 8), "t4": (40, 12), "t5": (50, 5),
            "t6": (70, 6), "t7": (70, 11)}
SUBSCRIPTIONS = {"s1": (10, 95), "s2": (20, 65), "s3": (25, 60), "s4": (35, 90), "s5": (60, 95),
                 "edge": (20, 70), "point": (40, 40)}


def spec(text):
    return FilterSpec(RANGE_AGGREGATE_DIALECT, text)


def test_parse_forms():
    query = parse_range_aggregate("MIN(per) WHERE risk IN [20, 60]")
    assert (query.function, query.value, query.over, query.x1, query.x2) == ("MIN", "per", "risk",
                                                                             20.0, 60.0)
    assert parse_range_aggregate("  max ( per )where risk in[ -1.5e1 ,7 ] ").x1 == -15.0
    assert query.range_filter() == "per.min.risk.low = 20.0 and per.min.risk.high = 60.0"


@pytest.mark.parametrize("text", [
    "", "MIN(per)", "SUM(per) WHERE risk IN [1, 2]", "MIN(per) WHERE risk IN [2, 1]",
    "MIN(per) WHERE risk IN (1, 2]", "MIN(per) WHERE risk IN [1, inf]",
    "MIN(per) WHERE risk IN [1, 2] or 1", "MIN(per) WHERE risk IN [1e999, 1e999]",
    "MIN(" + "p" * 65 + ") WHERE risk IN [1, 2]", "MIN(per) WHERE risk IN [1, 2]" + " " * MAX_FILTER_CHARS,
    "MIN(pér) WHERE risk IN [1, 2]", "MIN(per) WHERE 'risk' IN [1, 2]",
])
def test_bad_filters_are_refused(text):
    with pytest.raises(InvalidFilter):
        parse_range_aggregate(text)


def test_attributes_the_feed_does_not_carry_are_refused():
    with pytest.raises(InvalidFilter, match="unknown attribute"):
        compile_range_aggregate(spec("MIN(eps) WHERE risk IN [1, 2]"), SCHEMA)
    with pytest.raises(InvalidFilter, match="unknown attribute"):
        compile_range_aggregate(spec("MIN(per) WHERE beta IN [1, 2]"), SCHEMA)


@pytest.fixture(params=[RTreeMatchingEngine, BruteForceMatcher])
def engine(request):
    matcher = request.param(SCHEMA)
    for name, (x1, x2) in SUBSCRIPTIONS.items():
        matcher.add_filter(name, spec(f"MIN(per) WHERE risk IN [{x1}, {x2}]"))
        matcher.add_filter(f"max-{name}", spec(f"MAX(per) WHERE risk IN [{x1}, {x2}]"))
    return matcher


def figure_1(sign=1):
    table = RangeMinTable(sign)
    for key, (x, y) in FIGURE_1.items():
        table.update(key, x, sign * y)
    return table


@pytest.mark.parametrize("key,y,sign", [("t4", 4, 1), ("t5", 9, 1), ("t5", 9, -1),
                                        ("t2", 50, 1), ("t6", None, 1), ("t1", 1, -1)])
def test_the_engines_route_changes_as_the_predicate_says(engine, key, y, sign):
    function = "MIN" if sign == 1 else "MAX"
    x = FIGURE_1[key][0]
    messages = figure_1(sign).update(key, x, None if y is None else sign * y)[1]
    assert messages
    events = [change_element("stocks", 1, function, m.new, *m.as_tuple()[1:]) for m in messages]
    prefix = "" if sign == 1 else "max-"
    for message, event in zip(messages, events):
        expected = sorted(prefix + name for name, bounds in SUBSCRIPTIONS.items()
                          if matches(message, *bounds))
        assert sorted(engine.match(event)) == expected
    batched = engine.match_many(events)
    assert [sorted(found) for found in batched] == [sorted(engine.match(e)) for e in events]


def test_open_bounds_exclude_exactly_their_value():
    schema = Schema((Attribute("x", "number", "x", (), 0, 100),
                     Attribute("t", "dateTime", "t", (), 0, 10**18)))
    engine = RTreeMatchingEngine(schema)
    for value in (20, 30, 40):
        engine.add_filter(f"x{value}", FilterSpec(RANGES_DIALECT, f"x = {value}"))
    engine.add_filter("noon", FilterSpec(RANGES_DIALECT, "t = '2024-01-01T12:00:00Z'"))

    def event(**bounds):
        element = etree.Element("e")
        for name, attributes in bounds.items():
            etree.SubElement(element, name, {k: str(v) for k, v in attributes.items()})
        return element

    assert engine.match(event(x={"minExclusive": 20, "max": 40})) == ["x30", "x40"]
    assert engine.match(event(x={"min": 20, "maxExclusive": 40})) == ["x20", "x30"]
    assert engine.match(event(x={"minExclusive": 20, "maxExclusive": 40})) == ["x30"]
    assert engine.match(event(x={"minExclusive": 40})) == []
    assert engine.match(event(x={"minExclusive": 30, "maxExclusive": 30})) == []  # empty
    # Both forms of one end, or an unparsable bound: no usable value, so no match.
    assert engine.match(event(x={"min": 20, "minExclusive": 20, "max": 40})) == []
    assert engine.match(event(x={"minExclusive": "abc", "max": 40})) == []
    noon = "2024-01-01T12:00:00Z"
    assert engine.match(event(t={"minExclusive": noon})) == []
    assert engine.match(event(t={"min": noon, "maxExclusive": "2024-01-01T12:00:01Z"})) == ["noon"]
    assert engine.match(event(t={"minExclusive": "2024-01-01T11:59:59.999999Z"})) == ["noon"]
    batch = [event(x={"minExclusive": 20, "max": 40}), event(x={"minExclusive": 40})]
    assert [sorted(found) for found in engine.match_many(batch)] == [["x30", "x40"], []]


def test_string_attributes_have_no_open_bounds():
    schema = Schema((Attribute("s", "string", "s", ()),))
    engine = RTreeMatchingEngine(schema)
    engine.add_filter("b", FilterSpec(RANGES_DIALECT, "s = 'b'"))
    element = etree.fromstring('<e><s minExclusive="a" max="c"/></e>')
    assert engine.match(element) == []
    assert engine.match(etree.fromstring('<e><s min="a" max="c"/></e>')) == ["b"]


def test_change_element_round_trip():
    element = change_element("stocks", 17, "MIN", 4.0, 40, 40, 20, 100)
    assert read_change(element) == ("stocks", 17, "MIN", 4.0)
    empty = change_element("stocks", 18, "MAX", None, 10, 10, float("-inf"), float("inf"))
    assert read_change(empty) == ("stocks", 18, "MAX", None)
    low = empty.find(f"{{{RANGE_AGGREGATE}}}MaxLow")
    assert low.get("minExclusive") is None and low.get("max") == "10.0"
    with pytest.raises(ValueError):
        read_change(etree.Element("other"))


REFUSED = {"2004": "InvalidMessage", "2011": "CannotProcessFilter"}


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, topics=())
    h.service.topics.create("stocks", MATCHER_RTREE_ENGINE, SCHEMA.to_element())
    yield h
    h.close()


@pytest.mark.parametrize("version", ["2004", "2011"])
@pytest.mark.parametrize("text", ["MIN(per) WHERE risk IN [60, 20]", "AVG(per) WHERE risk IN [1, 2]",
                                  "MIN(eps) WHERE risk IN [1, 2]", "x" * 5000])
def test_subscribe_refuses_bad_filters_with_the_spec_fault(harness, version, text):
    with pytest.raises(SoapFault) as refused:
        harness.subscribe(version, filter=text, dialect=RANGE_AGGREGATE_DIALECT)
    assert refused.value.code == SENDER
    assert refused.value.subcode.endswith(REFUSED[version])


def test_subscribe_and_receive_a_change(harness):
    harness.subscribe("2011", notify_path="/s3", filter="MIN(per) WHERE risk IN [25, 60]",
                      dialect=RANGE_AGGREGATE_DIALECT)
    harness.subscribe("2011", notify_path="/s1", filter="MIN(per) WHERE risk IN [10, 95]",
                      dialect=RANGE_AGGREGATE_DIALECT)
    harness.publish(change_element("stocks", 1, "MIN", 4, 40, 40, 20, 100))
    harness.drain()
    assert len(harness.sink.at("/s3")) == 1 and harness.sink.at("/s1") == []
