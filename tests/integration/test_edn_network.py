"""A real event distribution network on loopback: ``edn serve dispatcher`` and three
``edn serve server --dispatcher ...`` (gunicorn processes, one partitioner each, one of them
with two workers), WS-Eventing clients subscribing at every server, events published at the
dispatcher, and a NotificationSink checking delivery against ground truth computed here.

Every wait is on a condition (the sink's count, the dispatcher's and servers' GetStats),
never on a fixed sleep.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork, wait_until
from subscription_manager.client import EventingClient
from tests.support.processes import ADMIN_TOKEN

TOPIC = "grid"
D = 3
N_SUBSCRIPTIONS = 300
SERVERS = (("s-random", "random", 1), ("s-rtree", "rtree", 1), ("s-kmeans", "kmeans", 2))


def stats(address: str, prefix: str | None = None) -> dict[str, str]:
    from edn.localnet.network import stats as admin_stats
    return admin_stats(address, ADMIN_TOKEN, prefix)


def publish(network: LocalNetwork, n: int, seed: int) -> tuple[int, int]:
    return network.publish(np.round(np.random.default_rng(seed).uniform(0, 10, size=(n, D)), 3))


@pytest.fixture(scope="module")
def edn(tmp_path_factory):
    network = LocalNetwork(tmp_path_factory.mktemp("edn"), SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000)
    with network:
        network.create_topic(TOPIC)
        rng = np.random.default_rng(1)
        centres = rng.uniform(0, 10, size=(N_SUBSCRIPTIONS, D))
        half = rng.uniform(0.3, 2.5, size=(N_SUBSCRIPTIONS, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        yield network


def test_exact_delivery_with_every_partitioner(edn):
    first, last = publish(edn, 150, seed=2)
    expected = edn.wait_delivered(first, last)
    assert len(expected) > 100
    assert edn.received(first, last) == expected
    # Placement ran on every server, and subscriptions live on more than one of them.
    loads = {name: int(stats(s.base_url, "load")["load"]) for name, s in edn.servers.items()}
    assert sum(loads.values()) == N_SUBSCRIPTIONS
    assert sum(1 for v in loads.values() if v > 0) >= 2
    figures = stats(edn.dispatcher.base_url)
    assert 0 < float(figures["hit_ratio"]) < 1  # summaries route: not every event everywhere


def test_offline_repartition_keeps_delivery_exact_and_eprs_working(edn):
    result = subprocess.run(
        [sys.executable, "-m", "edn.cli", "partition", "--at", edn.dispatcher.base_url,
         TOPIC, "--algorithm", "rtree", "--admin-token", ADMIN_TOKEN, "--json"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["moved"] > 0 and int(report["subscriptions"]) == N_SUBSCRIPTIONS
    edn.wait_routed()
    first, last = publish(edn, 150, seed=3)
    expected = edn.wait_delivered(first, last)
    assert edn.received(first, last) == expected
    # Every client EPR still works, wherever its subscription lives now.
    for i, handle in enumerate(edn.handles):
        client = EventingClient(handle.version.name)
        client.get_status(handle)
        if i % 10 == 0:
            assert client.renew(handle, "PT2H") is not None
    records = sum(int(stats(s.base_url, "forwarding_records")["forwarding_records"])
                  for s in edn.servers.values())
    assert records >= report["moved"]


def test_a_killed_server_comes_back_with_its_subscriptions_and_queued_events(edn):
    victim = edn.servers["s-rtree"]
    victim.kill()  # kill -9: nothing is shut down cleanly
    first, last = publish(edn, 120, seed=4)  # the dispatcher queues the victim's share
    victim.start()
    expected = edn.wait_delivered(first, last, timeout=60)
    assert edn.received(first, last) == expected
    figures = wait_until(lambda: (lambda f: f if int(f.get("registered", 0)) else None)(
        stats(victim.base_url)), what="re-registration")
    assert int(figures["summary_updates_sent"]) >= 1  # it re-announced its summary
    assert int(figures["load"]) > 0
    assert int(figures.get("events_received", 0)) > 0  # the dispatcher had queued them
    assert int(stats(edn.dispatcher.base_url, "server.s-rtree.")["server.s-rtree.failures"]) > 0
    mine = [h for h in edn.handles if h.manager.address.startswith(victim.base_url)]
    assert mine
    for handle in mine:
        assert EventingClient(handle.version.name).get_status(handle) is not None
    # Nothing was lost or duplicated anywhere, from the first event on.
    wait_until(edn.quiet, what="an idle network")
    assert edn.received() == edn.expected()
