"""Batch matching: ``match_many`` / ``match_many_reporting`` answer exactly as ``match`` /
``match_reporting`` event by event, for every registered engine; ``Schema.extract_many``
reads what ``Schema.extract`` reads; the paged index's batch query finds what one query per
box finds (bulk-loaded pages, single entries, removed rows).

Events are matched in place, as children of a batch element (the server's case: no copy),
and as document roots; they are points, eCube ranges, several values, out-of-domain values,
unparseable values, or lack attributes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from matchers import FilterSpec, RTreeMatchingEngine, Schema
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute
from matchers.schema.extraction import simple_step, standalone
from wsframework import ns
from wsframework.matching import FilterFailures, InvalidFilter, UnsupportedDialect
from wsframework.matching.registry import create_matcher, known_matchers

Q = "urn:q"
XPATH10 = ns.XPATH10_DIALECT_2011
XPATH20 = ns.XPATH20_DIALECT_2011
QN = (("q", Q),)
# simple paths (read in place), an attribute, a string, and one path XPath must read
SCHEMA = Schema((
    Attribute("price", "number", "/q:quote/q:price", QN, 0, 100),
    Attribute("qty", "number", "@qty", (), 0, 10),
    Attribute("sym", "string", "q:sym", QN),
    Attribute("deep", "number", "q:deep/q:v", QN, 0, 10),
))
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

NUMBERS = st.sampled_from([-3.0, 0.0, 0.5, 5.0, 10.0, 20.0, 50.0, 99.5, 100.0, 150.0])
TEXTS = st.sampled_from(["5", " 7.5 ", "1e2", "1e999", "abc", "", "+.5", "1_0", "٣"])
SYMBOLS = st.sampled_from(["", "A", "AB", "AAAAAA", "AAAAAAx", "é"])


def _num(value: float) -> str:
    return repr(float(value))


@st.composite
def event_xml(draw) -> str:
    parts, attributes = [], ""
    for _ in range(draw(st.integers(0, 2))):  # 0: absent, 2: several values (hull)
        kind = draw(st.sampled_from(["point", "range", "text", "nested"]))
        if kind == "range":
            low = draw(NUMBERS)
            high = low + draw(st.sampled_from([0.0, 5.0, 200.0]))
            bounds = draw(st.sampled_from(["both", "min", "max"]))
            text = "".join(f' {k}="{_num(v)}"' for k, v in (("min", low), ("max", high))
                           if bounds in ("both", k))
            parts.append(f"<q:price{text}/>")
        elif kind == "text":
            parts.append(f"<q:price>{draw(TEXTS)}</q:price>")
        elif kind == "nested":
            parts.append(f"<q:price>4<q:x>2</q:x></q:price>")  # string-value "42"
        else:
            parts.append(f"<q:price>{_num(draw(NUMBERS))}</q:price>")
    if draw(st.booleans()):
        attributes = f' qty="{draw(st.one_of(NUMBERS.map(_num), TEXTS))}"'
    if draw(st.booleans()):
        parts.append(f"<q:sym>{draw(SYMBOLS)}</q:sym>")
    if draw(st.booleans()):
        parts.append(f"<q:deep><q:v>{_num(draw(NUMBERS))}</q:v></q:deep>")
    if draw(st.booleans()):
        parts.append("<!-- a comment --><?pi x?>")
    root = draw(st.sampled_from(["q:quote", "q:other"]))  # /q:quote/... needs the root step
    return f'<{root} xmlns:q="{Q}"{attributes}>{"".join(parts)}</{root}>'


def _placed(texts: list[str], in_batch: bool) -> list[etree._Element]:
    """The events as children of one batch element (in place) or as document roots."""
    if in_batch:
        batch = etree.fromstring(f'<b:batch xmlns:b="urn:b" xmlns:z="urn:z">{"".join(texts)}'
                                 f'</b:batch>')
        return list(batch)
    return [etree.fromstring(text) for text in texts]


@st.composite
def range_filter(draw) -> str:
    def predicate():
        return draw(st.one_of(
            st.tuples(st.sampled_from(["price", "deep"]), NUMBERS, NUMBERS).map(
                lambda t: f"{t[0]} in [{_num(min(t[1:]))}, {_num(max(t[1:]))}]"),
            NUMBERS.map(lambda v: f"price > {_num(v)}"),
            st.sampled_from([0.0, 1.0, 5.0, 11.0]).map(lambda v: f"qty <= {_num(v)}"),
            SYMBOLS.map(lambda s: f"sym ^= '{s}'"),
            st.sampled_from(["price exists", "sym exists", "deep exists"])))
    conjunctions = [" and ".join(predicate() for _ in range(draw(st.integers(1, 3))))
                    for _ in range(draw(st.integers(1, 2)))]
    return " or ".join(conjunctions)


XPATH_FILTERS = st.sampled_from([
    (XPATH10, "/q:quote[q:price > 10]"),
    (XPATH10, "q:price >= 5 and q:price <= 50"),
    (XPATH10, "@qty > 1 and q:sym = 'A'"),
    (XPATH10, "count(//q:v) > 0"),
    (XPATH10, "$action = 'urn:act'"),
    (XPATH20, "xs:decimal(string((q:price)[1])) > 5"),  # raises on unparseable prices
    (XPATH20, "exists(/q:quote/q:sym)"),
])
FILTERS = st.lists(st.one_of(range_filter().map(lambda t: (RANGES_DIALECT, t)), XPATH_FILTERS),
                   min_size=1, max_size=10)


def _engine(uri: str):
    try:
        return create_matcher(uri, SCHEMA.to_element())
    except Exception:
        return create_matcher(uri, None)


def _load(engine, filters) -> int:
    added = 0
    for i, (dialect, text) in enumerate(filters):
        spec = FilterSpec(dialect, text, QN)
        try:
            engine.add_filter(f"f{i}", spec)
            added += 1
        except (InvalidFilter, UnsupportedDialect):
            pass
    return added


ENGINES = sorted(known_matchers())


@pytest.mark.parametrize("uri", ENGINES)
@FAST
@given(filters=FILTERS, texts=st.lists(event_xml(), min_size=1, max_size=8),
       in_batch=st.booleans())
def test_match_many_equals_match_event_by_event_for_every_engine(uri, filters, texts, in_batch):
    engine = _engine(uri)
    _load(engine, filters)
    events = _placed(texts, in_batch)
    variables = {"action": "urn:act"}
    assert engine.match_many(events) == [engine.match(e) for e in events]
    assert engine.match_many(events, variables=variables) == [
        engine.match(e, variables=variables) for e in events]
    reported = [FilterFailures() for _ in events]
    expected = [FilterFailures() for _ in events]
    singles = [engine.match_reporting(e, f, variables=variables)
               for e, f in zip(events, expected)]
    assert engine.match_many_reporting(events, reported, variables=variables) == singles
    assert [f.failed.keys() for f in reported] == [f.failed.keys() for f in expected]


def test_the_comparison_above_has_teeth():
    """The box engines load these filters and match some of these events, and one filter
    fails on one event (so the failure comparison compares something)."""
    engine = RTreeMatchingEngine(SCHEMA)
    assert _load(engine, [(RANGES_DIALECT, "price in [0.0, 50.0]"),
                          (XPATH20, "xs:decimal(string((q:price)[1])) > 5")]) == 2
    events = _placed([f'<q:quote xmlns:q="{Q}"><q:price>7</q:price></q:quote>',
                      f'<q:quote xmlns:q="{Q}"><q:price>abc</q:price></q:quote>'], True)
    failures = [FilterFailures(), FilterFailures()]
    assert engine.match_many_reporting(events, failures) == [["f0", "f1"], []]
    assert not failures[0] and list(failures[1].failed) == ["f1"]


def test_failures_must_come_one_per_event():
    engine = RTreeMatchingEngine(SCHEMA)
    with pytest.raises(ValueError):
        engine.match_many_reporting([etree.Element("e")], [])


@FAST
@given(st.lists(event_xml(), min_size=1, max_size=8), st.booleans())
def test_extract_many_reads_what_extract_reads(texts, in_batch):
    events = _placed(texts, in_batch)
    boxes = SCHEMA.extract_many(events)
    for i, event in enumerate(events):
        one = SCHEMA.extract(standalone(event))
        assert np.array_equal(boxes.lo[i], one.lo) and np.array_equal(boxes.hi[i], one.hi)
        assert bool(boxes.clean[i]) == one.clean
        assert boxes.box(i).values == one.values and boxes.box(i).clean == one.clean


def test_simple_steps_are_only_single_child_or_attribute_steps():
    assert simple_step("q:price", QN) == ("child", None, f"{{{Q}}}price")
    assert simple_step("/q:quote/@q:t", QN) == ("attribute", f"{{{Q}}}quote", f"{{{Q}}}t")
    assert simple_step("@qty", ()) == ("attribute", None, "qty")
    assert simple_step("price", ()) == ("child", None, "price")  # XPath 1.0: no namespace
    for path in ("q:deep/q:v", "//q:price", "q:price/text()", "../q:x", "child::q:price",
                 "q:price[1]", "x:price"):
        assert simple_step(path, QN) is None, path


def test_a_detached_element_is_copied_to_stand_alone():
    batch = etree.fromstring(f'<b xmlns:q="{Q}"><q:quote><q:price>5</q:price></q:quote></b>')
    event = batch[0]
    batch.remove(event)
    assert event.getparent() is None
    alone = standalone(event)
    assert alone is not event
    assert etree.XPath("/q:quote/q:price/text()", namespaces={"q": Q})(alone) == ["5"]
    root = etree.fromstring(f'<q:quote xmlns:q="{Q}"/>')
    assert standalone(root) is root


# -- the paged index: pages, single entries, removed rows -------------------------------------

BOX_SCHEMA = Schema(tuple(Attribute(f"x{j}", "number", f"x{j}", (), 0, 10) for j in range(3)))


def _box_events(points, highs=None) -> list[etree._Element]:
    batch = etree.Element("batch")
    for k, point in enumerate(points):
        event = etree.SubElement(batch, "event")
        for j, value in enumerate(point):
            child = etree.SubElement(event, f"x{j}")
            if highs is None:
                child.text = repr(float(value))
            else:  # an eCube event: a range per attribute
                child.set("min", repr(float(value)))
                child.set("max", repr(float(highs[k][j])))
    return list(batch)


@FAST
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 300), st.integers(0, 120),
       st.integers(0, 150), st.booleans())
def test_batch_index_pass_equals_one_query_per_event(seed, bulk, singles, removed, cubes):
    rng = np.random.default_rng(seed)
    engine = RTreeMatchingEngine(BOX_SCHEMA)

    def boxes(n):
        lo = np.round(rng.uniform(-1, 10, (n, 3)), 1)
        return np.clip(lo, 0, 10), np.clip(lo + np.round(rng.uniform(0, 6, (n, 3)), 1), 0, 10)

    lo, hi = boxes(bulk)
    engine.bulk_load([f"b{i}" for i in range(bulk)], lo, hi)
    lo, hi = boxes(singles)
    for i in range(singles):  # single R-tree entries until the next repack
        engine.add_filter(f"s{i}", FilterSpec(
            RANGES_DIALECT, " and ".join(f"x{j} in [{float(lo[i, j])!r}, {float(hi[i, j])!r}]"
                                         for j in range(3))))
    ids = engine.filter_ids()
    for filter_id in rng.permutation(ids)[:removed].tolist():
        engine.remove_filter(filter_id)
    points = np.round(rng.uniform(-1, 11, (40, 3)), 1)
    events = (_box_events(points, points + np.round(rng.uniform(0, 3, (40, 3)), 1)) if cubes
              else _box_events(points))
    assert engine.match_many(events) == [engine.match(e) for e in events]


@pytest.mark.parametrize("scan", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_the_r_tree_batch_query_and_the_numpy_scan_agree(monkeypatch, scan, seed):
    """Beyond its scan limits the engine asks the R-tree's batch query for pages and single
    entries: both ways give what one query per event gives."""
    from matchers.paged_index import PagedBoxIndex
    if not scan:
        monkeypatch.setattr(PagedBoxIndex, "SCAN_PAGES", 0)
        monkeypatch.setattr(PagedBoxIndex, "SCAN_SINGLES", 0)
    rng = np.random.default_rng(seed)
    engine = RTreeMatchingEngine(BOX_SCHEMA)
    lo = np.round(rng.uniform(0, 8, (500, 3)), 1)
    engine.bulk_load([f"b{i}" for i in range(500)], lo, lo + 2)
    for i in range(60):
        low = np.round(rng.uniform(0, 8, 3), 1)
        engine.add_filter(f"s{i}", FilterSpec(RANGES_DIALECT, " and ".join(
            f"x{j} in [{float(low[j])!r}, {float(low[j]) + 1.5!r}]" for j in range(3))))
    for i in range(0, 500, 7):
        engine.remove_filter(f"b{i}")
    events = _box_events(np.round(rng.uniform(0, 10, (64, 3)), 1))
    answers = engine.match_many(events)
    assert answers == [engine.match(e) for e in events]
    assert sum(map(len, answers)) > 64  # the events meet boxes: the comparison compares


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789+-.eE_ \t\n\u00a0\u2003infaINFAx٣٤")),
               max_size=8))
def test_batch_parsed_numbers_are_parse_number(text):
    from matchers.schema.codecs import parse_number
    from matchers.schema.extraction import _numbers
    fast, exact = _numbers([text]), parse_number(text)
    if exact is not None:
        assert fast == [exact]
    else:  # no number, or one too large to be finite (absent either way)
        assert fast is None or not np.isfinite(fast[0])


def test_pack_pages_single_entries_and_keeps_the_answers():
    rng = np.random.default_rng(5)
    engine = RTreeMatchingEngine(BOX_SCHEMA)
    for i in range(300):
        low = np.round(rng.uniform(0, 8, 3), 1)
        engine.add_filter(f"s{i}", FilterSpec(RANGES_DIALECT, " and ".join(
            f"x{j} in [{float(low[j])!r}, {float(low[j]) + 2.5!r}]" for j in range(3))))
    engine.remove_filter("s7")
    events = _box_events(np.round(rng.uniform(0, 10, (64, 3)), 1))
    before = [engine.match(e) for e in events]
    assert engine._index._singles > 0
    engine.pack()
    assert engine._index._singles == 0 and len(engine._index) == 299
    assert engine.match_many(events) == before == [engine.match(e) for e in events]
    assert sum(map(len, before)) > 0
