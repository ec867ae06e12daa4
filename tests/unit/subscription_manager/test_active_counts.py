"""The active counts that settle subscription limits: triggers keep, per scope (the service,
a topic, a NotifyTo host), the number of active rows through every change of the store
(insert, bulk insert, adoption over an existing row, release, renew, unsubscribe, end, end of
many, of a topic, of all, expiry, purge), and a limit is decided on the rows that are active and
unexpired. In process, no socket (on the PostgreSQL pass, the same against PostgreSQL)."""
from __future__ import annotations

import dataclasses
import random

from subscription_manager.lifecycle import State
from subscription_manager.messages import UNWRAP
from subscription_manager.store import (LimitReached, Subscription, SubscriptionLimits,
                                        SubscriptionStore)
from subscription_manager.versions import V2011
from wsframework.addressing import EndpointReference
from wsframework.soap import SoapVersion
from wsframework.store import Store

T0 = 1_700_000_000.0
HOSTS = ("http://a.test/n", "http://B.test:81/n", "http://c.test/n")
TOPICS = ("t1", "t2")


def _subscription(sid: str, topic: str, address: str, expires: float | None) -> Subscription:
    return Subscription(id=sid, topic=topic, topic_uid=topic + "-uid", version=V2011,
                        soap_version=SoapVersion.SOAP12.value, filter=None,
                        notify_to=EndpointReference(address), end_to=None, format=UNWRAP,
                        expires=expires, expires_kind="duration", created=T0)


def _truth(store: SubscriptionStore) -> dict[str, int]:
    """The counts recomputed from the rows (scopes with no active row left out)."""
    truth: dict[str, int] = {}
    for topic_uid, host in store.store.query(
            "SELECT topic_uid, notify_host FROM eventing_subscriptions WHERE status = 'active'"):
        for scope in ("total", f"topic:{topic_uid}", f"host:{host}"):
            truth[scope] = truth.get(scope, 0) + 1
    return truth


def _kept(store: SubscriptionStore) -> dict[str, int]:
    return {scope: n for scope, n in
            store.store.query("SELECT scope, n FROM eventing_active_counts") if n}


def test_the_counts_follow_every_change_of_the_store(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    rng = random.Random(7)
    made: list[Subscription] = []
    now = T0
    try:
        for step in range(300):
            now += 1
            kind = rng.choice(["insert", "insert", "many", "adopt", "release", "renew",
                               "unsubscribe", "end", "end_many", "end_topic", "expire",
                               "purge"])
            ids = [s.id for s in made]
            if kind == "insert" or not ids:
                s = _subscription(f"s{step}", rng.choice(TOPICS), rng.choice(HOSTS),
                                  now + rng.choice([5, 50, 500]))
                made.append(store.insert(s, None, now))
            elif kind == "many":
                batch = [_subscription(f"s{step}.{k}", rng.choice(TOPICS), rng.choice(HOSTS),
                                       now + 100) for k in range(rng.randint(1, 5))]
                stored, _ = store.insert_many(batch, None, now)
                made.extend(stored)
            elif kind == "adopt":  # over an existing row (active or ended) or a new one
                old = store.get(rng.choice(ids))
                moved = dataclasses.replace(old, topic_uid=rng.choice(TOPICS) + "-uid",
                                            notify_to=EndpointReference(rng.choice(HOSTS)))
                with store.store.transaction() as conn:
                    store.adopt(conn, [moved])
            elif kind == "release":
                current = store.get(rng.choice(ids))
                with store.store.transaction() as conn:
                    store.release(conn, {current.id: current.seq}, "elsewhere")
            elif kind == "renew":
                store.renew(rng.choice(ids), now + 100, "duration", now)
            elif kind == "unsubscribe":
                store.unsubscribe(rng.choice(ids), now)
            elif kind == "end":
                store.end(rng.choice(ids), "ended")
            elif kind == "end_many":
                store.end_many(rng.sample(ids, min(len(ids), rng.randint(1, 4))), "ended")
            elif kind == "end_topic" and rng.random() < 0.2:
                store.end_topic(rng.choice(TOPICS) + "-uid", "topic gone")
            elif kind == "expire":
                store.expire_due(now)
            elif kind == "purge":
                store.purge(now - 20)
            assert _kept(store) == _truth(store), (step, kind)
            assert store.store.query(  # no scope left behind empty
                "SELECT COUNT(*) FROM eventing_active_counts WHERE n <= 0")[0][0] == 0
            total, per_topic = store.active_counts()
            truth = _truth(store)
            assert total == truth.get("total", 0) == store.count(State.ACTIVE)
            assert per_topic == {scope[len("topic:"):]: n for scope, n in truth.items()
                                 if scope.startswith("topic:")}
        store.end_all("shutting down")
        assert _kept(store) == {} == _truth(store)
    finally:
        store.store.close()


def test_a_limit_counts_only_unexpired_rows_although_the_count_holds_expired_ones(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    try:
        limits = SubscriptionLimits(per_host=2)
        store.insert(_subscription("a", "t1", HOSTS[0], T0 + 10), limits, T0)
        store.insert(_subscription("b", "t1", HOSTS[0], T0 + 10), limits, T0)
        later = T0 + 20  # both expired, neither swept: still counted as active rows
        assert _kept(store)["host:a.test"] == 2
        store.insert(_subscription("c", "t1", HOSTS[0], later + 10), limits, later)
        stored, refused = store.insert_many(
            [_subscription(f"m{k}", "t1", HOSTS[0], later + 10) for k in range(3)], limits,
            later)
        assert [s.id for s in stored] == ["m0"] and sorted(refused) == ["m1", "m2"]
        try:
            store.insert(_subscription("d", "t1", HOSTS[0], later + 10), limits, later)
        except LimitReached as reached:
            assert reached.limit == 2
        else:
            raise AssertionError("a third unexpired subscription for one host was stored")
    finally:
        store.store.close()


def test_ending_many_ends_each_active_one_once_in_statements_of_bounded_size(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    try:
        made = [_subscription(f"s{k}", TOPICS[k % 2], HOSTS[0], None) for k in range(1203)]
        store.insert_many(made, None, T0)
        store.end("s7", "earlier")
        wanted = [s.id for s in made[::-1]] + ["s1", "unknown"]  # a repeat and a stranger
        ended = store.end_many(wanted, "filter refused")
        assert sorted(s.id for s in ended) == sorted(s.id for s in made if s.id != "s7")
        assert {s.status for s in ended} == {State.ENDED}
        assert store.count(State.ACTIVE) == 0 and _kept(store) == {}
        assert store.get("s7").end_reason == "earlier"  # already ended: left as it was
        assert store.get("s8").end_reason == "filter refused"
        assert store.end_many(wanted, "again") == []
    finally:
        store.store.close()
