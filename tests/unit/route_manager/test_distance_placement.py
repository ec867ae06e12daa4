"""Distance-aware placement (EDN III-D): the online rule "least added traffic times distance"
on hand-computed cases, the distance-weighted offline cut, and PlacementRouter's "distance"
algorithm."""
from __future__ import annotations

import numpy as np
import pytest

from route_manager import workloads
from route_manager.latency_matrix import parse_latency
from route_manager.partitioning import (OfflineDistanceRTreePartitioner,
                                        OnlineDistancePartitioner, OfflineRTreePartitioner,
                                        partition)
from route_manager.partitioning.distance import (added_traffic, distance_partition,
                                                 nearest_neighbour_chain)
from route_manager.placement_router import Candidate, PlacementRouter, Space

NEW_LO, NEW_HI = np.array([0.0, 0.0]), np.array([2.0, 2.0])  # volume 4


def rect(lo, hi):
    return np.array([lo], dtype=float), np.array([hi], dtype=float)


ENTRY_MISFIT = rect([5, 5], [7, 7])        # no overlap: adds 4
NEAR_FIT = rect([0, 0], [2, 1.5])          # covers 3: adds 1
FAR_BETTER_FIT = rect([0, 0], [2, 1.9])    # covers 3.8: adds 0.2
PERFECT_FIT = rect([0, 0], [3, 3])         # covers all: adds 0


def online(distances, far_box=FAR_BETTER_FIT, loads=(0, 0, 0), capacity=100, **params):
    """Three servers: 0 the entry server (fits badly), 1 near (fits a little worse than 2),
    2 far."""
    part = OnlineDistancePartitioner(capacity=capacity, **params).fit(
        np.empty((0, 2)), np.empty((0, 2)), n_servers=3)
    for server, (mins, maxs) in enumerate((ENTRY_MISFIT, NEAR_FIT, far_box)):
        part.update_server(server, mins, maxs, loads[server])
    return part.set_distances(distances)


def test_added_traffic_is_the_volume_outside_the_best_covering_rectangle():
    assert added_traffic(NEW_LO, NEW_HI, *ENTRY_MISFIT) == 4.0
    assert added_traffic(NEW_LO, NEW_HI, *NEAR_FIT) == 1.0
    assert added_traffic(NEW_LO, NEW_HI, *FAR_BETTER_FIT) == pytest.approx(0.2)
    assert added_traffic(NEW_LO, NEW_HI, *PERFECT_FIT) == 0.0
    # min over the rectangles, not the union: two halves still add 2
    halves = (np.array([[0, 0], [1, 0]], float), np.array([[1, 2], [2, 2]], float))
    assert added_traffic(NEW_LO, NEW_HI, *halves) == 2.0
    assert added_traffic(NEW_LO, NEW_HI, np.empty((0, 2)), np.empty((0, 2))) == 4.0


def test_near_server_with_a_worse_fit_wins_when_the_far_one_is_far_enough():
    # floor = smallest non-zero distance = 2: costs 4*(0+2)=8, 1*(2+2)=4, 0.2*(70+2)=14.4
    part = online([0, 2, 70])
    np.testing.assert_allclose(part.costs(NEW_LO, NEW_HI), [8.0, 4.0, 14.4])
    assert part.assign(NEW_LO, NEW_HI) == 1


def test_far_server_with_a_better_fit_wins_when_the_weighting_says_so():
    # far at 10 ms: 0.2*(10+2)=2.4 < 4 (near) < 8 (entry)
    part = online([0, 2, 10])
    np.testing.assert_allclose(part.costs(NEW_LO, NEW_HI), [8.0, 4.0, 2.4])
    assert part.assign(NEW_LO, NEW_HI) == 2
    # the break-even distance: 0.2*(d+2) = 4 at d = 18; just below the far one wins
    assert online([0, 2, 17.9]).assign(NEW_LO, NEW_HI) == 2
    assert online([0, 2, 18.1]).assign(NEW_LO, NEW_HI) == 1


def test_a_perfect_fit_adds_no_traffic_and_wins_at_any_distance():
    # The paper's product: zero added traffic costs nothing however far (its event path
    # carries no new event); among perfect fits the nearest wins.
    assert online([0, 2, 500], far_box=PERFECT_FIT).assign(NEW_LO, NEW_HI) == 2
    part = online([0, 2, 500], far_box=PERFECT_FIT)
    part.update_server(1, *PERFECT_FIT, load=0)
    assert part.assign(NEW_LO, NEW_HI) == 1


def test_equal_distances_give_the_plain_least_added_traffic_choice():
    assert online([5, 5, 5]).assign(NEW_LO, NEW_HI) == 2
    rng = np.random.default_rng(3)
    for _ in range(50):
        part = OnlineDistancePartitioner(capacity=1000).fit(np.empty((0, 3)), np.empty((0, 3)),
                                                           n_servers=4)
        for server in range(4):
            mins, maxs = workloads.uniform_rectangles(3, 3, seed=int(rng.integers(1 << 30)))
            part.update_server(server, mins, maxs, load=0)
        part.set_distances(np.full(4, 7.0))
        lo, hi = workloads.uniform_rectangles(1, 3, seed=int(rng.integers(1 << 30)))
        plain = [added_traffic(lo[0], hi[0], b.lo[:b.n], b.hi[:b.n]) for b in part._boxes]
        assert part.assign(lo[0], hi[0]) == int(np.argmin(plain))


def test_without_a_floor_the_bare_product_keeps_everything_at_the_entry_server():
    assert online([0, 2, 70], distance_floor=0).assign(NEW_LO, NEW_HI) == 0


def test_full_servers_are_skipped_and_the_choice_is_recorded():
    part = online([0, 2, 70], loads=(0, 5, 0), capacity=5)
    assert part.assign(NEW_LO, NEW_HI) == 0  # 8 < 14.4 once the near one is full
    assert part.costs(NEW_LO, NEW_HI)[0] == 0.0  # the entry server now holds the box


def test_distances_are_checked():
    part = online([0, 2, 70])
    for bad in ([0, 2], [0, -1, 3], [0, np.nan, 3], [0, np.inf, 3]):
        with pytest.raises(ValueError):
            part.set_distances(bad)
    with pytest.raises(ValueError):
        OnlineDistancePartitioner(capacity=3, distance_floor=-1).fit(
            np.zeros((1, 2)), np.ones((1, 2)), 2)


# -- offline --------------------------------------------------------------------------------

def two_regions(per_region=2, near=2.0, far=70.0):
    k = 2 * per_region
    region = np.arange(k) // per_region
    latency = np.where(region[:, None] == region[None, :], near, far)
    np.fill_diagonal(latency, 0.0)
    return latency, region


def test_nearest_neighbour_chain_visits_one_region_before_the_other():
    latency, region = two_regions(3)
    order = np.array([3, 0, 4, 1, 5, 2])  # interleave the regions' server numbers
    shuffled = latency[np.ix_(order, order)]
    chain = nearest_neighbour_chain(shuffled)
    assert list(region[order][chain]) == [1, 1, 1, 0, 0, 0]


@pytest.mark.parametrize("n, k", [(600, 5), (97, 4), (3000, 8)])
def test_equal_distances_reproduce_tgs_labels(n, k):
    mins, maxs = workloads.uniform_rectangles(n, 3, seed=n)
    entry = np.random.default_rng(n).integers(0, k, n)
    expected = partition(mins, maxs, k)
    np.testing.assert_array_equal(distance_partition(mins, maxs, entry, np.zeros((k, k))),
                                  expected)
    offline = OfflineDistanceRTreePartitioner(latency=np.zeros((k, k)), entry=entry)
    np.testing.assert_array_equal(offline.fit(mins, maxs, k).labels_, expected)
    np.testing.assert_array_equal(OfflineDistanceRTreePartitioner().fit(mins, maxs, k).labels_,
                                  OfflineRTreePartitioner().fit(mins, maxs, k).labels_)


def test_the_weighted_cut_with_constant_weights_is_tgs_cut():
    # The weighted path itself (not the shortcut): every subscription entered at a server
    # 1 ms from every server, including its own: weights are constant, cuts are TGS's.
    n, k = 500, 4
    mins, maxs = workloads.uniform_rectangles(n, 3, seed=5)
    latency = np.ones((k, k))
    entry = np.zeros(n, dtype=np.int64)
    labels = distance_partition(mins, maxs, entry, latency)
    np.testing.assert_array_equal(labels, partition(mins, maxs, k))


def test_subscriptions_stay_in_the_region_where_they_entered():
    latency, region = two_regions(per_region=2)
    n = 800
    mins, maxs = workloads.uniform_rectangles(n, 3, seed=21)
    rng = np.random.default_rng(21)
    entry = np.where(np.arange(n) % 2 == 0, rng.integers(0, 2, n), rng.integers(2, 4, n))
    labels = distance_partition(mins, maxs, entry, latency)
    assert np.array_equal(region[labels], region[entry])
    assert np.all(np.bincount(labels, minlength=4) == n // 4)  # TGS's equal groups kept
    # plain TGS ignores where they entered: about half land in the other region
    assert np.mean(region[partition(mins, maxs, 4)] != region[entry]) > 0.3


def test_distances_small_against_the_floor_favour_volume_over_location():
    # Regions 2.5 ms apart against a 20 ms floor: the weights barely differ (20 vs about
    # 21.25), so the geometric cut (two boxes of well under the whole volume) beats the
    # location cut (two boxes of nearly the whole volume). With the default floor (2 ms, the
    # nearest hop) the location cut's weights are 2 + 0 against 2 + 1.25 for a geometric cut
    # whose sides each hold half the other region's subscriptions, and location wins.
    latency, region = two_regions(per_region=2, near=2.0, far=2.5)
    n = 800
    mins, maxs = workloads.uniform_rectangles(n, 3, seed=21)
    entry = np.where(np.arange(n) % 2 == 0, 0, 2)
    labels = distance_partition(mins, maxs, entry, latency, distance_floor=20.0)
    assert np.mean(region[labels] != region[entry]) > 0.3
    labels = distance_partition(mins, maxs, entry, latency)
    assert np.array_equal(region[labels], region[entry])


@pytest.mark.parametrize("latency, entry", [
    (np.full((2, 2), np.nan), [0, 1]),
    ([[0, -1], [1, 0]], [0, 1]),
    (np.zeros((2, 3)), [0, 1]),
    (np.zeros((2, 2)), [0, 2]),
    (np.zeros((2, 2)), [0, -1]),
    (np.zeros((2, 2)), [0.0, 1.0]),
    (np.zeros((2, 2)), [0]),
])
def test_bad_latency_or_entry_is_refused(latency, entry):
    with pytest.raises(ValueError):
        distance_partition(np.zeros((2, 1)), np.ones((2, 1)), entry, latency)


def test_offline_partitioner_checks_the_matrix_against_the_servers_and_continues_online():
    latency, _ = two_regions()
    mins, maxs = workloads.uniform_rectangles(40, 2, seed=1)
    with pytest.raises(ValueError, match=r"\(3, 3\) for 3 servers"):
        OfflineDistanceRTreePartitioner(latency=latency, entry=np.zeros(40, int)).fit(
            mins, maxs, 3)
    part = OfflineDistanceRTreePartitioner(latency=latency, entry=np.arange(40) % 4,
                                           capacity=20).fit(mins, maxs, 4)
    lo, hi = mins[7], maxs[7]  # already held by its server: a perfect fit there
    held_by = part.labels_[7]
    assert part.set_distances(latency[held_by]).assign(lo, hi) == held_by


# -- PlacementRouter ------------------------------------------------------------------------

LATENCY = parse_latency('{"servers": ["here", "near", "far"], '
                        '"ms": [[0, 2, 70], [2, 0, 70], [70, 70, 0]]}', "json")


class View:
    """A RouteView over fixed candidates in a [0, 10]^2 space (the first is this server)."""

    space = Space(np.zeros(2), np.full(2, 10.0))

    def __init__(self, candidates):
        self._candidates = candidates
        self.self_name = candidates[0].name
        self.self_load = candidates[0].load

    def membership(self):
        return tuple(c.name for c in self._candidates)

    def content_key(self):
        return 0

    def candidates(self):
        return self._candidates


def cand(name, boxes, load=0):
    return Candidate(name, load, boxes[0], boxes[1], None, 0)


def test_router_weights_by_the_latency_from_this_server():
    view = View([cand("here", ENTRY_MISFIT), cand("near", NEAR_FIT),
                 cand("far", FAR_BETTER_FIT)])
    assert PlacementRouter("distance", 100, latency=LATENCY).choose(
        "t", NEW_LO, NEW_HI, view) == "near"
    assert PlacementRouter("rtree", 100).choose("t", NEW_LO, NEW_HI, view) == "far"


def test_router_counts_a_server_missing_from_the_matrix_as_the_farthest():
    view = View([cand("here", ENTRY_MISFIT), cand("near", NEAR_FIT),
                 cand("stranger", FAR_BETTER_FIT)])  # 0.2 * (70 + 2) > 1 * (2 + 2)
    assert PlacementRouter("distance", 100, latency=LATENCY).choose(
        "t", NEW_LO, NEW_HI, view) == "near"


def test_router_needs_a_latency_matrix():
    with pytest.raises(ValueError, match="latency"):
        PlacementRouter("distance", 100)


# -- the server's settings and edn serve --latency ------------------------------------------

def test_server_settings_read_the_latency_file(tmp_path):
    from subscription_manager.server.settings import EdnSettings
    from wsframework.settings import SettingsError
    good = tmp_path / "ms.csv"
    good.write_text(",here,near\nhere,0,2\nnear,2,0\n")
    settings = EdnSettings.from_mapping({"dispatcher": "http://d:1", "partitioner": "distance",
                                         "latency_file": str(good)})
    assert settings.latency().distance("here", "near") == 2.0
    with pytest.raises(SettingsError, match="needs a latency file"):
        EdnSettings.from_mapping({"dispatcher": "http://d:1", "partitioner": "distance"})
    bad = tmp_path / "bad.csv"
    bad.write_text(",here,near\nhere,0,-2\nnear,2,0\n")
    with pytest.raises(SettingsError, match="'here' -> 'near'"):
        EdnSettings.from_mapping({"dispatcher": "http://d:1", "latency_file": str(bad)})


def test_edn_serve_refuses_a_bad_latency_file_before_starting(tmp_path, capsys):
    from edn.cli import main
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": ["a", "a"], "ms": [[0, 1], [1, 0]]}')
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "server", "--dispatcher", "http://127.0.0.1:9", "--partitioner",
              "distance", "--latency", str(bad), "--data", str(tmp_path / "data")])
    assert "--latency" in str(stopped.value) and "duplicate" in str(stopped.value)
    assert not (tmp_path / "data").exists()


def test_router_and_settings_take_the_distance_floor(tmp_path):
    from subscription_manager.server.settings import EdnSettings
    from wsframework.settings import SettingsError
    view = View([cand("here", ENTRY_MISFIT), cand("near", NEAR_FIT),
                 cand("far", FAR_BETTER_FIT)])
    # floor 100: 4*100=400 (here), 1*102=102 (near), 0.2*170=34 (far): distance counts less
    assert PlacementRouter("distance", 100, latency=LATENCY, distance_floor=100).choose(
        "t", NEW_LO, NEW_HI, view) == "far"
    good = tmp_path / "ms.csv"
    good.write_text(",here,near\nhere,0,2\nnear,2,0\n")
    mapping = {"dispatcher": "http://d:1", "partitioner": "distance", "latency_file": str(good)}
    assert EdnSettings.from_mapping({**mapping, "placement_distance_floor": "35"}
                                    ).placement_distance_floor == 35.0
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(SettingsError, match="placement_distance_floor"):
            EdnSettings.from_mapping({**mapping, "placement_distance_floor": bad})


def test_dispatcher_settings_read_and_check_the_latency_file(tmp_path):
    from route_manager.dispatcher.settings import DispatcherSettings
    from wsframework.settings import SettingsError, read_settings
    good = tmp_path / "ms.json"
    good.write_text('{"servers": ["a", "b"], "ms": [[0, 2], [2, 0]]}')
    settings, = read_settings({"latency_file": str(good)}, DispatcherSettings)
    assert settings.latency_file == str(good)
    good.write_text('{"servers": ["a", "b"], "ms": [[0, 2], [2, 0.1]]}')
    with pytest.raises(SettingsError, match="'b' to itself"):
        read_settings({"latency_file": str(good)}, DispatcherSettings)


def test_the_study_compares_like_with_like():
    from benchmarks.reproductions.distance_placement import study, two_region_latency
    latency = two_region_latency(6, 2.0, 70.0, seed=0)
    assert np.allclose(latency, latency.T) and np.all(np.diag(latency) == 0)
    assert latency[0, 1] < 3.0 < 66.0 < latency[0, 5]
    figures = study(subscriptions=300, servers=4, d=3, events=300, floors=(), seed=2)
    strip = {k: v for k, v in figures["online_rtree"].items() if k != "seconds"}
    # least added traffic = |new| - max overlap: the online R-tree's rule, same choices
    assert {k: v for k, v in figures["online_added_traffic"].items() if k != "seconds"} == strip
    assert figures["local"]["mean_distance_ms"] == 0.0
    assert (figures["online_distance"]["mean_distance_ms"]
            < figures["online_rtree"]["mean_distance_ms"])
    assert (figures["offline_distance"]["cross_region"]
            < figures["offline_rtree"]["cross_region"])
