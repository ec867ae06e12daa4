"""The dispatcher's Prometheus exposition after known work on an in-process network (the
console tests' network, reused: a dispatcher, 3 servers, 7 subscriptions), parsed by
prometheus_client's own parser: names, types, units, values
(route_manager.dispatcher.metrics)."""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.edn import random_points
from tests.support.eventing import TOKEN
from tests.unit.route_manager.test_dispatcher_console import net  # noqa: F401  (its network)
from wsframework.http_routes import HttpRequest

EVENTS = 30


def scrape(service, token=TOKEN):
    _, handler = service.http_routes.find("/metrics")
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return handler(HttpRequest("GET", "/metrics", headers=headers, remote_addr="10.0.0.9"))


def families(service):
    answer = scrape(service)
    assert answer.status == 200
    assert dict(answer.headers)["Content-Type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(answer.body.decode())}


def value(family, **labels):
    [sample] = [s for s in family.samples
                if s.name == family.name + ("_total" if family.type == "counter" else "")
                and all(s.labels.get(k) == v for k, v in labels.items())]
    return sample.value


def test_the_exposition_counts_the_events_copies_and_servers(net):
    net.publish(random_points(EVENTS, net.d, seed=4))
    net.drain()
    d = net.dispatcher
    found = families(net.dispatcher_service)
    assert found["edn_dispatcher_events_routed"].type == "counter"
    assert value(found["edn_dispatcher_events_routed"]) == EVENTS
    copies = d.counters.copies_out
    assert copies > 0 and value(found["edn_dispatcher_copies_queued"]) == copies
    servers = sorted(d.servers)
    assert value(found["edn_dispatcher_servers"]) == len(servers) == 3
    routed = [value(found["edn_dispatcher_server_copies_routed"], server=s) for s in servers]
    forwarded = [value(found["edn_dispatcher_server_copies_forwarded"], server=s)
                 for s in servers]
    assert sum(routed) == copies and forwarded == routed  # drained: every copy acknowledged
    assert all(value(found["edn_dispatcher_server_queue_depth"], server=s) == 0 for s in servers)
    assert found["edn_dispatcher_server_queue_depth"].type == "gauge"
    assert value(found["edn_dispatcher_precision"]) == pytest.approx(float(d.control.precision))
    assert value(found["edn_process_cpu_seconds"]) > 0


def test_the_histograms_count_one_message_and_every_batch(net):
    before = families(net.dispatcher_service)
    net.publish(random_points(EVENTS, net.d, seed=5))
    net.drain()
    after = families(net.dispatcher_service)
    route = after["edn_dispatcher_route_seconds"]
    assert route.type == "histogram"
    count = {s.name: s.value for s in route.samples}
    earlier = {s.name: s.value for s in before["edn_dispatcher_route_seconds"].samples}
    assert count["edn_dispatcher_route_seconds_count"] > earlier.get(
        "edn_dispatcher_route_seconds_count", 0)
    assert count["edn_dispatcher_route_seconds_sum"] > 0
    buckets = [s for s in route.samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf"
    assert buckets[-1].value == count["edn_dispatcher_route_seconds_count"]
    copy = {s.name: s.value for s in after["edn_dispatcher_copy_seconds"].samples}
    batches = sum(value(after["edn_dispatcher_server_batches"], server=s)
                  for s in net.dispatcher.servers)
    assert batches > 0 and copy["edn_dispatcher_copy_seconds_count"] == batches


def test_no_label_grows_with_subscriptions_or_events(net):
    net.publish(random_points(EVENTS, net.d, seed=6))
    net.drain()
    for family in families(net.dispatcher_service).values():
        assert family.name.startswith("edn_")
        for sample in family.samples:
            assert set(sample.labels) <= {"server", "le"}, sample


def test_the_metrics_refuse_a_missing_or_wrong_credential(net):
    for token in (None, "wrong", TOKEN + "x"):
        answer = scrape(net.dispatcher_service, token)
        assert answer.status == 401 and b"edn_" not in answer.body
        assert dict(answer.headers)["WWW-Authenticate"].startswith("Bearer")
