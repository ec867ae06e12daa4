"""Distance-aware placement on real processes: three ``edn serve server --partitioner distance
--latency FILE`` servers ("here" and "near" 2 ms apart, "far" 70 ms from both) under one
dispatcher. A subscription entering at "here" that "far" fits a little better than "near"
(adds 0.2 against 1.0 of event volume) goes to "near": 1.0 x (2 + 2) < 0.2 x (70 + 2) <
4 x (0 + 2) for staying. Plain least added traffic (the rtree rule) would pick "far".

Every wait is on a condition (GetStats, the peer table in "here"'s store), never a sleep.
"""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from edn.localnet.network import TOPIC, LocalNetwork, wait_until
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient
from tests.support.processes import ADMIN_TOKEN
from matchers.vocabulary import RANGES_DIALECT

LATENCY = {"servers": ["here", "near", "far"],
           "ms": [[0, 2, 70], [2, 0, 70], [70, 70, 0]]}
FAR_SEED = ([0.0, 0.1], [2.0, 2.0])    # covers 3.8 of the new box
NEAR_SEED = ([0.0, 0.0], [2.0, 1.5])   # covers 3.0
NEW = ([0.0, 0.0], [2.0, 2.0])         # volume 4


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    root = tmp_path_factory.mktemp("distance")
    latency_file = root / "latency.json"
    latency_file.write_text(json.dumps(LATENCY))
    servers = [(name, "distance", 1) for name in ("here", "near", "far")]
    net = LocalNetwork(root, servers, token=ADMIN_TOKEN, d=2, load_threshold=100)
    for server in net.servers.values():  # LocalNetwork has no per-server option for this
        server.extra_args += ["--latency", str(latency_file)]
    with net:
        net.create_topic()
        yield net


def load(net: LocalNetwork, name: str) -> int:
    return int(net.server_stats(name, "load")["load"])


def subscribe_at(net: LocalNetwork, name: str, box) -> None:
    """Subscribe at server ``name``, notifications to the sink's /n/INDEX; recorded in the
    network's ground truth (net.lo / net.hi, row INDEX) and handles (what wait_routed
    counts)."""
    lo, hi = box
    index = len(net.lo)
    net.handles.append(EventingClient("2011").subscribe(
        f"{net.servers[name].base_url}/topics/{TOPIC}", f"{net.sink.url}/n/{index}",
        filter=range_filter(lo, hi), dialect=RANGES_DIALECT, expires="PT1H"))
    net.lo = np.vstack([net.lo, [lo]])
    net.hi = np.vstack([net.hi, [hi]])


def peers_known_at(net: LocalNetwork, name: str) -> dict[str, int]:
    """The subscription count per peer that ``name`` has from the peers' PeerUpdates (read
    from its store: GetStats has no per-peer figure)."""
    with sqlite3.connect(f"file:{net.servers[name].data_dir / 'edn.db'}?mode=ro",
                         uri=True) as conn:
        rows = conn.execute("SELECT name, count FROM edn_peer_routes WHERE route = ?",
                            (TOPIC,)).fetchall()
    return {peer: int(count or 0) for peer, count in rows}


def test_a_subscription_goes_to_the_near_server_rather_than_the_far_better_fit(network):
    # Seeds: each stays where it entered (every other server is empty or farther and no
    # better: far's floor is 70 ms, near's 2 ms with "here" empty).
    subscribe_at(network, "far", FAR_SEED)
    wait_until(lambda: load(network, "far") == 1, what="far holds its seed")
    subscribe_at(network, "near", NEAR_SEED)
    wait_until(lambda: load(network, "near") == 1, what="near holds its seed")
    wait_until(lambda: peers_known_at(network, "here") == {"near": 1, "far": 1},
               what="here knows both seeds from the peer exchange")

    for _ in range(3):  # three such subscriptions, one after the other
        subscribe_at(network, "here", NEW)
    wait_until(lambda: load(network, "near") == 4, what="near holds the new subscriptions")
    assert (load(network, "here"), load(network, "far")) == (0, 1)
    assert "is not in the latency file" not in network.servers["here"].log_text()

    # and they work where they were placed: (1, 1) matches all five, (1, 1.95) far's seed
    # and the three new ones, (9, 9) none; published once the dispatcher's route updates
    # account for all five (near's summary before them does not cover (1, 1.95))
    network.wait_routed()
    first, last = network.publish(np.array([[1.0, 1.0], [1.0, 1.95], [9.0, 9.0]]))
    expected = network.wait_delivered(first, last)
    assert len(expected) == 9
    assert network.received(first, last) == expected
