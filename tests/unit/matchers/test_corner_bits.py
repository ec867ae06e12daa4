"""CornerBits: the earliest stored point below each query point, across bitset growth."""
import numpy as np
import pytest

from matchers.summary.corner_bits import CornerBits


def _earliest_below(ids, stored, queries):
    answers = []
    for query in queries:
        below = np.flatnonzero(np.all(stored <= query, axis=1))
        answers.append(int(ids[below[0]]) if len(below) else -1)
    return np.array(answers)


@pytest.mark.parametrize("seed", range(4))
def test_first_below_is_the_earliest_stored_point_below(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 6))
    points = rng.integers(0, 6, (1500, k)).astype(float)  # ties on every axis
    bits = CornerBits(points[rng.choice(1500, 200)], buckets=int(rng.integers(2, 70)))
    ids = rng.permutation(10_000)[:1500]
    queries = rng.integers(-1, 7, (300, k)).astype(float)
    held = 0
    for step in (1, 63, 64, 700, 672):  # grows past the first 16 words (1,024 points)
        bits.add(ids[held:held + step], points[held:held + step])
        held += step
        assert len(bits) == held
        expected = _earliest_below(ids[:held], points[:held], queries)
        assert np.array_equal(bits.first_below(queries), expected)


def test_an_empty_store_finds_nothing():
    bits = CornerBits(np.zeros((0, 3)))
    assert np.array_equal(bits.first_below(np.zeros((4, 3))), np.full(4, -1))
    bits.add(np.array([7]), np.array([[1.0, 1.0, 1.0]]))
    assert bits.first_below(np.array([[1.0, 1.0, 1.0], [0.0, 5.0, 5.0]])).tolist() == [7, -1]


def test_points_of_no_axes_are_all_below_every_query():
    bits = CornerBits(np.zeros((3, 0)))
    assert bits.first_below(np.zeros((2, 0))).tolist() == [-1, -1]
    bits.add(np.array([7, 9]), np.zeros((2, 0)))
    assert bits.first_below(np.zeros((2, 0))).tolist() == [7, 7]


def test_an_engine_without_attributes_takes_filters_one_by_one_and_in_bulk():
    """A schema of no attributes gives every filter the same (empty) box: filters added one
    at a time and then a batch of fewer than an eighth of them (the incremental path of
    the maximal rectangles) leave one maximal rectangle and match as XPath says."""
    from lxml import etree

    from matchers import FilterSpec, RTreeMatchingEngine
    from wsframework import ns
    engine = RTreeMatchingEngine(None)
    for i in range(40):
        engine.add_filter(f"a{i}", FilterSpec(ns.XPATH10_DIALECT_2011, "/a"))
    engine.add_filters([("b", FilterSpec(ns.XPATH10_DIALECT_2011, "/b")),
                        ("c", FilterSpec(ns.XPATH10_DIALECT_2011, "/a"))])
    assert len(engine) == 42 and engine.maximal_count == 1
    expected = sorted([f"a{i}" for i in range(40)] + ["c"])
    assert sorted(engine.match(etree.fromstring("<a/>"))) == expected
    assert engine.match(etree.fromstring("<b/>")) == ["b"]
