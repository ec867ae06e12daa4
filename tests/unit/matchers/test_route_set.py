"""RTreeRouteSet: one summary per server, atomic replacement, single and batch routing."""

import threading
import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
from lxml import etree

from matchers import (
    FilterSpec,
    InvalidFilter,
    RTreeMatchingEngine,
    RTreeRouteSet,
    Schema,
    Summary,
    UnknownFilter,
    create_matcher,
)
from matchers.route_set import CALIBRATION_POINTS, routing
from matchers.route_set import table as route_table
from matchers.route_set.bitmaps import RankBitmaps
from matchers.schema import Attribute
from matchers.summary import SUMMARY_DIALECT
from matchers.vocabulary import EDN, MATCHER_RTREE_ROUTE_SET

SCHEMA = Schema((Attribute("x", "number", "/e/@x", (), 0, 10),
                 Attribute("y", "number", "/e/@y", (), 0, 10)))


def summary(*boxes, schema=SCHEMA):
    mins = [lo for lo, _ in boxes]
    maxs = [hi for _, hi in boxes]
    return Summary(schema.dims, np.array(mins, dtype=float).reshape(len(boxes), schema.d),
                   np.array(maxs, dtype=float).reshape(len(boxes), schema.d), schema)


def event(x=None, y=None):
    attributes = "".join(f' {k}="{v}"' for k, v in (("x", x), ("y", y)) if v is not None)
    return etree.fromstring(f"<e{attributes}/>")


@pytest.fixture
def routes():
    table = RTreeRouteSet(SCHEMA)
    table.set_summary("low", summary(([0, 0], [3, 3])))
    table.set_summary("high", summary(([5, 5], [10, 10]), ([0, 8], [2, 10])))
    table.set_summary("middle", summary(([2, 2], [6, 6])))
    return table


def test_registered_under_its_uri():
    assert isinstance(create_matcher(MATCHER_RTREE_ROUTE_SET), RTreeRouteSet)


def test_match_and_route(routes):
    assert routes.filter_ids() == ["low", "high", "middle"]
    assert routes.match(event(1, 1)) == ["low"]
    assert routes.match(event(2.5, 2.5)) == ["low", "middle"]
    assert routes.match(event(1, 9)) == ["high"]
    assert routes.match(event(4, 9)) == []
    assert routes.route([5.5, 5.5]) == frozenset({"high", "middle"})
    assert routes.route_box([3.5, 7], [4, 9]) == frozenset()  # an eCube event between boxes
    assert routes.route_box([1, 7], [4, 9]) == frozenset({"high"})


def test_match_many_answers_what_match_answers_event_by_event(routes):
    rng = np.random.default_rng(3)
    body = etree.Element("batch")  # events inside a larger document, as in an EventBatch
    for x, y in rng.integers(-1, 12, (80, 2)) / 1.0:
        body.append(event(x, y))
    body.append(event(x=1))
    body.append(etree.fromstring('<e x="2" y="" />'))
    events = list(body)
    assert routes.match_many(events) == [routes.match(etree.fromstring(etree.tostring(e)))
                                         for e in events]
    assert routes.match_many([]) == []
    routes.set_precision(0.0)  # no summary: every event to every server, nothing read
    assert routes.match_many(events[:2]) == [["low", "high", "middle"]] * 2
    assert RTreeRouteSet(SCHEMA).match_many(events[:3]) == [[], [], []]


def test_events_lacking_an_attribute_go_where_a_box_spans_null(routes):
    assert routes.match(event(x=1)) == []
    routes.set_summary("wide", summary((SCHEMA.null, SCHEMA.domain_hi)))
    assert routes.match(event(x=1)) == ["wide"]


def test_batch_equals_single_for_both_strategies(routes):
    rng = np.random.default_rng(0)
    points = rng.uniform(-1, 11, (300, 2))
    single = [routes.route(p) for p in points]
    table = routes._routes
    for method in (routing.by_scan, routing.by_rtree, routing.by_bitmaps, routing.by_cells):
        assert table.sets(method(table, points, points)) == single
        highs = points + 0.7
        assert table.sets(method(table, points, highs)) == [routes.route_box(a, b) for a, b in zip(points, highs)]
    for method in (routing.by_columns, routing.by_rtree, routing.by_bitmaps, routing.by_cells):
        assert [table.sets(method(table, p[None], p[None]))[0] for p in points] == single
    assert table.choice["single"] in ("columns", "rtree", "cells")  # after 64 single events
    assert routes.route_batch(points) == single  # calibrates, then routes
    assert routes._routes.choice["batch"] in ("scan", "rtree", "bitmap", "cells")
    assert routes.route_batch(points[:5]) == single[:5]
    highs = points + 0.5
    assert routes.route_batch(points, highs) == [routes.route_box(lo, hi) for lo, hi in zip(points, highs)]
    assert routes.route_batch(np.zeros((0, 2))) == []


def test_replacing_a_summary_is_atomic_and_recalibrates(routes):
    routes.route_batch(np.zeros((CALIBRATION_POINTS, 2)))
    before = routes._routes
    routes.set_summary("low", summary(([8, 0], [9, 1])))
    assert routes._routes is not before and routes._routes.choice == {"batch": None, "single": None}
    assert before.sets(routing.by_scan(before, np.ones((1, 2)), np.ones((1, 2)))) == [frozenset({"low"})]
    assert routes.filter_ids() == ["low", "high", "middle"]  # keeps its place
    assert routes.match(event(1, 1)) == []
    assert routes.match(event(8.5, 0.5)) == ["low"]


def test_no_summary_routes_everything(routes):
    routes.set_summary("all", None)
    assert routes.match(event(4, 9)) == ["all"]
    assert routes.route_batch(np.array([[4.0, 9.0], [1.0, 1.0]])) == [
        frozenset({"all"}), frozenset({"low", "all"})]
    assert routes.describe()["without_summary"] == ["all"] and routes.summary_of("all") is None


def test_remove(routes):
    routes.remove_filter("middle")
    assert routes.filter_ids() == ["low", "high"] and "middle" not in routes
    assert routes.match(event(2.5, 2.5)) == ["low"]
    with pytest.raises(UnknownFilter):
        routes.remove_filter("middle")
    with pytest.raises(UnknownFilter):
        routes.summary_of("middle")


def test_summaries_arrive_as_filter_elements_or_text():
    routes = RTreeRouteSet()  # no config: the schema comes with the first summary
    shipped = summary(([0, 0], [3, 3]))
    wrapper = etree.Element("{http://www.w3.org/2011/03/ws-evt}Filter")
    wrapper.append(shipped.to_element())
    routes.add_filter("a", FilterSpec(SUMMARY_DIALECT, "", (), wrapper))
    routes.add_filter("b", FilterSpec(SUMMARY_DIALECT, "", (), shipped.to_element()))
    routes.add_filter("c", FilterSpec(SUMMARY_DIALECT, shipped.to_text()))
    assert routes.schema == SCHEMA and routes.summary_of("c") == shipped
    assert routes.match(event(1, 1)) == ["a", "b", "c"]


def test_incompatible_summaries_are_refused(routes):
    other = Schema((Attribute("z", "number", "/e/@z", (), 0, 1),))
    with pytest.raises(InvalidFilter, match="dimensions"):
        routes.set_summary("z", summary(([0], [1]), schema=other))
    renamed = Schema((Attribute("x", "number", "/e/@x", (), 0, 99),
                      Attribute("y", "number", "/e/@y", (), 0, 10)))
    with pytest.raises(InvalidFilter, match="schema"):
        routes.set_summary("x", summary(([0, 0], [1, 1]), schema=renamed))
    with pytest.raises(InvalidFilter):
        routes.add_filter("bad", FilterSpec(SUMMARY_DIALECT, "<edn:Summary xmlns:edn='%s'/>" % EDN))
    assert routes.filter_ids() == ["low", "high", "middle"]


def test_without_any_schema_events_go_to_every_server_with_boxes():
    routes = RTreeRouteSet()
    bare = Summary(("x", "y"), [[0, 0]], [[1, 1]])
    routes.set_summary("a", bare)
    routes.set_summary("empty", Summary(("x", "y"), np.zeros((0, 2)), np.zeros((0, 2))))
    assert routes.match(event(5, 5)) == ["a"]  # cannot read the event: the safe answer
    assert routes.route([5, 5]) == frozenset()


def test_engine_summaries_route_every_matching_event():
    rng = np.random.default_rng(3)
    routes = RTreeRouteSet(SCHEMA)
    engines = {}
    for server in range(4):
        engine = RTreeMatchingEngine(SCHEMA)
        lo = rng.uniform(0, 9, (100, 2))
        engine.bulk_load([f"{server}-{i}" for i in range(100)], lo, lo + rng.uniform(0, 1, (100, 2)))
        engines[f"s{server}"] = engine
        routes.set_summary(f"s{server}", engine.summary(0.2))
    points = rng.uniform(0, 10, (500, 2))
    routed = routes.route_batch(points)
    for point, servers in zip(points, routed):
        for name, engine in engines.items():
            if engine.match_box(point):
                assert name in servers


def test_readers_never_see_a_half_updated_table(routes):
    stop = threading.Event()
    seen = set()
    errors = []

    reads = [0]

    def read():
        while not stop.is_set():
            try:
                seen.add(routes.route([1.0, 1.0]))
            except Exception as exc:  # pragma: no cover - would be the bug
                errors.append(exc)
            reads[0] += 1

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for i in range(200):
            # membership and order change with every swap: a read mixing two tables would
            # name a wrong server or index past the end
            if i % 2:
                routes.set_summary("low", summary(([0, 0], [3, 3])))
            else:
                routes.remove_filter("low")
            before = reads[0]
            while reads[0] < before + 3 and not errors:  # the readers see every table
                stop.wait(0.0005)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not errors
    assert seen == {frozenset({"low"}), frozenset()}


def test_servers_with_many_boxes_skip_the_bitmaps(routes, monkeypatch):
    monkeypatch.setattr(route_table, "MAX_BITMAP_BOXES", 1)
    routes.set_summary("big", summary(([0, 0], [1, 1]), ([9, 9], [10, 10])))
    table = routes._routes
    assert table.bitmaps[-1] is None and table.bitmaps[0] is not None
    assert "bitmap" not in routing.candidates(table, single=False)
    points = np.array([[0.5, 0.5], [9.5, 9.5], [4.0, 9.0]] * 30)
    assert routes.route_batch(points)[:3] == [frozenset({"low", "big"}), frozenset({"high", "big"}),
                                              frozenset()]
    assert table.choice["batch"] in ("scan", "rtree", "cells")


def test_rank_bitmaps_against_numpy():

    rng = np.random.default_rng(7)
    for k, d in ((0, 2), (1, 1), (63, 2), (64, 3), (65, 3), (300, 4)):
        mins = rng.integers(0, 6, (k, d)).astype(float)
        maxs = mins + rng.integers(0, 3, (k, d))
        bitmaps = RankBitmaps(mins, maxs)
        lo = rng.integers(-1, 8, (200, d)).astype(float)
        hi = lo + rng.integers(0, 2, (200, d))
        expected = [bool(np.any(np.all((mins <= b) & (maxs >= a), axis=1))) for a, b in zip(lo, hi)]
        assert bitmaps.any_hit(lo, hi).tolist() == expected


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 6), st.integers(1, 60), st.integers(0, 2**32 - 1))
def test_cell_bitmaps_answer_exactly_what_a_scan_answers(d, k, seed):
    """Boxes on a coarse grid (shared edges, degenerate boxes, equal bounds) and points on
    those edges, inside and outside the boxes' extent: cells never miss nor add a server."""
    from matchers.route_set.cells import CellBitmaps
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 8, (k, d)) / 2.0
    b = rng.integers(0, 8, (k, d)) / 2.0
    mins, maxs = np.minimum(a, b), np.maximum(a, b)
    owner = rng.integers(0, 3, k)
    points = np.vstack([rng.integers(-2, 10, (40, d)) / 2.0, rng.uniform(-1, 5, (20, d))])
    want = np.zeros((len(points), 3), dtype=bool)
    inside = np.all((mins[None] <= points[:, None]) & (maxs[None] >= points[:, None]), axis=2)
    for i, j in zip(*np.nonzero(inside)):
        want[i, owner[j]] = True
    for cells in (1, 3, 64):
        assert np.array_equal(CellBitmaps(mins, maxs, cells).hits(points, owner, 3), want)


def test_a_table_is_calibrated_once_while_other_batches_are_routed(routes, monkeypatch):
    """Concurrent batches on a new table: one calibrates, the others route meanwhile (the
    answers are the same either way) instead of timing every strategy again."""
    import threading
    entered, release = threading.Event(), threading.Event()
    calls = []
    real = routing.calibrate_batch

    def slow_calibration(table, lo, hi):
        calls.append(threading.current_thread().name)
        entered.set()
        assert release.wait(5)
        return real(table, lo, hi)

    monkeypatch.setattr(routing, "calibrate_batch", slow_calibration)
    points = np.random.default_rng(4).uniform(0, 10, (CALIBRATION_POINTS, 2))
    want = [routes.route(p) for p in points]
    answers = {}
    first = threading.Thread(target=lambda: answers.setdefault("first", routes.route_batch(points)),
                             name="calibrator")
    first.start()
    assert entered.wait(5)
    assert routes.route_batch(points) == want  # routed now, without calibrating
    release.set()
    first.join(5)
    assert answers["first"] == want and calls == ["calibrator"]
    assert routes._routes.choice["batch"] is not None
    assert routes.route_batch(points) == want and calls == ["calibrator"]


def test_calibration_cpu_is_counted_apart_once_per_table(routes, monkeypatch):
    """Callers subtract ``calibration_cpu()`` from their routing CPU: it grows while a table
    calibrates (here made measurably slow) and not on the batches routed after."""
    real = routing.calibrate_batch

    def costly_calibration(table, lo, hi):
        spin_until = time.thread_time() + 0.02  # CPU, not a sleep: thread_time must see it
        while time.thread_time() < spin_until:
            pass
        return real(table, lo, hi)

    monkeypatch.setattr(routing, "calibrate_batch", costly_calibration)
    points = np.random.default_rng(5).uniform(0, 10, (CALIBRATION_POINTS, 2))
    before = routing.calibration_cpu()
    routes.route_batch(points)
    calibrated = routing.calibration_cpu()
    assert calibrated - before >= 0.02
    routes.route_batch(points)
    assert routing.calibration_cpu() == calibrated  # the choice is kept: no second calibration
    seen = {}
    worker = threading.Thread(target=lambda: seen.setdefault("other", routing.calibration_cpu()))
    worker.start()
    worker.join(5)
    assert seen["other"] == 0.0  # per thread: another thread's calibration is not its cost
