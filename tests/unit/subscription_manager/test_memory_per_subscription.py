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
