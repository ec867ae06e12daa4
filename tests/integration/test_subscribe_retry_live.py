"""A Subscribe retried at another server, on real processes: three ``edn serve server
--partitioner local`` servers (each keeps what arrives at it) under one dispatcher. The same
request (same wsa:MessageID, same body) sent to each server in turn is made once: every
answer names the subscription the first server made, and the network holds one.

Every wait is on a condition (GetStats), never a sleep."""
from __future__ import annotations

import pytest

from edn.localnet.network import TOPIC, LocalNetwork, wait_until
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient, subscribe_body
from subscription_manager.server.relay import MessageIdClient
from subscription_manager.versions import VERSIONS
from tests.support.processes import ADMIN_TOKEN
from matchers.vocabulary import RANGES_DIALECT

NAMES = ("a", "b", "c")


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    root = tmp_path_factory.mktemp("retry")
    net = LocalNetwork(root, [(name, "local", 1) for name in NAMES], token=ADMIN_TOKEN, d=2)
    with net:
        net.create_topic()
        for name in NAMES:
            wait_until(lambda: int(net.server_stats(name, "peers").get("peers", 0)) == 2,
                       what=f"{name} knows its two peers")
        yield net


def subscribe(net: LocalNetwork, name: str, message_id: str):
    client = EventingClient("2011")
    client.soap = MessageIdClient(client.soap.transport, message_id,
                                  wsa_version=VERSIONS["2011"].wsa)
    body = subscribe_body("2011", f"{net.sink.url}/n/0", filter=range_filter([0, 0], [1, 1]),
                          dialect=RANGES_DIALECT, expires="PT1H")
    return client.subscribe_raw(f"{net.servers[name].base_url}/topics/{TOPIC}", body)


def total_load(net: LocalNetwork) -> int:
    return sum(int(net.server_stats(name, "load")["load"]) for name in NAMES)


def claims_answered(net: LocalNetwork) -> int:
    return sum(int(net.server_stats(name, "placement_claims_answered")
                   .get("placement_claims_answered", 0)) for name in NAMES)


@pytest.mark.parametrize("message_id", [f"urn:uuid:live-retry-{k}" for k in range(4)])
def test_a_retry_at_each_server_gets_the_first_subscription(network, message_id):
    before, claims_before = total_load(network), claims_answered(network)
    first = subscribe(network, "a", message_id)
    assert first.manager.address.startswith(network.servers["a"].base_url)
    for name in ("b", "c", "a"):
        again = subscribe(network, name, message_id)
        assert (again.manager.address, again.id) == (first.manager.address, first.id)
    assert total_load(network) == before + 1
    # b and c are not both the key's owner: one of them at least asked the owner
    assert claims_answered(network) > claims_before
