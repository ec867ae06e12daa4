"""Idempotent Subscribe (issue 13): a repeated Subscribe -- same wsa:MessageID, same body --
gets the subscription the first one made, on a source and across EDN servers (a forward
that timed out is sent again under the same MessageID); another client reusing a MessageID
gets its own subscription; an over-long MessageID is accepted but not remembered. The
store keeps one active subscription per key (a unique index, migrated for old tables).
In process, no socket."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import requests

from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient, SubscriptionHandle
from subscription_manager.server.relay import MessageIdClient
from subscription_manager.lifecycle import State
from subscription_manager.messages import UNWRAP
from subscription_manager.operations import MAX_MESSAGE_ID
from subscription_manager.store import DuplicateRequest, Subscription, SubscriptionStore
from subscription_manager.versions import V2011, VERSIONS
from tests.support.edn import Network, server_url
from tests.support.eventing import BASE, SINK, Harness
from wsframework.addressing import EndpointReference
from wsframework.soap import SoapVersion
from wsframework.store import Store
from wsframework.transport import TransportError

T0 = 1_700_000_000.0


def subscribe(transport, address, notify_to, message_id, *, version="2011",
              filter_text="price > 3", dialect=None, expires="PT1H") -> str:
    """Subscribe under ``message_id``; the subscription's identifier."""
    client = EventingClient(version, transport=transport)
    client.soap = MessageIdClient(transport, message_id, wsa_version=VERSIONS[version].wsa)
    from subscription_manager.client import subscribe_body
    body = subscribe_body(version, notify_to, filter=filter_text, dialect=dialect,
                          expires=expires)
    handle: SubscriptionHandle = client.subscribe_raw(address, body)
    return handle.id


@pytest.fixture
def source(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


def active(store) -> int:
    return store.count(State.ACTIVE)


# == a source =================================================================================

@pytest.mark.parametrize("version", ["2011", "2004"])
def test_a_repeated_subscribe_gets_the_first_subscription(source, version):
    at = f"{BASE}/topics/stocks"
    first = subscribe(source.transport, at, SINK + "/a", "urn:uuid:one", version=version,
                      filter_text="/*")
    again = subscribe(source.transport, at, SINK + "/a", "urn:uuid:one", version=version,
                      filter_text="/*")
    assert again == first
    assert active(source.manager.store) == 1
    other = subscribe(source.transport, at, SINK + "/a", "urn:uuid:two", version=version,
                      filter_text="/*")
    assert other != first and active(source.manager.store) == 2


def test_another_client_reusing_a_message_id_gets_its_own_subscription(source):
    at = f"{BASE}/topics/stocks"
    victim = subscribe(source.transport, at, SINK + "/victim", "urn:uuid:seen", filter_text="/*")
    for notify, text in ((SINK + "/thief", "/*"), (SINK + "/victim", "/*[1]")):
        thief = subscribe(source.transport, at, notify, "urn:uuid:seen", filter_text=text)
        assert thief != victim
    # another topic: another subscription too
    source.create_topic("bonds")
    bonds = subscribe(source.transport, f"{BASE}/topics/bonds", SINK + "/victim", "urn:uuid:seen",
                      filter_text="/*")
    assert bonds != victim
    assert active(source.manager.store) == 4


def test_an_ended_subscription_gives_its_key_up(source):
    at = f"{BASE}/topics/stocks"
    first = subscribe(source.transport, at, SINK + "/a", "urn:uuid:k", filter_text="/*")
    client = source.client()
    handle = SubscriptionHandle(V2011, _manager_epr(source, first), None)
    client.unsubscribe(handle)
    again = subscribe(source.transport, at, SINK + "/a", "urn:uuid:k", filter_text="/*")
    assert again != first and active(source.manager.store) == 1


def _manager_epr(source, sid) -> EndpointReference:
    from subscription_manager import messages as msg
    return msg.manager_epr(V2011, source.manager.manager_address, sid)


@pytest.mark.parametrize("length", [MAX_MESSAGE_ID + 1, 4000])
def test_an_over_long_message_id_is_accepted_but_not_remembered(source, length):
    at = f"{BASE}/topics/stocks"
    message_id = "urn:x:" + "a" * (length - 6)
    first = subscribe(source.transport, at, SINK + "/a", message_id, filter_text="/*")
    again = subscribe(source.transport, at, SINK + "/a", message_id, filter_text="/*")
    assert first != again and active(source.manager.store) == 2
    keys = source.manager.store.store.query(
        "SELECT request_key FROM eventing_subscriptions")
    assert all(row[0] is None for row in keys)


def test_only_a_bounded_digest_is_stored(source):
    message_id = "urn:x:" + "\u00e9" * (MAX_MESSAGE_ID - 10)
    subscribe(source.transport, f"{BASE}/topics/stocks", SINK + "/a", message_id,
              filter_text="/*")
    [[key]] = source.manager.store.store.query("SELECT request_key FROM eventing_subscriptions")
    assert len(key) == 64 and message_id not in key


# == the store ================================================================================

def _subscription(sid: str, topic: str = "t") -> Subscription:
    return Subscription(id=sid, topic=topic, topic_uid=topic + "-uid", version=V2011,
                        soap_version=SoapVersion.SOAP12.value, filter=None,
                        notify_to=EndpointReference(SINK + "/n"), end_to=None, format=UNWRAP,
                        expires=T0 + 3600, expires_kind="duration", created=T0)


def test_the_store_keeps_one_active_subscription_per_key(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    store.insert(_subscription("a"), now=T0, request_key="k" * 64)
    with pytest.raises(DuplicateRequest) as info:
        store.insert(_subscription("b"), now=T0, request_key="k" * 64)
    assert info.value.existing.id == "a" and store.count() == 1
    assert store.by_request_key("k" * 64, T0).id == "a"
    # expired: the key is free again
    assert store.by_request_key("k" * 64, T0 + 7200) is None
    import dataclasses
    later = dataclasses.replace(_subscription("c"), expires=T0 + 10800)
    store.insert(later, now=T0 + 7200, request_key="k" * 64)
    assert store.by_request_key("k" * 64, T0 + 7200).id == "c"
    with pytest.raises(store.store.integrity_error):  # the index itself refuses a second holder
        with store.store.transaction() as conn:
            conn.execute("UPDATE eventing_subscriptions SET request_key = ? WHERE id = 'a'",
                         ("k" * 64,))


@pytest.mark.sqlite_only("a SQLite file from before the column existed")
def test_a_table_from_before_the_request_key_column_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    store = SubscriptionStore(Store(path))
    store.insert(_subscription("a"))
    store.store.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX eventing_subscriptions_request")
    conn.execute("ALTER TABLE eventing_subscriptions DROP COLUMN request_key")
    conn.execute("DROP TABLE schema_versions")  # and before migrations were versioned
    conn.commit()
    conn.close()
    migrated = SubscriptionStore(Store(path))
    assert migrated.get("a").is_active
    migrated.insert(_subscription("b"), now=T0, request_key="k")
    with pytest.raises(DuplicateRequest):
        migrated.insert(_subscription("c"), now=T0, request_key="k")


# == EDN servers: a forward that timed out is sent again =====================================

class TimesOutOnce:
    """Delivers the first forwarded Subscribe, then reports a read timeout (as requests does);
    ``posts`` counts the forwarded Subscribes. Other peer messages (placement claims) pass."""

    def __init__(self, inner, times: int = 1):
        self.inner = inner
        self.left = times
        self.posts = 0

    def post(self, url, payload, content_type, soap_action):
        if "/topics/" not in url:
            return self.inner.post(url, payload, content_type, soap_action)
        self.posts += 1
        response = self.inner.post(url, payload, content_type, soap_action)
        if self.left > 0:
            self.left -= 1
            try:
                raise requests.exceptions.ReadTimeout("read timed out")
            except requests.exceptions.ReadTimeout as cause:
                raise TransportError("read timed out") from cause
        return response


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, partitioners=("rtree", "rtree", "rtree"))
    network.create_topic()
    network.step(2)
    yield network
    network.close()


def _total(net) -> int:
    return sum(m.store.count(State.ACTIVE) for m in net.managers)


def test_a_forward_that_timed_out_is_retried_under_the_same_message_id(net):
    first = net.manager(0)
    first.router.choose = lambda *args, **kwargs: "s1"
    first.peer_transport = TimesOutOnce(net.transport)
    lo, hi = np.zeros(3), np.ones(3)
    sid = subscribe(net.transport, f"{server_url(0)}/topics/grid", SINK + "/n/0", "urn:uuid:f",
                    filter_text=range_filter(lo, hi), dialect=RANGES_DIALECT)
    assert first.peer_transport.posts == 2
    assert net.manager(1).store.get(sid).is_active
    assert _total(net) == 1
    assert first.stats().get("forward_retries") in (1, "1")
    # the client retries at another server, which places it on s1 too: still one
    net.manager(2).router.choose = lambda *args, **kwargs: "s1"
    again = subscribe(net.transport, f"{server_url(2)}/topics/grid", SINK + "/n/0", "urn:uuid:f",
                      filter_text=range_filter(lo, hi), dialect=RANGES_DIALECT)
    assert again == sid and _total(net) == 1


def test_a_forward_that_keeps_timing_out_ends_with_a_fault_within_the_deadline(tmp_path):
    network = Network(tmp_path, partitioners=("rtree", "rtree"),
                      settings={"forward_timeout": "0.3"})
    try:
        network.create_topic()
        network.step(2)
        first = network.manager(0)
        first.router.choose = lambda *args, **kwargs: "s1"
        first.peer_transport = TimesOutOnce(network.transport, times=10 ** 6)
        from wsframework.exceptions import SoapFault
        with pytest.raises(SoapFault) as info:
            subscribe(network.transport, f"{server_url(0)}/topics/grid", SINK + "/n/0",
                      "urn:uuid:g", filter_text=range_filter(np.zeros(3), np.ones(3)),
                      dialect=RANGES_DIALECT)
        assert "may exist there" in info.value.reason
        assert first.peer_transport.posts >= 2
        assert _total(network) == 1  # every attempt reached s1; one subscription there
    finally:
        network.close()


def test_a_forward_without_a_usable_message_id_gets_one_minted(net):
    from subscription_manager.server.relay import forward_message_id

    class Msg:
        def __init__(self, mid):
            self.addressing = type("A", (), {"message_id": mid})()

    assert forward_message_id(Msg("urn:uuid:mine")) == "urn:uuid:mine"
    for bad in (None, "", "x" * (MAX_MESSAGE_ID + 1)):
        minted = forward_message_id(Msg(bad))
        assert minted.startswith("urn:uuid:") and len(minted) <= MAX_MESSAGE_ID


def test_a_repeated_subscribe_goes_where_the_first_was_placed(net):
    """The first server remembers its choice: a repeat reaches the subscription although
    the router would now choose another server."""
    first = net.manager(0)
    first.router.choose = lambda *args, **kwargs: "s1"
    lo, hi = np.zeros(3), np.ones(3)
    at = f"{server_url(0)}/topics/grid"
    sid = subscribe(net.transport, at, SINK + "/n/0", "urn:uuid:p",
                    filter_text=range_filter(lo, hi), dialect=RANGES_DIALECT)
    first.router.choose = lambda *args, **kwargs: "s2"
    again = subscribe(net.transport, at, SINK + "/n/0", "urn:uuid:p",
                      filter_text=range_filter(lo, hi), dialect=RANGES_DIALECT)
    assert again == sid and _total(net) == 1
    # another request goes where the router says now
    other = subscribe(net.transport, at, SINK + "/n/1", "urn:uuid:q",
                      filter_text=range_filter(lo, hi), dialect=RANGES_DIALECT)
    assert net.manager(2).store.get(other).is_active and _total(net) == 2


def test_the_placements_remembered_are_bounded(net, monkeypatch):
    from subscription_manager.server import subscribe_placement as placement
    monkeypatch.setattr(placement, "PLACEMENT_MEMORY_ROWS", 5)
    monkeypatch.setattr(placement, "PLACEMENT_TRIM_EVERY", 3)
    first = net.manager(0)
    for k in range(20):
        first.placement._remember(f"key-{k}", "s1")
    rows = first.service.store.query("SELECT request_key FROM edn_placements")
    assert len(rows) <= 5 + 3
    assert first.placement._remembered("key-19") == "s1"
