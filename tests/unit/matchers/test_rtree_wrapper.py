"""The R-tree wrapper: one coordinate order, ids only, numpy bulk loads, errors translated."""

import pickle
import threading

import numpy as np
import pytest

from matchers import MatcherError
from matchers._rtree import BoxIndex, SpatialIndexError, str_labels
from matchers.paged_index import PagedBoxIndex


def random_boxes(rng, n, d, spread=10.0, side=3.0):
    lo = rng.uniform(0, spread, (n, d))
    return lo, lo + rng.uniform(0, side, (n, d))


def containing(lo, hi, point):
    return set(np.flatnonzero(np.all((lo <= point) & (hi >= point), axis=1)).tolist())


@pytest.mark.parametrize("d", [0, 1, 2, 4])
def test_bulk_and_inserted_indexes_answer_like_numpy(d):
    rng = np.random.default_rng(d)
    lo, hi = random_boxes(rng, 300, d)
    bulk = BoxIndex.bulk(np.arange(300), lo, hi)
    grown = BoxIndex(d)
    for i in range(300):
        grown.insert(i, lo[i], hi[i])
    points = rng.uniform(0, 12, (40, d))
    for point in points:
        expected = containing(lo, hi, point)
        assert set(bulk.containing_point(point).tolist()) == expected
        assert set(grown.intersecting(point, point).tolist()) == expected
    ids, counts = bulk.intersecting_batch(points, points)
    offsets = np.r_[0, np.cumsum(counts)]
    for k, point in enumerate(points):
        assert set(ids[offsets[k]:offsets[k + 1]].tolist()) == containing(lo, hi, point)
    inside = bulk.inside(np.full(d, 2.0), np.full(d, 9.0))
    expected = set(np.flatnonzero(np.all((lo >= 2) & (hi <= 9), axis=1)).tolist())
    assert set(inside.tolist()) == expected
    for i in range(0, 300, 2):
        grown.delete(i, lo[i], hi[i])
    assert len(grown) == 150
    assert set(grown.containing_point(points[0]).tolist()) == {
        i for i in containing(lo, hi, points[0]) if i % 2}


def test_batch_buffer_grows_when_results_are_many():
    lo = np.zeros((500, 2))
    hi = np.ones((500, 2))
    index = BoxIndex.bulk(np.arange(500), lo, hi)
    ids, counts = index.intersecting_batch(np.full((3, 2), 0.5), np.full((3, 2), 0.5))
    assert counts.tolist() == [500, 500, 500] and len(ids) == 1500


def test_tiny_boxes_are_not_collapsed_into_points():
    # libspatialindex's C API stores a box whose extents are all <= DBL_EPSILON as a point.
    index = BoxIndex(1)
    index.insert(7, [0.0], [1e-17])
    assert index.containing_point([5e-18]).tolist() == [7]
    index = BoxIndex(2)
    index.insert(7, [0.0, 0.0], [1e-62, 1e-62])
    assert index.containing_point([1e-77, 1e-77]).tolist() == [7]
    assert index.intersecting([-1e-17, -1e-17], [0.0, 0.0]).tolist() == [7]


def test_empty_bulk_load_gives_an_empty_index():
    index = BoxIndex.bulk(np.zeros(0), np.zeros((0, 3)), np.zeros((0, 3)))
    assert len(index) == 0 and index.containing_point(np.zeros(3)).size == 0


def test_errors_are_translated():
    assert issubclass(SpatialIndexError, MatcherError)
    index = BoxIndex(2)
    with pytest.raises(SpatialIndexError, match="minimum is above"):
        index.insert(1, [1, 1], [0, 0])
    with pytest.raises(SpatialIndexError, match="coordinates"):
        index.insert(1, [1, 1, 1], [2, 2, 2])
    with pytest.raises(SpatialIndexError, match="minimum above"):
        BoxIndex.bulk(np.arange(1), np.ones((1, 2)), np.zeros((1, 2)))
    with pytest.raises(SpatialIndexError):
        BoxIndex.bulk(np.arange(2), np.ones((1, 2)), np.ones((1, 2)))


def test_indexes_refuse_to_be_pickled():
    with pytest.raises(TypeError, match="rebuild"):
        pickle.dumps(BoxIndex(2))
    with pytest.raises(TypeError, match="rebuild"):
        pickle.dumps(PagedBoxIndex(2))


def test_concurrent_queries_are_serialized_safely():
    rng = np.random.default_rng(1)
    lo, hi = random_boxes(rng, 2000, 3)
    index = BoxIndex.bulk(np.arange(2000), lo, hi)
    point = np.array([5.0, 5.0, 5.0])
    expected = containing(lo, hi, point)
    failures = []

    def work():
        for _ in range(200):
            if set(index.containing_point(point).tolist()) != expected:
                failures.append(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


@pytest.mark.parametrize("d", [0, 1, 3])
def test_paged_index_with_singles_and_removals(d):
    rng = np.random.default_rng(10 + d)
    lo, hi = random_boxes(rng, 400, d)
    index = PagedBoxIndex.bulk(np.arange(300), lo[:300], hi[:300], dims=d, page_size=16)
    for i in range(300, 400):
        index.insert(i, lo[i], hi[i])
    removed = set(range(0, 400, 3))
    for i in removed:
        index.delete(i, lo[i], hi[i])
    assert len(index) == 400 - len(removed)
    for point in rng.uniform(0, 12, (30, d)):
        got = index.intersecting(point, point)
        assert len(set(got.tolist())) == len(got)
        assert set(got.tolist()) == containing(lo, hi, point) - removed


def test_paged_index_asks_for_a_repack_when_singles_dominate():
    index = PagedBoxIndex.bulk(np.arange(10), np.zeros((10, 2)), np.ones((10, 2)), dims=2)
    assert not index.needs_repack()
    for i in range(10, 5000):
        index.insert(i, np.zeros(2), np.ones(2))
    assert index.needs_repack()


def test_str_labels_make_equal_compact_groups():
    rng = np.random.default_rng(3)
    centres = rng.uniform(0, 10, (1000, 2))
    labels = str_labels(centres, 16)
    sizes = np.bincount(labels)
    assert len(sizes) == 16 and sizes.max() - sizes.min() <= 1
    assert str_labels(centres[:5], 16).max() == 4  # never more groups than points
    assert set(str_labels(np.zeros((4, 0)), 3).tolist()) == {0}
