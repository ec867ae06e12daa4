"""Kyra's cliques and zones on real processes: ``edn serve dispatcher --latency FILE`` and four
``edn serve server`` (partitioner ``local``: a subscription stays where it entered) on
loopback, a latency file with two cliques (a1, a2 and b1, b2: 2-3 ms inside, 70-80 ms across),
subscriptions entering round robin, then ``edn partition --algorithm kyra``.

Checked: the subscriptions are where the plan (route_manager.partitioning.kyra.KyraPlacement, computed
here over the same boxes) says, none left its clique; the same events published before and
after bring every subscriber exactly the same notifications; GetStatus and Renew through the
EPRs handed out before the moves still work (the sources forward them). Every wait is on a
condition, never a fixed sleep.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork
from route_manager import protocol
from route_manager.partitioning.kyra import KyraPlacement
from subscription_manager.client import EventingClient
from tests.support.edn import random_boxes, random_points
from tests.support.processes import ADMIN_TOKEN
from wsframework.admin import AdminClient

TOPIC = "grid"
D = 2
N_SUBSCRIPTIONS = 120
NAMES = ("a1", "a2", "b1", "b2")  # sorted: the dispatcher's server order
LATENCY_MS = [[0, 2, 70, 75],
              [2, 0, 72, 80],
              [71, 73, 0, 3],
              [76, 79, 3, 0]]
MAX_DISTANCE = 10.0


@pytest.fixture(scope="module")
def edn(tmp_path_factory):
    data = tmp_path_factory.mktemp("kyra")
    latency_file = data / "latency.json"
    latency_file.write_text(json.dumps({"servers": list(NAMES), "ms": LATENCY_MS}))
    network = LocalNetwork(data, [(name, "local", 1) for name in NAMES], token=ADMIN_TOKEN,
                           d=D, dispatcher_args=["--latency", str(latency_file)])
    with network:
        network.create_topic(TOPIC)
        network.subscribe(*random_boxes(N_SUBSCRIPTIONS, D, seed=11))
        yield network


def notifications_by_subscriber(edn, first: int, last: int) -> dict[str, set[int]]:
    """sink path -> the events it received, counted from ``first`` (ids made relative)."""
    out: dict[str, set[int]] = defaultdict(set)
    for path, event_id in edn.received(first, last):
        out[path].add(int(event_id) - first)
    return dict(out)


def holders(edn) -> dict[str, str]:
    """subscription id -> the name of the server holding it (its export)."""
    out = {}
    for name, server in edn.servers.items():
        response = AdminClient(server.base_url, ADMIN_TOKEN).call(
            protocol.ExportSubscriptions(Topic=TOPIC))
        for element in response.Subscriptions.iter(protocol.SUBSCRIPTION):
            assert element.get("id") not in out, "a subscription held twice"
            out[element.get("id")] = name
    return out


def kyra_plan(edn, entered: np.ndarray) -> list[str]:
    """Where KyraPlacement puts each subscription, over the boxes normalized as the
    dispatcher normalizes them (per dimension to [0, 10] over all the boxes)."""
    low, high = edn.lo.min(axis=0), edn.hi.max(axis=0)
    scale = 10.0 / np.where(high > low, high - low, 1.0)
    placement = KyraPlacement(MAX_DISTANCE, len(NAMES)).fit(
        np.asarray(LATENCY_MS, dtype=float), (edn.lo - low) * scale, (edn.hi - low) * scale,
        entered, (np.zeros(D), np.full(D, 10.0)))
    assert placement.cliques_ == [[0, 1], [2, 3]]
    return [NAMES[i] for i in placement.labels_]


def test_kyra_repartition_on_real_processes(edn):
    events = random_points(200, D, seed=12)
    first, last = edn.publish(events)
    edn.wait_delivered(first, last)
    before = notifications_by_subscriber(edn, first, last)
    assert sum(len(v) for v in before.values()) > 200
    entered = np.array([NAMES.index(n) for n in map(holders(edn).get,
                                                    (h.id for h in edn.handles))])
    assert entered.tolist() == [i % 4 for i in range(N_SUBSCRIPTIONS)]  # local placement

    result = subprocess.run(
        [sys.executable, "-m", "edn.cli", "partition", "--at", edn.dispatcher.base_url, TOPIC,
         "--algorithm", "kyra", "--max-distance", str(MAX_DISTANCE), "--max-servers", "4",
         "--admin-token", ADMIN_TOKEN, "--json"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    print("edn partition --algorithm kyra:", json.dumps(report))
    assert int(report["subscriptions"]) == N_SUBSCRIPTIONS
    assert int(report["cliques"]) == 2 and int(report["zones"]) == 4
    assert report["moved"] > 0

    plan = kyra_plan(edn, entered)
    now = holders(edn)
    assert [now[h.id] for h in edn.handles] == plan
    assert sum(name != NAMES[e] for name, e in zip(plan, entered)) == report["moved"]
    assert all(now[h.id][0] == NAMES[e][0] for h, e in zip(edn.handles, entered))  # clique kept

    edn.wait_routed()
    first, last = edn.publish(events)
    edn.wait_delivered(first, last)
    assert notifications_by_subscriber(edn, first, last) == before
    moved = [(h, NAMES[e]) for h, e in zip(edn.handles, entered) if now[h.id] != NAMES[e]]
    for handle, entry in moved:  # the EPRs handed out name the server they entered at
        assert handle.manager.address.startswith(edn.servers[entry].base_url)
        client = EventingClient(handle.version.name)
        assert client.get_status(handle) is not None
        assert client.renew(handle, "PT2H") is not None
    forwarding = sum(int(edn.server_stats(name, "forwarding_records")["forwarding_records"])
                     for name in NAMES)
    assert forwarding == report["moved"]
