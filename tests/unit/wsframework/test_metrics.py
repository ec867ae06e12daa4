"""wsframework.metrics: who may read a role's metrics (the admin credential by default,
loopback or everyone only when asked), the exposition parsed by prometheus_client's parser,
and multiprocess mode: two workers' readings add up (counters kept after a worker dies, live
gauges not), shared readings are not summed. Socket-free: two workers are two value classes
of prometheus_client in this process."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families

from wsframework.utilization import BusyMeter
from wsframework.http_routes import HttpRequest, Routes
from wsframework.service import ServiceNames
from wsframework.metrics import (ACCESS_ENV, MULTIPROC_ENV, Reading, RoleMetrics, access_mode,
                                 mark_worker_dead, prepare_multiproc_dir)

TOKEN = "metrics-token"


def service():
    closed = []
    return SimpleNamespace(config=SimpleNamespace(admin_token=TOKEN), busy=BusyMeter(),
                           names=ServiceNames(metric_prefix="edn_"),  # an application's
                           http_routes=Routes(), add_component=closed.append, closed=closed)


def get(metrics, headers=None, remote="192.0.2.7"):
    return metrics.handle(HttpRequest("GET", "/metrics", headers=headers or {},
                                      remote_addr=remote))


def samples(metrics) -> dict:
    answer = get(metrics, {"authorization": f"Bearer {TOKEN}"})
    assert answer.status == 200
    out = {}
    for family in text_string_to_metric_families(answer.body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = (family.type, s.value)
    return out


def test_by_default_only_the_admin_credential_reads_the_metrics(monkeypatch):
    monkeypatch.delenv(ACCESS_ENV, raising=False)
    metrics = RoleMetrics(service())
    assert metrics.access == "token"
    refused = [get(metrics), get(metrics, remote="127.0.0.1"),
               get(metrics, {"authorization": "Bearer wrong"}),
               get(metrics, {"authorization": "Bearer " + TOKEN + "x"}),
               get(metrics, {"authorization": "Bearer "}),
               get(metrics, {"authorization": f"Basic {TOKEN}"}),
               get(metrics, {"authorization": TOKEN})]
    for answer in refused:
        assert answer.status == 401 and b"edn_" not in answer.body
        assert dict(answer.headers)["WWW-Authenticate"].startswith("Bearer ")
    assert get(metrics, {"authorization": f"bearer {TOKEN}"}).status == 200


def test_loopback_mode_opens_the_metrics_to_this_host_only():
    metrics = RoleMetrics(service(), access="loopback")
    for address in ("127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"):
        assert get(metrics, remote=address).status == 200, address
    for address in ("10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "", None, "localhost"):
        assert get(metrics, remote=address).status == 401, address
    assert get(metrics, {"authorization": f"Bearer {TOKEN}"}, remote="10.0.0.1").status == 200


def test_open_mode_is_explicit_and_a_bad_mode_is_refused(monkeypatch):
    assert get(RoleMetrics(service(), access="open")).status == 200
    monkeypatch.setenv(ACCESS_ENV, "everyone")
    with pytest.raises(ValueError, match=ACCESS_ENV):
        access_mode()
    with pytest.raises(ValueError):
        RoleMetrics(service())
    monkeypatch.setenv(ACCESS_ENV, " Loopback ")
    assert access_mode() == "loopback"


def test_a_single_process_exposition_has_types_units_and_values():
    metrics = RoleMetrics(service())
    metrics.add_reader(lambda: [
        Reading("edn_things_total", "counter", "things", 3),
        Reading("edn_queue_depth", "gauge", "queue", 4, (("server", "s1"),)),
        Reading("edn_queue_depth", "gauge", "queue", 5, (("server", "s2"),)),
    ])
    histogram = metrics.histogram("edn_step_seconds", "a step", (0.01, 0.1))
    for seconds in (0.005, 0.05, 0.5):
        histogram.observe(seconds)
    found = samples(metrics)
    assert found[("edn_things_total", ())] == ("counter", 3)
    assert found[("edn_queue_depth", (("server", "s2"),))] == ("gauge", 5)
    assert found[("edn_step_seconds_bucket", (("le", "0.1"),))] == ("histogram", 2)
    assert found[("edn_step_seconds_count", ())] == ("histogram", 3)
    assert found[("edn_step_seconds_sum", ())][1] == pytest.approx(0.555)
    assert found[("edn_process_cpu_seconds_total", ())][1] > 0
    assert found[("edn_busy_seconds_total", ())][0] == "counter"


def test_a_reader_that_fails_hides_no_other_figure():
    metrics = RoleMetrics(service())
    metrics.add_reader(lambda: 1 / 0)
    metrics.add_reader(lambda: [Reading("edn_ok", "gauge", "ok", 1)])
    assert samples(metrics)[("edn_ok", ())] == ("gauge", 1)


class Worker:
    """One simulated worker: its own prometheus_client files (pid ``pid``) in ``directory``."""

    def __init__(self, monkeypatch, pid: int, figures: dict):
        monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: pid))
        self.figures = figures
        self.metrics = RoleMetrics(service(), mirror_interval=0)
        self.metrics.add_reader(lambda: [
            Reading("edn_events_total", "counter", "events", self.figures["events"]),
            Reading("edn_depth", "gauge", "depth", self.figures["depth"]),
            Reading("edn_precision", "max", "precision", self.figures["precision"]),
            Reading("edn_subscriptions", "shared", "subscriptions", self.figures["subs"]),
        ])
        self.metrics._mirror([r for r in self.metrics.readings() if r.kind != "shared"])


def test_workers_add_up_and_a_dead_workers_counters_stay(tmp_path, monkeypatch):
    (tmp_path / "counter_999.db").write_bytes(b"stale")  # a previous run's file
    monkeypatch.setenv(MULTIPROC_ENV, "unset-by-the-test")
    prepare_multiproc_dir(tmp_path)
    assert not (tmp_path / "counter_999.db").exists()
    one = Worker(monkeypatch, 101, {"events": 5, "depth": 2, "precision": 0.5, "subs": 7})
    two = Worker(monkeypatch, 102, {"events": 3, "depth": 4, "precision": 0.25, "subs": 7})
    found = samples(two.metrics)
    assert found[("edn_events_total", ())] == ("counter", 8)
    assert found[("edn_depth", ())] == ("gauge", 6)
    assert found[("edn_precision", ())] == ("gauge", 0.5)
    assert found[("edn_subscriptions", ())] == ("gauge", 7)  # the store's, not 14
    one.figures["events"] = 9  # worker one routes 4 more; its mirror adds the difference
    one.metrics._mirror([r for r in one.metrics.readings() if r.kind != "shared"])
    assert samples(two.metrics)[("edn_events_total", ())] == ("counter", 12)
    mark_worker_dead(101)
    found = samples(two.metrics)
    assert found[("edn_events_total", ())] == ("counter", 12)  # counted events stay counted
    assert found[("edn_depth", ())] == ("gauge", 4)  # a dead worker holds no queue
    assert found[("edn_precision", ())] == ("gauge", 0.25)


def test_a_workers_file_read_mid_write_is_read_again(tmp_path, monkeypatch):
    from prometheus_client import multiprocess

    monkeypatch.setenv(MULTIPROC_ENV, "unset-by-the-test")
    prepare_multiproc_dir(tmp_path)
    worker = Worker(monkeypatch, 201, {"events": 5, "depth": 2, "precision": 0.5, "subs": 7})
    collect = multiprocess.MultiProcessCollector.collect
    torn = {"left": 2}

    def sometimes_torn(self):
        if torn["left"]:
            torn["left"] -= 1
            raise RuntimeError("Read beyond file size detected, file is corrupted.")
        return collect(self)

    monkeypatch.setattr(multiprocess.MultiProcessCollector, "collect", sometimes_torn)
    assert samples(worker.metrics)[("edn_events_total", ())] == ("counter", 5)
    assert torn["left"] == 0
    torn["left"] = 99  # a file that stays unreadable is an error, not a hang
    with pytest.raises(RuntimeError):
        worker.metrics.exposition()
