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
import time

import numpy as np
import pytest
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from subscription_manager.client import EventingClient
from tests.support.processes import ADMIN_TOKEN, ServerProcess
from tests.support.sink import HttpSink
from wsframework import admin_contracts as contracts
from wsframework.admin_client import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION

EV = "urn:edn-integration:events"
TOPIC = "grid"
D = 3
N_SUBSCRIPTIONS = 300


def schema_element(d: int) -> etree._Element:
    root = etree.Element("{urn:wsframework:edn}Schema",
                         nsmap={"edn": "urn:wsframework:edn", "e": EV})
    for i in range(d):
        etree.SubElement(root, "{urn:wsframework:edn}Attribute", name=f"x{i}", type="number",
                         xpath=f"e:x{i}", min="0", max="10")
    return root


def event_element(values, event_id: int) -> etree._Element:
    event = etree.Element(f"{{{EV}}}event", nsmap={"e": EV})
    event.set("id", str(event_id))
    for i, v in enumerate(values):
        etree.SubElement(event, f"{{{EV}}}x{i}").text = repr(float(v))
    return event


def wait_until(condition, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def stats(address: str, prefix: str | None = None) -> dict[str, str]:
    admin = AdminClient(address, ADMIN_TOKEN)
    return {f.Name: f.Value for f in admin.call(contracts.GetStats(Prefix=prefix)).Figure or []}


class EdnNetwork:
    PARTITIONERS = (("s-random", "random", 1), ("s-rtree", "rtree", 1), ("s-kmeans", "kmeans", 2))

    def __init__(self, tmp):
        self.sink = HttpSink().start()
        self.dispatcher = ServerProcess("dispatcher", data_dir=tmp / "dispatcher").start()
        self.servers = {}
        for name, partitioner, workers in self.PARTITIONERS:
            self.servers[name] = ServerProcess(
                "server", data_dir=tmp / name, workers=workers,
                extra_args=["--dispatcher", self.dispatcher.base_url, "--name", name,
                            "--partitioner", partitioner, "--load-threshold", "1000"]).start()
        self.admin = AdminClient(self.dispatcher.base_url, ADMIN_TOKEN)
        self.admin.create_topic(TOPIC, None, schema_element(D))
        wait_until(lambda: int(stats(self.dispatcher.base_url, "servers").get("servers", 0)) == 3,
                   what="three registered servers")
        wait_until(lambda: all(self.hosts_topic(s) for s in self.servers.values()),
                   what="the topic on every server")
        self.lo = np.empty((0, D))
        self.hi = np.empty((0, D))
        self.handles = []
        self.published: list[tuple[int, np.ndarray]] = []
        self.next_event = 0

    @staticmethod
    def hosts_topic(server) -> bool:
        return any(t["name"] == TOPIC
                   for t in AdminClient(server.base_url, ADMIN_TOKEN).list_topics())

    # -- subscriptions ---------------------------------------------------------------------
    def subscribe_all(self, n: int, seed: int = 1):
        rng = np.random.default_rng(seed)
        centres = rng.uniform(0, 10, size=(n, D))
        half = rng.uniform(0.3, 2.5, size=(n, D))
        self.lo = np.round(np.clip(centres - half, 0, 10), 2)
        self.hi = np.round(np.clip(centres + half, 0, 10), 2)
        names = list(self.servers)
        for i in range(n):
            server = self.servers[names[i % len(names)]]
            version = "2004" if i % 5 == 0 else "2011"
            client = EventingClient(version)
            text = " and ".join(f"x{k} in [{float(a)!r}, {float(b)!r}]"
                                for k, (a, b) in enumerate(zip(self.lo[i], self.hi[i])))
            self.handles.append(client.subscribe(
                f"{server.base_url}/topics/{TOPIC}", f"{self.sink.url}/n/{i}",
                filter=text, dialect=RANGES_DIALECT, expires="PT1H"))
        self.wait_routed()

    def wait_routed(self):
        """Until the dispatcher's route updates account for every subscription."""
        def total_load():
            figures = stats(self.dispatcher.base_url, "server.")
            return sum(int(v) for k, v in figures.items() if k.endswith(".load"))
        wait_until(lambda: total_load() == len(self.handles), what="route updates")

    # -- events ----------------------------------------------------------------------------
    def publish(self, n: int, seed: int):
        points = np.round(np.random.default_rng(seed).uniform(0, 10, size=(n, D)), 3)
        client = SoapClient()
        first = self.next_event
        for k, point in enumerate(points):
            client.send(f"{self.dispatcher.base_url}/topics/{TOPIC}", PUBLISH_ACTION,
                        event_element(point, first + k))
            self.published.append((first + k, point))
        self.next_event += n
        return first, first + n

    def expected(self, first: int = 0, last: int | None = None) -> list[tuple[str, str]]:
        out = []
        for event_id, point in self.published:
            if event_id < first or (last is not None and event_id >= last):
                continue
            inside = np.all((self.lo <= point) & (self.hi >= point), axis=1)
            out.extend((f"/n/{i}", str(event_id)) for i in np.flatnonzero(inside))
        return sorted(out)

    def received(self, first: int = 0, last: int | None = None) -> list[tuple[str, str]]:
        out = []
        for message in list(self.sink.messages):
            event = etree.fromstring(message.body).find(f".//{{{EV}}}event")
            event_id = int(event.get("id"))
            if event_id >= first and (last is None or event_id < last):
                out.append((message.path, str(event_id)))
        return sorted(out)

    def wait_delivered(self, first: int, last: int, timeout: float = 30.0):
        expected = self.expected(first, last)
        wait_until(lambda: len(self.received(first, last)) >= len(expected), timeout,
                   what=f"{len(expected)} notifications")
        wait_until(self.quiet, timeout, what="an idle network")
        return expected

    def quiet(self) -> bool:
        figures = stats(self.dispatcher.base_url, "server.")
        queued = sum(int(v) for k, v in figures.items() if k.endswith(".queued"))
        sent = sum(int(v) for k, v in figures.items() if k.endswith(".sent"))
        dropped = sum(int(v) for k, v in figures.items() if k.endswith(".dropped"))
        if queued != sent + dropped:
            return False
        return all(int(stats(s.base_url, "pending").get("pending", 1)) == 0
                   for s in self.servers.values())

    def close(self):
        for process in [*self.servers.values(), self.dispatcher]:
            try:
                process.stop()
            except Exception:
                process.kill()
        self.sink.stop()


@pytest.fixture(scope="module")
def edn(tmp_path_factory):
    network = EdnNetwork(tmp_path_factory.mktemp("edn"))
    try:
        network.subscribe_all(N_SUBSCRIPTIONS)
        yield network
    finally:
        network.close()


def test_exact_delivery_with_every_partitioner(edn):
    first, last = edn.publish(150, seed=2)
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
        [sys.executable, "-m", "wsframework.cli", "partition", "--at", edn.dispatcher.base_url,
         TOPIC, "--algorithm", "rtree", "--admin-token", ADMIN_TOKEN, "--json"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["moved"] > 0 and int(report["subscriptions"]) == N_SUBSCRIPTIONS
    edn.wait_routed()
    first, last = edn.publish(150, seed=3)
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
    first, last = edn.publish(120, seed=4)  # the dispatcher queues the victim's share
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
