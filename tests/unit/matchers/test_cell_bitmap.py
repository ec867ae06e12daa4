"""CellBitmapIndex and CellBitmapEngine against oracles: a numpy scan of the boxes for the
index, BruteForceMatcher (same compiled filters) for the engine, and the R-tree engine for
summaries.  Few cells (3 or 4) so that query sides span, OR and skip cells; a small re-cut
threshold so that single additions re-cut the cells; engines forced to cells, forced to the
paged R-tree, and measuring which (at test sizes) all answer alike."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from matchers import (
    BruteForceMatcher,
    FilterSpec,
    RTreeMatchingEngine,
    Schema,
    cell_bitmap,
    cell_bitmap_index,
    create_matcher,
)
from matchers.cell_bitmap import CELL_BITMAP_URI, CellBitmapEngine, CellBitmapIndex
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute
from matchers.summary import summary_target
from matchers.vocabulary import MATCHER_CELL_BITMAP

FAST = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SCHEMA = Schema(tuple(Attribute(f"x{i}", "number", f"/e/@x{i}", (), 0, 10) for i in range(3)))
D = SCHEMA.d
# null (-10), the domain's ends, repeated inner values: equal bounds and shared edges
VALUES = st.sampled_from([-10.0, 0.0, 0.5, 2.0, 2.0, 5.0, 7.5, 10.0])


class FewCells(CellBitmapEngine):
    cells = 3
    strategy = "cells"


class RTreeChoice(CellBitmapEngine):
    strategy = "rtree"


ENGINES = st.sampled_from([CellBitmapEngine, FewCells, RTreeChoice])


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch):
    """Re-cuts and measured index choices happen at test sizes."""
    monkeypatch.setattr(cell_bitmap_index, "_MIN_RECUT", 4)
    monkeypatch.setattr(cell_bitmap, "_CALIBRATION_MIN_ROWS", 2)
    monkeypatch.setattr(cell_bitmap, "_CALIBRATION_QUERIES", 3)


@st.composite
def box(draw, d: int = D):
    lo, hi = [], []
    for _ in range(d):
        a, b = sorted([draw(VALUES), draw(VALUES)])
        lo.append(a)
        hi.append(b)
    return lo, hi


def _scan(mins: np.ndarray, maxs: np.ndarray, lo, hi) -> set[int]:
    if not len(mins):
        return set()
    inside = np.all(mins <= np.asarray(hi), axis=1) & np.all(maxs >= np.asarray(lo), axis=1)
    return set(np.flatnonzero(inside).tolist())


# -- the index ---------------------------------------------------------------------------------
OPERATIONS = st.lists(st.one_of(st.tuples(st.just("insert"), box()),
                                st.tuples(st.just("delete"), st.integers(0, 40)),
                                st.tuples(st.just("recut"), st.just(None))),
                      max_size=40)


@FAST
@given(initial=st.lists(box(), max_size=20), operations=OPERATIONS,
       queries=st.lists(box(), min_size=1, max_size=8), cells=st.sampled_from([1, 2, 4, 64]),
       batch_check=st.sampled_from([0, 2, 256]))
def test_index_answers_exactly_the_boxes_meeting_the_query(initial, operations, queries, cells,
                                                           batch_check, monkeypatch):
    # batch queries check many candidates query by query, few all at once: both ways
    monkeypatch.setattr(cell_bitmap_index, "_BATCH_CHECK", batch_check)
    held: dict[int, tuple[list, list]] = dict(enumerate(initial))
    index = CellBitmapIndex.bulk(np.arange(len(initial)), np.array([b[0] for b in initial]),
                                 np.array([b[1] for b in initial]), dims=D, cells=cells)
    next_row = len(initial)
    for kind, argument in operations:
        if kind == "insert":
            index.insert(next_row, *argument)
            held[next_row] = argument
            next_row += 1
        elif kind == "delete" and held:
            row = sorted(held)[argument % len(held)]
            index.delete(row)
            del held[row]
        elif kind == "recut":
            rows = np.array(sorted(held), dtype=np.int64)
            index = CellBitmapIndex.bulk(rows, np.array([held[r][0] for r in rows]).reshape(-1, D),
                                         np.array([held[r][1] for r in rows]).reshape(-1, D),
                                         dims=D, cells=cells)
    assert len(index) == len(held)
    rows = np.array(sorted(held), dtype=np.int64)
    mins = np.array([held[r][0] for r in rows]).reshape(-1, D)
    maxs = np.array([held[r][1] for r in rows]).reshape(-1, D)
    wanted = [{int(rows[i]) for i in _scan(mins, maxs, lo, hi)} for lo, hi in queries]
    for (lo, hi), want in zip(queries, wanted):
        found = index.intersecting(np.array(lo), np.array(hi))
        assert set(found.tolist()) == want and len(found) == len(want)
        point = index.intersecting(np.array(lo), np.array(lo))  # a point query
        assert set(point.tolist()) == {int(rows[i]) for i in _scan(mins, maxs, lo, lo)}
    found, counts = index.intersecting_batch(np.array([q[0] for q in queries]),
                                             np.array([q[1] for q in queries]))
    assert counts.tolist() == [len(w) for w in wanted]
    ends = np.cumsum(counts)
    for want, start, end in zip(wanted, ends - counts, ends):
        assert set(found[start:end].tolist()) == want


def test_index_refuses_bad_rows_and_boxes():
    index = CellBitmapIndex(2, cells=4)
    index.insert(3, [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        index.insert(3, [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        index.insert(4, [2.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        index.delete(5)
    index.delete(3)
    assert len(index) == 0 and index.intersecting(np.zeros(2), np.ones(2)).tolist() == []


# -- the engine --------------------------------------------------------------------------------
def _range_filter(lo, hi) -> FilterSpec:
    # sides at null..top stay unconstrained; others are closed ranges (the box is the filter)
    parts = [f"x{j} in [{a!r}, {b!r}]" for j, (a, b) in enumerate(zip(lo, hi))
             if not (a == -10.0 and b == 10.0) and a >= 0.0]
    return FilterSpec(RANGES_DIALECT, " and ".join(parts) or "x0 exists")


ENGINE_OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("bulk"), st.lists(box(), min_size=1, max_size=12)),
    st.tuples(st.just("add"), box()),
    st.tuples(st.just("replace"), st.integers(0, 60), box()),
    st.tuples(st.just("remove"), st.integers(0, 60)),
), min_size=1, max_size=25)


_FRESH = itertools.count()  # filter ids are never reused


def _apply(engines, operations, ids=None):
    ids = [] if ids is None else ids
    for operation in operations:
        kind = operation[0]
        if kind == "bulk":
            boxes = operation[1]
            new = [f"b{next(_FRESH)}-{len(ids)}" for _ in boxes]
            for engine in engines:
                engine.bulk_load(new, np.array([b[0] for b in boxes]), np.array([b[1] for b in boxes]))
            ids += new
        elif kind == "add":
            lo, hi = operation[1]
            ids.append(f"a{next(_FRESH)}-{len(ids)}")
            for engine in engines:
                engine.add_filter(ids[-1], _range_filter(lo, hi))
        elif ids and kind == "replace":
            lo, hi = operation[2]
            for engine in engines:
                engine.add_filter(ids[operation[1] % len(ids)], _range_filter(lo, hi))
        elif ids and kind == "remove":
            victim = ids.pop(operation[1] % len(ids))
            for engine in engines:
                engine.remove_filter(victim)
    return ids


@FAST
@given(operations=ENGINE_OPERATIONS, points=st.lists(box(), min_size=1, max_size=6),
       engine_class=ENGINES)
def test_engine_agrees_with_brute_force_on_coordinates(operations, points, engine_class):
    engine, oracle = engine_class(SCHEMA), BruteForceMatcher(SCHEMA)
    ids = _apply([engine, oracle], operations)
    assert engine.filter_ids() == oracle.filter_ids() == ids
    lows = np.array([p[0] for p in points])
    highs = np.array([p[1] for p in points])
    order = {filter_id: position for position, filter_id in enumerate(ids)}
    batch = engine.match_points(lows)
    boxes = engine.match_points(lows, highs)
    for i in range(len(points)):
        want_point = oracle.match_box(lows[i])
        assert sorted(batch[i], key=order.get) == batch[i], "insertion order"
        assert batch[i] == sorted(want_point, key=order.get)
        assert engine.match_box(lows[i]) == batch[i]
        assert boxes[i] == sorted(oracle.match_box(lows[i], highs[i]), key=order.get)


def _event(values) -> etree._Element:
    attributes = " ".join(f'x{j}="{v!r}"' for j, v in enumerate(values) if v is not None)
    return etree.fromstring(f"<e {attributes}/>")


EVENT_VALUE = st.one_of(st.none(), VALUES, st.sampled_from([-1.0, 11.0, 3.25]))


@FAST
@given(operations=ENGINE_OPERATIONS,
       events=st.lists(st.lists(EVENT_VALUE, min_size=D, max_size=D), min_size=1, max_size=6),
       engine_class=ENGINES)
def test_engine_agrees_with_brute_force_on_events(operations, events, engine_class):
    """XML events (absent attributes, values outside the domain): match and match_many."""
    engine, oracle = engine_class(SCHEMA), BruteForceMatcher(SCHEMA)
    _apply([engine, oracle], operations)
    documents = [_event(values) for values in events]
    wanted = [oracle.match(document) for document in documents]
    assert [engine.match(document) for document in documents] == wanted
    assert engine.match_many(documents) == wanted


@FAST
@given(operations=ENGINE_OPERATIONS, log_limit=st.sampled_from([1, 3, 1024]),
       early=st.booleans())
def test_summaries_are_the_rtree_engines(operations, log_limit, early):
    """Whether the deferred manager replays its log or reloads from the rows (log_limit),
    and whether a summary was taken half way (early)."""
    engine, reference = CellBitmapEngine(SCHEMA), RTreeMatchingEngine(SCHEMA)
    saved, cell_bitmap._LOG_LIMIT = cell_bitmap._LOG_LIMIT, log_limit
    try:
        half = len(operations) // 2
        ids = _apply([engine, reference], operations[:half])
        if early:
            engine.summary(1.0)
        _apply([engine, reference], operations[half:], ids)
    finally:
        cell_bitmap._LOG_LIMIT = saved
    for precision in (1.0, 0.5):
        mine, theirs = engine.summary(precision), reference.summary(precision)
        assert sorted(map(tuple, np.hstack([mine.mins, mine.maxs]).tolist())) == \
            sorted(map(tuple, np.hstack([theirs.mins, theirs.maxs]).tolist()))
    assert engine.maximal_count == reference.maximal_count
    assert engine.describe()["maximal"] == reference.maximal_count


@FAST
@given(operations=ENGINE_OPERATIONS, tail=ENGINE_OPERATIONS,
       precision=st.sampled_from([1.0, 0.5, 0.1]))
def test_summaries_past_the_maximal_limit_cover_every_rectangle(operations, tail, precision):
    """Past _MAXIMAL_LIMIT rectangles: all live rectangles (precision 1) or STR groups of
    them, as many boxes as the R-tree engine would cut from as many maximal ones; back under
    the limit, the R-tree engine's summaries again."""
    engine, reference = CellBitmapEngine(SCHEMA), RTreeMatchingEngine(SCHEMA)
    saved, cell_bitmap._MAXIMAL_LIMIT = cell_bitmap._MAXIMAL_LIMIT, 3
    try:
        ids = _apply([engine, reference], operations)
        summary = engine.summary(precision)
        rows, mins, maxs = engine._live_boxes()
        if len(rows) > 3:
            target = summary_target(precision, engine.rectangle_count)
            assert len(summary.mins) == min(target, len(rows))
            covered = np.all(summary.mins[:, None, :] <= mins[None, :, :], axis=2) & \
                np.all(summary.maxs[:, None, :] >= maxs[None, :, :], axis=2)
            assert covered.any(axis=0).all(), "a rectangle outside every summary box"
            if precision == 1.0:
                assert sorted(map(tuple, np.hstack([summary.mins, summary.maxs]).tolist())) == \
                    sorted(map(tuple, np.hstack([mins, maxs]).tolist()))
        _apply([engine, reference], tail, ids)
        while len(ids) > 3:
            victim = ids.pop()
            engine.remove_filter(victim)
            reference.remove_filter(victim)
        mine, theirs = engine.summary(precision), reference.summary(precision)
        assert sorted(map(tuple, np.hstack([mine.mins, mine.maxs]).tolist())) == \
            sorted(map(tuple, np.hstack([theirs.mins, theirs.maxs]).tolist()))
    finally:
        cell_bitmap._MAXIMAL_LIMIT = saved


def test_summary_follows_changes_after_a_bulk_load():
    engine = CellBitmapEngine(SCHEMA)
    engine.bulk_load(["a", "b"], [[0, 0, 0], [1, 1, 1]], [[2, 2, 2], [3, 3, 3]])
    generation = engine.summary_generation
    assert engine.describe()["maximal"] is None  # pending: describe does not compute it
    assert len(engine.summary(1.0).mins) == 2
    engine.add_filter("c", FilterSpec(RANGES_DIALECT, "x0 in [0, 9] and x1 in [0, 9] and x2 in [0, 9]"))
    assert engine.summary_generation != generation
    assert len(engine.summary(1.0).mins) == 1  # c covers a and b
    engine.remove_filter("c")
    assert len(engine.summary(1.0).mins) == 2


def test_the_measured_choice_is_one_of_the_indexes_and_described():
    engine = CellBitmapEngine(SCHEMA)
    rng = np.random.default_rng(3)
    lo = rng.uniform(0, 8, (300, D))
    engine.bulk_load([f"b{i}" for i in range(300)], lo, lo + 2)
    assert engine.choice_ in ("cells", "rtree")
    index_class = CellBitmapIndex if engine.choice_ == "cells" else cell_bitmap.PagedBoxIndex
    assert isinstance(engine._index, index_class)
    described = engine.describe()
    assert described["strategy"] == "measured" and described["index"] == engine.choice_
    assert RTreeChoice(SCHEMA).describe()["index"] == "rtree"
    with pytest.raises(ValueError):
        type("Bad", (CellBitmapEngine,), {"strategy": "fastest"})(SCHEMA)


def test_the_index_is_measured_again_only_when_the_rows_halve_or_double(monkeypatch):
    engine = CellBitmapEngine(SCHEMA)
    calls = []
    measure = engine._measure
    monkeypatch.setattr(engine, "_measure", lambda *a: calls.append(len(a[0])) or measure(*a))
    rng = np.random.default_rng(5)
    lo = rng.uniform(0, 8, (400, D))
    engine.bulk_load([f"a{i}" for i in range(100)], lo[:100], lo[:100] + 2)
    engine._repack()
    engine.bulk_load([f"b{i}" for i in range(100)], lo[100:200], lo[100:200] + 2)  # 200 rows
    assert calls == [100]
    engine.bulk_load([f"c{i}" for i in range(200)], lo[200:], lo[200:] + 2)  # 400: doubled
    assert calls == [100, 400]


def test_registered_under_its_uri():
    assert CELL_BITMAP_URI == MATCHER_CELL_BITMAP == "urn:wsframework:matchers:cell-bitmap"
    assert isinstance(create_matcher(CELL_BITMAP_URI), CellBitmapEngine)


def test_single_additions_recut_the_cells():
    engine = type("Cells", (CellBitmapEngine,), {"strategy": "cells"})(SCHEMA)
    for i in range(40):
        engine.add_filter(f"f{i}", FilterSpec(RANGES_DIALECT, f"x0 in [{i / 4!r}, {i / 4 + 0.1!r}]"))
    assert engine._index._cut_for >= 8  # re-cut along the way (threshold 4 in these tests)
    assert engine.match_points([[5.05, 0, 0]]) == [["f20"]]
