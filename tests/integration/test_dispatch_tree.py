"""A dispatch tree of real processes (paper II): a root dispatcher, two child dispatchers
(``edn serve dispatcher --parent``), a grandchild under one of them, and six servers at three
depths; events published at the root must reach exactly the subscriptions a single event
source would notify, through sub-tree summaries at every level, whatever the precision the
parents route with, and across a child killed with ``kill -9`` mid-flow.

Every wait is on a condition (the sink's count, GetStats), never a fixed sleep.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork, wait_until
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from tests.support.processes import ADMIN_TOKEN

D = 3
N_SUBSCRIPTIONS = 240
SERVERS = [(f"s{k}", "rtree", 1) for k in range(1, 7)]
# root -> c1, c2, s6;  c1 -> g1, s1;  g1 -> s2, s3;  c2 -> s4, s5
CHILDREN = {"c1": ["g1", "s1"], "g1": ["s2", "s3"], "c2": ["s4", "s5"]}


def points(n: int, seed: int) -> np.ndarray:
    return np.round(np.random.default_rng(seed).uniform(0, 10, size=(n, D)), 3)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    network = LocalNetwork(tmp_path_factory.mktemp("tree"), SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000, children=CHILDREN)
    with network:
        network.create_topic()
        rng = np.random.default_rng(7)
        centres = rng.uniform(0, 10, size=(N_SUBSCRIPTIONS, D))
        half = rng.uniform(0.2, 1.5, size=(N_SUBSCRIPTIONS, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        yield network


def test_a_three_level_tree_delivers_exactly_what_one_source_would(tree):
    # The root knows its own children only; a child its own; the grandchild its servers.
    assert tree.registered(tree.dispatcher) == 3
    assert tree.node_stats(tree.dispatcher, "server.c1.kind")["server.c1.kind"] == "dispatcher"
    first, last = tree.publish(points(200, seed=1))
    expected = tree.wait_delivered(first, last)
    assert len(expected) > 50
    assert tree.received(first, last) == expected
    # Summaries route at every level: no level sends every event everywhere, and every
    # subscription's events got through (above).
    ratios = tree.level_hit_ratios()
    assert len(ratios) == 3
    assert all(0 < r < 1 for r in ratios), ratios
    # Subscriptions live at every depth, and the root's load of c1 is its whole subtree.
    loads = {name: int(tree.server_stats(name, "load")["load"]) for name in tree.servers}
    assert sum(loads.values()) == N_SUBSCRIPTIONS
    subtree = sum(loads[s] for s in ("s1", "s2", "s3"))
    assert int(tree.dispatcher_stats("server.c1.load")["server.c1.load"]) == subtree


def test_a_child_reports_at_the_precision_its_parent_routes_it_with(tree):
    admin = AdminClient(tree.dispatcher.base_url, ADMIN_TOKEN)
    admin.call(contracts.Configure(Setting=[contracts.Figure(Name="self_tuning", Value="off"),
                                            contracts.Figure(Name="precision", Value="0.2")]))
    try:
        c1 = tree.children["c1"]
        wait_until(lambda: float(tree.node_stats(c1, "tree.parent.0.precision")
                                 ["tree.parent.0.precision"]) == 0.2,
                   what="c1 learns the root's precision")
        # Its report was cut: the root holds fewer boxes for c1 than c1 holds for its children.
        first, last = tree.publish(points(150, seed=2))
        expected = tree.wait_delivered(first, last)
        assert tree.received(first, last) == expected
    finally:
        admin.call(contracts.Configure(Setting=[contracts.Figure(Name="precision",
                                                                 Value="precise")]))


def test_publishing_at_a_child_is_refused(tree):
    from wsframework.client import SoapClient
    from wsframework.publisher import PUBLISH_ACTION
    from route_manager.workloads.grid_xml import event_element
    with pytest.raises(SoapFault) as fault:
        SoapClient().send(f"{tree.children['c2'].base_url}/topics/grid", PUBLISH_ACTION,
                          event_element(points(1, 3)[0], 10**6))
    assert "root" in fault.value.reason


def test_a_child_killed_mid_flow_loses_and_repeats_nothing(tree):
    """kill -9 of c1 while the root forwards to it: the root's log keeps the copies c1 did
    not acknowledge, c1's log the ones it did; after the restart both are delivered once
    (c1 skips what the root resends up to the position it committed)."""
    c1 = tree.children["c1"]
    batch = points(600, seed=4)
    done = threading.Event()
    result = {}

    def publish():
        result["range"] = tree.publish(batch, batch=20, threads=1)
        done.set()

    publisher = threading.Thread(target=publish)
    publisher.start()
    wait_until(lambda: int(tree.node_stats(c1, "events_in").get("events_in", 0)) > 0,
               what="c1 routing the root's events")
    c1.kill()
    publisher.join(120)
    assert done.is_set()
    c1.start()
    first, last = result["range"]
    expected = tree.wait_delivered(first, last, timeout=120)
    assert tree.received(first, last) == expected


def test_edn_status_shows_each_level_and_what_its_parent_asks(tree):
    import subprocess
    import sys
    run = lambda url: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "edn.cli", "status", "--at", url, "--admin-token", ADMIN_TOKEN],
        capture_output=True, text=True, timeout=60)
    root = run(tree.dispatcher.base_url)
    assert root.returncode == 0, root.stderr
    assert "child dispatchers: c1, c2" in root.stdout
    grandchild = run(tree.children["g1"].base_url)
    assert f"child g1 of {tree.children['c1'].base_url}: registered" in grandchild.stdout
