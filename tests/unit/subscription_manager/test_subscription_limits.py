"""Subscription limits: the whole service, one topic, one NotifyTo host. Counted in the store,
in the insert's transaction (one count for every worker); only active, unexpired
subscriptions count; a Subscribe over a limit is refused with EventSourceUnableToProcess
(2004/08, Receiver) or a Receiver fault (2011), in the addressing version of the request.
In process, no socket."""
from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient, subscribe_body
from subscription_manager.server.settings import EdnSettings
from subscription_manager.exceptions import TooManySubscriptions
from subscription_manager.lifecycle import State
from subscription_manager.settings import EventingSettings
from subscription_manager.store import (LimitReached, SubscriptionLimits, SubscriptionStore,
                                        notify_host)
from subscription_manager.versions import V2004, V2004_WSA10, V2011
from tests.support.edn import Network, server_url
from tests.support.eventing import BASE, SINK, Harness
from wsframework.addressing import AddressingHeaders, WsaVersion, request_headers
from wsframework.exceptions import RECEIVER, SoapFault
from wsframework.faults import fault_for
from wsframework.settings import SettingsError
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.store import Store

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make(tmp_path):
    made = []

    def build(clock=None, topics=("stocks", "bonds"), **settings):
        h = Harness(tmp_path, settings={k: str(v) for k, v in settings.items()}, topics=topics,
                    clock=clock)
        made.append(h)
        return h
    yield build
    for h in made:
        h.close()


def refused(callable_, *args, **kwargs) -> SoapFault:
    with pytest.raises(SoapFault) as info:
        callable_(*args, **kwargs)
    return info.value


def active(h) -> int:
    return h.manager.store.count(State.ACTIVE)


# == settings =================================================================================

def test_defaults_and_help():
    s = EventingSettings()
    assert (s.max_subscriptions, s.max_subscriptions_per_topic,
            s.max_subscriptions_per_host) == (50_000, 20_000, 5_000)
    assert s.subscription_limits() == SubscriptionLimits(50_000, 20_000, 5_000)
    keys = EventingSettings.keys()
    for key in ("max_subscriptions", "max_subscriptions_per_topic", "max_subscriptions_per_host"):
        assert keys[key].metadata["doc"]
    # the server role reads them too (one mapping, both groups)
    edn = EdnSettings.from_mapping({"dispatcher": "http://d", "max_subscriptions_per_host": "7"})
    assert edn.dispatcher == "http://d"


@pytest.mark.parametrize("key", ["max_subscriptions", "max_subscriptions_per_topic",
                                 "max_subscriptions_per_host"])
@pytest.mark.parametrize("value", ["-1", "abc", "", "1.5", "1e3", "ten", "0x10"])
def test_bad_limit_values_are_refused(key, value):
    with pytest.raises(SettingsError):
        EventingSettings.from_mapping({key: value})


@pytest.mark.parametrize("key", ["max_subscriptions", "max_subscriptions_per_topic",
                                 "max_subscriptions_per_host"])
def test_zero_is_no_limit_and_numbers_parse(key):
    assert getattr(EventingSettings.from_mapping({key: "0"}), key) == 0
    assert getattr(EventingSettings.from_mapping({key: " 12 "}), key) == 12


def test_a_server_refuses_a_bad_limit_at_start(tmp_path):
    with pytest.raises(SettingsError):
        Harness(tmp_path, settings={"max_subscriptions_per_topic": "-5"})


# == the fault, both versions ===================================================================

@pytest.mark.parametrize("name, version, wsa, subcodes", [
    ("2004", V2004, WsaVersion.WSA2004, (V2004.q("EventSourceUnableToProcess"),)),
    ("2004-wsa10", V2004_WSA10, WsaVersion.WSA10, (V2004.q("EventSourceUnableToProcess"),)),
    ("2011", V2011, WsaVersion.WSA10, ()),
])
def test_over_the_topic_limit_is_the_versions_fault_in_the_requests_addressing(
        make, name, version, wsa, subcodes):
    h = make(max_subscriptions_per_topic=2)
    h.subscribe(name, expires="PT1H")
    h.subscribe(name, expires="PT1H")
    body = subscribe_body(version, SINK + "/third", expires="PT1H")
    headers = request_headers(wsa, BASE + "/topics/stocks", version.action("Subscribe"))
    response = h.post("/topics/stocks", build_envelope(SoapVersion.SOAP12, body, headers))
    reply = parse_envelope(response.body)
    fault = reply.fault()
    assert fault.code == RECEIVER and fault.subcodes == subcodes
    assert "topic stocks" in fault.reason and "(2)" in fault.reason
    assert fault.reason.startswith("the event source cannot process the subscription")
    addressing = AddressingHeaders.parse(reply.headers)
    assert addressing.version is wsa and addressing.action == version.fault_action
    assert response.status == 500  # SOAP 1.2 HTTP binding: a Receiver fault
    assert active(h) == 2
    # another topic is not affected
    h.subscribe(name, topic="bonds", expires="PT1H")


@pytest.mark.parametrize("version", [V2004, V2011], ids=lambda v: v.name)
def test_the_exception_translates_to_unable_to_process(version):
    fault = fault_for(TooManySubscriptions(version, "host h", 3))
    expected = version.faults.unable_to_process(str(TooManySubscriptions(version, "host h", 3)))
    assert (fault.code, fault.subcodes, fault.reason, fault.action) == \
        (expected.code, expected.subcodes, expected.reason, expected.action)
    assert fault.code == RECEIVER


# == per host, per service =======================================================================

def test_per_host_limit_counts_the_notify_to_host_across_topics_and_paths(make):
    h = make(max_subscriptions_per_host=3)
    client = h.client("2011")
    for i, topic in enumerate(("stocks", "bonds", "stocks")):
        client.subscribe(f"{BASE}/topics/{topic}", f"{SINK}/n/{i}", expires="PT1H")
    # the same host, another path, port, case or topic: refused
    for address in ("http://SINK.test/other", "http://sink.test:8080/x"):
        fault = refused(client.subscribe, f"{BASE}/topics/bonds", address, expires="PT1H")
        assert fault.code == RECEIVER and "host sink.test" in fault.reason
    # another host: accepted
    client.subscribe(f"{BASE}/topics/stocks", "http://other.test/n", expires="PT1H")
    # EndTo is not NotifyTo
    client.subscribe(f"{BASE}/topics/stocks", "http://third.test/n", end_to=SINK + "/end",
                     expires="PT1H")
    assert active(h) == 5


def test_per_service_limit_counts_every_topic(make):
    h = make(max_subscriptions=2)
    h.subscribe("2011", topic="stocks", expires="PT1H")
    h.subscribe("2004", topic="bonds", expires="PT1H")
    fault = refused(h.subscribe, "2004", topic="bonds", expires="PT1H")
    assert fault.subcode == V2004.q("EventSourceUnableToProcess")
    assert "the service" in fault.reason


def test_zero_means_no_limit(make):
    h = make(max_subscriptions=0, max_subscriptions_per_topic=0, max_subscriptions_per_host=0)
    for _ in range(5):
        h.subscribe("2011", expires="PT1H")
    assert active(h) == 5


def test_a_refused_subscribe_leaves_no_filter_behind(make):
    h = make(max_subscriptions_per_topic=1)
    h.subscribe("2011", filter="/q:quote[q:price > 1]", namespaces={"q": "urn:q"},
                expires="PT1H")
    refused(h.subscribe, "2011", filter="/q:quote[q:price > 2]", namespaces={"q": "urn:q"},
            expires="PT1H")
    entry = h.service.topics.get("stocks")
    assert len(h.manager.matcher_for(entry)) == 1
    assert len(h.manager.view) == 1


# == what counts ===================================================================================

def test_expired_subscriptions_do_not_count_even_before_the_sweep(make):
    clock = Clock()
    h = make(clock=clock, max_subscriptions_per_topic=1, max_subscriptions_per_host=1)
    h.subscribe("2011", expires="PT10S")
    refused(h.subscribe, "2011", expires="PT10S")
    clock.now += 11  # expired, still 'active' in the store: no sweep ran
    assert active(h) == 1
    h.subscribe("2011", expires="PT10S")


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_unsubscribed_and_ended_subscriptions_do_not_count(make, name):
    h = make(max_subscriptions_per_topic=1)
    sub = h.subscribe(name, expires="PT1H")
    refused(h.subscribe, name, expires="PT1H")
    h.client(name).unsubscribe(sub)
    second = h.subscribe(name, expires="PT1H")
    h.manager.store.end(second.id, "test")
    h.subscribe(name, expires="PT1H")


def test_one_count_for_every_worker(make, tmp_path):
    """Two processes' managers on one store: the count is the store's, not a process's."""
    first = make(max_subscriptions_per_topic=3)
    second = make(max_subscriptions_per_topic=3)
    first.subscribe("2011", expires="PT1H")
    second.subscribe("2011", expires="PT1H")
    first.subscribe("2011", expires="PT1H")
    refused(second.subscribe, "2011", expires="PT1H")
    refused(first.subscribe, "2011", expires="PT1H")


def test_racing_inserts_never_pass_the_limit(tmp_path):
    """Inserts from many threads (each its own SQLite connection, as workers are) against
    one limit: exactly the limit gets in."""
    store = SubscriptionStore(Store(tmp_path / "race.db"))
    h_limits = SubscriptionLimits(per_topic=5)
    template = _subscription("x", "t")
    outcomes: list[str] = []
    barrier = threading.Barrier(12)

    def insert(i):
        barrier.wait()
        try:
            store.insert(_replace_id(template, f"s{i}"), h_limits, T0)
            outcomes.append("in")
        except LimitReached:
            outcomes.append("refused")

    threads = [threading.Thread(target=insert, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("in") == 5 and outcomes.count("refused") == 7
    assert store.count(State.ACTIVE) == 5


def test_moves_and_imports_are_never_refused(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "adopt.db"))
    limits = SubscriptionLimits(per_topic=1)
    store.insert(_subscription("a", "t"), limits, T0)
    with store.store.transaction() as conn:
        store.adopt(conn, [_subscription("b", "t"), _subscription("c", "t")])
    assert store.count(State.ACTIVE) == 3
    with pytest.raises(LimitReached):
        store.insert(_subscription("d", "t"), limits, T0)


@pytest.mark.sqlite_only("a SQLite file from before the column existed")
def test_a_table_from_before_the_host_column_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    store = SubscriptionStore(Store(path))
    store.insert(_subscription("a", "t", "http://Old.Example:81/n"))
    store.store.close()
    conn = sqlite3.connect(path)
    for trigger in ("inserted", "left", "entered", "deleted"):  # before the counts, too
        conn.execute(f"DROP TRIGGER eventing_active_counts_{trigger}")
    conn.execute("DROP TABLE eventing_active_counts")
    conn.execute("DROP INDEX eventing_subscriptions_host")
    conn.execute("ALTER TABLE eventing_subscriptions DROP COLUMN notify_host")
    conn.execute("DROP TABLE schema_versions")  # and before migrations were versioned
    conn.commit()
    conn.close()
    migrated = SubscriptionStore(Store(path))
    assert migrated.store.query("SELECT notify_host FROM eventing_subscriptions")[0][0] == \
        "old.example"
    assert dict(migrated.store.query("SELECT scope, n FROM eventing_active_counts")) == {
        "total": 1, "topic:t-uid": 1, "host:old.example": 1}
    with pytest.raises(LimitReached):
        migrated.insert(_subscription("b", "u", "http://old.example/x"),
                        SubscriptionLimits(per_host=1), T0)


@pytest.mark.parametrize("address, host", [
    ("http://Sink.Test:8080/a", "sink.test"), ("https://10.0.0.1/", "10.0.0.1"),
    ("http://[::1]:9/", "::1"), ("not a url", "not a url"),
])
def test_notify_host(address, host):
    assert notify_host(address) == host


# == the EDN subscription server ==================================================================

def test_an_edn_server_refuses_over_its_topic_limit(tmp_path):
    net = Network(tmp_path, partitioners=("local",), settings={
        "max_subscriptions_per_topic": "2"})
    try:
        net.create_topic()
        lo, hi = np.zeros((3, 3)), np.ones((3, 3))
        net.subscribe(0, lo[0], hi[0], 0)
        net.subscribe(0, lo[1], hi[1], 1, version="2004")
        for version, subcodes in (("2011", ()), ("2004", (V2004.q("EventSourceUnableToProcess"),))):
            client = EventingClient(version, transport=net.transport)
            fault = refused(client.subscribe, f"{server_url(0)}/topics/grid", f"{SINK}/n/9",
                            filter=range_filter(lo[2], hi[2]), dialect=RANGES_DIALECT,
                            expires="PT1H")
            assert fault.code == RECEIVER and fault.subcodes == subcodes
            assert "topic grid" in fault.reason
        assert net.manager(0).store.count(State.ACTIVE) == 2
    finally:
        net.close()


def test_an_edn_server_refuses_over_its_host_limit(tmp_path):
    net = Network(tmp_path, partitioners=("local",), settings={"max_subscriptions_per_host": "1"})
    try:
        net.create_topic()
        lo, hi = np.zeros(3), np.ones(3)
        net.subscribe(0, lo, hi, 0)
        fault = refused(net.subscribe, 0, lo, hi, 1)
        assert fault.code == RECEIVER and "host sink.test" in fault.reason
    finally:
        net.close()


# == helpers ======================================================================================

def _subscription(sid: str, topic: str, address: str = SINK + "/n"):
    from subscription_manager.messages import UNWRAP
    from subscription_manager.store import Subscription
    from wsframework.addressing import EndpointReference
    return Subscription(id=sid, topic=topic, topic_uid=topic + "-uid", version=V2011,
                        soap_version=SoapVersion.SOAP12.value, filter=None,
                        notify_to=EndpointReference(address), end_to=None, format=UNWRAP,
                        expires=T0 + 3600, expires_kind="duration", created=T0)


def _replace_id(subscription, sid: str):
    import dataclasses
    return dataclasses.replace(subscription, id=sid)
