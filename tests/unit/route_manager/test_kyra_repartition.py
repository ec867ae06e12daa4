"""Kyra's placement of real subscriptions (route_manager.partitioning.kyra.KyraPlacement) and the
dispatcher's ``Repartition {Algorithm: kyra ...}`` (route_manager.repartition), in process."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from route_manager import protocol
from route_manager.exceptions import UnknownAlgorithm
from route_manager.partitioning.kyra import KyraNetwork, KyraPlacement, zone_shares
from route_manager.latency_matrix import LatencyMatrix
from route_manager.repartition import (InvalidRepartition, KyraParameters, algorithm_text,
                                       parse_algorithm)
from subscription_manager.client import EventingClient
from tests.support.edn import TOPIC, Network, random_boxes, random_points
from wsframework.admin import contracts
from wsframework.exceptions import RECEIVER, SoapFault

# Two obvious cliques: servers 0 and 1 are 2-3 ms apart, so are 2 and 3; across, 70-80 ms.
LATENCY = np.array([[0, 2, 70, 75],
                    [2, 0, 72, 80],
                    [71, 73, 0, 3],
                    [76, 79, 3, 0]], dtype=float)
NAMES = ("s0", "s1", "s2", "s3")
DOMAIN = (np.zeros(2), np.full(2, 10.0))


def fitted(mins, maxs, holder, *, max_distance=10.0, max_servers=4, latency=LATENCY):
    return KyraPlacement(max_distance, max_servers).fit(latency, mins, maxs, holder, DOMAIN)


def box_volume(lo, hi):
    return float(np.prod(np.clip(hi - lo, 0, None)))


# -- the label computation ------------------------------------------------------------------
def test_two_obvious_cliques_and_their_bounds():
    lo, hi = random_boxes(40, 2, seed=1)
    holder = np.arange(40) % 4
    assert fitted(lo, hi, holder).cliques_ == [[0, 1], [2, 3]]
    assert fitted(lo, hi, holder, max_distance=100.0).cliques_ == [[0, 1, 2, 3]]
    assert fitted(lo, hi, holder, max_servers=1).cliques_ == [[0], [1], [2], [3]]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 60), st.integers(0, 2**31))
def test_zones_of_a_clique_tile_the_space_without_overlap(n, seed):
    lo, hi = random_boxes(n, 2, seed=seed)
    placement = fitted(lo, hi, np.random.default_rng(seed).integers(0, 4, size=n))
    domain_volume = box_volume(*DOMAIN)
    for members in placement.cliques_:
        z_lo, z_hi = placement.zone_mins_[members], placement.zone_maxs_[members]
        assert np.all(z_lo >= DOMAIN[0]) and np.all(z_hi <= DOMAIN[1])
        assert sum(box_volume(a, b) for a, b in zip(z_lo, z_hi)) == pytest.approx(domain_volume)
        for i in range(len(members)):
            for j in range(i + 1, len(members)):
                shared = box_volume(np.maximum(z_lo[i], z_lo[j]), np.minimum(z_hi[i], z_hi[j]))
                assert shared == 0.0
        # Every point of the domain lies in exactly one zone's interior (up to faces).
        points = np.random.default_rng(seed + 1).uniform(0, 10, size=(200, 2))
        inside = np.all((z_lo[None] < points[:, None]) & (points[:, None] < z_hi[None]), axis=2)
        assert np.all(inside.sum(axis=1) == 1)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 80), st.integers(0, 2**31))
def test_every_subscription_lands_in_its_clique_at_a_zone_it_overlaps(n, seed):
    lo, hi = random_boxes(n, 2, seed=seed)
    holder = np.random.default_rng(seed).integers(0, 4, size=n)
    placement = fitted(lo, hi, holder)
    target = placement.labels_
    assert np.all(placement.clique_of_[target] == placement.clique_of_[holder])
    shares = zone_shares(lo, hi, placement.zone_mins_, placement.zone_maxs_)
    for i in range(n):
        assert np.all(placement.zone_mins_[target[i]] <= hi[i])
        assert np.all(lo[i] <= placement.zone_maxs_[target[i]])
        clique = placement.cliques_[placement.clique_of_[holder[i]]]
        # ... the zone of its clique holding the largest share of its volume
        assert shares[i, target[i]] == pytest.approx(shares[i, clique].max())
    assert np.all((placement.zones_overlapped_ >= 1) & (placement.zones_overlapped_ <= 2))


def test_the_single_proxy_is_one_of_the_papers_proxies():
    # KyraNetwork (the simulator's Kyra) gives a subscription one proxy per zone of its clique
    # it overlaps; KyraPlacement picks one of them, over the same cliques and zones.
    lo, hi = random_boxes(60, 2, seed=5)
    holder = np.arange(60) % 4
    placement = fitted(lo, hi, holder)
    network = KyraNetwork(LATENCY, lo, hi, holder, DOMAIN, max_distance=10.0, max_servers=4)
    assert network.cliques_ == placement.cliques_
    assert np.array_equal(network.zone_mins_, placement.zone_mins_)
    proxies = [set() for _ in range(60)]
    for server, ids in enumerate(network.proxies_):
        for i in ids:
            proxies[i].add(server)
    assert all(placement.labels_[i] in proxies[i] for i in range(60))
    assert [len(p) for p in proxies] == placement.zones_overlapped_.tolist()


def test_a_subscription_over_two_zones_goes_to_the_larger_share_and_a_tie_stays():
    # One clique of two servers; centres split at x = 5 (the median), so zones [0,5] / [5,10]
    # along x (the dimension where the centres spread most).
    latency = np.array([[0, 1], [1, 0]], dtype=float)
    mins = np.array([[1, 4], [8, 4], [4, 1], [3, 1], [4.5, 1], [5, 2]], dtype=float)
    maxs = np.array([[2, 6], [9, 6], [6, 2], [6, 2], [5.5, 1], [5, 3]], dtype=float)
    holder = np.array([0, 1, 1, 0, 1, 0])
    placement = KyraPlacement(5.0, 2).fit(latency, mins, maxs, holder, DOMAIN)
    assert placement.zone_maxs_[0].tolist() == [5.0, 10.0]
    assert placement.zone_mins_[1].tolist() == [5.0, 0.0]
    # [4, 6] in x: half each, held by 1: stays. [3, 6]: two thirds in zone 0: moves to 0.
    # [4.5, 5.5] x {1} (flat in y): half each, stays at 1. x = 5 exactly (flat on the face):
    # both zones hold it whole: a tie, it stays at 0.
    assert placement.labels_.tolist() == [0, 1, 1, 0, 1, 0]
    assert placement.zones_overlapped_.tolist() == [1, 1, 2, 2, 2, 2]
    moved = KyraPlacement(5.0, 2).fit(latency, mins, maxs, np.array([1, 0, 0, 1, 0, 1]), DOMAIN)
    assert moved.labels_.tolist() == [0, 1, 0, 0, 0, 1]


def test_zone_shares_of_flat_and_full_boxes():
    zones_lo = np.array([[0.0, 0.0], [5.0, 0.0]])
    zones_hi = np.array([[5.0, 10.0], [10.0, 10.0]])
    shares = zone_shares(np.array([[2.0, 3.0], [4.0, 7.0], [7.0, 7.0]]),
                         np.array([[7.0, 5.0], [4.0, 7.0], [7.0, 7.0]]), zones_lo, zones_hi)
    assert shares.tolist() == [[0.6, 0.4], [1.0, 0.0], [0.0, 1.0]]


def test_placement_refuses_inconsistent_input():
    with pytest.raises(ValueError):
        fitted(np.zeros((2, 2)), np.ones((3, 2)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError):
        fitted(np.zeros((1, 2)), np.ones((1, 2)), np.array([4]))


# -- the request's Algorithm text -----------------------------------------------------------
def test_algorithm_text_round_trips():
    text = algorithm_text("kyra", max_distance=12.5, max_servers=3)
    assert text == "kyra maxDistance=12.5 maxNumServers=3"
    assert parse_algorithm(text) == ("kyra", KyraParameters(12.5, 3))
    assert parse_algorithm("KYRA  maxDistance=0") == ("kyra", KyraParameters(0.0, None))
    assert parse_algorithm(" rtree ") == ("rtree", None)
    assert algorithm_text("kmeans") == "kmeans"


@pytest.mark.parametrize("text", [
    "kyra", "kyra maxNumServers=2", "kyra maxDistance=", "kyra maxDistance=abc",
    "kyra maxDistance=nan", "kyra maxDistance=inf", "kyra maxDistance=-1",
    "kyra maxDistance=1e9", "kyra maxDistance=5 maxDistance=6", "kyra maxDistance=5 extra=1",
    "kyra maxDistance=5 maxNumServers=0", "kyra maxDistance=5 maxNumServers=1025",
    "kyra maxDistance=5 maxNumServers=2.5", "kyra maxDistance=5 maxNumServers=٣",
    "kyra maxDistance=5 maxNumServers=" + "9" * 100, "kyra maxDistance=5 " + "x" * 300,
    "rtree maxDistance=5", "kmeans 3"])
def test_unusable_parameters_are_refused(text):
    with pytest.raises(InvalidRepartition):
        parse_algorithm(text)


def test_unknown_algorithms_are_refused():
    for text in ("", "   ", "hash", "kyra2 maxDistance=4"):
        with pytest.raises(UnknownAlgorithm):
            parse_algorithm(text)


# -- Repartition kyra at an in-process dispatcher -------------------------------------------
@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, ("local",) * 4, d=2)
    network.create_topic()
    yield network
    network.close()


def subscribe_round_robin(net, lo, hi):
    handles = [net.subscribe(i % 4, lo[i], hi[i], i) for i in range(len(lo))]
    net.step()
    return handles


def holders(net) -> dict[str, int]:
    """subscription id -> index of the server holding it."""
    return {s.id: i for i, m in enumerate(net.managers) for s in m.store.active()}


def repartition_fault(net, algorithm) -> SoapFault:
    with pytest.raises(SoapFault) as caught:
        net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm=algorithm))
    return caught.value


def test_kyra_repartition_moves_by_the_plan_and_delivery_is_unchanged(net):
    n = 40
    lo, hi = random_boxes(n, 2, seed=7)
    handles = subscribe_round_robin(net, lo, hi)
    events = random_points(60, 2, seed=8)
    net.publish(events)
    net.drain()
    before = {(path, int(event)) for path, event in net.received()}
    net.dispatcher.repartitioner.latency = LatencyMatrix(NAMES, LATENCY)

    response = net.admin.call(protocol.Repartition(
        Topic=TOPIC, Algorithm=algorithm_text("kyra", max_distance=10, max_servers=4)))

    figures = {f.Name: f.Value for f in response.Figure}
    assert int(figures["cliques"]) == 2 and int(figures["zones"]) == 4
    assert int(figures["subscriptions"]) == n and int(figures["moved"]) == response.Moved > 0
    assert 0 < int(figures["multi_zone"]) < n
    assert float(figures["hit_ratio_after"]) < float(figures["hit_ratio_before"])
    # The plan, computed here over the same normalized boxes, is where they are now.
    low, high = lo.min(axis=0), hi.max(axis=0)
    scale = 10.0 / (high - low)
    plan = fitted((lo - low) * scale, (hi - low) * scale, np.arange(n) % 4).labels_
    where = holders(net)
    assert [where[h.id] for h in handles] == plan.tolist()
    assert sum(m.mover.forwarding.count() for m in net.managers) == response.Moved
    # Nobody left its clique: 0 and 1 hold what entered at 0 and 1.
    assert all((where[h.id] < 2) == (i % 4 < 2) for i, h in enumerate(handles))
    net.step()
    net.publish(events, first_id=1000)
    net.drain()
    after = {(path, int(event) - 1000) for path, event in net.received() if int(event) >= 1000}
    assert after == before and len(before) > 30
    client = EventingClient("2011", transport=net.transport)
    assert all(client.get_status(h) is not None for h in handles)


def test_bad_kyra_requests_are_invalid_requests(net):
    for text in ("kyra", "kyra maxDistance=-3", "kyra maxDistance=5 maxNumServers=0",
                 "rtree maxDistance=5", "kyra maxDistance=5 " + "y" * 400):
        fault = repartition_fault(net, text)
        assert fault.subcode == contracts.FAULT_INVALID_REQUEST, text


def test_kyra_without_a_latency_file_is_a_receiver_fault_and_moves_nothing(net):
    lo, hi = random_boxes(8, 2, seed=3)
    subscribe_round_robin(net, lo, hi)
    fault = repartition_fault(net, "kyra maxDistance=10")
    assert fault.code == RECEIVER and "latency_file" in fault.reason
    assert sum(m.mover.forwarding.count() for m in net.managers) == 0


def test_servers_missing_from_the_latency_matrix_are_named(net):
    lo, hi = random_boxes(8, 2, seed=4)
    subscribe_round_robin(net, lo, hi)
    net.dispatcher.repartitioner.latency = LatencyMatrix(NAMES[:3], LATENCY[:3, :3])
    fault = repartition_fault(net, "kyra maxDistance=10")
    assert fault.code == RECEIVER and "'s3'" in fault.reason
    assert [m.load() for m in net.managers] == [2, 2, 2, 2]


def test_the_latency_file_setting_is_read_at_each_request(net, tmp_path):
    lo, hi = random_boxes(12, 2, seed=6)
    subscribe_round_robin(net, lo, hi)
    path = tmp_path / "latency.json"
    path.write_text(json.dumps({"servers": list(NAMES), "ms": LATENCY.tolist()}))
    net.dispatcher.settings = dataclasses.replace(net.dispatcher.settings, latency_file=str(path))
    response = net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm="kyra maxDistance=10"))
    assert {f.Name: f.Value for f in response.Figure}["cliques"] == "2"
    path.write_text('{"servers": ["s0"], "ms": [[0, 1]]}')  # edited into nonsense since
    fault = repartition_fault(net, "kyra maxDistance=10")
    assert fault.code == RECEIVER and "latency file" in fault.reason
