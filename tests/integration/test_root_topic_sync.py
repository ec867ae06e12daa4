"""Two root dispatchers of real processes that list each other (``--peer-root``, as
``LocalNetwork(roots=2)`` starts them): a topic created at root 1 only reaches root 2, and
events published at root 2 only are delivered to the subscribers. Every wait is on a
condition with a deadline."""
from __future__ import annotations

import numpy as np
import pytest

from edn.localnet.network import TOPIC, LocalNetwork, wait_until
from route_manager.workloads.grid_xml import schema_element
from tests.support.processes import ADMIN_TOKEN
from wsframework.admin import AdminClient

D = 2
SERVERS = [(f"s{k}", "rtree", 1) for k in range(1, 3)]


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    net = LocalNetwork(tmp_path_factory.mktemp("peer-roots"), SERVERS, token=ADMIN_TOKEN, d=D,
                       load_threshold=1000, roots=2)
    with net:
        yield net


def test_a_topic_created_at_root_1_only_is_routed_at_root_2(network):
    root1, root2 = network.roots
    assert not network.hosts_topic(root2)
    AdminClient(root1.base_url, ADMIN_TOKEN).create_topic(TOPIC, None, schema_element(D))
    wait_until(lambda: network.hosts_topic(root2), 30, what="the topic at root 2")
    wait_until(lambda: all(network.hosts_topic(s) for s in network.servers.values()), 30,
               what="the topic on every server")
    rng = np.random.default_rng(5)
    lo = np.round(rng.uniform(0, 8, size=(40, D)), 2)
    network.subscribe(lo, lo + 2)  # waits until both roots route every subscription
    points = np.round(np.random.default_rng(6).uniform(0, 10, size=(200, D)), 3)
    first, last = network.publish(points, at=[root2])
    expected = network.wait_delivered(first, last)
    assert len(expected) > 20 and network.received(first, last) == expected
    figures = network.node_stats(root2, "topic_sync")
    assert figures["topic_sync.conflicts"] == "0" and int(figures["topic_sync.taken"]) >= 1
