"""RTreeMatchingEngine: the subscription server's engine, beyond the shared conformance test."""

import numpy as np
import pytest
from lxml import etree

from matchers.compiled_filter import CompiledFilter
from matchers import (
    FilterSpec,
    InvalidFilter,
    InvalidSchema,
    RTreeMatchingEngine,
    Schema,
    UnknownFilter,
    UnsupportedDialect,
    create_matcher,
)
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute
from matchers.summary import MaximalRectangles
from matchers.vocabulary import EDN, MATCHER_RTREE_ENGINE

OPTIONS = f"""<adm:Options xmlns:adm="urn:wsframework:admin">
<edn:Schema xmlns:edn="{EDN}" xmlns:q="urn:quotes">
  <edn:Attribute name="price"  type="number" xpath="/q:quote/q:price" min="0" max="1000"/>
  <edn:Attribute name="symbol" type="string" xpath="/q:quote/q:symbol"/>
  <edn:Attribute name="volume" type="number" xpath="/q:quote/@volume" min="0" max="1e9"/>
</edn:Schema></adm:Options>"""
XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"  # the event is the context node
XPATH20 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath20"
Q = (("q", "urn:quotes"),)


def ranges(text):
    return FilterSpec(RANGES_DIALECT, text)


def quote(body="", attributes=""):
    return etree.fromstring(f'<q:quote xmlns:q="urn:quotes"{attributes}>{body}</q:quote>')


@pytest.fixture
def engine():
    return create_matcher(MATCHER_RTREE_ENGINE, etree.fromstring(OPTIONS))


def test_created_from_topic_options(engine):
    assert isinstance(engine, RTreeMatchingEngine)
    assert engine.schema.dims == ("price", "symbol", "volume")
    assert engine.describe() == {"uri": MATCHER_RTREE_ENGINE, "filters": 0,
                                 "dims": ["price", "symbol", "volume"], "rectangles": 0, "maximal": 0}
    with pytest.raises(InvalidSchema):
        RTreeMatchingEngine(etree.fromstring("<options/>"))


def test_mixed_dialects_match_in_insertion_order(engine):
    engine.add_filter("ge-band", ranges("price >= 30 and price < 50 and symbol = 'GE' or symbol ^= 'IB'"))
    engine.add_filter("traded", ranges("volume exists"))
    engine.add_filter("xpath", FilterSpec(XPATH10, "/q:quote[q:price > 30 and q:symbol = 'GE']", Q))
    engine.add_filter("xpath2", FilterSpec(XPATH20, "/q:quote[xs:decimal(q:price) lt 10]", Q))
    engine.add_filter("band", ranges("price in [10, 20)"))
    assert engine.match(quote("<q:symbol>GE</q:symbol><q:price>42</q:price>")) == ["ge-band", "xpath"]
    assert engine.match(quote("<q:symbol>IBM</q:symbol><q:price>5</q:price>", ' volume="7"')) == [
        "ge-band", "traded", "xpath2"]
    assert engine.match(quote("<q:price>20</q:price>")) == []
    assert engine.match(quote("<q:price>10</q:price>")) == ["band"]


def test_replace_keeps_the_position_and_remove_forgets(engine):
    engine.add_filter("a", ranges("price > 1"))
    engine.add_filter("b", ranges("price > 2"))
    engine.add_filter("a", ranges("price < 1 or price > 500"))  # two rectangles now
    assert engine.filter_ids() == ["a", "b"] and engine.rectangle_count == 3
    assert engine.match(quote("<q:price>600</q:price>")) == ["a", "b"]
    engine.remove_filter("a")
    assert engine.filter_ids() == ["b"] and engine.rectangle_count == 1
    with pytest.raises(UnknownFilter):
        engine.remove_filter("a")
    engine.add_filter("a", ranges("price > 1"))
    assert engine.match(quote("<q:price>600</q:price>")) == ["b", "a"]  # re-added: at the end


def test_invalid_filters_change_nothing(engine):
    engine.add_filter("a", ranges("price > 1"))
    for spec in (ranges("price >"), ranges("colour = 'x'"), FilterSpec(XPATH10, "/q:quote[", Q)):
        with pytest.raises(InvalidFilter):
            engine.add_filter("a", spec)
    with pytest.raises(UnsupportedDialect):
        engine.add_filter("a", FilterSpec("urn:other", "x"))
    assert engine.filter_ids() == ["a"] and engine.match(quote("<q:price>2</q:price>")) == ["a"]


def test_clamped_values_get_the_exact_check(engine):
    engine.add_filter("cheap", ranges("price <= 1000"))
    engine.add_filter("dear", ranges("price >= 2000"))
    assert engine.match(quote("<q:price>1500</q:price>")) == []
    assert engine.match(quote("<q:price>2500</q:price>")) == ["dear"]
    assert engine.match(quote("<q:price>999</q:price>")) == ["cheap"]


def test_a_failing_filter_does_not_fail_the_match(engine):
    engine.add_filter("needs-variable", FilterSpec(XPATH10, "/q:quote[q:price > $limit]", Q))
    engine.add_filter("plain", ranges("price > 1"))
    event = quote("<q:price>5</q:price>")
    assert engine.match(event) == ["plain"]
    assert engine.match(event, variables={"limit": 1}) == ["needs-variable", "plain"]


def test_without_a_schema_xpath_still_works_and_range_filters_are_refused():
    engine = RTreeMatchingEngine()
    engine.add_filter("x", FilterSpec(XPATH10, "/q:quote[q:price > 3]", Q))
    assert engine.match(quote("<q:price>5</q:price>")) == ["x"]
    assert engine.match(quote("<q:price>1</q:price>")) == []
    with pytest.raises(InvalidFilter, match="without a schema"):
        engine.add_filter("r", ranges("price > 1"))
    assert len(engine.summary(1.0)) == 1  # no dimensions: one box, every event routes here


def test_bulk_load_box_filters_then_incremental_changes():
    schema = Schema(tuple(Attribute(f"x{i}", "number", f"/e/@x{i}", (), 0, 10) for i in range(3)))
    engine = RTreeMatchingEngine(schema)
    rng = np.random.default_rng(0)
    lo = rng.uniform(0, 8, (5000, 3))
    hi = lo + 2
    engine.bulk_load([f"s{i}" for i in range(5000)], lo, hi)
    point = np.array([4.0, 4.0, 4.0])
    expected = [f"s{i}" for i in np.flatnonzero(np.all((lo <= point) & (hi >= point), axis=1))]
    event = etree.fromstring('<e x0="4" x1="4" x2="4"/>')
    assert engine.match(event) == expected and engine.match_box(point) == expected
    engine.add_filter("r", FilterSpec(RANGES_DIALECT, "x0 > 3.5"))
    engine.remove_filter(expected[0])
    assert engine.match(event) == expected[1:] + ["r"]
    with pytest.raises(ValueError, match="distinct"):
        engine.bulk_load(["r"], lo[:1], hi[:1])
    with pytest.raises(ValueError, match="inside"):
        engine.bulk_load(["z"], np.full((1, 3), -100.0), np.full((1, 3), 20.0))
    with pytest.raises(ValueError, match="finite"):
        engine.bulk_load(["z"], hi[:1], lo[:1])


def test_add_filters_validates_everything_first(engine):
    with pytest.raises(InvalidFilter):
        engine.add_filters([("a", ranges("price > 1")), ("b", ranges("price >"))])
    assert len(engine) == 0
    engine.add_filters([(f"f{i}", ranges(f"price >= {i}")) for i in range(100)])
    assert engine.match(quote("<q:price>2</q:price>")) == ["f0", "f1", "f2"]
    with pytest.raises(ValueError, match="new ids"):
        engine.add_filters([("f1", ranges("price > 1"))])


def test_small_batches_into_a_full_engine_summarize_as_one_by_one():
    schema = Schema((Attribute("x", "number", "/e/@x", (), 0, 10),
                     Attribute("y", "number", "/e/@y", (), 0, 10)))
    rng = np.random.default_rng(4)
    a, b = rng.uniform(0, 10, (2, 600, 2)).round(1)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    specs = [(f"s{i}", ranges(f"x in [{lo[i, 0]}, {hi[i, 0]}] and y in [{lo[i, 1]}, {hi[i, 1]}]"))
             for i in range(600)]
    batched, single = RTreeMatchingEngine(schema), RTreeMatchingEngine(schema)
    batched.add_filters(specs[:400])  # rebuilt from arrays
    one_by_one = []
    add = MaximalRectangles.add
    MaximalRectangles.add = lambda self, *args: one_by_one.append(args) or add(self, *args)
    try:
        for start in range(400, 600, 20):  # a twentieth of what is held: added in bulk
            batched.add_filters(specs[start:start + 20])
    finally:
        MaximalRectangles.add = add
    assert one_by_one == []
    for filter_id, spec in specs:
        single.add_filter(filter_id, spec)
    assert batched.maximal_count == single.maximal_count
    assert set(map(tuple, np.hstack(batched._maximal.maximal_boxes()))) == \
        set(map(tuple, np.hstack(single._maximal.maximal_boxes())))
    event = etree.fromstring('<e x="5" y="5"/>')
    assert sorted(batched.match(event)) == sorted(single.match(event))


def test_repacking_after_many_single_insertions_keeps_answers():
    schema = Schema((Attribute("x", "number", "/e/@x", (), 0, 10),
                     Attribute("y", "number", "/e/@y", (), 0, 10)))
    engine = RTreeMatchingEngine(schema)
    rng = np.random.default_rng(1)
    lo = rng.uniform(0, 9, (4200, 2))
    for i in range(4200):
        engine.bulk_load([f"s{i}"], lo[i:i + 1], lo[i:i + 1] + 1)  # one at a time: singles
    assert engine._index._paged > 0  # repacked along the way
    for i in range(0, 4200, 2):
        engine.remove_filter(f"s{i}")
    point = np.array([5.0, 5.0])
    inside = np.all((lo <= point) & (lo + 1 >= point), axis=1)
    assert engine.match_box(point) == [f"s{i}" for i in np.flatnonzero(inside) if i % 2]


def test_bounding_box_is_the_compiled_filters_bounding_box():
    from route_manager.placement_router import subscription_box
    schema = Schema((Attribute("price", "number", "/e/@price", (), 0, 10),
                     Attribute("qty", "number", "/e/@qty", (), 0, 10)))
    engine = RTreeMatchingEngine(schema)
    spec = ranges("price in [1, 2] and qty < 3 or price in [5, 9]")
    engine.add_filter("f", spec)
    lo, hi = engine.bounding_box("f")
    want_lo, want_hi = subscription_box(engine.schema, spec)
    assert lo.tolist() == want_lo.tolist() and hi.tolist() == want_hi.tolist()
    assert engine.bounding_box("unknown") is None


def test_an_exact_range_filter_kept_as_its_spec_still_checks_unclean_events():
    """A value outside the domain is clamped (the event's box is unclean): the filter is
    compiled again from its spec to check the real value."""
    schema = Schema((Attribute("price", "number", "/e/@price", (), 0, 10),))
    engine = RTreeMatchingEngine(schema)
    engine.add_filter("top", ranges("price >= 9"))
    engine.add_filter("mid", ranges("price in [2, 3]"))
    assert not isinstance(engine._table.compiled[engine._table.seq_of["top"]], CompiledFilter)
    assert engine.match(etree.fromstring('<e price="50"/>')) == ["top"]  # clamped to 10
    assert engine.match(etree.fromstring('<e price="2.5"/>')) == ["mid"]
    assert engine.match(etree.fromstring('<e price="-4"/>')) == []  # clamped to 0
