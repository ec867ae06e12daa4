"""What the event source keeps per subscription and per failing filter stays bounded: no
subscription keeps its Subscribe request document, and strikes of subscriptions that left
are forgotten. In process."""
from __future__ import annotations

import gc

import pytest

from tests.support.eventing import Harness, quote


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


@pytest.mark.parametrize("version", ["2004", "2011"])
def test_a_subscription_keeps_no_element_of_its_request(harness, version):
    sub = harness.subscribe(version, filter="//q:quote[q:price > 3]", namespaces={"q": "urn:q"},
                            expires="PT1H")
    view = harness.manager.view
    assert view.subscriptions[sub.id].filter.content is None
    assert view._installed[sub.id].filter.content is None
    # what the matcher holds is the stored subscription itself: no record apiece
    assert view._installed[sub.id] is view.subscriptions[sub.id]


def test_strikes_of_subscriptions_that_left_are_forgotten(harness):
    manager = harness.manager
    live = harness.subscribe("2011", filter="//q:quote", namespaces={"q": "urn:q"},
                             expires="PT1H")
    manager.strikes.count({f"gone-{i}": "test" for i in range(150)})
    manager.strikes.count({live.id: "test"})
    gc.collect()
    assert manager.strikes.table.counts() == {live.id: 1}


def test_subscriptions_read_from_the_store_share_what_they_repeat(harness):
    made = [harness.subscribe("2011", notify_path=f"/n/{i}", expires="PT1H") for i in range(3)]
    stored = harness.manager.store.active()
    assert len(stored) == len(made)
    first, *others = stored
    for other in others:
        for name in ("topic", "topic_uid", "soap_version", "format", "expires_kind"):
            assert getattr(other, name) is getattr(first, name), name
        assert other.notify_to.address != first.notify_to.address
    assert not hasattr(first, "__dict__")  # slots: no per-object dictionary


def test_subscriptions_without_reference_parameters_hold_no_template_of_their_own(harness):
    from lxml import etree
    from subscription_manager.notifications import shared_template
    from tests.support.eventing import BASE, SINK
    from wsframework.addressing import EndpointReference
    made = [harness.subscribe("2011", notify_path=f"/n/{i}&x", expires="PT1H") for i in range(2)]
    parameter = etree.fromstring('<app:Key xmlns:app="urn:app">k-1</app:Key>')
    own = harness.client("2011").subscribe(
        f"{BASE}/topics/stocks", EndpointReference(SINK + "/rp", (parameter,)), expires="PT1H")
    view = harness.manager.view
    assert set(view.templates) == {own.id}  # only the one with reference parameters
    one, two = (view.template_of(s.id) for s in made)
    assert one is two is shared_template(view.subscriptions[made[0].id].soap_version,
                                         view.subscriptions[made[0].id].version.wsa, False)
    message = two.render(SINK + "/n/1&x", "urn:a", b"<e/>", "urn:m")
    assert message.count(b"<wsa:To") == 1 and b"/n/1&amp;x</wsa:To>" in message
    mine = view.template_of(own.id)
    assert mine is not one and b"k-1</app:Key>" in mine.render(SINK + "/rp", "urn:a", b"<e/>")
    assert view.template_of("no-such-subscription") is None
    harness.publish(quote(5))
    harness.drain()
    assert {url for url, *_ in harness.sink.messages} == {SINK + "/n/0&x", SINK + "/n/1&x",
                                                          SINK + "/rp"}


def test_what_the_view_records_as_installed_follows_each_newer_row(harness):
    """A renewed subscription's record is its newest row, not the row it replaced (which
    would then stay alive beside it); one that leaves takes its filter out of the matcher."""
    client = harness.client("2011")
    made = harness.subscribe("2011", filter="//q:quote[q:price > 3]", namespaces={"q": "urn:q"},
                             expires="PT1H")
    view = harness.manager.view
    first = view.subscriptions[made.id]
    client.renew(made, expires="PT2H")
    renewed = view.subscriptions[made.id]
    assert renewed is not first and renewed.expires > first.expires
    assert view._installed[made.id] is renewed
    entry = harness.service.topics.get("stocks")
    assert made.id in view._matcher_for(entry)
    client.unsubscribe(made)
    assert made.id not in view._installed and made.id not in view._matcher_for(entry)
    assert view.packed_filter(made.id) is None
