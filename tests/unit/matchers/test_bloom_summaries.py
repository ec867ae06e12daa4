"""Bloom-filter summaries of equality-tested string attributes: the filter, its wire form
(and hostile inputs), the schema opt-in, engine summaries, routing and sub-tree unions."""

import base64

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from matchers import FilterSpec, InvalidFilter, RTreeMatchingEngine, RTreeRouteSet
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute, InvalidSchema, Schema
from matchers.schema.codecs import string_coordinate
from matchers.summary import BloomFilter, Summary, cut, union
from matchers.summary.bloom import MAX_BITS, union_of
from matchers.vocabulary import EDN

SCHEMA = Schema((Attribute("price", "number", "price", (), 0, 100),
                 Attribute("symbol", "string", "symbol", summary="bloom")))
PLAIN = Schema((Attribute("price", "number", "price", (), 0, 100),
                Attribute("symbol", "string", "symbol")))
POOL = ["GE", "IBM", "MSFT", "AAPL", "ORCL", "SAP", "T", "F", "ABCDEFG", "ABCDEFH"]
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _engine(subscriptions, schema=SCHEMA):
    engine = RTreeMatchingEngine(schema)
    engine.add_filters((f"s{i}", FilterSpec(RANGES_DIALECT, text))
                       for i, text in enumerate(subscriptions))
    return engine


def _equality(symbol, low, high):
    return f"price >= {low} and price <= {high} and symbol = '{symbol}'"


def _event(symbol, price):
    return etree.fromstring(f"<q><price>{price}</price><symbol>{symbol}</symbol></q>")


# -- the filter -------------------------------------------------------------------------------
def test_filter_holds_its_values_and_rejects_most_others():
    rng = np.random.default_rng(1)
    values = rng.random(2000)
    bloom = BloomFilter.of(values, 0.01)
    assert bloom.bits & (bloom.bits - 1) == 0 and bloom.hashes == 7 and bloom.values == 2000
    assert bloom.contains(values).all()
    assert bloom.contains(rng.random(50_000)).mean() < 0.02
    assert bloom.false_positive_rate < 0.02
    assert bloom.contains(np.array([-0.0]))[0] == bloom.contains(np.array([0.0]))[0]


def test_folding_is_exact_and_unfolding_answers_alike():
    values = np.random.default_rng(2).random(300)
    bloom = BloomFilter.of(values, 0.001)
    folded = bloom.resized(bloom.bits // 4)
    rebuilt = BloomFilter(bloom.bits // 4, bloom.hashes, 0,
                          np.zeros(bloom.bits // 32, dtype=np.uint8)).with_values(values)
    assert folded.to_bytes() == rebuilt.to_bytes()
    probes = np.random.default_rng(3).random(5000)
    assert np.array_equal(bloom.resized(bloom.bits * 4).contains(probes), bloom.contains(probes))


def test_union_of_filters_with_other_sizes_and_hash_counts_misses_nothing():
    rng = np.random.default_rng(4)
    a, b, extra = rng.random(100), rng.random(3000), rng.random(50)
    combined = union_of([BloomFilter.of(a, 0.1), BloomFilter.of(b, 0.0001)], extra)
    assert combined.hashes == BloomFilter.of(a, 0.1).hashes
    assert combined.contains(np.concatenate([a, b, extra])).all()
    with pytest.raises(ValueError):
        union_of([])


# -- the summary value and its wire form -------------------------------------------------------
def _bloom_summary():
    bloom = BloomFilter.of([string_coordinate("GE"), string_coordinate("IBM")])
    return Summary(SCHEMA.dims, [[10.0, 0.0]], [[20.0, SCHEMA.domain_hi[1]]], SCHEMA,
                   {"symbol": bloom})


def test_covers_intersects_and_contains_box_consult_the_filter():
    summary = _bloom_summary()
    ge, xx = string_coordinate("GE"), string_coordinate("XX")
    assert summary.covers([15, ge]) and not summary.covers([15, xx]) and not summary.covers([30, ge])
    assert summary.intersects([15, xx], [15, xx + 0.01])  # an interval passes the filter
    assert not summary.intersects([15, xx], [16, xx])
    assert summary.contains_box([12, ge], [18, ge])
    assert not summary.contains_box([12, xx], [18, xx]) and not summary.contains_box([12, ge], [18, xx])
    assert summary.bloom_dims == (1,)
    assert summary != Summary(summary.dims, summary.mins, summary.maxs, SCHEMA)
    with pytest.raises(ValueError):
        Summary(("price",), [[0.0]], [[1.0]], None, {"symbol": summary.blooms["symbol"]})


def test_wire_round_trip_is_exact():
    summary = _bloom_summary()
    text = summary.to_text()
    assert "<edn:Bloom" in text and 'dim="symbol"' in text and 'encoding="base64"' in text
    again = Summary.from_text(text)
    assert again == summary
    assert again.blooms["symbol"].to_bytes() == summary.blooms["symbol"].to_bytes()
    attribute = again.schema.attributes[1]
    assert (attribute.summary, attribute.false_positive_rate) == ("bloom", 0.01)


def test_schema_opt_in_syntax():
    element = etree.fromstring(
        f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute name="s" type="string" xpath="s" '
        'summary="bloom" falsePositiveRate="0.001"/></edn:Schema>')
    attribute = Schema.from_element(element).attributes[0]
    assert (attribute.summary, attribute.false_positive_rate) == ("bloom", 0.001)
    assert Schema.from_element(Schema((attribute,)).to_element()).attributes[0].false_positive_rate == 0.001
    for bad in ('summary="bloom" falsePositiveRate="1.5"', 'summary="bloom" falsePositiveRate="x"',
                'falsePositiveRate="0.1"', 'summary="sketch"'):
        with pytest.raises(InvalidSchema):
            Schema.from_element(etree.fromstring(
                f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute name="s" type="string" xpath="s" '
                f'{bad}/></edn:Schema>'))
    with pytest.raises(InvalidSchema):
        Attribute("p", "number", "p", (), 0, 1, summary="bloom")
    assert SCHEMA == PLAIN  # a hint on how summaries are made, not on how events are read


def _with_bloom(**changes):
    element = _bloom_summary().to_element()
    bloom = element.find(f"{{{EDN}}}Bloom")
    text = changes.pop("text", None)
    for name, value in changes.items():
        bloom.set(name, value)
    if text is not None:
        bloom.text = text
    return element


@pytest.mark.parametrize("element", [
    _with_bloom(text="!!!not base64!!!"),
    _with_bloom(bits=str(MAX_BITS * 2)),
    _with_bloom(bits="96"),
    _with_bloom(bits="128"),                     # the text holds 64 bits' worth
    _with_bloom(text=base64.b64encode(b"\0" * 7).decode()),
    _with_bloom(text=base64.b64encode(b"\0" * 9).decode()),
    _with_bloom(hashes="0"),
    _with_bloom(hashes="33"),
    _with_bloom(hashes="²"),
    _with_bloom(values="-1"),
    _with_bloom(dim="volume"),
    _with_bloom(encoding="hex"),
    _with_bloom(bits="1" * 40),
], ids=lambda e: "case")
def test_hostile_bloom_elements_are_refused(element):
    with pytest.raises(InvalidFilter):
        Summary.from_element(element)


def test_duplicate_and_surplus_bloom_elements_are_refused():
    element = _bloom_summary().to_element()
    element.append(element.find(f"{{{EDN}}}Bloom").__copy__())
    with pytest.raises(InvalidFilter):
        Summary.from_element(element)


# -- the engine: when a summary uses a filter ---------------------------------------------------
def test_equality_subscriptions_give_widened_boxes_and_a_filter():
    engine = _engine([_equality(s, 10, 20) for s in POOL] + [_equality("GE", 50, 60)])
    summary = engine.summary(1.0)
    assert list(summary.blooms) == ["symbol"] and len(summary) == 2  # merged across symbols
    assert np.all(summary.mins[:, 1] == 0.0) and np.all(summary.maxs[:, 1] == SCHEMA.domain_hi[1])
    assert summary.blooms["symbol"].contains([string_coordinate(s) for s in POOL]).all()
    assert engine.summary(0.01).blooms == summary.blooms  # precision cuts keep the filter
    assert not _engine([_equality(s, 10, 20) for s in POOL], PLAIN).summary(1.0).blooms


@pytest.mark.parametrize("other", ["price >= 3", "symbol >= 'A' and symbol <= 'C'",
                                   "price <= 4 or symbol = 'GE'"])
def test_any_subscription_not_testing_equality_opts_the_server_out(other):
    engine = _engine([_equality(s, 10, 20) for s in POOL])
    assert engine.summary(1.0).blooms
    engine.add_filter("other", FilterSpec(RANGES_DIALECT, other))
    plain = engine.summary(1.0)
    assert not plain.blooms
    engine.remove_filter("other")
    assert engine.summary(1.0).blooms


# -- routing never misses an event: a brute-force oracle ----------------------------------------
subscription = st.tuples(st.sampled_from(POOL), st.integers(0, 90), st.integers(0, 30))
server = st.lists(subscription, min_size=1, max_size=25)
event = st.tuples(st.sampled_from(POOL + ["XX", "IBMX", "ABCDEFZ"]), st.integers(-5, 120))


def _matches(subscriptions, symbol, price):
    return any(s == symbol and low <= price <= low + width for s, low, width in subscriptions)


def _point(symbol, price):
    return [min(max(float(price), 0.0), 100.0), string_coordinate(symbol)]


@FAST
@given(servers=st.lists(server, min_size=1, max_size=4), events=st.lists(event, min_size=1, max_size=30),
       opted_out=st.booleans())
def test_bloom_summaries_never_miss_a_matching_event(servers, events, opted_out):
    summaries = []
    for number, subscriptions in enumerate(servers):
        texts = [_equality(s, low, low + width) for s, low, width in subscriptions]
        if opted_out and number == 0:
            texts.append("price >= 200")  # a range-free server: plain boxes, mixed in the union
        summaries.append(_engine(texts).summary(1.0))
    routes = RTreeRouteSet(SCHEMA)
    for number, summary in enumerate(summaries):
        routes.set_summary(f"server-{number}", summary)
    expected = [{f"server-{n}" for n, subs in enumerate(servers) if _matches(subs, sym, price)}
                for sym, price in events]
    points = np.array([_point(sym, price) for sym, price in events])
    xml = [_event(sym, price) for sym, price in events]
    for precision in (1.0, 0.5, 0.1, 0.01):
        routes.set_precision(precision)
        for wanted, by_point, by_event in zip(expected, routes.route_batch(points), routes.match_many(xml)):
            assert wanted <= by_point and wanted <= set(by_event)
    subtree = union(summaries)
    if not opted_out:
        assert list(subtree.blooms) == ["symbol"]
    for trimmed in (subtree, cut(subtree, 1), Summary.from_text(cut(subtree, 3).to_text())):
        for wanted, point in zip(expected, points):
            assert not wanted or trimmed.covers(point)


def test_ecube_events_spanning_symbols_pass_the_filter():
    routes = RTreeRouteSet(SCHEMA)
    routes.set_summary("a", _engine([_equality("GE", 10, 20)]).summary(1.0))
    low, high = string_coordinate("A"), string_coordinate("Z")
    assert routes.route_box([15, low], [15, high]) == {"a"}
    assert routes.route([15, string_coordinate("IBM")]) == frozenset()
    assert routes.route_batch([[15, low]], [[15, high]]) == [{"a"}]


def test_describe_reports_the_filters():
    routes = RTreeRouteSet(SCHEMA)
    assert routes.describe()["bloom_dims"] == [] and routes.describe()["bloom_false_positive_rate"] is None
    routes.set_summary("a", _engine([_equality(s, 10, 20) for s in POOL]).summary(1.0))
    routes.set_summary("b", _engine(["price >= 3"]).summary(1.0))
    described = routes.describe()
    assert described["bloom_dims"] == ["symbol"] and described["bloom_servers"] == 1
    assert 0 < described["bloom_false_positive_rate"] < 0.01


# -- sub-tree unions --------------------------------------------------------------------------
def test_union_inserts_point_values_and_drops_the_filter_for_intervals():
    bloomed = _engine([_equality("GE", 10, 20)]).summary(1.0)
    points = _engine([_equality("IBM", 30, 40)], PLAIN).summary(1.0)  # degenerate boxes only
    combined = union([bloomed, points])
    assert list(combined.blooms) == ["symbol"]
    assert combined.covers(_point("IBM", 35)) and combined.covers(_point("GE", 15))
    assert not combined.covers(_point("MSFT", 35))
    assert np.all(combined.mins[:, 1] == 0.0)
    ranged = _engine(["price >= 50 and symbol >= 'A' and symbol <= 'C'"], PLAIN).summary(1.0)
    loose = union([bloomed, ranged])
    assert not loose.blooms and loose.covers(_point("GE", 15)) and loose.covers(_point("B", 60))
    assert cut(combined, 1).blooms == combined.blooms


@FAST
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=60))
def test_interval_sweep_finds_the_maximal_rectangles(intervals):
    from matchers.summary.equality import _maximal
    from matchers.summary.maximal import MaximalRectangles

    mins = np.array([[low, 0.5] for low, _ in intervals], dtype=float)
    maxs = np.array([[low + width, 0.5] for low, width in intervals], dtype=float)
    general = MaximalRectangles(2)
    general.load(np.arange(len(mins)), mins, maxs)
    assert _maximal(mins, maxs, [0]).tolist() == general.maximal_rows().tolist()
