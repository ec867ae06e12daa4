"""The server's one publication path, ``SubscriptionManager.publish_many``: a plain
publication is a list of one event, the dispatcher's edn:EventBatch a list of its events with
the dispatcher's position; one event-limit check answers the same for an event alone and in
a batch; NotifyWhen reads the matched element (no second parse). In process, no sockets."""
from __future__ import annotations

import copy
import re

import pytest
from lxml import etree

from matchers.vocabulary import EDN
from route_manager import protocol
from subscription_manager.client import subscribe_body
from subscription_manager.event_limits import EventLimits
from subscription_manager.notify_when import notify_when_element
from tests.support.edn import EV, Network, event_element
from tests.support.eventing import BASE, SINK, Harness, Q, quote
from tests.unit.subscription_manager.test_edn_event_batch import _batch, _send


def _recording(manager) -> list[tuple[int, object]]:
    """Wrap ``manager.publish_many``; the list gets (number of events, position) per call."""
    calls = []
    original = manager.publish_many

    def publish_many(entry, events, **kwargs):
        calls.append((len(events), kwargs.get("position")))
        return original(entry, events, **kwargs)
    manager.publish_many = publish_many
    return calls


def _prices(sink, path):
    return [float(re.search(rb"<q:price>(.*?)</q:price>", m[1]).group(1)) for m in sink.at(path)]


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, settings={"event_max_depth": "4"})
    yield h
    h.close()


def test_a_plain_publication_is_publish_many_of_one_event(harness):
    harness.subscribe("2011", filter="q:price > 3", namespaces={"q": Q})
    calls = _recording(harness.manager)
    harness.publish(quote(5))
    harness.publish(quote(1))
    harness.drain()
    assert calls == [(1, None), (1, None)]
    assert len(harness.sink.messages) == 1
    assert harness.manager.counters["published"] == 2


def test_publish_many_reports_what_it_did(harness):
    harness.subscribe("2011", filter="q:price > 3", namespaces={"q": Q})
    entry = harness.service.topics.get("stocks")
    deep = etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:a><q:b><q:c><q:d/></q:c></q:b></q:a>'
                            f'</q:quote>')
    events = [etree.fromstring(quote(5)), deep, etree.fromstring(quote(2)),
              etree.fromstring(quote(7))]
    published = harness.manager.publish_many(entry, events, action="urn:a")
    harness.drain()
    assert published.refused == {1: "nested deeper than 4 elements"}
    assert (published.queued, published.received, published.skipped) == (2, 3, 0)
    assert _prices(harness.sink, "/notify") == [5.0, 7.0]


def test_a_refused_plain_publication_is_a_fault_and_matches_nothing(harness):
    harness.subscribe("2011")
    deep = f'<q:quote xmlns:q="{Q}"><q:a><q:b><q:c><q:d/></q:c></q:b></q:a></q:quote>'
    response = harness.publish(deep)
    assert response.status >= 400 and b"nested deeper than 4 elements" in response.body
    assert harness.manager.counters["published"] == 0


@pytest.mark.parametrize("xml,why", [
    (f'<q:quote xmlns:q="{Q}">' + "<q:x/>" * 12 + "</q:quote>", "more than 12 elements"),
    (f'<q:quote xmlns:q="{Q}">' + "<q:x/>" * 11 + "</q:quote>", None),
    (f'<q:quote xmlns:q="{Q}"><q:a><q:b><q:c/></q:b></q:a></q:quote>', None),
    (f'<q:quote xmlns:q="{Q}"><q:a><q:b><q:c><q:d/></q:c></q:b></q:a></q:quote>',
     "nested deeper than 4 elements"),
    (f'<q:quote xmlns:q="{Q}"><q:a><q:b><q:c><q:d/>' + "<q:x/>" * 8 + "</q:c></q:b></q:a>"
     "</q:quote>", "more than 12 elements and nested deeper than 4 elements"),
])
def test_the_event_limits_answer_alike_for_an_event_alone_and_in_a_batch(xml, why):
    limits = EventLimits(max_elements=12, max_depth=4)
    alone = etree.fromstring(xml)
    assert limits.why_over(alone) == why
    batch = etree.Element(protocol.EVENT_BATCH, nsmap={"edn": EDN})
    batch.append(etree.fromstring(quote(1)))
    batch.append(copy.deepcopy(alone))
    assert limits.refusals(list(batch)) == ({} if why is None else {1: why})


def _notify_when_subscription(harness, path, changed_by):
    body = subscribe_body("2011", SINK + path, namespaces={"q": Q})
    body.append(notify_when_element("/q:quote/q:price", changed_by, None, namespaces={"q": Q}))
    return harness.client("2011").subscribe_raw(f"{BASE}/topics/stocks", body)


def test_notify_when_reads_the_matched_element_without_parsing_it_again(harness, monkeypatch):
    import subscription_manager.manager as manager_module

    def no_parse(*args, **kwargs):
        raise AssertionError("the event was parsed again")
    monkeypatch.setattr(manager_module, "parse_xml", no_parse)
    _notify_when_subscription(harness, "/nw", "5")
    for price in (100, 102, 106, 104):
        harness.publish(quote(price))
    # the events of a batch sit in a parent: the absolute Value path still starts at each
    wrapper = etree.Element("batch")
    for price in (108, 112, 115):
        wrapper.append(etree.fromstring(quote(price)))
    harness.manager.publish_many(harness.service.topics.get("stocks"), list(wrapper))
    harness.drain()
    assert _prices(harness.sink, "/nw") == [100.0, 106.0, 112.0]


def test_an_event_batch_is_one_publish_many_with_the_dispatchers_position(tmp_path):
    net = Network(tmp_path, ("local",), settings={"event_max_depth": 4})
    try:
        net.create_topic()
        net.subscribe(0, [0, 0, 0], [10, 10, 10], 0)
        manager = net.manager(0)
        calls = _recording(manager)
        deep = event_element([5, 5, 5], 1)
        node = deep
        for _ in range(4):
            node = etree.SubElement(node, f"{{{EV}}}nested")
        _send(net, _batch([event_element([1, 1, 1], 0), deep, event_element([2, 2, 2], 2)],
                          "disp-1", 7))
        _send(net, _batch([event_element([2, 2, 2], 2), event_element([3, 3, 3], 3)],
                          "disp-1", 9))  # a replay: seq 9 was applied
        net.drain()
        assert calls == [(3, ("disp-1", 7)), (2, ("disp-1", 9))]
        ids = sorted(etree.fromstring(payload).find(f".//{{{EV}}}event").get("id")
                     for _, payload, _, _ in net.sink.messages)
        assert ids == ["0", "2", "3"]
        counters = manager.edn_counters
        assert (counters["events_received"], counters["events_refused"],
                counters["replayed_events_skipped"]) == (3, 1, 1)
        assert manager.counters["published"] == 3
        assert manager.outbox.position("disp-1") == 10
    finally:
        net.close()
