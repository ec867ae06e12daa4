"""Kyra's cliques, zones, routing trees and event routes (route_manager.partitioning.kyra), against worked
examples and a brute-force oracle."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from route_manager.partitioning.kyra import (KyraNetwork, cliques, median_zones, minimum_spanning_tree,
                                proxy_assignment, zone_of)


def line_latency(positions):
    x = np.asarray(positions, dtype=float)
    return np.abs(x[:, None] - x[None, :])


# -- cliques (Fig. 5) -----------------------------------------------------------------------
def test_cliques_worked_example():
    # Servers at 0, 1, 3, 10, 11 ms on a line. Merges: {0,1} (1 ms, lowest-index tie),
    # {3,4} (1 ms), {0,1}+{2} (furthest pair 0-2: 3 ms); then {0,1,2}-{3,4} is 11 ms > 5.
    latency = line_latency([0, 1, 3, 10, 11])
    assert cliques(latency, max_distance=5, max_servers=3) == [[0, 1, 2], [3, 4]]
    # Size 2: {0,1}+{2} no longer fits and {2}-{3,4} is 8 ms (complete linkage), over 5.
    assert cliques(latency, max_distance=5, max_servers=2) == [[0, 1], [2], [3, 4]]
    # Complete linkage, not single: 2 joins {0,1} at 3 ms, not at its 2 ms to server 1.
    assert cliques(latency, max_distance=2.5, max_servers=5) == [[0, 1], [2], [3, 4]]
    assert cliques(latency, max_distance=100, max_servers=5) == [[0, 1, 2, 3, 4]]


def test_cliques_refuse_bad_input():
    with pytest.raises(ValueError):
        cliques(np.zeros((2, 3)), 1, 2)
    with pytest.raises(ValueError):
        cliques(np.array([[0, -1], [1, 0]]), 1, 2)
    with pytest.raises(ValueError):
        cliques(np.zeros((2, 2)), 1, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 14), st.floats(0, 80), st.integers(1, 6), st.integers(0, 2**31))
def test_cliques_respect_both_bounds(n, max_distance, max_servers, seed):
    points = np.random.default_rng(seed).uniform(0, 100, size=(n, 2))
    latency = np.linalg.norm(points[:, None] - points[None, :], axis=2)
    groups = cliques(latency, max_distance, max_servers)
    assert sorted(s for g in groups for s in g) == list(range(n))
    for g in groups:
        assert len(g) <= max_servers
        assert latency[np.ix_(g, g)].max() <= max_distance or len(g) == 1
    # Maximality: no two cliques could still merge within both bounds.
    for a in range(len(groups)):
        for b in range(a + 1, len(groups)):
            merged = groups[a] + groups[b]
            assert (len(merged) > max_servers
                    or latency[np.ix_(merged, merged)].max() > max_distance)


# -- zones -------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 3), st.integers(0, 300), st.integers(0, 2**31))
def test_zones_tile_the_domain_and_balance_points(k, d, m, seed):
    rng = np.random.default_rng(seed)
    points = rng.uniform(0, 10, size=(m, d))
    mins, maxs = median_zones(points, np.zeros(d), np.full(d, 10.0), k)
    assert mins.shape == maxs.shape == (k, d)
    assert np.isclose(np.prod(maxs - mins, axis=1).sum(), 10.0 ** d)  # no overlap, no gap
    probes = rng.uniform(0, 10, size=(50, d))
    for p in probes:
        inside = np.all((mins < p) & (p < maxs), axis=1)
        assert inside.sum() <= 1  # interiors are disjoint
        zone_of(p, mins, maxs)
    if m >= 4 * k:
        counts = np.bincount([zone_of(p, mins, maxs) for p in points], minlength=k)
        assert counts.max() - counts.min() <= max(3, m // (2 * k))


def test_zone_of_refuses_a_point_outside():
    mins, maxs = median_zones(np.empty((0, 1)), [0.0], [10.0], 2)
    assert mins.ravel().tolist() == [0.0, 5.0] and maxs.ravel().tolist() == [5.0, 10.0]
    with pytest.raises(ValueError):
        zone_of([11.0], mins, maxs)


# -- trees and routes --------------------------------------------------------------------------
def test_minimum_spanning_tree_on_a_line():
    latency = line_latency([0, 1, 3, 10])
    edges = minimum_spanning_tree(latency, [0, 1, 2, 3])
    assert sorted(tuple(sorted(e)) for e in edges) == [(0, 1), (1, 2), (2, 3)]
    assert minimum_spanning_tree(latency, [2]) == []


def figure4_like():
    """Two cliques of three servers on a line 0..9 (1-D), subscriptions as intervals."""
    latency = line_latency([0, 1, 2, 50, 51, 52])
    mins = np.array([[1], [5], [7], [0], [3], [5], [2], [8]], dtype=float)
    maxs = np.array([[1], [5], [8], [0], [3], [6], [2], [9]], dtype=float)
    entry = np.array([0, 0, 1, 3, 4, 4, 5, 5])
    return KyraNetwork(latency, mins, maxs, entry, ([0.0], [9.0]),
                       max_distance=10, max_servers=3)


def test_network_structure():
    net = figure4_like()
    assert net.cliques_ == [[0, 1, 2], [3, 4, 5]]
    assert len(net.trees_) == 3
    for members, edges in net.trees_:
        assert len(edges) == max(len(members) - 1, 0)
    ids = [f"s{i}" for i in range(8)]
    assignment = proxy_assignment(net, ids)
    held = [i for server in assignment.values() for i in server]
    assert set(held) == set(ids)
    for server, names in assignment.items():  # proxies stay within the subscriber's clique
        for name in names:
            assert net.clique_of_[net.entry[ids.index(name)]] == net.clique_of_[server]
    with pytest.raises(ValueError):
        proxy_assignment(net, ids[:3])


def test_route_of_an_event_reaches_both_cliques():
    net = figure4_like()
    links, delivering, work = net.route([5.0], publisher_server=0)
    assert delivering == sorted({net.owner([5.0], 0), net.owner([5.0], 3)})
    assert work >= len(delivering)
    assert all(net.latency[a, b] >= 0 for a, b in links)
    with pytest.raises(ValueError):
        net.route([5.0], publisher_server=9)
    with pytest.raises(ValueError):
        net.route([10.0], publisher_server=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10), st.integers(1, 2), st.integers(0, 40), st.integers(1, 4),
       st.integers(0, 2**31))
def test_route_matches_the_oracle(n, d, m, max_servers, seed):
    rng = np.random.default_rng(seed)
    positions = rng.uniform(0, 100, size=(n, 2))
    latency = np.linalg.norm(positions[:, None] - positions[None, :], axis=2)
    centres = rng.uniform(0, 10, size=(m, d))
    half = rng.uniform(0, 3, size=(m, d))
    mins, maxs = np.clip(centres - half, 0, 10), np.clip(centres + half, 0, 10)
    entry = rng.integers(0, n, size=m)
    net = KyraNetwork(latency, mins, maxs, entry, (np.zeros(d), np.full(d, 10.0)),
                      max_distance=40, max_servers=max_servers)
    events = np.vstack([rng.uniform(0, 10, size=(20, d)), np.round(centres[:5])])
    for point in events:
        publisher = int(rng.integers(0, n))
        links, delivering, work = net.route(point, publisher)
        oracle = set(np.flatnonzero(np.all((mins <= point) & (point <= maxs), axis=1)).tolist())
        notified = set()
        for server in delivering:
            notified |= set(net.matching_proxies(point, server).tolist())
        assert notified == oracle
        # Every clique with a matching subscription: its zone owner of the point delivers.
        interested = {int(net.clique_of_[entry[i]]) for i in oracle}
        expected = {net.owner(point, net.cliques_[c][0]) for c in interested}
        assert set(delivering) == expected
        # Links: the hop to the clique owner, then edges of the event's tree, each used once.
        tree_members, tree_edges = net.trees_[zone_of(point, net.tree_mins_, net.tree_maxs_)]
        undirected = {tuple(sorted(e)) for e in tree_edges}
        tree_links = links[1:] if links and links[0][0] == publisher and \
            net.owner(point, publisher) != publisher else links
        assert all(tuple(sorted(e)) in undirected for e in tree_links)
        assert len(set(tree_links)) == len(tree_links)
        assert work == 1 + len(tree_links)
