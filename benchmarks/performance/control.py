"""The control path: how fast subscriptions are made, on real processes.

* ``subscribe_per_s``: WS-Eventing Subscribes acknowledged per second into a 4-server network
  with placement (R-tree partitioner, load threshold twice the average), from
  ``subscribe_clients`` concurrent clients; ``subscribe_cpu_ms_per_subscription``: the
  servers' and dispatcher's CPU per Subscribe, and the clients' (``client_cpu_ms...``).
* ``placed_bulk_subscribe_per_s``: the same population made by an operator's placed bulk
  subscribe (``edn subscribe --from-file --place``: SubscribeMany with ``Place``, at most
  2,500 requests a message, so one message to one server, which places each request as a
  Subscribe would be and sends each other server its share), which ``edn demo`` uses; ``placed_bulk_cpu_ms_per_subscription``
  (servers and dispatcher).
* ``bulk_subscribe_per_s``: ``edn subscribe --from-file`` (SubscribeMany, chunks of 5,000)
  into one server with its subscription limits lifted; ``bulk_server_cpu_us_per_subscription``.
* ``summary_propagation_p99_ms``: after the Subscribe network is populated, a Subscribe whose
  filter alone matches a probe event is acknowledged, and the probe is published again and
  again until the sink receives it: the time from the acknowledgement to the first delivery,
  over ``probes`` subscriptions (p50 and p99). It includes one publication round trip.

* One server holding ``server_subscriptions`` (1,000,000 in the full run; bulk-made, limits
  lifted): ``rss_bytes_per_subscription_1m`` (the server's RSS over its empty start, per
  subscription, after a restart: what it holds, not what making them left behind; the RSS
  just after making them is ``rss_bytes_per_subscription_after_bulk``),
  ``restart_to_serving_s_1m`` (stop, then start until it answers ``/health``: the stored
  subscriptions are loaded before the worker serves), and ``renew_storm_publish_p99_ratio``:
  ``EventBatch`` round trips at the server (matching, the outbox commit: the server's
  publication path, sent as the dispatcher sends them, by one publisher over one keep-alive
  connection) p99 while ``storm_clients`` clients in a process of their own renew 10% of the
  subscriptions, over the same p99 when quiet (:data:`QUIET_ROUND_TRIPS` round trips before
  the storm); ``renew_storm_renews_per_s``
  and ``renew_storm_s`` say how fast the storm went (the goal is 10% within a second). At
  another size (``--quick``) these keys end in ``_at_n`` instead of ``_1m``.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.livenet import bulk_subscribe, group_cpu_seconds
from edn.localnet.network import TOPIC, LocalNetwork
from edn.sink import FastSink
from route_manager.workloads import uniform_rectangles
from matchers.vocabulary import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient

_TOKEN = "bench-control-token"
_D = 4
_MILLION = 1_000_000
#: the quiet round trips the storm's are compared with: enough for a p99 that is not the max
QUIET_ROUND_TRIPS = 1000


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _subscribe_network(tmp: Path, n: int, clients: int, probes: int) -> dict:
    lo, hi = uniform_rectangles(n, _D, seed=11)
    lo, hi = np.round(lo, 3), np.round(hi, 3)
    servers = [(f"s{i + 1}", "rtree", 1) for i in range(4)]
    with FastSink(record=True) as sink, LocalNetwork(
            tmp / "network", servers, token=_TOKEN, d=_D, load_threshold=max(1, 2 * n // 4),
            sink=sink) as network:
        network.create_topic()
        pids = [p.proc.pid for p in [*network.servers.values(), network.dispatcher]]
        cpu_before, own_before = sum(map(group_cpu_seconds, pids)), _own_cpu()
        started = time.perf_counter()
        network.subscribe(lo, hi, threads=clients)
        took = time.perf_counter() - started
        cpu = sum(map(group_cpu_seconds, pids)) - cpu_before
        own = _own_cpu() - own_before
        delays = _propagation(network, sink, probes)
    return {"subscribe_per_s": round(n / took, 1),
            "subscribe_cpu_ms_per_subscription": round(cpu / n * 1000, 3),
            "client_cpu_ms_per_subscription": round(own / n * 1000, 3),
            "summary_propagation_p50_ms": round(float(np.percentile(delays, 50)), 1),
            "summary_propagation_p99_ms": round(float(np.percentile(delays, 99)), 1)}


def _placed_bulk(tmp: Path, n: int) -> dict:
    lo, hi = uniform_rectangles(n, _D, seed=11)
    lo, hi = np.round(lo, 3), np.round(hi, 3)
    servers = [(f"s{i + 1}", "rtree", 1) for i in range(4)]
    with FastSink() as sink, LocalNetwork(tmp / "placed", servers, token=_TOKEN, d=_D,
                                          load_threshold=max(1, 2 * n // 4),
                                          sink=sink) as network:
        network.create_topic()
        pids = [p.proc.pid for p in [*network.servers.values(), network.dispatcher]]
        cpu_before = sum(map(group_cpu_seconds, pids))
        started = time.perf_counter()
        network.subscribe_in_bulk(lo, hi)
        took = time.perf_counter() - started
        cpu = sum(map(group_cpu_seconds, pids)) - cpu_before
    return {"placed_bulk_subscribe_per_s": round(n / took, 1),
            "placed_bulk_cpu_ms_per_subscription": round(cpu / n * 1000, 3)}


def _propagation(network: LocalNetwork, sink, probes: int) -> list[float]:
    """ms from each probe Subscribe's acknowledgement to its first notification."""
    names = list(network.servers)
    delays = []
    for k in range(probes):
        # a corner of the space no uniform rectangle of the population reaches alone
        point = np.full(_D, 10.0 - 0.0005 * (k + 1))
        lo, hi = point - 0.0001, point + 0.0001
        path = f"/probe/{k}"
        server = network.servers[names[k % len(names)]]
        EventingClient("2011").subscribe(f"{server.base_url}/topics/{TOPIC}",
                                         f"{sink.url}{path}", filter=range_filter(lo, hi),
                                         dialect=RANGES_DIALECT, expires="PT1H")
        acknowledged = time.perf_counter()
        deadline = acknowledged + 30.0
        while not any(m.path == path for m in sink.messages):
            if time.perf_counter() > deadline:
                raise AssertionError(f"probe {k} was never delivered")
            before = sink.count
            network.publish(point[None, :], batch=1, threads=1)
            sink.wait_count(before + 1, timeout=0.05)  # a delivery, or the next attempt
        delays.append((time.perf_counter() - acknowledged) * 1000)
    return delays


def _bulk(tmp: Path, n: int) -> dict:
    lo, hi = uniform_rectangles(n, _D, seed=12)
    lo, hi = np.round(lo, 3), np.round(hi, 3)
    requests = tmp / "requests.jsonl"
    with requests.open("w") as out:
        for i in range(n):
            out.write(json.dumps({"notify_to": f"http://127.0.0.1:9/n/{i}",
                                  "filter": range_filter(lo[i], hi[i])}) + "\n")
    network = LocalNetwork(tmp / "bulk", [("s1", "rtree", 1)], token=_TOKEN, d=_D,
                           load_threshold=10 * n)
    network.servers["s1"].extra_args += [
        "--set", "max_subscriptions=0", "--set", "max_subscriptions_per_topic=0",
        "--set", "max_subscriptions_per_host=0"]
    with network:
        network.create_topic()
        server = network.servers["s1"]
        cpu_before = group_cpu_seconds(server.proc.pid)
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "edn.cli", "subscribe", "--at", server.base_url, TOPIC,
             "--from-file", str(requests), "--dialect", "ranges", "--admin-token", _TOKEN,
             "--out", str(tmp / "results.jsonl")], capture_output=True, text=True, timeout=900)
        took = time.perf_counter() - started
        cpu = group_cpu_seconds(server.proc.pid) - cpu_before
        if result.returncode != 0:
            raise RuntimeError(f"edn subscribe --from-file failed: {result.stderr[-2000:]}")
    return {"bulk_subscribe_per_s": round(n / took, 1),
            "bulk_server_cpu_us_per_subscription": round(cpu / n * 1e6, 1)}


def _rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its children."""
    pids = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            pids += [int(c) for c in children.read().split()]
    total = 0
    for p in pids:
        with open(f"/proc/{p}/status") as status:
            total += sum(int(line.split()[1]) * 1024 for line in status
                         if line.startswith("VmRSS:"))
    return total


def _bulk_admin(server, n: int, seed: int) -> list[str]:
    """``n`` range subscriptions made at ``server`` with SubscribeMany; their ids."""
    lo, hi = uniform_rectangles(n, _D, seed=seed)
    return bulk_subscribe(server.base_url, _TOKEN, TOPIC, np.round(lo, 3), np.round(hi, 3),
                          lambda i: f"http://127.0.0.1:9/n/{i}")


class _BatchProbe:
    """One-event EventBatch round trips at ``server`` as the dispatcher sends them (its
    credential, a sequence number, one keep-alive connection), one after the other."""

    def __init__(self, server):
        from lxml import etree
        from wsframework import ns
        from wsframework.admin import contracts
        from wsframework.client import SoapClient
        from wsframework.transport import HttpTransport
        self.address = f"{server.base_url}/topics/{TOPIC}"
        self.transport = HttpTransport(timeout=(3.0, 60.0))
        self.client = SoapClient(self.transport)
        self.credential = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        self.credential.text = _TOKEN
        self.seq = 0

    def round_trip(self) -> float:
        """ms of one round trip."""
        from lxml import etree
        from route_manager.protocol import (BATCH_DISPATCHER, BATCH_FIRST_SEQ, EVENT_BATCH,
                                            EVENT_BATCH_ACTION)
        from route_manager.workloads.grid_xml import event_element
        self.seq += 1
        batch = etree.Element(EVENT_BATCH, {BATCH_DISPATCHER: "bench-control",
                                            BATCH_FIRST_SEQ: str(self.seq)})
        batch.append(event_element(np.full(_D, 9.99), self.seq))  # a corner few reach
        started = time.perf_counter()
        self.client.send(self.address, EVENT_BATCH_ACTION, batch, [self.credential])
        return (time.perf_counter() - started) * 1000

    def close(self) -> None:
        self.transport.close()


def _renew_storm(server, ids: list[str], clients: int) -> dict:
    """Publication p99 at ``server`` while ``clients`` renew 10% of ``ids``, over quiet. The
    renewing clients run in a process of their own (:mod:`.renew_clients`); one publisher
    times its round trips over one keep-alive connection, quiet and during the storm."""
    probe = _BatchProbe(server)
    try:
        quiet = [probe.round_trip() for _ in range(QUIET_ROUND_TRIPS)]
        storm_ids = ids[:max(1, len(ids) // 10)]
        started = time.perf_counter()
        errors = tempfile.TemporaryFile()  # not a pipe: a full one would stop the clients
        storm = subprocess.Popen([sys.executable, "-m", "benchmarks.performance.renew_clients",
                                  server.base_url, str(clients)],
                                 stdin=subprocess.PIPE, stderr=errors, text=True)
        try:
            storm.stdin.write("\n".join(storm_ids) + "\n")
            storm.stdin.close()
            during = []
            while storm.poll() is None:
                during.append(probe.round_trip())
            storm_s = time.perf_counter() - started
        finally:
            if storm.poll() is None:
                storm.kill()
            storm.wait()
            errors.seek(0)
            reported = errors.read().decode(errors="replace")
            errors.close()
        if storm.returncode != 0:
            raise RuntimeError(f"the renewing clients failed: {reported[-2000:]}")
    finally:
        probe.close()
    quiet_p99 = float(np.percentile(quiet, 99))
    storm_p99 = float(np.percentile(during, 99)) if during else None
    return {"renew_storm_publish_p99_ratio": (round(storm_p99 / quiet_p99, 2)
                                              if storm_p99 is not None else None),
            "publish_p99_quiet_ms": round(quiet_p99, 2),
            "publish_p99_during_storm_ms": round(storm_p99, 2) if storm_p99 else None,
            "publish_p50_during_storm_ms": (round(float(np.percentile(during, 50)), 2)
                                            if during else None),
            "publications_during_storm": len(during),
            "renew_storm_renews": len(storm_ids),
            "renew_storm_s": round(storm_s, 2),
            "renew_storm_renews_per_s": round(len(storm_ids) / storm_s, 1)}


def _one_server(tmp: Path, n: int, clients: int) -> dict:
    network = LocalNetwork(tmp / "one-server", [("s1", "rtree", 1)], token=_TOKEN, d=_D,
                           load_threshold=10 * n)
    network.servers["s1"].extra_args += [
        "--set", "max_subscriptions=0", "--set", "max_subscriptions_per_topic=0",
        "--set", "max_subscriptions_per_host=0"]
    suffix = "1m" if n == _MILLION else "at_n"
    with network:
        network.create_topic()
        server = network.servers["s1"]
        empty = _rss(server.proc.pid)
        ids = _bulk_admin(server, n, seed=13)
        after_bulk = _rss(server.proc.pid)
        server.stop()
        started = time.perf_counter()
        server.start(timeout=3600)
        restart = time.perf_counter() - started
        held = _rss(server.proc.pid)
        figures = {f"rss_bytes_per_subscription_{suffix}": round((held - empty) / n),
                   "rss_bytes_per_subscription_after_bulk": round((after_bulk - empty) / n),
                   f"restart_to_serving_s_{suffix}": round(restart, 1)}
        storm = _renew_storm(server, ids, clients)
    ratio = storm.pop("renew_storm_publish_p99_ratio")
    figures[f"renew_storm_publish_p99_ratio{'' if n == _MILLION else '_at_n'}"] = ratio
    figures.update(storm)
    return figures


def run(quick: bool = False) -> dict:
    n = 400 if quick else 2000
    bulk_n = 2000 if quick else 50_000
    clients = 32
    probes = 5 if quick else 40
    server_n = 5000 if quick else int(os.environ.get("EDN_BENCH_SERVER_SUBSCRIPTIONS", _MILLION))
    with tempfile.TemporaryDirectory(prefix="edn-bench-control-") as tmp:
        figures = {"setup": {"subscriptions": n, "subscribe_clients": clients, "servers": 4,
                             "bulk_subscriptions": bulk_n, "probes": probes,
                             "server_subscriptions": server_n, "cores": os.cpu_count()}}
        figures.update(_subscribe_network(Path(tmp), n, clients, probes))
        figures.update(_placed_bulk(Path(tmp), n))
        figures.update(_bulk(Path(tmp), bulk_n))
        figures.update(_one_server(Path(tmp), server_n, clients))
    return figures
