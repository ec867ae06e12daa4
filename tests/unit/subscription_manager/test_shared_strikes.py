"""Filter strikes are counted in the service's store: the workers of one service (here, two
managers over one data directory) add to one count, a restart keeps it, the subscription
ends once at the limit, and the count goes when the subscription does. In process."""
from __future__ import annotations

import threading

import pytest

from subscription_manager.store import SubscriptionStore
from tests.support.eventing import SINK, Harness, RecordingSink, quote
from wsframework.store import Store

# keep_subscriptions_on_shutdown: closing a harness is a worker stopping, not the service
SHARED = {"filter_strikes": "3", "keep_subscriptions_on_shutdown": "true"}
FAILING = {"filter": "$nope = 1"}  # 2004/08 XPath: an unbound variable fails at evaluation


def _ends(sink):
    return [(e.body.find("{*}Status").text, e.body.find("{*}Reason").text)
            for e in sink.envelopes("/end")]


@pytest.fixture
def sink():
    return RecordingSink()


def test_workers_add_to_one_count_that_a_restart_keeps(tmp_path, sink):
    a = Harness(tmp_path, settings=SHARED, sink=sink)
    b = Harness(tmp_path, settings=SHARED, sink=sink)
    try:
        sub = a.subscribe("2004", notify_path="/bad", end_to=f"{SINK}/end", **FAILING)
        a.publish(quote(1))
        b.publish(quote(2))  # b learns of the subscription at the start of the request
        assert a.manager.store.get(sub.id).is_active  # 2 strikes of 3
    finally:
        a.close()
        b.close()
    restarted = Harness(tmp_path, settings=SHARED, sink=sink)
    try:
        restarted.publish(quote(3))  # the third strike: it ends the subscription
        restarted.drain()
        assert not restarted.manager.store.get(sub.id).is_active
        [(status, reason)] = _ends(sink)
        assert status.endswith("SourceCancelling") and "on 3 events" in reason
        assert sink.at("/bad") == []
        restarted.publish(quote(4))  # no fourth strike against an ended subscription
        restarted.drain()
        assert len(_ends(sink)) == 1
    finally:
        restarted.close()


def test_two_workers_reaching_the_limit_at_once_end_the_subscription_once(tmp_path, sink):
    settings = {**SHARED, "filter_strikes": "5"}
    a = Harness(tmp_path, settings=settings, sink=sink)
    b = Harness(tmp_path, settings=settings, sink=sink)
    try:
        sub = a.subscribe("2011", end_to=f"{SINK}/end")
        b.manager.sync()
        start = threading.Barrier(2)

        def strike(manager):
            start.wait()
            for _ in range(20):
                manager.strikes.count({sub.id: "test"})

        threads = [threading.Thread(target=strike, args=(h.manager,)) for h in (a, b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        a.drain()
        b.drain()
        assert not a.manager.store.get(sub.id).is_active
        [(status, reason)] = _ends(sink)
        assert status.endswith("SourceCancelling") and "on 5 events" in reason
        for h in (a, b):  # the worker that lost the race learns of the end from the store
            h.manager.sync()
            assert sub.id not in h.manager.view.subscriptions
        assert a.manager.strikes.table.counts() == {}
    finally:
        a.close()
        b.close()


def test_the_count_goes_with_a_subscription_ended_otherwise(tmp_path):
    h = Harness(tmp_path, settings=SHARED)
    try:
        kept = h.subscribe("2011")
        gone = h.subscribe("2011")
        h.manager.strikes.count({kept.id: "test", gone.id: "test"})
        assert h.manager.strikes.table.counts() == {kept.id: 1, gone.id: 1}
        restarted = Harness(tmp_path, settings=SHARED, sink=h.sink)  # another worker sees them
        assert restarted.manager.strikes.table.count(kept.id) == 1
        restarted.close()
        h.client("2011").unsubscribe(gone)
        assert h.manager.strikes.table.counts() == {kept.id: 1}
        h.client("2011").renew(kept, expires="PT1H")  # still active: the count stays
        assert h.manager.strikes.table.counts() == {kept.id: 1}
    finally:
        h.close()


@pytest.mark.sqlite_only("reads sqlite_master")
def test_the_schema_is_made_once_by_workers_opening_the_store_at_once(tmp_path):
    from subscription_manager.strike_table import StrikeTable
    path = tmp_path / "store.db"
    SubscriptionStore(Store(path))  # a store made before strikes were kept in it
    start = threading.Barrier(8)
    errors = []

    def open_store():
        try:
            start.wait()
            StrikeTable(SubscriptionStore(Store(path)))
        except Exception as error:  # reported below: a thread's exception is lost otherwise
            errors.append(error)

    threads = [threading.Thread(target=open_store) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    names = {row[0] for row in Store(path).query(
        "SELECT name FROM sqlite_master WHERE name LIKE 'eventing_filter_strikes%'")}
    assert names == {"eventing_filter_strikes", "eventing_filter_strikes_left_active",
                     "eventing_filter_strikes_deleted"}
