"""The wide-area simulator: Gryphon's topology, spanning trees, the kernel's ordering, the
exactness of each routing mode on a small network, the overload detector; link matching with
the real LinkMatcher per broker, virtual links where the publishers' trees disagree with a
broker's own paths (the Gryphon paper's footnote 2), each decision equal to the oracle, steps charged
to the broker's CPU."""

import pytest

from simulation import BrokerNetwork, Kernel, gryphon_topology, make_workload
from simulation.linkmatching import CLIENTS_LINK, LinkMatchingRouter, virtual_links
from simulation.routing import ROUTERS, Router, make_router, register_router
from simulation.topology import LATERAL_LINKS, Topology

PUBLISHERS = ["0.4", "1.7", "2.10"]


@pytest.fixture(scope="module")
def gryphon():
    topology = gryphon_topology()
    trees = {p: topology.spanning_tree(p) for p in PUBLISHERS}
    workload = make_workload(topology, PUBLISHERS, subscriptions=400, events=20, seed=3)
    return topology, trees, workload


def test_gryphon_has_39_brokers_in_three_subtrees_of_13(gryphon):
    topology, _, _ = gryphon
    assert len(topology.brokers) == 39
    for region in range(3):
        assert sum(b.startswith(f"{region}.") for b in topology.brokers) == 13
    lateral = {b for link in LATERAL_LINKS for b in link}
    for broker in topology.brokers:
        region, index = map(int, broker.split("."))
        expected = 5 if index == 0 else 4 if index <= 3 else 1
        assert len(topology.neighbours(broker)) == expected + (broker in lateral)


def test_gryphon_delays(gryphon):
    topology, _, _ = gryphon
    d = topology.delays
    assert (d["0.0"]["1.0"], d["1.0"]["2.0"], d["0.0"]["2.0"]) == (50.0, 65.0, 75.0)
    assert d["0.0"]["0.1"] == 25.0 and d["0.1"]["0.4"] == 10.0 and d["0.2"]["1.5"] == 50.0
    assert topology.client_delay_ms == 1.0 and topology.clients_per_broker == 10


def test_lateral_links_join_non_roots_of_two_regions():
    with pytest.raises(ValueError):
        gryphon_topology(lateral=(("0.0", "1.4"),))
    with pytest.raises(ValueError):
        gryphon_topology(lateral=(("0.4", "0.5"),))


def test_spanning_trees_are_shortest_path_trees(gryphon):
    topology, trees, _ = gryphon
    for tree in trees.values():
        assert len(tree.parent) == 38 and len(tree.subtree(tree.root)) == 39
        for broker, parent in tree.parent.items():
            # Bellman's condition: no neighbour offers a shorter way in
            dist = tree.distance_ms[broker]
            assert dist == pytest.approx(tree.distance_ms[parent] + topology.delays[parent][broker])
            assert all(tree.distance_ms[n] + ms >= dist - 1e-9
                       for n, ms in topology.delays[broker].items())
    # 0.4 reaches region 1 over the lateral link 0.2 - 1.5 quicker than over the roots
    tree = trees["0.4"]
    assert tree.parent["1.5"] == "0.2"
    assert tree.hops("1.5") == 4   # 0.4 - 0.1 - 0.0 - 0.2 - 1.5


def test_kernel_runs_events_in_time_then_schedule_order():
    kernel, seen = Kernel(), []
    kernel.schedule(0.2, seen.append, "late")
    kernel.schedule(0.1, seen.append, "first")
    kernel.schedule(0.1, seen.append, "second")
    kernel.schedule(0.1, lambda: kernel.schedule(0.0, seen.append, "nested"))
    kernel.run(until=1.0)
    assert seen == ["first", "second", "nested", "late"]
    assert kernel.now == pytest.approx(0.2)
    with pytest.raises(ValueError):
        kernel.schedule(-1.0, seen.append, "past")


def test_kernel_stops_at_until():
    kernel, seen = Kernel(), []
    kernel.schedule(1.0, seen.append, 1)
    kernel.schedule(3.0, seen.append, 3)
    kernel.run(until=2.0)
    assert seen == [1]


def test_workload_care_probability_and_share(gryphon):
    _, _, workload = gryphon
    care = (workload.subscriptions >= 0).mean(axis=0)
    assert care[0] > 0.9 and care[-1] < care[0] / 2
    assert 0.0 < workload.matching_share() < 0.2


@pytest.mark.parametrize("name, options, exact_links", [
    ("flooding", {}, False),
    ("summaries", {"precision": 1.0}, True),
    ("summaries", {"precision": 0.05}, False),
    ("linkmatching", {}, True),
])
def test_each_mode_delivers_exactly(gryphon, name, options, exact_links):
    topology, trees, workload = gryphon
    network = BrokerNetwork(make_router(name, topology, trees, workload, **options))
    for publisher in PUBLISHERS:
        for event in range(len(workload.events[publisher])):
            network.publish(publisher, event)
    network.kernel.run(until=float("inf"))
    check = network.exactness()
    assert check["missed"] == 0 and check["extra"] == 0 and check["exact"]
    if exact_links:
        assert check["useless_links"] == 0
    assert network.result.latencies_ms and min(network.result.latencies_ms) >= 2.0


def test_precise_summaries_carry_fewer_messages_than_flooding(gryphon):
    topology, trees, workload = gryphon
    counts = {}
    for name, options in [("flooding", {}), ("summaries", {"precision": 1.0})]:
        network = BrokerNetwork(make_router(name, topology, trees, workload, **options))
        for event in range(len(workload.events["0.4"])):
            network.publish("0.4", event)
        network.kernel.run(until=float("inf"))
        counts[name] = network.result.link_messages
    assert counts["flooding"] == 38 * len(workload.events["0.4"])
    assert counts["summaries"] < counts["flooding"]


def test_overload_detector_stops_a_run_whose_queue_reaches_80(gryphon):
    topology, trees, workload = gryphon
    router = make_router("flooding", topology, trees, workload)
    slow = BrokerNetwork(router, per_message_s=0.05, record=False).run_poisson(100.0, 5.0)
    assert slow.overloaded and slow.max_queue == 80
    fast = BrokerNetwork(router, per_message_s=1e-4, record=False).run_poisson(20.0, 1.0)
    assert not fast.overloaded and fast.max_queue < 80


def test_router_registry_hook():
    class Nowhere(Router):
        name = "nowhere"

        def route(self, broker, tree, publisher, event):
            return (), 0

    register_router("test-nowhere", Nowhere)
    try:
        with pytest.raises(ValueError):
            register_router("test-nowhere", Nowhere)
        assert ROUTERS["test-nowhere"] is Nowhere
    finally:
        del ROUTERS["test-nowhere"]
    with pytest.raises(ValueError):
        make_router("no-such-mode", Topology(), {}, None)


def test_kyra_on_gryphon_is_exact_and_cheaper_than_flooding(gryphon):
    from simulation.kyra_mode import kyra_row

    topology, _, workload = gryphon
    row = kyra_row(topology, workload)
    assert row["exact"] and row["missed"] == 0 and row["extra"] == 0
    assert 0 < row["link_messages_per_event"] < 38


# -- link matching ----------------------------------------------------------------------------
def test_registered_under_its_name(gryphon):
    router = make_router("linkmatching", *gryphon)
    assert isinstance(router, LinkMatchingRouter) and router.exact_links


def test_on_a_tree_network_no_link_is_split():
    topology = gryphon_topology(lateral=())
    trees = {p: topology.spanning_tree(p) for p in PUBLISHERS}
    for broker in ("0.0", "1.1", "2.10"):
        positions = virtual_links(topology, broker, trees)
        # a neighbour below the broker on some publisher's tree is one position; the rest
        # (behind the neighbours towards every publisher) make one group, "-"
        downstream = {c for tree in trees.values() for c in tree.children[broker]}
        assert set(positions.links) - {"-"} == downstream | {CLIENTS_LINK}


def test_a_link_is_split_where_the_trees_disagree(gryphon):
    topology, trees, _ = gryphon
    # 0.4's tree reaches 1.5 through 0.0 - 0.2 and the lateral 0.2 - 1.5; the others reach
    # it from region 1, and 0.2 is still a child of 0.0 on theirs: 0.0 splits its link 0.2
    positions = virtual_links(topology, "0.0", trees)
    assert positions.of["0.7"] == "0.2" and positions.of["1.5"] == "0.2#2"
    assert positions.physical["0.2#2"] == {"0.4": "0.2"}
    for publisher in PUBLISHERS:
        # the mask: M exactly on the groups below 0.0 on the publisher's tree
        mask = dict(zip(positions.links, positions.mask(publisher)))
        below = set(trees[publisher].subtree("0.0")) - {"0.0"}
        assert {d for d, link in positions.of.items() if mask[link] == "M"} == below
        assert mask[CLIENTS_LINK] == "N"


def test_every_decision_is_the_oracles(gryphon):
    router = LinkMatchingRouter(*gryphon)
    topology, trees, workload = gryphon
    checked = 0
    for publisher in PUBLISHERS:
        for broker in topology.brokers:
            for event in range(len(workload.events[publisher])):
                forward, steps = router.route(broker, trees[publisher], publisher, event)
                assert set(forward) == router.downstream_matches(broker, publisher, event)
                assert steps >= (1 if trees[publisher].children[broker] else 0)
                checked += bool(forward)
    assert checked > 0


def test_steps_are_charged_to_the_broker_cpu(gryphon):
    topology, trees, workload = gryphon
    times = {}
    for step_s in (0.0, 1e-3):
        network = BrokerNetwork(make_router("linkmatching", topology, trees, workload),
                                per_message_s=1e-4, step_s=step_s, overload_queue=10**9)
        network.publish("0.4", 0)
        network.kernel.run(until=float("inf"))
        times[step_s] = (network.kernel.now, network.result.steps)
    assert times[0.0][1] == times[1e-3][1] > 0
    # the path's matching steps delay the last delivery by at least one step each on it
    assert times[1e-3][0] > times[0.0][0] + 1e-3


def test_link_matching_sends_what_precise_summaries_send(gryphon):
    """Both are exact: the same links carry the same events."""
    carried = {}
    for name, options in [("linkmatching", {}), ("summaries", {"precision": 1.0})]:
        network = BrokerNetwork(make_router(name, *gryphon, **options), overload_queue=10**9)
        for publisher in PUBLISHERS:
            for event in range(len(gryphon[2].events[publisher])):
                network.publish(publisher, event)
        network.kernel.run(until=float("inf"))
        carried[name] = sorted(network.result.carried)
    assert carried["linkmatching"] == carried["summaries"] and carried["summaries"]


def test_local_delivery_is_shared_only_within_one_workload(gryphon):
    topology, trees, workload = gryphon
    flooding = make_router("flooding", topology, trees, workload)
    summaries = make_router("summaries", topology, trees, workload)
    summaries.share_local_delivery(flooding)
    flooding.decide("0.4", "0.4", 0)
    assert summaries._local is flooding._local and ("0.4", "0.4") in summaries._local
    other = make_workload(topology, PUBLISHERS, subscriptions=10, events=2, seed=9)
    with pytest.raises(ValueError):
        make_router("flooding", topology, trees, other).share_local_delivery(flooding)


def test_link_matching_shares_one_factored_tree(gryphon):
    topology, trees, workload = gryphon
    router = LinkMatchingRouter(topology, trees, workload)
    for broker in ("0.0", "1.1"):
        router.route(broker, trees["0.4"], "0.4", 0)
    tree = router.shared_tree()
    assert len(tree) == len(workload.subscriptions)
    assert len(tree.factored) == workload.factoring == 3
    # one tree, each broker's own annotation over it
    assert router.pst_nodes > len(tree.factored)
    assert router.positions["0.0"] != router.positions["1.1"]
