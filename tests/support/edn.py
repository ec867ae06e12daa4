"""Helpers shared by the EDN unit tests (this module holds no tests).

:class:`Network` mounts a dispatcher and N subscription servers (and a recording notification
sink) on one :class:`~wsframework.transport.InProcessTransport`: the whole network runs in
this process, with no socket. Background threads are off; tests drive the servers with
``step()`` / ``flush_summaries()`` and wait for the dispatcher's channels and the servers'
delivery queues to drain.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from route_manager.dispatcher import build_dispatcher
from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
from subscription_manager.client import EventingClient
from subscription_manager.server import build_server
from subscription_manager.source import build_source
from tests.support.eventing import FAST, SINK, TOKEN, RecordingSink, fake_resolver
from matchers.vocabulary import MATCHER_RTREE_ENGINE
from route_manager.workloads.grid_xml import GRID_EVENTS
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import ServiceConfig
from wsframework.transport import InProcessTransport

DISPATCHER = "http://dispatcher.test"
EV = GRID_EVENTS
TOPIC = "grid"


def random_boxes(n: int, d: int, seed: int, *, width: float = 4.0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, size=(n, d))
    half = rng.uniform(0.2, width / 2, size=(n, d))
    lo = np.round(np.clip(centres - half, 0, 10), 2)
    hi = np.round(np.clip(centres + half, 0, 10), 2)
    return lo, hi


def random_points(n: int, d: int, seed: int):
    return np.round(np.random.default_rng(seed).uniform(0, 10, size=(n, d)), 3)


def server_url(i: int) -> str:
    return f"http://s{i}.test"


class Network:
    def __init__(self, tmp_path: Path, partitioners=("rtree", "rtree", "rtree"), *,
                 d: int = 3, settings: dict | None = None, register: bool = True,
                 dispatcher_settings: dict | None = None):
        self.tmp_path = Path(tmp_path)
        self.transport = InProcessTransport()
        self.sink = RecordingSink()
        self.transport.mount(SINK, self.sink)
        self.d = d
        self.dispatcher_service = build_dispatcher(
            ServiceConfig(DISPATCHER, self.tmp_path / "dispatcher", TOKEN, role="dispatcher",
                          settings=dict(dispatcher_settings or {})),
            transport=self.transport)
        self.dispatcher = self.dispatcher_service.dispatcher
        self.transport.mount(DISPATCHER, self.dispatcher_service)
        self.servers = []
        for i, partitioner in enumerate(partitioners):
            self.servers.append(self.start_server(i, partitioner, settings))
        self.admin = AdminClient(DISPATCHER, TOKEN, transport=self.transport)
        if register:
            for service in self.servers:
                assert service.subscription_manager.network.register()

    def start_server(self, i: int, partitioner: str, settings: dict | None = None):
        config = ServiceConfig(server_url(i), self.tmp_path / f"s{i}", TOKEN, role="server",
                               settings={"dispatcher": DISPATCHER, "name": f"s{i}",
                                         "partitioner": partitioner, "placement_refresh": 0,
                                         "placement_seed": i, **(settings or {})})
        service = build_server(config, transport=self.transport, resolver=fake_resolver(),
                               settings=dict(FAST), start_sweeper=False, start_background=False)
        self.transport.mount(server_url(i), service)
        return service

    def manager(self, i: int):
        return self.servers[i].subscription_manager

    @property
    def managers(self):
        return [s.subscription_manager for s in self.servers]

    def create_topic(self, name: str = TOPIC):
        return self.admin.create_topic(name, None, schema_element(self.d))

    def step(self, rounds: int = 1):
        for _ in range(rounds):
            for m in self.managers:
                m.step()

    def subscribe(self, at: int, lo, hi, index: int, *, version: str = "2011", topic: str = TOPIC):
        client = EventingClient(version, transport=self.transport)
        return client.subscribe(f"{server_url(at)}/topics/{topic}", f"{SINK}/n/{index}",
                                filter=range_filter(lo, hi), dialect=RANGES_DIALECT,
                                expires="PT1H")

    def publish(self, events, *, topic: str = TOPIC, first_id: int = 0):
        client = SoapClient(self.transport)
        for k, values in enumerate(events):
            client.send(f"{DISPATCHER}/topics/{topic}", PUBLISH_ACTION,
                        event_element(values, first_id + k))

    def drain(self):
        assert self.dispatcher.forwarder.drain(10)
        for m in self.managers:
            assert m.deliverer.drain(10)

    def received(self) -> list[tuple[str, str]]:
        """(sink path, event id) of every notification received, sorted."""
        out = []
        for url, payload, _, _ in self.sink.messages:
            root = etree.fromstring(payload)
            event = root.find(f".//{{{EV}}}event")
            out.append((url[len(SINK):], event.get("id")))
        return sorted(out)

    def close(self):
        for service in self.servers:
            service.close()
        self.dispatcher_service.close()


def expected_notifications(lo, hi, events, first_id: int = 0, indices=None) -> list[tuple[str, str]]:
    """Ground truth computed in the test: (path, event id) for every (subscription, event)
    whose closed box contains the event."""
    out = []
    indices = range(len(lo)) if indices is None else indices
    for k, point in enumerate(np.asarray(events)):
        inside = np.all((lo <= point) & (hi >= point), axis=1)
        for i in np.flatnonzero(inside):
            out.append((f"/n/{list(indices)[i]}", str(first_id + k)))
    return sorted(out)


class SingleSource:
    """The ground truth by the product itself: one base event source holding every
    subscription, publishing every event."""

    def __init__(self, tmp_path: Path, d: int, settings: dict | None = None):
        self.transport = InProcessTransport()
        self.sink = RecordingSink()
        self.transport.mount(SINK, self.sink)
        self.data = Path(tmp_path) / "single"
        self.settings = dict(settings or {})
        self.start()
        AdminClient("http://single.test", TOKEN, transport=self.transport).create_topic(
            TOPIC, MATCHER_RTREE_ENGINE, schema_element(d))

    def start(self) -> None:
        """Start the source's service on its data directory (again, after :meth:`close`)."""
        self.service = build_source(ServiceConfig("http://single.test", self.data, TOKEN,
                                                  settings=self.settings),
                                    transport=self.transport, resolver=fake_resolver(),
                                    settings=dict(FAST), start_sweeper=False)
        self.transport.mount("http://single.test", self.service)

    def subscribe(self, lo, hi, index):
        EventingClient("2011", transport=self.transport).subscribe(
            f"http://single.test/topics/{TOPIC}", f"{SINK}/n/{index}",
            filter=range_filter(lo, hi), dialect=RANGES_DIALECT, expires="PT1H")

    def publish(self, events, first_id: int = 0):
        client = SoapClient(self.transport)
        for k, values in enumerate(events):
            client.send(f"http://single.test/topics/{TOPIC}", PUBLISH_ACTION,
                        event_element(values, first_id + k))
        assert self.service.subscription_manager.deliverer.drain(10)

    def received(self):
        out = []
        for url, payload, _, _ in self.sink.messages:
            event = etree.fromstring(payload).find(f".//{{{EV}}}event")
            out.append((url[len(SINK):], event.get("id")))
        return sorted(out)

    def close(self):
        self.service.close()
