"""A subscription server with several root dispatchers (``--dispatcher URL1 --dispatcher
URL2``): it registers with and reports every summary to each, independently. Two
dispatchers and three servers on one InProcessTransport, no sockets, no timers (a root's
registration backoff is skipped by moving the uplink's clock)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

import route_manager.uplink as uplink_module
from route_manager.dispatcher import build_dispatcher
from subscription_manager.server import EdnSettings
from tests.support.edn import (DISPATCHER, TOPIC, Network, expected_notifications,
                               random_boxes, random_points, schema_element)
from tests.support.eventing import TOKEN
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import ServiceConfig
from wsframework.transport import TransportError
from route_manager.workloads.grid_xml import event_element

ROOT2 = "http://root2.test"


def _down(url, payload, content_type, soap_action):
    raise TransportError(f"POST {url} failed: connection refused")


class TwoRoots(Network):
    """tests.support.edn.Network with a second root dispatcher every server reports to."""

    def __init__(self, tmp_path, *, root2_up: bool = True):
        self.root2 = None
        self._root2_dir = 0
        super().__init__(tmp_path, ("local", "local", "local"), register=False,
                         settings={"dispatcher": [DISPATCHER, ROOT2]})
        self.restart_root2(up=root2_up)

    def restart_root2(self, *, up: bool = True):
        """A fresh second root (a new, empty data directory), or one that does not answer."""
        if self.root2 is not None:
            self.root2.close()
            self.root2 = None
        if not up:
            self.transport.mount(ROOT2, _down)
            return
        self._root2_dir += 1
        self.root2 = build_dispatcher(ServiceConfig(ROOT2, self.tmp_path / f"root2-{self._root2_dir}",
                                                    TOKEN, role="dispatcher"),
                                      transport=self.transport)
        self.transport.mount(ROOT2, self.root2)

    def create_topic(self, name: str = TOPIC, at=(DISPATCHER, ROOT2)):
        """At each root that answers (an operator creates a topic at every root)."""
        for root in at:
            try:
                AdminClient(root, TOKEN, transport=self.transport).create_topic(
                    name, None, schema_element(self.d))
            except TransportError:
                pass

    def rows(self, root, server):
        service = self.dispatcher_service if root == DISPATCHER else self.root2
        return service.store.query("SELECT generation, load, summary FROM edn_summaries "
                                   "WHERE route = ? AND server = ?", (TOPIC, server))

    def publish_at(self, root, events):
        client = SoapClient(self.transport)
        for k, values in enumerate(events):
            client.send(f"{root}/topics/{TOPIC}", PUBLISH_ACTION, event_element(values, k))

    def drain(self):
        if self.root2 is not None:  # the roots first: their copies feed the servers' queues
            assert self.root2.dispatcher.forwarder.drain(10)
        super().drain()

    def close(self):
        super().close()
        if self.root2 is not None:
            self.root2.close()


@pytest.fixture
def later(monkeypatch):
    """Move the uplink's clock past every registration backoff."""
    def skip():
        monkeypatch.setattr(uplink_module, "time",
                            SimpleNamespace(monotonic=lambda: time.monotonic() + 3600,
                                            time=time.time))
    return skip


@pytest.fixture
def roots(tmp_path):
    nets = []

    def make(**kwargs):
        net = TwoRoots(tmp_path, **kwargs)
        nets.append(net)
        return net
    yield make
    for net in nets:
        net.close()


def _subscribe_all(net, lo, hi, first=0):
    for i in range(len(lo)):
        net.subscribe(i % 3, lo[i], hi[i], first + i)


def test_settings_take_several_roots_and_the_first_is_the_topic_address():
    edn = EdnSettings.from_mapping({"dispatcher": "http://a.test/, http://b.test"})
    assert edn.dispatcher == "http://a.test" and edn.dispatchers == ("http://a.test", "http://b.test")
    edn = EdnSettings.from_mapping({"dispatcher": ["http://a.test", "http://b.test/", "http://a.test"]},
                                   "http://s1.test:8081")
    assert edn.dispatchers == ("http://a.test", "http://b.test")  # each once, in order
    assert edn.name == "s1.test:8081" and edn.dispatcher == "http://a.test"
    assert EdnSettings.from_mapping({"dispatcher": "http://a.test"}).dispatchers == ("http://a.test",)
    with pytest.raises(ValueError, match="base URL"):
        EdnSettings.from_mapping({"dispatcher": "http://a.test,a.test"})


def test_each_root_gets_every_summary_and_routes_exactly(roots):
    net = roots()
    for m in net.managers:
        assert m.network.register()  # with both roots
    net.create_topic()
    lo, hi = random_boxes(60, 3, seed=41)
    _subscribe_all(net, lo, hi)
    net.step()
    for server in ("s0", "s1", "s2"):
        (one,), (two,) = net.rows(DISPATCHER, server), net.rows(ROOT2, server)
        assert (one["generation"], one["load"], one["summary"]) == \
            (two["generation"], two["load"], two["summary"])
    assert sum(net.rows(ROOT2, s)[0]["load"] for s in ("s0", "s1", "s2")) == 60
    stats = net.manager(0).stats()
    assert (stats["registered"], stats["roots"], stats["root.1.address"]) == (2, 2, ROOT2)
    # an event published at either root reaches exactly the subscriptions it matches
    events = random_points(40, 3, seed=42)
    net.publish_at(ROOT2, events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)
    net.sink.messages.clear()
    net.publish_at(DISPATCHER, events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)
    # the subscribers' topic address stays the first root's
    assert {m[3] for m in net.sink.messages} == {f"{DISPATCHER}/topics/{TOPIC}/Event"}


def test_a_root_that_is_down_does_not_stop_reports_to_the_other(roots, later):
    net = roots(root2_up=False)
    for m in net.managers:
        assert not m.network.register()  # not with every root ...
        assert m.network.registered.is_set()  # ... but with one: the peers can be asked
    net.create_topic()
    lo, hi = random_boxes(30, 3, seed=43)
    _subscribe_all(net, lo, hi)
    net.step()
    assert sum(net.rows(DISPATCHER, s)[0]["load"] for s in ("s0", "s1", "s2")) == 30
    assert net.manager(0).stats()["root.1.registered"] == 0
    # the second root answers now: the next round registers there and sends it everything
    net.restart_root2()
    net.create_topic(at=[ROOT2])
    later()
    net.step()
    assert all(m.stats()["registered"] == 2 for m in net.managers)
    assert [net.rows(ROOT2, s)[0]["summary"] for s in ("s0", "s1", "s2")] == \
        [net.rows(DISPATCHER, s)[0]["summary"] for s in ("s0", "s1", "s2")]
    # a registered root that stops answering: the other keeps getting every change
    net.transport.mount(ROOT2, _down)
    lo2, hi2 = random_boxes(12, 3, seed=44)
    _subscribe_all(net, lo2, hi2, first=30)
    sent = net.manager(0).stats().get("summary_updates_sent", 0)
    net.step()
    assert net.manager(0).stats()["summary_updates_sent"] > sent
    assert sum(net.rows(DISPATCHER, s)[0]["load"] for s in ("s0", "s1", "s2")) == 42
    assert sum(net.rows(ROOT2, s)[0]["load"] for s in ("s0", "s1", "s2")) == 30
    # back: it gets what it missed (still due to it), with nobody registering again
    registrations = net.manager(0).stats()["registrations"]
    net.transport.mount(ROOT2, net.root2)
    net.step()
    assert sum(net.rows(ROOT2, s)[0]["load"] for s in ("s0", "s1", "s2")) == 42
    assert net.manager(0).stats()["registrations"] == registrations


def test_a_root_restarted_with_an_empty_store_gets_everything_again(roots):
    net = roots()
    for m in net.managers:
        assert m.network.register()
    net.create_topic()
    lo, hi = random_boxes(45, 3, seed=45)
    _subscribe_all(net, lo, hi)
    net.step()
    net.restart_root2()  # lost its data: no servers, no routes, no summaries
    net.create_topic(at=[ROOT2])
    assert net.rows(ROOT2, "s0") == []
    net.step()  # ListServers at each root: the second does not list us -> register again
    net.step()
    assert sorted(net.root2.dispatcher.servers) == ["s0", "s1", "s2"]
    for server in ("s0", "s1", "s2"):
        assert net.rows(ROOT2, server)[0]["summary"] == net.rows(DISPATCHER, server)[0]["summary"]
    events = random_points(40, 3, seed=46)
    net.publish_at(ROOT2, events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)
