"""Summaries (value, wire form, precision cuts) and the maximal-rectangle manager."""

import base64
from types import SimpleNamespace

import numpy as np
import pytest
from lxml import etree

from matchers import FilterSpec, InvalidFilter, RTreeMatchingEngine, Schema, Summary
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute
from matchers.summary import MaximalRectangles, str_groups, summary_target
from matchers.summary.bulk import _cover_order, choose_algorithm, maximal_parents
from matchers.vocabulary import EDN

SCHEMA = Schema((Attribute("x", "number", "/e/x", (), 0, 10),
                 Attribute("y", "number", "/e/y", (), 0, 10)))


def test_value_queries_and_equality():
    summary = Summary(("x", "y"), [[0, 0], [5, 5]], [[1, 1], [9, 9]], SCHEMA)
    assert len(summary) == 2 and summary.d == 2
    assert summary.covers([0.5, 1.0]) and summary.covers([9, 9]) and not summary.covers([2, 2])
    assert summary.intersects([1, 1], [5, 5]) and not summary.intersects([2, 2], [4, 4])
    assert summary.contains_box([6, 6], [7, 8]) and not summary.contains_box([0, 0], [6, 6])
    assert summary == Summary(("x", "y"), summary.mins.copy(), summary.maxs.copy(), SCHEMA)
    assert summary != Summary(("x", "y"), summary.mins, summary.maxs)
    with pytest.raises(ValueError):
        summary.mins[0, 0] = 3  # frozen arrays


@pytest.mark.parametrize("mins, maxs, message", [
    ([[0, 0]], [[1]], "arrays"),
    ([[2, 0]], [[1, 1]], "minimum above"),
    ([[np.nan, 0]], [[1, 1]], "finite"),
    ([[0, 0]], [[1, 1], [2, 2]], "differ"),
])
def test_invalid_values(mins, maxs, message):
    with pytest.raises(ValueError, match=message):
        Summary(("x", "y"), mins, maxs)


def test_wire_form_round_trips_exactly():
    rng = np.random.default_rng(0)
    mins = rng.uniform(0, 5, (50, 2))
    summary = Summary(("x", "y"), mins, mins + rng.uniform(0, 5, (50, 2)), SCHEMA)
    element = summary.to_element()
    assert element.tag == f"{{{EDN}}}Summary" and element.get("boxes") == "50"
    assert Summary.from_element(element) == summary
    assert Summary.from_text(summary.to_text()) == summary
    bare = Summary.from_element(summary.to_element(with_schema=False))
    assert bare.schema is None and np.array_equal(bare.mins, summary.mins)


def test_empty_and_everything():
    assert len(Summary.nothing(SCHEMA)) == 0 and not Summary.nothing(SCHEMA).covers([1, 1])
    everything = Summary.everything(SCHEMA)
    assert everything.covers(SCHEMA.null) and everything.covers(SCHEMA.domain_hi)
    assert Summary.from_element(Summary.nothing(SCHEMA).to_element()) == Summary.nothing(SCHEMA)


def _summary_xml(boxes="1", dims="x y", mins=None, maxs=None, extra=""):
    encode = lambda values: base64.b64encode(np.array(values, dtype="<f8").tobytes()).decode()
    mins = encode([0.0, 0.0]) if mins is None else mins
    maxs = encode([1.0, 1.0]) if maxs is None else maxs
    return (f'<edn:Summary xmlns:edn="{EDN}" dims="{dims}" boxes="{boxes}">{extra}'
            f'<edn:Mins>{mins}</edn:Mins><edn:Maxs>{maxs}</edn:Maxs></edn:Summary>')


@pytest.mark.parametrize("xml, message", [
    (_summary_xml(boxes="x"), "integer"),
    (_summary_xml(boxes="-1"), "boxes"),
    (_summary_xml(boxes="2"), "bytes"),
    (_summary_xml(mins="@@@"), "base64"),
    (_summary_xml(maxs=base64.b64encode(np.array([-1.0, 0.0]).tobytes()).decode()), "minimum above"),
    (_summary_xml(mins=base64.b64encode(np.array([np.inf, 0.0]).tobytes()).decode()), "finite"),
    (f'<edn:Summary xmlns:edn="{EDN}" dims="x" boxes="0"><edn:Mins/></edn:Summary>', "missing"),
    (_summary_xml(extra=f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute name="x"/></edn:Schema>'),
     "summary"),
    ("<not-a-summary/>", "expected"),
])
def test_malformed_wire_forms_are_invalid_filters(xml, message):
    with pytest.raises(InvalidFilter, match=message):
        Summary.from_element(etree.fromstring(xml))


def test_from_text_refuses_hostile_xml():
    with pytest.raises(InvalidFilter, match="well-formed"):
        Summary.from_text('<!DOCTYPE x [<!ENTITY e "e">]><x>&e;</x>')
    with pytest.raises(InvalidFilter):
        Summary.from_text("<oops")


def test_target_sizes():
    assert summary_target(1.0, 10) == 10 and summary_target(0.25, 10) == 3
    assert summary_target(0.0001, 10) == 1 and summary_target(0.5, 0) == 0
    for bad in (0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError):
            summary_target(bad, 10)


def test_str_groups_cover_and_count():
    rng = np.random.default_rng(1)
    mins = rng.uniform(0, 9, (500, 3))
    maxs = mins + rng.uniform(0, 1, (500, 3))
    for groups in (1, 7, 64, 499, 500, 800):
        group_mins, group_maxs = str_groups(mins, maxs, groups)
        assert len(group_mins) == min(groups, 500)
        for lo, hi in zip(mins, maxs):
            assert np.any(np.all((group_mins <= lo) & (group_maxs >= hi), axis=1))


def _maximal_by_definition(mins, maxs):
    n = len(mins)
    result = []
    for b in range(n):
        covers = np.all(mins <= mins[b], axis=1) & np.all(maxs >= maxs[b], axis=1)
        identical = np.all(mins == mins[b], axis=1) & np.all(maxs == maxs[b], axis=1)
        dominated = covers & (~identical | (np.arange(n) < b))
        dominated[b] = False
        result.append(not dominated.any())
    return np.array(result, dtype=bool)


@pytest.mark.parametrize("side, d, expected", [
    (0.002, 4, "corner-tree"),  # thin boxes, no coverers: the tree prunes well
    (0.02, 8, "corner-tree"),
    (0.3, 8, "sort-filter"),  # wide boxes, no coverers: the tree's queries visit most nodes
    (None, 8, "sort-filter"),  # the paper's uniform boxes (min and max of two draws)
    (None, 2, "sort-filter"),  # ... and in 2 dimensions, where each has many coverers
])
def test_maximal_parents_chooses_by_width_and_overlap(side, d, expected):
    rng = np.random.default_rng(3)
    n = 4000
    if side is None:
        a, b = rng.random((n, d)), rng.random((n, d))
        mins, maxs = np.minimum(a, b), np.maximum(a, b)
    else:
        mins = rng.random((n, d)) * (1 - side)
        maxs = mins + rng.random((n, d)) * side
    algorithm, _ = choose_algorithm(mins, maxs, window_pairs=0)
    assert algorithm == expected
    assert choose_algorithm(mins, maxs, window_pairs=n * n)[0] == "windows"


@pytest.mark.parametrize("seed", range(12))
def test_maximal_rectangles_incremental_bulk_and_removal(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(0, 4))
    n = int(rng.integers(1, 80))
    mins = rng.integers(0, 5, (n, d)).astype(float)
    maxs = mins + rng.integers(0, 4, (n, d))
    expected = _maximal_by_definition(mins, maxs)
    ways = [{"window_pairs": n * n},  # windows
            {"window_pairs": 0, "sort_filter_coverers": n,
             "corner_tree_side": np.inf},  # the corner R-tree
            {"window_pairs": 0, "sort_filter_coverers": 0},  # sort-filter in one block
            # in blocks, with leaders and bitsets; with the R-tree beyond 4 maximal boxes
            {"window_pairs": 0, "sort_filter_coverers": 0, "block": 7, "leaders": 3},
            {"window_pairs": 0, "sort_filter_coverers": 0, "block": 9, "leaders": 7,
             "leader_stage": 2},  # leaders consulted a few at a time
            {"window_pairs": 0, "sort_filter_coverers": 0, "block": 5, "leaders": 1,
             "bits_limit": 4}]
    for way in ways:
        parents = maximal_parents(mins, maxs, **way)
        assert np.array_equal(parents < 0, expected)
        for child in np.flatnonzero(parents >= 0):
            parent = parents[child]
            assert expected[parent]
            assert np.all(mins[parent] <= mins[child]) and np.all(maxs[parent] >= maxs[child])
    manager = MaximalRectangles(d)
    for i in range(n):
        manager.add(i, mins[i], maxs[i])
    assert np.array_equal(np.isin(np.arange(n), manager.maximal_rows()), expected)
    loaded = MaximalRectangles(d)
    loaded.load(np.arange(n), mins, maxs)
    assert np.array_equal(np.isin(np.arange(n), loaded.maximal_rows()), expected)
    # reading its boxes from an owner's table (rows index it) instead of keeping copies
    borrowing = MaximalRectangles(d, boxes=SimpleNamespace(mins=mins, maxs=maxs))
    for i in range(n):
        borrowing.add(i, mins[i], maxs[i])
    assert np.array_equal(np.isin(np.arange(n), borrowing.maximal_rows()), expected)
    alive = list(range(n))
    for row in rng.permutation(n)[: n // 2].tolist():
        for structure in (manager, loaded, borrowing):
            structure.remove(row)
        alive.remove(row)
        reference = _maximal_by_definition(mins[alive], maxs[alive])
        for structure in (manager, loaded, borrowing):
            assert structure.maximal_count == int(reference.sum())
            boxes = {(tuple(a), tuple(b)) for a, b in zip(*structure.maximal_boxes())}
            assert boxes == {(tuple(mins[r]), tuple(maxs[r])) for r, m in zip(alive, reference) if m}


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("settings", [
    {},  # bitsets, the tree changed in place
    {"BULK_COVER_LIMIT": 0, "IN_PLACE_CHANGES": 0},  # the corner tree, dropped and rebuilt
    {"ONE_BY_ONE_BELOW": float("inf")}])  # a batch small next to what is held
def test_adding_many_at_once_gives_the_maximal_rectangles_of_adding_one_by_one(seed, settings):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    n = int(rng.integers(2, 90))
    mins = rng.integers(0, 5, (n, d)).astype(float)
    maxs = mins + rng.integers(0, 4, (n, d))
    first = int(rng.integers(0, n))
    manager = MaximalRectangles(d)
    for name, value in settings.items():
        setattr(manager, name, value)
    for i in range(first):
        manager.add(i, mins[i], maxs[i])
    generation = manager.generation
    manager.add_many(np.arange(first, n), mins[first:], maxs[first:])
    expected = _maximal_by_definition(mins, maxs)
    assert np.array_equal(np.isin(np.arange(n), manager.maximal_rows()), expected)
    assert len(manager) == n and manager.maximal_count == int(expected.sum())
    assert (manager.generation != generation) == (
        set(manager.maximal_rows().tolist()) != set(np.flatnonzero(
            _maximal_by_definition(mins[:first], maxs[:first])).tolist()))
    for row in range(n):  # every box filed under a maximal box that covers it
        if not expected[row]:
            parent = int(manager._parent[row])
            assert expected[parent] and row in manager._children[parent]
            assert np.all(mins[parent] <= mins[row]) and np.all(maxs[parent] >= maxs[row])
    removed = rng.permutation(n)[: n // 2].tolist()
    for row in removed:  # and removals still promote right
        manager.remove(row)
    alive = sorted(set(range(n)) - set(removed))
    reference = _maximal_by_definition(mins[alive], maxs[alive])
    boxes = {(tuple(a), tuple(b)) for a, b in zip(*manager.maximal_boxes())}
    assert boxes == {(tuple(mins[r]), tuple(maxs[r])) for r, m in zip(alive, reference) if m}


def test_generation_changes_only_with_the_maximal_set():
    manager = MaximalRectangles(1)
    manager.add(0, [0.0], [10.0])
    generation = manager.generation
    manager.add(1, [2.0], [3.0])  # covered: no change
    assert manager.generation == generation and not manager.is_maximal(1)
    manager.remove(0)  # the covered box is promoted
    assert manager.generation > generation and manager.is_maximal(1)
    with pytest.raises(KeyError):
        manager.remove(0)
    with pytest.raises(KeyError):
        manager.add(1, [0.0], [1.0])


def test_engine_summary_at_precisions_follows_the_paper_definition():
    engine = RTreeMatchingEngine(SCHEMA)
    rng = np.random.default_rng(5)
    lo = rng.uniform(0, 9, (200, 2))
    engine.bulk_load([f"s{i}" for i in range(200)], lo, lo + 1)
    assert len(engine.summary(1.0)) == engine.maximal_count <= 200
    assert len(engine.summary(0.1)) == 20 and len(engine.summary(0.001)) == 1
    assert engine.summary(0.1) is engine.summary(0.1)  # cached until the rectangles change
    generation = engine.summary_generation
    engine.add_filter("huge", FilterSpec(RANGES_DIALECT, "x exists and y exists"))
    assert engine.summary_generation != generation and engine.maximal_count == 1
    assert len(engine.summary(1.0)) == 1
    engine.remove_filter("huge")
    assert engine.maximal_count == len(engine.summary(1.0)) > 1
    assert len(RTreeMatchingEngine(SCHEMA).summary(0.5)) == 0


def test_cut_to_bytes_fits_the_limit_and_still_covers():
    from matchers.summary import cut_to_bytes
    rng = np.random.default_rng(3)
    mins = rng.uniform(0, 9, (5000, 4))
    big = Summary(("a", "b", "c", "d"), mins, mins + rng.uniform(0, 1, (5000, 4)))
    limit = 64 * 1024
    small = cut_to_bytes(big, limit)
    assert len(small) < len(big)
    assert len(etree.tostring(small.to_element())) <= limit
    # covering: every corner of every original box lies in some box of the cut one
    for lo, hi in zip(big.mins, big.maxs):
        assert np.any(np.all((small.mins <= lo) & (small.maxs >= hi), axis=1))
    assert cut_to_bytes(big, 1 << 30) is big  # already fits: unchanged
    assert len(cut_to_bytes(big, 10)) == 1  # never below one box


def test_rows_filed_by_a_load_change_like_rows_filed_one_by_one():
    from matchers.summary.maximal import _Children
    filed = _Children.filed(np.array([5, 1, 7, 3]), np.array([9, 2, 9, 2]))
    assert sorted(filed[9].tolist()) == [5, 7] and sorted(filed[2].tolist()) == [1, 3]
    filed.add(9, 11)
    filed.discard(2, 1)
    assert filed.pop(9) == {5, 7, 11} and filed.pop(9) == set()
    filed.discard(2, 3)  # the last one: the parent is no longer filed
    assert filed.pop(2) == set()
    filed.update(4, [1, 2])
    assert filed.pop(4) == {1, 2}
    assert _Children.filed(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).pop(0) == set()


@pytest.mark.parametrize("seed", range(6))
def test_cover_order_puts_every_box_after_those_that_cover_it(seed):
    """Boxes on a coarse grid tie often on width, on their low sides and on corners, and
    repeat: every covering box comes first, identical boxes in position order."""
    rng = np.random.default_rng(seed)
    n, d = 500, 3
    if seed < 4:  # a grid: ties everywhere
        mins = rng.integers(0, 4, (n, d)).astype(float)
        maxs = mins + rng.integers(0, 3, (n, d))
        if seed >= 2:  # so wide on one axis that the total width rounds the others away
            maxs[:, 0] += 1e16
    else:  # real-valued: nearly no ties
        mins = rng.random((n, d))
        maxs = mins + rng.random((n, d))
    if seed % 2:
        mins[::7], maxs[::7] = mins[0], maxs[0]  # identical boxes
    corners = np.hstack([mins, -maxs])
    order = _cover_order(mins, maxs, corners)
    assert sorted(order.tolist()) == list(range(n))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    covers = (corners[:, None, :] <= corners[None, :, :]).all(axis=2)  # [c, b]: c covers b
    identical = covers & covers.T
    c, b = np.nonzero(covers & ~identical)
    assert len(c) > 0
    assert (rank[c] < rank[b]).all()
    c, b = np.nonzero(identical & (np.arange(n)[:, None] < np.arange(n)[None, :]))
    assert (rank[c] < rank[b]).all()
