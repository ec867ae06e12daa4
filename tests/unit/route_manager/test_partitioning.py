"""Partitioners: estimator conformance, load thresholds, TGS bulk loading, K-means."""
import functools
import inspect

import numpy as np
import pytest

from route_manager.models import hit_ratio as hr
from route_manager import workloads
from route_manager.partitioning import (
    ALL_PARTITIONERS,
    CapacityExceeded,
    KMeansPartitioner,
    OfflineOnlineRTreePartitioner,
    OfflineRTreePartitioner,
    OnlineKMeansPartitioner,
    OnlineRTreePartitioner,
    RandomPartitioner,
    partition,
    rtree_summary,
    tree_height,
)
from route_manager.partitioning import conformance
from route_manager.partitioning.overlap_index import MaxOverlapIndex
from route_manager.partitioning.tgs import rtree_levels

SEEDED = {"random_state": 0}


def make(cls, **params):
    if "random_state" in inspect.signature(cls.__init__).parameters:
        params = {**SEEDED, **params}
    return cls(**params)


@pytest.fixture(scope="module")
def rects():
    return workloads.uniform_rectangles(1200, 3, seed=11)


# ---- one conformance suite over every partitioner (route_manager.partitioning.conformance) --

def factory(cls):
    """The class, with its random_state pinned when it has one (fit must repeat itself)."""
    return functools.partial(make, cls)


@pytest.mark.parametrize("cls", ALL_PARTITIONERS, ids=lambda c: c.__name__)
def test_estimator_conventions(cls):
    conformance.check_estimator_conventions(factory(cls))


@pytest.mark.parametrize("cls", ALL_PARTITIONERS, ids=lambda c: c.__name__)
def test_fit_and_online_use(cls, rects):
    mins, maxs = rects
    extra = workloads.uniform_rectangles(50, 3, seed=12)
    conformance.check_fit_and_online_use(factory(cls), mins, maxs, 4, extra=extra)


@pytest.mark.parametrize("cls", ALL_PARTITIONERS, ids=lambda c: c.__name__)
def test_empty_fit_then_live_assignment_respects_capacity(cls):
    mins, maxs = workloads.uniform_rectangles(40, 2, seed=3)
    conformance.check_empty_fit_then_live_assignment(factory(cls), mins, maxs, 4)


@pytest.mark.parametrize("cls", ALL_PARTITIONERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("load_factor", [1.0, 1.3])
def test_threshold_never_exceeded(cls, load_factor):
    mins, maxs = workloads.zipf_rectangles(900, 3, 1.0, seed=5, bins=6)  # clustered
    conformance.check_threshold_never_exceeded(factory(cls), mins, maxs, 6, load_factor)


class _Greedy(RandomPartitioner):
    """Breaks the contract: ignores the load threshold."""

    def _assign_one(self, lo, hi):
        return 0


def test_a_broken_partitioner_fails_with_a_clear_message():
    with pytest.raises(AssertionError, match=r"_Greedy placed \[40, 0, 0, 0\] live"):
        conformance.check_empty_fit_then_live_assignment(factory(_Greedy))
    with pytest.raises(AssertionError, match="_Greedy"):
        conformance.check_partitioner(factory(_Greedy))


def test_too_many_subscriptions_rejected():
    mins, maxs = workloads.uniform_rectangles(30, 2, seed=1)
    with pytest.raises(CapacityExceeded):
        RandomPartitioner(capacity=5).fit(mins, maxs, 4)
    with pytest.raises(ValueError):
        RandomPartitioner(load_factor=0.5).fit(mins, maxs, 4)


# ---- offline R-tree (TGS) --------------------------------------------------------------------

@pytest.mark.parametrize("n,k", [(1000, 10), (1003, 7), (50, 50), (10, 1)])
def test_offline_rtree_exactly_n_partitions_of_near_equal_size(n, k):
    mins, maxs = workloads.uniform_rectangles(n, 4, seed=n)
    est = OfflineRTreePartitioner().fit(mins, maxs, k)
    sizes = np.bincount(est.labels_, minlength=k)
    assert len(sizes) == k and sizes.sum() == n and sizes.min() > 0
    assert sizes.max() - sizes.min() <= 1
    assert sizes.max() <= est.capacity_


def test_cost_function_cuts_between_two_clusters():
    rng = np.random.default_rng(0)
    left = rng.uniform(0, 2, size=(100, 2))
    right = rng.uniform(8, 10, size=(100, 2))
    centres = np.vstack([left, right])
    mins, maxs = centres - 0.1, centres + 0.1
    labels = partition(mins, maxs, 2)
    assert len(set(labels[:100])) == 1 and len(set(labels[100:])) == 1
    assert labels[0] != labels[100]
    # the cut is along dimension 0 even when dimension 1 is the stretched one
    mins2, maxs2 = mins[:, ::-1].copy(), maxs[:, ::-1].copy()
    labels2 = partition(mins2, maxs2, 2)
    assert labels2[0] != labels2[100] and len(set(labels2[:100])) == 1


def test_tgs_picks_the_cheapest_cut_by_volume():
    # Three tight columns of rectangles: 2 partitions must group by columns (whole columns),
    # never mix them, since any mixed side has a huge bounding box.
    cols = [np.array([0.0, 0.0]), np.array([4.5, 0.0]), np.array([9.0, 0.0])]
    mins = np.vstack([c + [0, y] for c in cols for y in np.linspace(0, 9, 20)])
    maxs = mins + [1.0, 1.0]
    labels = partition(mins, maxs, 3)
    for j in range(3):
        assert len(set(labels[20 * j: 20 * (j + 1)])) == 1
    assert len(set(labels)) == 3


def test_rtree_levels_nest_and_respect_fanout():
    mins, maxs = workloads.uniform_rectangles(700, 3, seed=2)
    height = tree_height(700, 4)
    assert 4 ** (height - 1) < 700 <= 4 ** height
    levels = rtree_levels(mins, maxs, 4, height)
    for upper, lower in zip(levels, levels[1:]):
        # every node at the lower depth sits inside exactly one node above
        pairs = np.unique(np.stack([lower, upper], axis=1), axis=0)
        assert len(np.unique(pairs[:, 0])) == len(pairs)
        assert np.bincount(np.unique(pairs, axis=0)[:, 1]).max() <= 4  # fan-out
    assert np.bincount(levels[-1]).max() <= 4  # leaf nodes hold <= fanout rectangles
    box_lo, box_hi = rtree_summary(mins, maxs, 2, 4)
    assert len(box_lo) == len(np.unique(levels[1]))
    deep = rtree_summary(mins, maxs, height + 1, 4)
    assert np.array_equal(deep[0], mins)


# ---- online R-tree ---------------------------------------------------------------------------

def _brute_best(index, srv, lo_all, hi_all, lo, hi, loads, eligible):
    ov = np.prod(np.clip(np.minimum(hi_all, hi) - np.maximum(lo_all, lo), 0, None), axis=1)
    ov[~eligible[srv]] = -1
    best = ov.max()
    if best <= 0:
        cand = np.flatnonzero(eligible)
    else:
        cand = np.unique(srv[ov == best])
    return int(cand[np.argmin(loads[cand])])


@pytest.mark.parametrize("d", [2, 4, 8])
def test_max_overlap_index_matches_brute_force(d):
    rng = np.random.default_rng(d)
    mins, maxs = workloads.uniform_rectangles(800, d, seed=d)
    srv = rng.integers(0, 5, 800)
    index = MaxOverlapIndex(d, 5, 0.0, 10.0, slabs=8, initial_capacity=64)
    for s in range(5):
        index.add_many(s, mins[:400][srv[:400] == s], maxs[:400][srv[:400] == s])
    for j in range(400, 800):
        index.add(int(srv[j]), mins[j], maxs[j])
    eligible = np.array([True, False, True, True, True])
    index.set_server_eligible(1, False)
    loads = rng.integers(0, 50, 5)
    queries = workloads.uniform_rectangles(200, d, seed=d + 100)
    for lo, hi in zip(*queries):
        got, _, _ = index.best_server(lo, hi, loads)
        assert got == _brute_best(index, srv, mins, maxs, lo, hi, loads, eligible)


def test_online_rtree_prefers_the_covering_server_and_breaks_ties_by_load():
    est = OnlineRTreePartitioner(capacity=5).fit(np.empty((0, 2)), np.empty((0, 2)), 3)
    est.update_server(0, [[0, 0]], [[5, 5]], load=3)
    est.update_server(1, [[4, 4]], [[10, 10]], load=1)
    assert est.assign([1, 1], [2, 2]) == 0          # only server 0 overlaps
    assert est.assign([4.2, 4.2], [4.8, 4.8]) == 1  # both cover it: least loaded
    assert est.assign([3, 3], [4.5, 4.5]) == 0      # larger overlap wins over load
    assert est.assign([20, 20], [21, 21]) == 2      # no overlap: least loaded (empty)
    est.update_server(0, [[0, 0]], [[5, 5]], load=5)  # server 0 is at the threshold
    assert est.assign([1, 1], [2, 2]) in (1, 2)


def test_online_rtree_degenerate_subscriptions():
    est = OnlineRTreePartitioner(capacity=10).fit(np.empty((0, 2)), np.empty((0, 2)), 2)
    est.update_server(0, [[0, 0]], [[2, 10]], load=5)
    est.update_server(1, [[5, 0]], [[10, 10]], load=0)
    assert est.assign([1, 3], [1, 3]) == 0     # a point inside server 0's box
    assert est.assign([6, 0], [6, 10]) == 1    # a segment inside server 1's box


@pytest.mark.parametrize("depth", [1, 2, None])
def test_depth_limited_online_rtree(depth, rects):
    mins, maxs = rects
    est = OnlineRTreePartitioner(summary_depth=depth, fanout=4).fit(mins, maxs, 4)
    assert est.loads_.max() <= est.capacity_
    if depth is not None:
        assert 0 < est.mean_summary_depth_ <= depth
        for s in range(4):
            boxes = est.server_summary(s)[0]
            if est.loads_[s]:
                assert 1 <= len(boxes) <= 4 ** (depth - 1)
    else:
        assert est.mean_summary_depth_ >= 1


def test_offline_share_seeds_servers_with_the_bulk_load(rects):
    mins, maxs = rects
    half = OfflineOnlineRTreePartitioner(offline_share=0.5).fit(mins, maxs, 4)
    offline_part = partition(mins[:600], maxs[:600], 4)
    assert np.array_equal(half.labels_[:600], offline_part)
    full = OnlineRTreePartitioner(offline_share=1.0).fit(mins, maxs, 4)
    assert np.array_equal(full.labels_, OfflineRTreePartitioner().fit(mins, maxs, 4).labels_)


# ---- K-means ---------------------------------------------------------------------------------

def test_kmeans_converges_on_separated_clusters_and_respects_threshold():
    rng = np.random.default_rng(1)
    centres = np.array([[1.0, 1.0], [9.0, 1.0], [5.0, 9.0]])
    pts = np.vstack([c + rng.normal(0, 0.3, size=(200, 2)) for c in centres])
    mins, maxs = pts - 0.05, pts + 0.05
    est = KMeansPartitioner(random_state=3, load_factor=1.5).fit(mins, maxs, 3)
    assert est.n_iter_ < est.max_iter
    for j in range(3):
        assert len(set(est.labels_[200 * j: 200 * (j + 1)])) == 1
    # an unbalanced workload: the threshold forces overflow to the next-nearest centroid
    pts2 = np.vstack([centres[0] + rng.normal(0, 0.3, size=(500, 2)),
                      centres[1] + rng.normal(0, 0.3, size=(100, 2))])
    est2 = KMeansPartitioner(random_state=3, load_factor=1.0).fit(pts2, pts2, 3)
    assert np.bincount(est2.labels_, minlength=3).tolist() == [200, 200, 200]


def test_spark_kmeans_with_no_more_subscriptions_than_servers_needs_no_spark_job():
    # Falls back to the local fit, which reads the base class's parameters (delta): the
    # Spark subclass must set them too.
    pytest.importorskip("pyspark")
    from spark_jobs.study import SparkKMeansPartitioner

    pts = np.array([[1.0, 1.0], [5.0, 5.0], [9.0, 9.0]])
    est = SparkKMeansPartitioner(session=object(), capacity=5).fit(pts, pts, 4)
    assert sorted(est.labels_.tolist()) == sorted(set(est.labels_.tolist()))  # one per server
    assert np.bincount(est.labels_, minlength=4).tolist().count(0) == 1  # one server empty


def test_online_kmeans_seeds_empty_servers_then_follows_centroids():
    est = OnlineKMeansPartitioner(capacity=100).fit(np.empty((0, 1)), np.empty((0, 1)), 2)
    assert est.assign([0.0], [0.0]) == 0
    assert est.assign([9.0], [9.0]) == 1  # empty server first
    assert est.assign([8.0], [8.5]) == 1
    assert est.assign([1.0], [1.0]) == 0
    assert est.cluster_centers_[1, 0] == pytest.approx((9.0 + 8.25) / 2)


# ---- the point of it all -------------------------------------------------------------------

def test_random_partitioning_costs_more_traffic_than_offline_rtree():
    mins, maxs = workloads.zipf_rectangles(4000, 3, 1.0, seed=21, bins=8)
    events = workloads.uniform_events(3000, 3, seed=22)
    ratios = {}
    for cls in (RandomPartitioner, OfflineRTreePartitioner):
        labels = make(cls).fit(mins, maxs, 8).labels_
        ratios[cls.__name__] = hr.hit_ratio(events, hr.precise_summaries(mins, maxs, labels, 8))
    assert ratios["RandomPartitioner"] > 1.5 * ratios["OfflineRTreePartitioner"], ratios
