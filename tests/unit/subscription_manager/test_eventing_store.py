"""Durability and multi-process consistency: a new Service over the same data re-matches;
two Services on one database behave like two gunicorn workers; shutdown and topic deletion
end subscriptions with the right SubscriptionEnd, exactly once."""
from __future__ import annotations

import threading
import time

import pytest
from lxml import etree

from subscription_manager import SubscriptionManager
from subscription_manager.lifecycle import State
from subscription_manager.store import SubscriptionStore
from subscription_manager.versions import V2004, V2011
from tests.support.eventing import SINK, Harness, RecordingSink, quote
from wsframework.exceptions import SoapFault

STATUS = {V2004.namespace: V2004, V2011.namespace: V2011}


def end_statuses(sink: RecordingSink, path="/end"):
    out = []
    for envelope in sink.envelopes(path):
        version = STATUS[envelope.body.tag[1:].split("}")[0]]
        out.append(envelope.body.find(version.q("Status")).text.rsplit("/", 1)[1])
    return out


def test_new_service_over_same_data_rematches(tmp_path):
    first = Harness(tmp_path)
    subs = [first.subscribe(name, filter="//q:price > 30", namespaces={"q": "urn:quotes"},
                            notify_path=f"/{name}", expires="PT1H") for name in ("2004", "2011")]
    # No close(): the process "dies" here, as with kill -9.
    second = Harness(tmp_path, sink=first.sink)
    try:
        assert second.manager.counters["subscriptions"] == 2
        second.publish(quote(10))
        second.publish(quote(50))
        second.drain()
        assert len(first.sink.at("/2004")) == 1 and len(first.sink.at("/2011")) == 1
        for name, sub in zip(("2004", "2011"), subs):
            assert second.client(name).get_status(sub)
    finally:
        second.close()
        first.manager.deliverer.close(0)


def test_two_services_on_one_database_stay_consistent(tmp_path):
    sink = RecordingSink()
    a = Harness(tmp_path, sink=sink)
    b = Harness(tmp_path, sink=sink)
    try:
        sub = a.subscribe("2011", filter="q:price > 30", namespaces={"q": "urn:quotes"},
                          expires="PT1H")
        b.publish(quote(40))  # worker B learns about A's subscription at the request
        b.drain()
        assert len(sink.at("/notify")) == 1
        assert b.client("2011").renew(sub, "PT2H") == "PT2H"
        assert a.client("2011").get_status(sub).startswith("PT1H59M") or \
            a.client("2011").get_status(sub) == "PT2H"
        b.client("2011").unsubscribe(sub)
        a.publish(quote(40))
        a.drain()
        assert len(sink.at("/notify")) == 1
        with pytest.raises(SoapFault):
            a.client("2011").get_status(sub)
        assert a.manager.counters["subscriptions"] == b.manager.counters["subscriptions"] == 0
    finally:
        a.close()
        b.close()


def test_subscribe_on_one_worker_is_seen_by_the_others_sweep(tmp_path):
    a = Harness(tmp_path)
    b = Harness(tmp_path, sink=a.sink)
    try:
        a.subscribe("2004")
        assert b.manager.counters["subscriptions"] == 0
        b.manager.sweep()  # the sweeper also keeps an idle worker current
        assert b.manager.counters["subscriptions"] == 1
    finally:
        a.close()
        b.close()


def test_graceful_close_sends_source_shutting_down_once(tmp_path):
    sink = RecordingSink()
    a = Harness(tmp_path, sink=sink)
    b = Harness(tmp_path, sink=sink)
    subs = [a.subscribe(name, end_to=SINK + "/end") for name in ("2004", "2011")]
    a.subscribe("2011", notify_path="/no-end-to")
    a.close()
    b.close()  # the other worker finds nothing left to end
    assert sorted(end_statuses(sink)) == ["SourceShuttingDown", "SourceShuttingDown"]
    reopened = Harness(tmp_path, sink=sink)
    try:
        assert reopened.manager.counters["subscriptions"] == 0
        for sub in subs:
            assert reopened.manager.store.get(sub.id).status is State.ENDED
    finally:
        reopened.close()


def test_keep_subscriptions_on_shutdown(tmp_path):
    h = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": "true"})
    sub = h.subscribe("2011", end_to=SINK + "/end")
    h.close()
    assert h.sink.at("/end") == []
    again = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": "true"}, sink=h.sink)
    try:
        assert again.manager.store.get(sub.id).status is State.ACTIVE
        again.publish(quote(1))
        again.drain()
        assert len(h.sink.at("/notify")) == 1
    finally:
        again.close()


def test_topic_deletion_sends_source_cancelling_once_across_workers(tmp_path):
    sink = RecordingSink()
    a = Harness(tmp_path, sink=sink, topics=("stocks", "bonds"))
    b = Harness(tmp_path, sink=sink, topics=())
    try:
        gone = a.subscribe("2011", end_to=SINK + "/end")
        kept = a.subscribe("2004", topic="bonds", end_to=SINK + "/end")
        b.manager.sweep()
        a.admin.delete_topic("stocks")
        b.manager.sweep()  # B notices the deletion too, but A already ended them
        a.drain()
        b.drain()
        assert end_statuses(sink) == ["SourceCancelling"]
        assert a.manager.store.get(gone.id).status is State.ENDED
        assert a.manager.store.get(kept.id).status is State.ACTIVE
        # A topic re-created under the same name starts empty.
        a.admin.create_topic("stocks")
        b.publish(quote(1))
        b.drain()
        assert sink.at("/notify") == []
    finally:
        a.close()
        b.close()


def test_subscription_of_a_vanished_topic_is_ended_at_load(tmp_path):
    a = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": "true"})
    sub = a.subscribe("2011", end_to=SINK + "/end")
    a.close()
    # Remove the topic behind the source's back (as another role sharing the data might).
    with a.service.store.__class__(tmp_path / "edn.db").transaction() as conn:
        conn.execute("DELETE FROM ns_topics WHERE name = 'stocks'")
        conn.execute("UPDATE generations SET value = value + 1 WHERE name = 'namespace:topics'")
    b = Harness(tmp_path, topics=(), sink=a.sink)
    try:
        assert b.manager.store.get(sub.id).status is State.ENDED
        b.drain()
        assert end_statuses(a.sink) == ["SourceCancelling"]
    finally:
        b.close()


def test_hooks_for_subclasses(tmp_path):
    events = []

    class Recording(SubscriptionManager):
        def on_subscription_added(self, subscription, *, local):
            events.append(("added", subscription.id, local))

        def on_subscription_removed(self, subscription, *, local):
            events.append(("removed", subscription.id, subscription.status.value, local))

        def on_event_matched(self, entry, event, action, subscription_ids):
            events.append(("matched", entry.name, action, tuple(subscription_ids)))
            return []  # swallow: nothing is delivered

    a = Harness(tmp_path, manager_class=Recording)
    b = Harness(tmp_path, manager_class=Recording, sink=a.sink)
    try:
        sub = a.subscribe("2011")
        a.publish(quote(1), action="urn:x")
        b.manager.sweep()
        a.client("2011").unsubscribe(sub)
        b.manager.sweep()
        a.drain()
        assert a.sink.messages == []
        assert events == [("added", sub.id, True),
                          ("matched", "stocks", "urn:x", (sub.id,)),
                          ("added", sub.id, False),
                          ("removed", sub.id, "unsubscribed", True),
                          ("removed", sub.id, "unsubscribed", False)]
    finally:
        a.close()
        b.close()


def test_matcher_comes_from_the_namespace_entry(tmp_path):
    h = Harness(tmp_path)
    try:
        sub = h.subscribe("2011", filter="true()")
        entry = h.service.topics.get("stocks")
        assert sub.id in entry.matcher
        h.client("2011").unsubscribe(sub)
        assert sub.id not in entry.matcher
    finally:
        h.close()


@pytest.mark.sqlite_only("counts statements with sqlite3's trace callback")
@pytest.mark.parametrize("durable", [True, False])
def test_publication_runs_one_transaction_or_no_sql(tmp_path, durable):
    """A publication commits its event and outbox rows in one transaction (durable_outbox);
    without the outbox it runs no SQL at all."""
    h = Harness(tmp_path, settings={"durable_outbox": durable})
    try:
        for index in range(5):
            h.subscribe("2011", filter="q:price > 1", namespaces={"q": "urn:quotes"},
                        notify_path=f"/{index}")
        h.publish(quote(5))  # warm: syncs once
        h.drain()
        h.manager.outbox.flush()
        statements = []
        conn = h.service.store.connection()
        conn.set_trace_callback(statements.append)
        try:
            h.manager.publish(h.service.topics.get("stocks"), etree.fromstring(quote(9)), "urn:a")
        finally:
            conn.set_trace_callback(None)
        h.drain()
        if durable:
            assert statements.count("BEGIN IMMEDIATE") == 1 and statements[-1] == "COMMIT"
        else:
            assert statements == []
        assert h.manager.counters["delivered"] == 10
    finally:
        h.close()


def test_housekeeping_purges_terminal_rows_and_forgets_them(tmp_path):
    h = Harness(tmp_path, settings={"purge_after": 0})
    try:
        kept = h.subscribe("2011")
        gone = h.subscribe("2011")
        h.client("2011").unsubscribe(gone)
        assert gone.id in h.manager.view._gone
        h.manager.clock = lambda: time.time() + 1
        h.manager.housekeeping(forget_after=-1)
        assert h.manager.store.get(gone.id) is None
        assert h.manager.store.get(kept.id).status is State.ACTIVE
        assert h.manager.view._gone == {}
    finally:
        h.close()


def test_a_start_ends_the_subscriptions_whose_stored_filters_its_limits_refuse(
        tmp_path, monkeypatch):
    """A start takes the stored subscriptions in. A filter this process's limits refuse
    (lowered since) would match nothing: its subscription ends with SubscriptionEnd
    (SourceCancelling, saying why), once although two workers start together and both
    refuse it. A filter of a dialect no matcher here knows is only logged (its plugin may
    be missing from a broken installation). Every other subscription matches as before."""
    sink = RecordingSink()
    keep = {"keep_subscriptions_on_shutdown": "true"}
    first = Harness(tmp_path, sink=sink, topics=("stocks", "bonds"), settings=keep)
    short, long = "//q:price > 30", "//q:price > 30 and //q:price < 1000000000000000"
    made = {}
    for topic in ("stocks", "bonds"):
        for name, xpath in (("short", short), ("long", long), ("plugin", short)):
            made[topic, name] = first.subscribe(
                "2004" if topic == "bonds" else "2011", topic=topic, filter=xpath,
                namespaces={"q": "urn:quotes"}, notify_path=f"/{topic}-{name}",
                end_to=SINK + "/end", expires="PT1H")
    with first.manager.store.store.transaction() as conn:  # stored by a plugin not here now
        conn.execute("UPDATE eventing_subscriptions SET dialect = 'urn:example:gone' "
                     "WHERE id IN (?, ?)", (made["stocks", "plugin"].id,
                                            made["bonds", "plugin"].id))
    first.close()
    # both workers load (and refuse) before either ends anything: they meet in end_many
    meeting = threading.Barrier(2, timeout=20)
    end_many = SubscriptionStore.end_many

    def met(store, ids, reason):
        meeting.wait()
        return end_many(store, ids, reason)

    monkeypatch.setattr(SubscriptionStore, "end_many", met)
    lowered = {**keep, "filter_max_length": str(len(short) + 5)}
    workers, failures = [], []

    def start():
        try:
            workers.append(Harness(tmp_path, sink=sink, topics=(), settings=lowered))
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert not failures and len(workers) == 2, failures
        second = workers[0]
        for worker in workers:
            worker.drain()
        assert end_statuses(sink) == ["SourceCancelling", "SourceCancelling"]
        reasons = [payload for _, payload, *_ in sink.at("/end")]
        assert all(b"no longer accepted here" in r and b"longer than" in r for r in reasons)
        for (topic, name), sub in made.items():
            status = second.manager.store.get(sub.id).status
            assert status is (State.ENDED if name == "long" else State.ACTIVE), (topic, name)
        for topic in ("stocks", "bonds"):
            second.publish(quote(50), topic=topic)
        second.drain()
        assert [len(sink.at(f"/{t}-{n}")) for t in ("stocks", "bonds")
                for n in ("short", "long", "plugin")] == [1, 0, 0, 1, 0, 0]
    finally:
        for worker in workers:
            worker.close()


@pytest.mark.parametrize("address", [
    "http://h:1/a", "  http://h:1/a?b=1&c=<2>&amp;  ", "http://h/é/ü", "http://h/a\r\nb",
    "http://h/&lt;", "http://h/\u2028", "http://h/a b\tc"])
@pytest.mark.parametrize("version", ["2004", "2011"])
def test_a_stored_address_only_epr_reads_back_as_the_parser_reads_it(address, version):
    from lxml import etree
    from subscription_manager.store import _dump_epr, _load_epr
    from subscription_manager.versions import VERSIONS
    from wsframework.addressing import EndpointReference
    from wsframework.xmlparse import parse_xml
    v = VERSIONS[version]
    parameter = etree.Element("{urn:x}Key")
    parameter.text = "7"
    for epr in (EndpointReference(address), EndpointReference(address, (parameter,))):
        blob = _dump_epr(epr, v)
        parsed = EndpointReference.from_element(parse_xml(blob), v.wsa)
        loaded = _load_epr(blob, v)
        assert loaded == parsed and loaded.address == parsed.address


def test_a_start_settles_its_memory_only_after_a_large_load(tmp_path, monkeypatch):
    import subscription_manager.manager as manager_module
    settled = []
    monkeypatch.setattr(manager_module, "settle_after_load", lambda: settled.append(True))
    first = Harness(tmp_path)
    for i in range(3):
        first.subscribe(notify_path=f"/n/{i}", expires="PT1H")
    monkeypatch.setattr(manager_module, "SETTLE_AFTER_LOADING", 4)
    below = Harness(tmp_path, sink=first.sink, topics=())
    assert settled == [] and below.manager.counters["subscriptions"] == 3
    monkeypatch.setattr(manager_module, "SETTLE_AFTER_LOADING", 3)
    at = Harness(tmp_path, sink=first.sink, topics=())
    assert settled == [True]
    for h in (at, below):
        h.close()
    first.manager.deliverer.close(0)
