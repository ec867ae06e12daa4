"""An operator's placed bulk subscribe on real processes: ``edn subscribe --from-file --place``
at one server of a three-server network spreads the subscriptions as Subscribes would go,
says which manager holds each (and each answers there), and a population made the same way
is delivered to exactly as a single source would."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient, SubscriptionHandle
from subscription_manager.messages import manager_epr
from subscription_manager.versions import VERSIONS
from tests.support.processes import ADMIN_TOKEN

TOPIC = "grid"
D = 3
SERVERS = (("s1", "rtree", 1), ("s2", "rtree", 1), ("s3", "rtree", 1))


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    with LocalNetwork(tmp_path_factory.mktemp("placed"), SERVERS, token=ADMIN_TOKEN, d=D,
                      load_threshold=100) as network:
        network.create_topic(TOPIC)
        yield network


def _boxes(n: int, seed: int):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, size=(n, D))
    half = rng.uniform(0.3, 2.5, size=(n, D))
    return (np.round(np.clip(centres - half, 0, 10), 2),
            np.round(np.clip(centres + half, 0, 10), 2))


def test_the_command_places_each_line_and_names_its_manager(network, tmp_path):
    lo, hi = _boxes(120, seed=3)
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(
        json.dumps({"notify_to": f"{network.sink.url}/cli/{i}",
                    "filter": range_filter(lo[i], hi[i])}) + "\n" for i in range(120)))
    results = tmp_path / "results.jsonl"
    s1 = network.servers["s1"]
    done = subprocess.run(
        [sys.executable, "-m", "edn.cli", "subscribe", "--at", s1.base_url, TOPIC,
         "--from-file", str(requests), "--dialect", "ranges", "--place", "--chunk", "50",
         "--admin-token", ADMIN_TOKEN, "--out", str(results)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [line["line"] for line in lines] == list(range(1, 121))
    managers = {line.get("manager", s1.base_url + "/subscriptions") for line in lines}
    addresses = {s.base_url + "/subscriptions" for s in network.servers.values()}
    assert managers <= addresses and len(managers) >= 2  # placed on more than one server
    loads = {name: int(network.server_stats(name, "load")["load"])
             for name in network.servers}
    assert sum(loads.values()) == 120 and max(loads.values()) <= 100
    version = VERSIONS["2011"]
    client = EventingClient("2011")
    for line in lines:  # each is managed where its line says
        manager = line.get("manager", s1.base_url + "/subscriptions")
        client.unsubscribe(SubscriptionHandle(version, manager_epr(version, manager,
                                                                   line["id"]), None))
    assert sum(int(network.server_stats(name, "load")["load"])
               for name in network.servers) == 0


def test_a_population_placed_in_bulk_is_delivered_to_exactly(network):
    lo, hi = _boxes(240, seed=4)
    network.subscribe_in_bulk(lo, hi, chunk=80)  # a message at each server at once
    loads = [int(network.server_stats(name, "load")["load"]) for name in network.servers]
    assert sum(loads) == 240 and sum(load > 0 for load in loads) >= 2
    first, last = network.publish(np.round(np.random.default_rng(5).uniform(0, 10, (150, D)), 3))
    expected = network.wait_delivered(first, last)
    assert len(expected) > 100
    assert network.received(first, last) == expected


def test_a_placed_bulk_without_the_credential_is_refused(network, tmp_path):
    requests = tmp_path / "one.jsonl"
    requests.write_text(json.dumps({"notify_to": f"{network.sink.url}/x",
                                    "filter": range_filter([1, 1, 1], [2, 2, 2])}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "edn.cli", "subscribe", "--at", network.servers["s2"].base_url,
         TOPIC, "--from-file", str(requests), "--dialect", "ranges", "--place",
         "--admin-token", "not-the-token"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "admin credential" in done.stderr
