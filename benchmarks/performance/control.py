"""The control path: how fast subscriptions are made, on real processes.

* ``subscribe_per_s``: WS-Eventing Subscribes acknowledged per second into a 4-server network
  with placement (R-tree partitioner, load threshold twice the average), from
  ``subscribe_clients`` concurrent clients; ``subscribe_cpu_ms_per_subscription``: the
  servers' and dispatcher's CPU per Subscribe, and the clients' (``client_cpu_ms...``).
* ``bulk_subscribe_per_s``: ``edn subscribe --from-file`` (SubscribeMany, chunks of 5,000)
  into one server with its subscription limits lifted; ``bulk_server_cpu_us_per_subscription``.
* ``summary_propagation_p99_ms``: after the Subscribe network is populated, a Subscribe whose
  filter alone matches a probe event is acknowledged, and the probe is published again and
  again until the sink receives it: the time from the acknowledgement to the first delivery,
  over ``probes`` subscriptions (p50 and p99). It includes one publication round trip.

Figures not measured by this benchmark yet are printed as None, named in ``not_measured``.
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

from edn.localnet.network import TOPIC, LocalNetwork
from edn.sink import FastSink
from route_manager.workloads import uniform_rectangles
from matchers.vocabulary import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient

_TOKEN = "bench-control-token"
_D = 4
_NOT_MEASURED = ("rss_bytes_per_subscription_1m", "restart_to_serving_s_1m",
                 "renew_storm_publish_p99_ratio")


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (the gunicorn arbiter and its workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                pids += [int(c) for c in children.read().split()]
    except OSError:
        pass
    total = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


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
        cpu_before, own_before = sum(map(_cpu_seconds, pids)), _own_cpu()
        started = time.perf_counter()
        network.subscribe(lo, hi, threads=clients)
        took = time.perf_counter() - started
        cpu = sum(map(_cpu_seconds, pids)) - cpu_before
        own = _own_cpu() - own_before
        delays = _propagation(network, sink, probes)
    return {"subscribe_per_s": round(n / took, 1),
            "subscribe_cpu_ms_per_subscription": round(cpu / n * 1000, 3),
            "client_cpu_ms_per_subscription": round(own / n * 1000, 3),
            "summary_propagation_p50_ms": round(float(np.percentile(delays, 50)), 1),
            "summary_propagation_p99_ms": round(float(np.percentile(delays, 99)), 1)}


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
        cpu_before = _cpu_seconds(server.proc.pid)
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "edn.cli", "subscribe", "--at", server.base_url, TOPIC,
             "--from-file", str(requests), "--dialect", "ranges", "--admin-token", _TOKEN,
             "--out", str(tmp / "results.jsonl")], capture_output=True, text=True, timeout=900)
        took = time.perf_counter() - started
        cpu = _cpu_seconds(server.proc.pid) - cpu_before
        if result.returncode != 0:
            raise RuntimeError(f"edn subscribe --from-file failed: {result.stderr[-2000:]}")
    return {"bulk_subscribe_per_s": round(n / took, 1),
            "bulk_server_cpu_us_per_subscription": round(cpu / n * 1e6, 1)}


def run(quick: bool = False) -> dict:
    n = 400 if quick else 2000
    bulk_n = 2000 if quick else 50_000
    clients = 32
    probes = 5 if quick else 40
    with tempfile.TemporaryDirectory(prefix="edn-bench-control-") as tmp:
        figures = {"setup": {"subscriptions": n, "subscribe_clients": clients, "servers": 4,
                             "bulk_subscriptions": bulk_n, "probes": probes,
                             "cores": os.cpu_count()}}
        figures.update(_subscribe_network(Path(tmp), n, clients, probes))
        figures.update(_bulk(Path(tmp), bulk_n))
    figures.update({key: None for key in _NOT_MEASURED})
    figures["not_measured"] = list(_NOT_MEASURED)
    return figures
