"""Prometheus metrics of real ``edn serve`` processes (gunicorn) over real HTTP: a dispatcher
and two servers of 2 workers each, and a standalone source of 2 workers. Every exposition is
parsed by prometheus_client's parser; counts add up across workers (the multiprocess files
the arbiter gives them); the endpoint refuses a request without the admin credential, opens
to loopback only when EDN_METRICS_ACCESS says so; a worker killed with kill -9 leaves the
live gauges and keeps its counters."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import requests
from lxml import etree
from prometheus_client.parser import text_string_to_metric_families

from edn.localnet.network import LocalNetwork, wait_until
from subscription_manager.client import EventingClient
from tests.support.processes import ADMIN_TOKEN, ServerProcess
from wsframework.admin import AdminClient
from wsframework.publisher import publish

D = 3
SERVERS = (("s1", "rtree", 2), ("s2", "rtree", 2))
Q = "urn:quotes"


def scrape(process, token=ADMIN_TOKEN) -> dict[tuple, float]:
    """(sample name, sorted labels) -> value; the exposition must parse."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = requests.get(process.base_url + "/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain; version=")
    out = {}
    for family in text_string_to_metric_families(answer.text):
        assert family.name.startswith("edn_"), family.name
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(samples, name) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


@pytest.fixture(scope="module")
def edn(tmp_path_factory):
    network = LocalNetwork(tmp_path_factory.mktemp("metrics"), SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000)
    with network:
        network.create_topic()
        rng = np.random.default_rng(4)
        centres = rng.uniform(0, 10, size=(40, D))
        half = rng.uniform(0.5, 2.5, size=(40, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        yield network


def test_every_role_refuses_the_metrics_without_the_credential(edn):
    for process in [edn.dispatcher, *edn.servers.values()]:
        for headers in ({}, {"Authorization": "Bearer wrong"},
                        {"Authorization": f"Basic {ADMIN_TOKEN}"}):
            answer = requests.get(process.base_url + "/metrics", headers=headers, timeout=10)
            assert answer.status_code == 401 and "edn_" not in answer.text
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_dispatcher_and_the_servers_count_the_same_events(edn):
    first, last = edn.publish(np.round(np.random.default_rng(5).uniform(0, 10, size=(200, D)), 3))
    expected = edn.wait_delivered(first, last)
    assert len(expected) > 50
    d = scrape(edn.dispatcher)
    assert d[("edn_dispatcher_events_routed_total", ())] == last - first
    copies = d[("edn_dispatcher_copies_queued_total", ())]
    assert total(d, "edn_dispatcher_server_copies_forwarded_total") == copies > 0
    assert d[("edn_dispatcher_route_seconds_count", ())] >= (last - first) / 50
    assert total(d, "edn_dispatcher_copy_seconds_count") == total(
        d, "edn_dispatcher_server_batches_total")
    assert 0 < d[("edn_dispatcher_precision", ())] <= 1

    def servers_caught_up():  # the other worker's files are at most a second behind
        figures = {name: scrape(s) for name, s in edn.servers.items()}
        received = {name: f[("edn_server_events_received_total", ())]
                    for name, f in figures.items()}
        forwarded = {name: d[("edn_dispatcher_server_copies_forwarded_total",
                               (("server", name),))] for name in edn.servers}
        delivered = sum(f[("edn_notifications_delivered_total", ())] for f in figures.values())
        return received == forwarded and delivered == len(expected) and figures
    figures = wait_until(servers_caught_up, 20, what="the servers' metrics")
    for name, f in figures.items():
        assert f[("edn_workers", ())] == 2, name  # both workers' files are in the sums
        assert f[("edn_subscriptions_active", ())] == f[("edn_server_load", ())]
    assert sum(f[("edn_subscriptions_active", ())] for f in figures.values()) == 40


def quote(price):
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')


def test_a_two_worker_source_adds_up_and_survives_a_killed_worker(tmp_path, sink):
    prom = tmp_path / "prometheus"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(prom), "EDN_METRICS_ACCESS": "loopback"}
    with ServerProcess("source", data_dir=tmp_path / "source", workers=2, env=env) as source:
        AdminClient(source.base_url, source.admin_token).create_topic("stocks")
        EventingClient("2011").subscribe(source.base_url + "/topics/stocks",
                                         sink.url + "/notify", filter="q:price > 1",
                                         namespaces={"q": Q})
        for price in range(2, 32):  # one connection each: the kernel spreads them
            publish(source.base_url, "stocks", quote(price))
        sink.wait_for(30)
        # loopback access: no credential needed from this host
        found = wait_until(lambda: (lambda f: f[("edn_workers", ())] == 2
                                    and f[("edn_notifications_delivered_total", ())] == 30
                                    and f)(scrape(source, token=None)),
                           20, what="both workers in the sums")
        assert found[("edn_events_published_total", ())] == 30
        pids = sorted(int(p.stem.rsplit("_", 1)[1]) for p in prom.glob("gauge_livesum_*.db"))
        assert len(pids) == 2
        os.kill(pids[0], signal.SIGKILL)
        # the arbiter marks it dead (its live gauges leave) and starts another worker
        wait_until(lambda: not (prom / f"gauge_livesum_{pids[0]}.db").exists(), 20,
                   what="the dead worker's gauges removed")
        # the new worker claims the dead one's outbox rows not yet deleted (at-least-once,
        # same MessageIDs: subscription_manager.outbox) and delivers them again
        after = wait_until(lambda: (lambda f: f[("edn_workers", ())] == 2
                                    and f[("edn_notifications_delivered_total", ())]
                                    == len(sink.messages) and f)(scrape(source, token=None)),
                           20, what="a new worker counting what the sink received")
        assert after[("edn_events_published_total", ())] == 30  # counted events stay
        assert after[("edn_notifications_delivered_total", ())] >= 30


def test_a_bad_access_mode_stops_edn_serve_before_any_worker(tmp_path):
    process = ServerProcess("source", data_dir=tmp_path / "source",
                            env={"EDN_METRICS_ACCESS": "everyone"})
    with pytest.raises(RuntimeError, match="EDN_METRICS_ACCESS must be one of"):
        process.start(timeout=30)
    assert process.proc.returncode == 1


def test_a_two_worker_dispatcher_sums_its_workers(tmp_path):
    # two workers only without the durable log (one process holds it)
    with ServerProcess("dispatcher", data_dir=tmp_path / "dispatcher", workers=2,
                       extra_args=["--set", "durable_log=false"]) as dispatcher:
        found = wait_until(lambda: (lambda f: f[("edn_workers", ())] == 2 and f)(
            scrape(dispatcher)), 20, what="both dispatcher workers in the sums")
        assert found[("edn_dispatcher_events_routed_total", ())] == 0
        assert 0 < found[("edn_dispatcher_precision", ())] <= 1  # the largest, not a sum
        assert found[("edn_dispatcher_servers", ())] == 0
