"""S-CN notification conditions on real processes: a dispatcher and two subscription servers
(``edn serve``), a notification sink; subscribers with different bounds δ subscribe with the
range filter ``low < δ and high >= δ`` (half at each server, one in five through WS-Eventing
2004/08); the publisher side (:mod:`subscription_manager.stateful.interval_publisher`) turns a
value stream into interval messages published at the dispatcher: the first half in this
process, the rest by ``edn intervals publish`` (its own process, continuing the same store, as
a restarted publisher does), one value of it while the root it names is down (the value is
applied and its messages sent by the next run, in order).  Each subscriber receives exactly
the values section 5.2's strict semantics give it, computed directly per subscriber.

Every wait is on a condition (the sink's count, GetStats), never a fixed sleep.
"""
from __future__ import annotations

import random
import subprocess
import sys

import pytest
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from edn.localnet.processes import free_port
from subscription_manager.client import EventingClient
from subscription_manager.stateful.interval_commands import STORE_FILE
from subscription_manager.stateful.interval_publisher import (IntervalPublisher, MESSAGE_TAG,
                                                            read_message_event,
                                                            subscription_filter, topic_schema)
from subscription_manager.stateful.interval_store import IntervalStore
from tests.support.processes import ADMIN_TOKEN
from tests.unit.subscription_manager.test_scn_intervals import strict  # the 5.2 oracle
from matchers.vocabulary import RANGES_DIALECT
from wsframework.admin import AdminClient
from route_manager.publisher import Publisher

TOPIC = "quotes"
LIMIT = 4.0
BOUNDS = [0.25, 0.5, 0.75, 1.0, 1.25, 2.0, 2.5, 3.0, 3.75, 4.0]  # quarters: differences exact


def price_walk(n: int, seed: int) -> list[float]:
    """A random walk in quarter steps, with a repeat (ignorable) and a jump now and then."""
    rng = random.Random(seed)
    value, out = 100.0, []
    for _ in range(n):
        value += rng.choice([-0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, -1.0, 3.0, -5.0])
        out.append(value)
    return out


@pytest.mark.sqlite_only("the publisher's interval store is a file that `edn intervals "
                         "publish`, another process, reopens")
def test_subscribers_receive_exactly_their_strict_notifications(tmp_path):
    servers = [("s1", "local", 1), ("s2", "local", 1)]
    with LocalNetwork(tmp_path / "net", servers, token=ADMIN_TOKEN) as network:
        AdminClient(network.dispatcher.base_url, ADMIN_TOKEN).create_topic(
            TOPIC, None, topic_schema(LIMIT, 0, 1000))
        wait_until(lambda: all(network.hosts_topic(s, TOPIC) for s in network.servers.values()),
                   what="the topic on every server")
        names = list(network.servers)
        for k, bound in enumerate(BOUNDS):
            server = network.servers[names[k % 2]]
            client = EventingClient("2004" if k % 5 == 4 else "2011")
            network.handles.append(client.subscribe(
                f"{server.base_url}/topics/{TOPIC}", f"{network.sink.url}/n/{k}",
                filter=subscription_filter(bound, LIMIT), dialect=RANGES_DIALECT,
                expires="PT1H"))
        network.wait_routed()

        values = price_walk(80, seed=17)
        data = tmp_path / "publisher"
        half = len(values) // 2
        store = IntervalStore(data / STORE_FILE, limit=LIMIT)
        with Publisher(network.dispatcher.base_url) as roots:
            publisher = IntervalPublisher(store, roots, TOPIC)
            for value in values[:half]:
                publisher.publish(value)
        assert store.pending() == []
        store.close()
        # the rest through `edn intervals publish`, its own process continuing the store; the
        # first of them while the only root it knows is down: applied, kept, sent next run
        def cli(root: str, part: list[float]) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "edn.cli", "intervals", "publish", "--at", root, TOPIC,
                 "--data", str(data), "-"],
                input="\n".join(repr(v) for v in part), capture_output=True, text=True,
                timeout=120)
        down = cli(f"http://127.0.0.1:{free_port()}", values[half:half + 1])
        assert down.returncode == 3 and "is applied" in down.stderr, down.stderr
        assert len(IntervalStore.open_existing(data / STORE_FILE).pending()) >= 1
        run = cli(network.dispatcher.base_url, values[half + 1:])
        assert run.returncode == 0, run.stderr
        assert IntervalStore.open_existing(data / STORE_FILE).interval_set().last == values[-1]

        expected = {k: strict(values, bound) for k, bound in enumerate(BOUNDS)}
        total = sum(len(v) for v in expected.values())
        assert network.sink.wait_count(total, timeout=60), "notifications did not arrive"
        wait_until(network.quiet, 60, what="an idle network")

        seen: dict[int, dict[tuple[int, int], float]] = {k: {} for k in expected}
        for message in list(network.sink.messages):
            k = int(message.path.rsplit("/", 1)[1])
            event = etree.fromstring(message.body).find(f".//{MESSAGE_TAG}")
            stored = read_message_event(event)
            assert stored.message.reaches(BOUNDS[k])  # the network delivered a match only
            seen[k][(stored.seq, stored.part)] = stored.message.update  # drop a redelivery
        got = {k: [update for _, update in sorted(by_seq.items())] for k, by_seq in seen.items()}
        print(f"\n{len(values)} values, {total} notifications to {len(BOUNDS)} subscribers, "
              f"{len(network.sink.messages)} received")
        assert got == expected
        # the small bounds hear of many values, the limit of few: the filter separated them
        assert len(expected[0]) > 3 * len(expected[len(BOUNDS) - 1])
