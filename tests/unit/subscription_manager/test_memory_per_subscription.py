"""What the event source keeps per subscription and per failing filter stays bounded: no
subscription keeps its Subscribe request document, and strikes of subscriptions that left
are forgotten. In process."""
from __future__ import annotations

import gc

import pytest

from tests.support.eventing import Harness


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
    assert view._installed[sub.id][1].content is None
    assert view._installed[sub.id][1] == view.subscriptions[sub.id].filter


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


def test_notification_templates_keep_only_their_address_apart(harness):
    from subscription_manager.notifications import NotificationTemplate
    made = [harness.subscribe("2011", notify_path=f"/n/{i}", expires="PT1H") for i in range(2)]
    one, two = (NotificationTemplate(harness.manager.view.subscriptions[s.id]) for s in made)
    for part in ("_open", "_after_to", "_after_action", "_after_id"):
        assert getattr(one, part) is getattr(two, part), part
    assert one._to != two._to
    assert two.render("urn:a", b"<e/>", "urn:m").count(two._to) == 1
