"""Property tests: every box engine agrees with the oracles, and summaries cover their filters.

Oracles:
* ``BruteForceMatcher`` (numpy scan, same compiled filters) for the R-tree engine;
* the exact check of every filter on every event (no boxes at all), which tests that the
  boxes cover their filters and that the box-exact shortcut is right;
* a direct evaluation of the parsed range filter on point events (plain comparisons), which
  tests the interval algebra;
* lxml (``XPathFilterMatcher``) for XPath filters going through range extraction.

The schema has two numbers (one read from an attribute), a string (with values sharing their
first 6 bytes, so the string coordinate collides) and events that are points, eCube ranges,
several values, out-of-domain values, or missing attributes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from matchers import (
    BruteForceMatcher,
    FilterSpec,
    InvalidFilter,
    RTreeMatchingEngine,
    RTreeRouteSet,
    Schema,
    XPathFilterMatcher,
)
from matchers.box_filters import compile_filter
from matchers.ranges import RANGES_DIALECT, parse_range_filter
from matchers.schema import Attribute

Q = "urn:q"
# the 2011 dialect: event as context node in every engine (the XPath matcher evaluates the
# 2004/08 dialect on the notification envelope, as that submission says)
XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"
SCHEMA = Schema((
    Attribute("price", "number", "/q:quote/q:price", (("q", Q),), 0, 100),
    Attribute("qty", "number", "/q:quote/@qty", (("q", Q),), 0, 10),
    Attribute("sym", "string", "/q:quote/q:sym", (("q", Q),)),
))
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

NUMBERS = st.sampled_from([-3.0, 0.0, 0.5, 5.0, 10.0, 20.0, 50.0, 99.5, 100.0, 150.0])
QTYS = st.sampled_from([0.0, 1.0, 5.0, 10.0, 11.0])
SYMBOLS = st.sampled_from(["", "A", "AB", "ABC", "B", "AAAAAA", "AAAAAAx", "AAAAAAy", "é"])


def _num(value: float) -> str:
    return repr(float(value))


@st.composite
def numeric_predicate(draw, name: str, values) -> str:
    a, b = sorted([draw(values), draw(values)])
    form = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "in[]", "in()", "in[)", "in(]",
                                 "exists", "mirror"]))
    if form == "exists":
        return f"{name} exists"
    if form == "mirror":
        return f"{_num(a)} <= {name}"
    if form.startswith("in"):
        return f"{name} in {form[2]}{_num(a)}, {_num(b)}{form[3]}"
    return f"{name} {form} {_num(a)}"


@st.composite
def string_predicate(draw) -> str:
    value = draw(SYMBOLS)
    form = draw(st.sampled_from(["=", "^=", "<", ">=", "exists"]))
    return "sym exists" if form == "exists" else f"sym {form} '{value}'"


PREDICATE = st.one_of(numeric_predicate("price", NUMBERS), numeric_predicate("qty", QTYS),
                      string_predicate())
RANGE_FILTER = st.lists(st.lists(PREDICATE, min_size=1, max_size=3).map(" and ".join),
                        min_size=1, max_size=3).map(" or ".join)


@st.composite
def events(draw) -> etree._Element:
    parts, attributes = [], ""
    for _ in range(draw(st.integers(0, 2))):  # 0: absent, 2: several values (hull)
        if draw(st.booleans()):
            low = draw(NUMBERS)
            high = low + draw(st.sampled_from([0.0, 5.0, 200.0]))
            bounds = draw(st.sampled_from(["both", "min", "max"]))
            text = "".join(f' {k}="{_num(v)}"' for k, v in (("min", low), ("max", high))
                           if bounds in ("both", k))
            parts.append(f"<q:price{text}/>")
        else:
            parts.append(f"<q:price>{_num(draw(NUMBERS))}</q:price>")
    if draw(st.booleans()):
        attributes = f' qty="{_num(draw(QTYS))}"'
    if draw(st.booleans()):
        parts.append(f"<q:sym>{draw(SYMBOLS)}</q:sym>")
    if draw(st.booleans()):
        parts.append("<q:price>not a number</q:price>")
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"{attributes}>{"".join(parts)}</q:quote>')


def _compiled_or_none(text: str):
    try:
        return compile_filter(FilterSpec(RANGES_DIALECT, text), SCHEMA)
    except InvalidFilter:
        return None  # contradictory conjunctions are refused; skip them


def _valid_filters(texts: list[str]) -> list[str]:
    return [t for t in texts if _compiled_or_none(t) is not None]


@FAST
@given(st.lists(RANGE_FILTER, min_size=1, max_size=12), st.lists(events(), min_size=1, max_size=8))
def test_range_filters_rtree_equals_brute_force_equals_exact(texts, event_list):
    texts = _valid_filters(texts)
    engine, brute = RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA)
    compiled = {}
    for i, text in enumerate(texts):
        spec = FilterSpec(RANGES_DIALECT, text)
        engine.add_filter(f"f{i}", spec)
        brute.add_filter(f"f{i}", spec)
        compiled[f"f{i}"] = compile_filter(spec, SCHEMA)
    for event in event_list:
        box = SCHEMA.extract(event)
        exact = [k for k, c in compiled.items() if c.check(event, box, None)]
        assert engine.match(event) == brute.match(event) == exact


def _direct(text: str, values: tuple) -> bool:
    """Evaluate a range filter on a point event with plain comparisons (independent of the
    interval algebra)."""
    names = {"price": 0, "qty": 1, "sym": 2}
    for conjunction in parse_range_filter(text).conjunctions:
        ok = True
        for p in conjunction:
            value = values[names[p.name]]
            if value is None:
                ok = False
                break
            v = value[0]
            literal = p.value
            if p.op == "exists":
                continue
            if p.op == "^=":
                ok = v.startswith(literal)
            elif p.op == "in":
                low_ok = v > literal if p.lo_open else v >= literal
                high_ok = v < p.high if p.hi_open else v <= p.high
                ok = low_ok and high_ok
            else:
                ok = {"=": v == literal, "<": v < literal, "<=": v <= literal,
                      ">": v > literal, ">=": v >= literal}[p.op]
            if not ok:
                break
        if ok:
            return True
    return False


@FAST
@given(st.lists(RANGE_FILTER, min_size=1, max_size=10), st.lists(events(), min_size=1, max_size=8))
def test_range_filters_on_point_events_equal_direct_evaluation(texts, event_list):
    texts = _valid_filters(texts)
    engine = RTreeMatchingEngine(SCHEMA)
    for i, text in enumerate(texts):
        engine.add_filter(f"f{i}", FilterSpec(RANGES_DIALECT, text))
    for event in event_list:
        values = SCHEMA.values_of(event)
        if any(v is not None and (v[0] is None or v[0] != v[1]) for v in values):
            continue  # ranges: covered by the exact-check oracle above
        expected = [f"f{i}" for i, t in enumerate(texts) if _direct(t, values)]
        assert engine.match(event) == expected


# -- random insert / remove sequences -------------------------------------------------------

OPERATIONS = st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "bulk"]),
                                st.integers(0, 15), RANGE_FILTER), min_size=1, max_size=25)


@FAST
@given(OPERATIONS, st.lists(events(), min_size=3, max_size=6), st.randoms(use_true_random=False))
def test_insert_remove_sequences_agree_and_keep_maximal_rectangles(ops, event_list, rnd):
    engine, brute = RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA)
    bulk_counter = 0
    for op, key, text in ops:
        filter_id = f"f{key}"
        if op == "remove":
            if filter_id in engine:
                engine.remove_filter(filter_id)
                brute.remove_filter(filter_id)
            continue
        if op == "bulk":
            lo = np.array([rnd.uniform(a, b) for a, b in zip(SCHEMA.null, SCHEMA.domain_hi)])
            hi = lo + np.array([rnd.uniform(0, 100), rnd.uniform(0, 10), rnd.uniform(0, 1)])
            hi = np.minimum(hi, SCHEMA.domain_hi)
            ids = [f"b{bulk_counter}"]
            bulk_counter += 1
            engine.bulk_load(ids, lo[None, :], hi[None, :])
            brute.bulk_load(ids, lo[None, :], hi[None, :])
            continue
        if _compiled_or_none(text) is None:
            continue
        engine.add_filter(filter_id, FilterSpec(RANGES_DIALECT, text))
        brute.add_filter(filter_id, FilterSpec(RANGES_DIALECT, text))
        assert engine.filter_ids() == brute.filter_ids()
        for event in event_list:
            assert engine.match(event) == brute.match(event)
    assert engine.filter_ids() == brute.filter_ids()
    for event in event_list:
        assert engine.match(event) == brute.match(event)
    _assert_maximal_rectangles(engine)


def _assert_maximal_rectangles(engine: RTreeMatchingEngine) -> None:
    table = engine._table
    live = table.live_rows()
    mins, maxs = table.mins[live], table.maxs[live]
    unique = {(tuple(a), tuple(b)) for a, b in zip(mins, maxs)}
    maximal = {box for box in unique
               if not any(other != box and all(o <= x for o, x in zip(other[0], box[0]))
                          and all(o >= x for o, x in zip(other[1], box[1])) for other in unique)}
    precise = engine.summary(1.0)
    got = {(tuple(a), tuple(b)) for a, b in zip(precise.mins, precise.maxs)}
    assert got == maximal
    assert len(precise) == len(maximal) == engine.maximal_count


# -- summaries cover their filters ----------------------------------------------------------

@FAST
@given(st.lists(RANGE_FILTER, min_size=1, max_size=25), st.lists(events(), min_size=1, max_size=8),
       st.floats(0.001, 1.0))
def test_every_summary_covers_every_filter(texts, event_list, random_precision):
    texts = _valid_filters(texts)
    engine = RTreeMatchingEngine(SCHEMA)
    for i, text in enumerate(texts):
        engine.add_filter(f"f{i}", FilterSpec(RANGES_DIALECT, text))
    rectangles = [(lo, hi) for i in range(len(texts))
                  for lo, hi in zip(*_boxes(engine, f"f{i}"))]
    for precision in (0.001, 0.05, 0.2, 0.5, 1.0, random_precision):
        summary = engine.summary(precision)
        if texts:
            assert 1 <= len(summary) <= max(1, int(np.ceil(precision * len(rectangles))),
                                            engine.maximal_count if precision == 1.0 else 0)
        for lo, hi in rectangles:
            assert summary.contains_box(lo, hi)
        for event in event_list:
            if engine.match(event):
                box = SCHEMA.extract(event)
                assert summary.intersects(box.lo, box.hi)
        routes = RTreeRouteSet()
        routes.set_summary("server", summary)
        for event in event_list:
            if engine.match(event):
                assert routes.match(event) == ["server"]


def _boxes(engine: RTreeMatchingEngine, filter_id: str):
    table = engine._table
    rows = table.rows(table.seq_of[filter_id])
    return table.mins[rows], table.maxs[rows]


# -- XPath through range extraction equals lxml --------------------------------------------

PATH = st.sampled_from(["q:price", "@qty", "q:sym", "."])
LITERAL = st.sampled_from(["0", "5", "10", "-3", "99.5", "150", "'5'", "'abc'", "(-2)", "'A'",
                           "'AB'", "'AAAAAAx'", "' '", "''", "3.0000000000000001"])
COMPARISON = st.builds(
    lambda path, op, literal, flip: f"{literal} {op} {path}" if flip else f"{path} {op} {literal}",
    PATH, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), LITERAL, st.booleans())


def _boolean(children):
    return st.one_of(
        st.tuples(children, children).map(lambda t: f"{t[0]} and {t[1]}"),
        st.tuples(children, children).map(lambda t: f"({t[0]} or {t[1]})"),
        children.map(lambda c: f"not({c})"),
    )


BOOLEAN = st.recursive(st.one_of(COMPARISON, PATH, st.sampled_from(["true()", "false()"])),
                       _boolean, max_leaves=5)
XPATH_FILTER = st.one_of(
    BOOLEAN.map(lambda b: f"/q:quote[{b}]"),
    st.tuples(BOOLEAN, BOOLEAN).map(lambda t: f"/q:quote[{t[0]}] | /q:quote[{t[1]}]"),
    st.tuples(st.sampled_from(["<", ">=", "="]), LITERAL, BOOLEAN).map(
        lambda t: f"/q:quote/q:price {t[0]} {t[1]} or /q:quote[{t[2]}]"),
    st.tuples(BOOLEAN).map(lambda t: f"/q:quote[q:sym][{t[0]}]"),
)


@FAST
@given(st.lists(XPATH_FILTER, min_size=1, max_size=10), st.lists(events(), min_size=1, max_size=8))
def test_xpath_with_extracted_ranges_equals_lxml(expressions, event_list):
    engine, brute, lxml_matcher = RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA), XPathFilterMatcher()
    for i, expression in enumerate(expressions):
        spec = FilterSpec(XPATH10, expression, (("q", Q),))
        for matcher in (engine, brute, lxml_matcher):
            matcher.add_filter(f"x{i}", spec)
    for event in event_list:
        expected = lxml_matcher.match(event)
        assert engine.match(event) == expected
        assert brute.match(event) == expected


XPATH10_2004 = "http://www.w3.org/TR/1999/REC-xpath-19991116"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"


@FAST
@given(st.lists(XPATH_FILTER, min_size=1, max_size=6), st.lists(events(), min_size=1, max_size=6))
def test_2004_filters_on_the_envelope_equal_2011_filters_on_the_event(expressions, event_list):
    """A 2004/08 filter reading the event through ``/s:Envelope/s:Body`` selects exactly what
    the same filter without that prefix selects in the 2011 dialect, in every engine."""
    engines_2004 = (RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA), XPathFilterMatcher())
    lxml_2011 = XPathFilterMatcher()
    for i, expression in enumerate(expressions):
        lxml_2011.add_filter(f"x{i}", FilterSpec(XPATH10, expression, (("q", Q),)))
        enveloped = expression.replace("/q:quote", "/s:Envelope/s:Body/q:quote")
        spec = FilterSpec(XPATH10_2004, enveloped, (("q", Q), ("s", SOAP12)))
        for matcher in engines_2004:
            matcher.add_filter(f"x{i}", spec)
    for event in event_list:
        expected = lxml_2011.match(event)
        for matcher in engines_2004:
            assert matcher.match(event) == expected, type(matcher).__name__


# -- eCube: random boxes, points and event boxes through the coordinate API ----------------

@FAST
@given(st.integers(1, 4), st.integers(0, 60), st.integers(1, 10), st.randoms(use_true_random=False))
def test_box_queries_equal_brute_force(d, n, queries, rnd):
    schema = Schema(tuple(Attribute(f"a{i}", "number", f"/e/a{i}", (), 0, 10) for i in range(d)))
    engine, brute = RTreeMatchingEngine(schema), BruteForceMatcher(schema)
    lo = np.array([[rnd.choice([0, 2.5, 5, rnd.uniform(0, 10)]) for _ in range(d)] for _ in range(n)])
    sides = np.array([[rnd.choice([0.0, 0.0, 1.0, rnd.uniform(0, 5)]) for _ in range(d)] for _ in range(n)])
    lo = lo.reshape(n, d)
    hi = np.minimum(lo + sides.reshape(n, d), 10)
    ids = [f"s{i}" for i in range(n)]
    half = n // 2
    engine.bulk_load(ids[:half], lo[:half], hi[:half])  # paged
    brute.bulk_load(ids[:half], lo[:half], hi[:half])
    for i in range(half, n):  # single entries on top of the pages
        engine.bulk_load([ids[i]], lo[i:i + 1], hi[i:i + 1])
        brute.bulk_load([ids[i]], lo[i:i + 1], hi[i:i + 1])
    for i in range(0, n, 3):
        engine.remove_filter(ids[i])
        brute.remove_filter(ids[i])
    for _ in range(queries):
        q_lo = np.array([rnd.uniform(-1, 10) for _ in range(d)])
        q_hi = q_lo + np.array([rnd.choice([0.0, 0.5, 3.0]) for _ in range(d)])
        assert engine.match_box(q_lo, q_hi) == brute.match_box(q_lo, q_hi)
        assert engine.match_box(q_lo) == brute.match_box(q_lo)
