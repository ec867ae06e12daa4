"""An event source's and a subscription server's Prometheus exposition after known work,
parsed by prometheus_client's parser (subscription_manager.metrics): notifications delivered,
failed and dead-lettered, subscriptions active, outbox and dead letters, a server's events
received from the dispatcher, the table role's tuples, updates and feed backlog."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.edn import random_points
from tests.support.eventing import Harness, RecordingSink, quote
from subscription_manager.stateful.table_role import build_table
from subscription_manager.stateful.table_service import put
from tests.unit.route_manager.test_dispatcher_console import net  # noqa: F401  (its network)
from tests.unit.subscription_manager.test_range_aggregate_table import (FakePublisher,
                                                                        role_config, send)
from wsframework.http_routes import HttpRequest

Q = {"q": "urn:quotes"}


def scrape(service) -> dict[str, float]:
    """Sample name -> value (no labels in these roles' own metrics)."""
    _, handler = service.http_routes.find("/metrics")
    token = service.config.admin_token  # TOKEN, or the table tests' "token"
    answer = handler(HttpRequest("GET", "/metrics", headers={"authorization": f"Bearer {token}"}))
    assert answer.status == 200
    samples, types = {}, {}
    for family in text_string_to_metric_families(answer.body.decode()):
        types[family.name] = family.type
        for sample in family.samples:
            assert not set(sample.labels) - {"le", "topic"}, sample  # nothing per subscription
            samples[sample.name] = sample.value
    samples["types"] = types
    return samples


def test_a_source_counts_deliveries_and_active_subscriptions(tmp_path):
    h = Harness(tmp_path, sink=RecordingSink())
    try:
        for path in ("/a", "/b"):
            h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path=path)
        h.subscribe("2011", filter="q:price > 100", namespaces=Q, notify_path="/c")
        h.publish(quote(5))
        h.publish(quote(7))
        h.drain()
        found = scrape(h.service)
        assert found["types"]["edn_notifications_delivered"] == "counter"
        assert found["edn_events_published_total"] == 2
        assert found["edn_notifications_delivered_total"] == 4  # 2 events x 2 subscriptions
        assert found["edn_notifications_failed_total"] == 0
        assert found["edn_subscriptions_active"] == 3 == found["edn_topic_subscriptions_active"]
        assert found["types"]["edn_subscriptions_active"] == "gauge"
        assert found["edn_delivery_queue_depth"] == 0 and found["edn_dead_letters"] == 0
        assert found["edn_process_cpu_seconds_total"] > 0
    finally:
        h.close()


def test_a_refused_notification_is_failed_and_dead_lettered(tmp_path):
    h = Harness(tmp_path, sink=RecordingSink(status=500),
                settings={"delivery_retries": 0, "end_subscription_on_dead_letter": False})
    try:
        h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path="/a")
        h.publish(quote(5))
        h.drain()
        found = scrape(h.service)
        assert found["edn_notifications_delivered_total"] == 0
        assert found["edn_notifications_failed_total"] == 1
        assert found["edn_notifications_dead_lettered_total"] == 1
        assert found["edn_dead_letters"] == 1
    finally:
        h.close()


def test_a_server_counts_the_events_the_dispatcher_sent_it(net):
    net.publish(random_points(25, net.d, seed=8))
    net.drain()
    hits = net.dispatcher.counters.per_server_hits
    assert sum(hits.values()) > 0
    active = 0
    for i, service in enumerate(net.servers):
        found = scrape(service)
        assert found["types"]["edn_server_events_received"] == "counter"
        assert found["edn_server_events_received_total"] == hits.get(f"s{i}", 0)
        assert found["edn_subscriptions_active"] == found["edn_server_load"]
        assert found["edn_topic_subscriptions_active"] == found["edn_subscriptions_active"]
        active += found["edn_subscriptions_active"]
    assert active == 7  # the network's subscriptions, each held by one server


def test_the_table_role_counts_its_tuples_updates_and_waiting_changes(tmp_path):
    publisher = FakePublisher()
    service = build_table(role_config(tmp_path, retry_seconds="3600"), publisher=publisher,
                          owner_wait=0)
    try:
        for key, x, y in (("t1", 10, 3), ("t2", 20, 4), ("t1", 10, 5)):  # the third: a new y
            assert send(service, put(key, x, y)).status == 202
        found = scrape(service)
        assert found["edn_table_tuples"] == 2 and found["types"]["edn_table_tuples"] == "gauge"
        assert found["edn_table_updates_total"] == 3
        assert found["types"]["edn_table_updates"] == "counter"
        assert found["edn_table_feed_pending"] == 0  # every change reached the feed
        publisher.fail = True
        assert send(service, put("t3", 30, 1)).status == 202
        assert scrape(service)["edn_table_feed_pending"] > 0  # kept for the next flush
    finally:
        service.close()
