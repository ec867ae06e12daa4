"""An EDN server's edn:EventBatch path: one batch matched with one ``match_many_reporting``
call, positions / replays / refused events as event by event, notified events serialized as
a copy of themselves, strikes counted per event."""
from __future__ import annotations

import copy

import pytest
from lxml import etree

from route_manager import protocol
from subscription_manager.client import EventingClient
from tests.support.edn import EV, TOPIC, Network, event_element, server_url
from tests.support.eventing import SINK, TOKEN
from wsframework import ns
from matchers.vocabulary import EDN, RANGES_DIALECT
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.admin import contracts
from wsframework.client import SoapClient
from wsframework.soap import parse_envelope

XPATH20 = ns.XPATH20_DIALECT_2011


def _deep_event(event_id: int, depth: int) -> etree._Element:
    event = event_element([5, 5, 5], event_id)
    node = event
    for _ in range(depth):
        node = etree.SubElement(node, f"{{{EV}}}nested")
    return event


def _batch(events, dispatcher=None, first_seq=None) -> etree._Element:
    batch = etree.Element(protocol.EVENT_BATCH, nsmap={"edn": EDN})
    for event in events:
        batch.append(event)
    if dispatcher is not None:
        batch.set(protocol.BATCH_DISPATCHER, dispatcher)
        batch.set(protocol.BATCH_FIRST_SEQ, str(first_seq))
    return batch


def _send(net, batch):
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = TOKEN
    client = SoapClient(net.transport)
    address = f"{server_url(0)}/topics/{TOPIC}"
    payload = client.envelope(address, EVENT_BATCH_ACTION, batch, [token])
    response = net.transport.post(address, payload, client.soap_version.content_type,
                                  EVENT_BATCH_ACTION)
    if response.body:
        fault = parse_envelope(response.body).fault()
        assert fault is None, fault
    assert response.status == 202


def _received(net) -> list[tuple[str, str]]:
    out = []
    for url, payload, _, _ in net.sink.messages:
        event = etree.fromstring(payload).find(f".//{{{EV}}}event")
        out.append((url[len(SINK):], event.get("id")))
    return sorted(out)


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, ("local", "local", "local"),
                      settings={"event_max_depth": 4, "filter_strikes": 2})
    network.create_topic()
    network.subscribe(0, [0, 0, 0], [10, 10, 10], 0)   # everything in the space
    network.subscribe(0, [1, 1, 1], [2, 2, 2], 1)      # one corner
    yield network
    network.close()


def test_a_batch_is_matched_once_with_refused_events_and_positions_as_before(net):
    manager = net.manager(0)
    engine = manager.matcher_for(manager.topics.get(TOPIC))
    calls = []
    many = engine.match_many_reporting

    def counting(events, failures, **kwargs):
        calls.append(len(events))
        return many(events, failures, **kwargs)

    def never(*args, **kwargs):
        raise AssertionError("a batch is matched with match_many_reporting, not event by event")

    engine.match_many_reporting = counting
    engine.match = engine.match_reporting = never
    events = [event_element([1.5, 1.5, 1.5], 0), event_element([5, 5, 5], 1),
              _deep_event(2, 4),  # depth 5 > event_max_depth 4: refused
              event_element([11, 11, 11], 3)]  # outside every filter (clamped, unclean)
    _send(net, _batch(events, "disp-1", 7))
    net.drain()
    assert calls == [3]  # the refused event never reaches the engine
    assert _received(net) == [("/n/0", "0"), ("/n/0", "1"), ("/n/1", "0")]
    counters = manager.edn_counters
    assert counters["events_refused"] == 1 and counters["events_received"] == 3
    # seqs follow the events' places in the batch, refused ones included: 7, 8, (9), 10
    assert manager.outbox.position("disp-1") == 10


def test_a_replayed_batch_skips_applied_seqs_and_refused_events_keep_their_place(net):
    _send(net, _batch([event_element([1.5, 1.5, 1.5], 0), _deep_event(1, 6)], "disp-1", 1))
    net.drain()
    assert _received(net) == [("/n/0", "0"), ("/n/1", "0")]
    # the replay holds seq 1 (applied), seq 2 (refused again) and seq 3 (new)
    _send(net, _batch([event_element([1.5, 1.5, 1.5], 0), _deep_event(1, 6),
                       event_element([3, 3, 3], 2)], "disp-1", 1))
    net.drain()
    assert _received(net) == [("/n/0", "0"), ("/n/0", "2"), ("/n/1", "0")]
    counters = net.manager(0).edn_counters
    assert counters["replayed_events_skipped"] == 1 and counters["events_refused"] == 2
    assert net.manager(0).outbox.position("disp-1") == 3


def test_notified_events_are_serialized_as_a_copy_of_themselves(net):
    event = event_element([1.5, 1.5, 1.5], 0)
    event.set("note", "kept")
    expected = etree.tostring(copy.deepcopy(event))
    _send(net, _batch([event, event_element([9, 9, 9], 1)], "disp-1", 1))
    net.drain()
    payloads = [payload for url, payload, _, _ in net.sink.messages if url.endswith("/n/1")]
    assert len(payloads) == 1
    # the event's own bytes, without the declarations of the batch and envelope around it
    assert expected in payloads[0]
    assert b"xmlns:edn" not in expected


def test_strikes_count_per_event_of_a_batch(net):
    client = EventingClient("2011", transport=net.transport)
    # xs:integer('1.5') is a dynamic error on every event with a fractional x0
    client.subscribe(f"{server_url(0)}/topics/{TOPIC}", f"{SINK}/n/hostile",
                     filter="xs:integer(string(e:x0)) > 0", dialect=XPATH20,
                     namespaces={"e": EV}, expires="PT1H")
    manager = net.manager(0)
    assert manager.load() == 3
    # two failures in one batch are two strikes (filter_strikes = 2): the subscription ends
    _send(net, _batch([event_element([1.5, 1.5, 1.5], 0), event_element([2.5, 2.5, 2.5], 1)],
                      "disp-1", 1))
    net.drain()
    assert manager.load() == 2
    assert all(url != "/n/hostile" for url, _ in _received(net))
    assert ("/n/0", "1") in _received(net)  # the others still served


def _wide_event(event_id: int, extra: int) -> etree._Element:
    event = event_element([5, 5, 5], event_id)  # 4 elements
    for _ in range(extra):
        etree.SubElement(event, f"{{{EV}}}extra")
    return event


def test_event_limits_hold_per_event_at_their_bounds(tmp_path):
    net = Network(tmp_path, ("local",), settings={"event_max_depth": 4, "event_max_elements": 12})
    try:
        net.create_topic()
        net.subscribe(0, [0, 0, 0], [10, 10, 10], 0)
        events = [_deep_event(0, 3),   # depth 4: at the bound
                  _deep_event(1, 4),   # depth 5: over
                  _wide_event(2, 8),   # 12 elements: at the bound
                  _wide_event(3, 9),   # 13 elements: over
                  event_element([1, 1, 1], 4)]  # the batch holds 50 elements: no matter
        _send(net, _batch(events, "disp-1", 1))
        net.drain()
        assert _received(net) == [("/n/0", "0"), ("/n/0", "2"), ("/n/0", "4")]
        assert net.manager(0).edn_counters["events_refused"] == 2
        # every event under the bounds, the batch over them together: all published
        _send(net, _batch([_wide_event(10 + k, 8) for k in range(3)], "disp-1", 6))
        net.drain()
        assert len(_received(net)) == 6
    finally:
        net.close()


def test_an_import_leaves_the_topics_index_packed(net):
    from matchers import FilterSpec
    from route_manager.workloads.grid_xml import range_filter
    from subscription_manager.server.moves import subscriptions_element
    from subscription_manager.messages import UNWRAP
    from subscription_manager.store import Subscription
    from subscription_manager.versions import VERSIONS
    from wsframework.addressing import EndpointReference
    from wsframework.soap import SoapVersion

    manager = net.manager(0)
    imported = [Subscription(
        id=f"imp{i}", topic=TOPIC, topic_uid="", version=VERSIONS["2011"],
        soap_version=SoapVersion.SOAP12.value,
        filter=FilterSpec(RANGES_DIALECT, range_filter([i % 9, 0, 0], [i % 9 + 1, 10, 10])),
        notify_to=EndpointReference(f"{SINK}/n/imp{i}"), end_to=None, format=UNWRAP,
        expires=None, expires_kind="duration", created=0.0) for i in range(300)]
    assert manager.mover.import_(TOPIC, subscriptions_element(TOPIC, imported)) == 300
    index = manager.matcher_for(manager.topics.get(TOPIC))._index
    assert index._singles == 0 and len(index) == 302  # the two of the fixture as well
    _send(net, _batch([event_element([3.5, 5, 5], 0)], "disp-1", 1))
    net.drain()
    assert ("/n/imp3", "0") in _received(net) and ("/n/imp2", "0") not in _received(net)
