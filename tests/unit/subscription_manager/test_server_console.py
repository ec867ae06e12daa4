"""An event source's web console panels (subscription_manager.console) over HTTP, socket-free
through the WSGI app: topics with their active subscriptions, the counters, and dead letters
browsed, redelivered (same MessageID) and purged, with the refusals of bad or forged
actions."""
from __future__ import annotations

import pytest

from tests.support.console_client import ConsoleClient
from tests.support.edn import TOPIC, Network, random_boxes
from tests.support.eventing import TOKEN, Harness, RecordingSink, quote
from wsframework import ns

Q = {"q": "urn:quotes"}


@pytest.fixture
def dead(tmp_path):
    """A source with two dead letters (a refusing sink; subscriptions kept) and a third
    subscription on another topic."""
    sink = RecordingSink(status=500)
    h = Harness(tmp_path, sink=sink, topics=("stocks", "bonds"),
                settings={"delivery_retries": 0, "end_subscription_on_dead_letter": False})
    h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path="/a")
    h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path="/b")
    h.subscribe("2011", topic="bonds", filter="q:price > 1", namespaces=Q, notify_path="/c")
    h.publish(quote(5))
    h.drain()
    yield h
    h.close()


@pytest.fixture
def console(dead):
    client = ConsoleClient(dead.service)
    assert client.login(TOKEN).status == 200
    return client


def message_ids(sink: RecordingSink) -> list[str]:
    return sorted(env.header(ns.qname(ns.WSA10, "MessageID")).text for env in sink.envelopes())


def test_a_source_offers_its_panels_and_no_dispatcher_figures(console):
    features = console.get("/console/api/session").json()["features"]
    assert features == ["dead-letters", "purge", "redeliver", "summary", "topics"]
    assert console.get("/console/api/figures").status == 404


def test_every_panel_needs_a_session(dead):
    anonymous = ConsoleClient(dead.service)
    for name in ("topics", "summary", "dead-letters"):
        assert anonymous.get(f"/console/api/{name}").status == 401
    assert anonymous.post("/console/api/purge", {"all": True}).status == 401
    assert dead.manager.outbox.dead_letter_count() == 2


def test_topics_count_their_active_subscriptions(console):
    answer = console.get("/console/api/topics")
    assert answer.status == 200 and answer.header("Cache-Control") == "no-store"
    assert sorted(map(tuple, (t.values() for t in answer.json()["topics"]))) == [
        ("bonds", 1), ("stocks", 2)]


def test_the_summary_shows_the_counters(console, dead):
    figures = console.get("/console/api/summary").json()["figures"]
    assert figures["subscriptions"] == 3 and figures["dead_letters"] == 2


def test_dead_letters_are_listed_with_their_reason(console, dead):
    answer = console.get("/console/api/dead-letters").json()
    assert answer["total"] == 2 and len(answer["letters"]) == 2
    first = answer["letters"][0]
    assert first["reason"] == "HTTP 500" and first["topic"] == "stocks"
    assert first["url"].startswith("http://sink.test/") and first["dead_at"].endswith("Z")
    assert first["message_id"].startswith("urn:uuid:") and first["attempts"] == 1
    one = console.get("/console/api/dead-letters?limit=1").json()
    assert one["total"] == 2 and [d["id"] for d in one["letters"]] == [first["id"]]
    for bad in ("0", "-1", "100000", "ten"):
        assert console.get(f"/console/api/dead-letters?limit={bad}").status == 400, bad


def test_a_redelivered_dead_letter_keeps_its_message_id(console, dead):
    letters = console.get("/console/api/dead-letters").json()["letters"]
    dead.sink.status = 202
    answer = console.post("/console/api/redeliver", {"ids": [letters[0]["id"], 99999]})
    assert answer.status == 200
    assert answer.json() == {"redelivered": 1, "unknown": [99999],
                             "message": "redelivered 1 dead letter; unknown: 99999"}
    dead.drain()
    assert message_ids(dead.sink) == [letters[0]["message_id"]]
    assert console.post("/console/api/redeliver", {"all": True}).json()["redelivered"] == 1
    dead.drain()
    assert message_ids(dead.sink) == sorted(d["message_id"] for d in letters)
    assert console.get("/console/api/dead-letters").json() == {"total": 0, "letters": []}


def test_purge_by_ids_and_all(console, dead):
    letters = console.get("/console/api/dead-letters").json()["letters"]
    answer = console.post("/console/api/purge", {"ids": [letters[0]["id"], 424242]})
    assert answer.json() == {"purged": 1, "message": "purged 1 dead letter"}
    assert console.post("/console/api/purge", {"all": True}).json()["purged"] == 1
    assert dead.manager.outbox.dead_letter_count() == 0
    assert dead.sink.messages == []  # purged, not delivered


@pytest.mark.parametrize("action", ["redeliver", "purge"])
@pytest.mark.parametrize("body", [
    {}, {"ids": [1], "all": True}, {"all": False}, {"all": "true"}, {"ids": []},
    {"ids": "1"}, {"ids": [0]}, {"ids": [-3]}, {"ids": [1.5]}, {"ids": [True]},
    {"ids": ["1"]}, {"ids": [2 ** 63]}, {"ids": list(range(1, 1002))}, {"ids": [1], "x": 1},
])
def test_bad_actions_are_refused_and_change_nothing(console, dead, action, body):
    answer = console.post(f"/console/api/{action}", body)
    assert answer.status == 400 and "error" in answer.json()
    assert dead.manager.outbox.dead_letter_count() == 2 and dead.sink.messages == []


@pytest.mark.parametrize("action", ["redeliver", "purge"])
def test_forged_actions_are_refused_and_change_nothing(console, dead, action):
    body = {"all": True}
    assert console.post(f"/console/api/{action}", body, csrf=False).status == 403
    assert console.post(f"/console/api/{action}", body,
                        headers={"Origin": "http://attacker.test"}).status == 403
    assert console.post(f"/console/api/{action}", raw=b"all=true",
                        content_type="application/x-www-form-urlencoded").status == 415
    assert console.get(f"/console/api/{action}").status == 404  # an action is never a GET
    assert dead.manager.outbox.dead_letter_count() == 2


def test_an_edn_server_counts_the_subscriptions_it_holds(tmp_path):
    net = Network(tmp_path, partitioners=("rtree", "rtree"))
    try:
        net.create_topic()
        net.step()
        lo, hi = random_boxes(5, net.d, seed=3)
        for k in range(5):
            net.subscribe(k % 2, lo[k], hi[k], k)
        held = [len(m.view.subscriptions) for m in net.managers]
        for service, count in zip(net.servers, held):
            client = ConsoleClient(service)
            assert client.login(TOKEN).status == 200
            assert client.get("/console/api/topics").json() == {
                "topics": [{"name": TOPIC, "subscriptions": count}]}
            figures = client.get("/console/api/summary").json()["figures"]
            assert figures["load"] == count and "peers" in figures
        assert sum(held) == 5
    finally:
        net.close()
