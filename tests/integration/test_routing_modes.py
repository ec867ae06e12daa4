"""Routing modes on real processes (``edn serve dispatcher --routing M``): a root, two child
dispatchers and two servers under each; equality subscriptions (``x0 = 1 and x2 = 2``,
written as the range dialect's one-point intervals); events published at the root. In every
mode delivery is exactly what a single source would deliver; with link matching no child
receives an event that none of its servers' subscriptions match, and no server one that
none of its own subscriptions match (each child's links, by its per-server hits); with
flooding every child receives every event.

Link matching's route sets answer with the PST's link matcher once their reports' scans have
paid for building it (:mod:`matchers.pst.links_route_set`); events are published five to a
message, so the root meets enough batches to build it during the run (its log says so).

Every wait is on a condition (the sink's count, GetStats), never a fixed sleep.
"""
from __future__ import annotations

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork
from tests.support.processes import ADMIN_TOKEN

D = 3
VALUES = 4          # attribute values 0..3: equalities match often enough to be seen
N_SUBSCRIPTIONS = 24
CHILDREN = {"c1": ["s1", "s2"], "c2": ["s3", "s4"]}
# "local": a subscription stays where it was made (round robin over the servers), so which
# child holds it is known without asking
SERVERS = [(f"s{k}", "local", 1) for k in range(1, 5)]


def equality_subscriptions(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row tests one or two attributes by equality (a one-point interval) and leaves the
    others open (their whole range)."""
    rng = np.random.default_rng(seed)
    lo = np.zeros((N_SUBSCRIPTIONS, D))
    hi = np.full((N_SUBSCRIPTIONS, D), 10.0)
    for i in range(N_SUBSCRIPTIONS):
        if i % 4 >= 2:  # on c2's servers (s3, s4): only x0 = 3, which a quarter of events hold
            lo[i, 0] = hi[i, 0] = 3
            continue
        tested = rng.choice(D, size=rng.integers(1, 3), replace=False)
        lo[i, tested] = hi[i, tested] = rng.integers(0, VALUES, size=len(tested))
    return lo, hi


def events(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VALUES, size=(n, D)).astype(float)


def server_of_subscription(i: int) -> str:
    return SERVERS[i % len(SERVERS)][0]


def child_of_server(server: str) -> str:
    return next(child for child, below in CHILDREN.items() if server in below)


def nodes_receiving(network: LocalNetwork, points: np.ndarray, node_of) -> dict[str, int]:
    """The oracle: per node (``node_of(server)``), the events one of the subscriptions
    below it matches."""
    out: dict[str, int] = {}
    for point in points:
        inside = np.all((network.lo <= point) & (network.hi >= point), axis=1)
        for node in {node_of(server_of_subscription(i)) for i in np.flatnonzero(inside)}:
            out[node] = out.get(node, 0) + 1
    return out


@pytest.mark.parametrize("routing", ["summaries", "linkmatching", "flooding"])
def test_each_mode_delivers_exactly_what_one_source_would(tmp_path, routing):
    network = LocalNetwork(tmp_path / routing, SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000, children=CHILDREN,
                           dispatcher_args=["--routing", routing])
    with network:
        network.create_topic()
        lo, hi = equality_subscriptions(seed=5)
        network.subscribe(lo, hi)
        points = events(150, seed=6)
        first, last = network.publish(points, batch=5)
        expected = network.wait_delivered(first, last)
        assert len(expected) > 30
        assert network.received(first, last) == expected
        events_in = {child: int(network.node_stats(process, "events_in")["events_in"])
                     for child, process in network.children.items()}
        oracle = {child: 0 for child in CHILDREN} | nodes_receiving(network, points,
                                                                     child_of_server)
        print(f"\n{routing}: {len(points)} events, {len(expected)} notifications, children's "
              f"events_in {events_in}, matching their subscriptions {oracle}")
        if routing == "flooding":
            assert events_in == {child: len(points) for child in CHILDREN}
        elif routing == "linkmatching":
            # equalities only: a child's Y link is exact, so it sees its own events, no more
            assert events_in == oracle
            assert 0 < events_in["c2"] < len(points)
            # one level down: each child's links to its servers carry their events only
            hits = {server: int(network.node_stats(network.children[child], "server.")
                                .get(f"server.{server}.hits", 0))
                    for child, servers in CHILDREN.items() for server in servers}
            expected_hits = {server: 0 for server in hits} | nodes_receiving(
                network, points, lambda server: server)
            print(f"servers' copies {hits}, matching their subscriptions {expected_hits}")
            assert hits == expected_hits
            # the PST's link matcher answered at the root: 30 messages of 5 events, 14 or so
            # predicates, so the scans' debt pays for the tree by the 16th message; a child
            # gets the root's copies in batches the forwarder may merge, so maybe not there
            built = {name: "link matching: tree built" in process.log_text()
                     for name, process in [("root", network.dispatcher),
                                           *network.children.items()]}
            print(f"trees built {built}")
            assert built["root"]
