"""Placement under concurrent Subscribes: ``clients`` threads subscribe
``subscribes`` range filters at once, spread over three EDN servers (real ``edn serve``
processes; each places the subscription on the best server and may forward it there).

Figures: ``ok`` and ``failed`` (with the first few failure texts), latency ``p50_ms``,
``p95_ms``, ``p99_ms``, ``max_ms`` of the successful Subscribes, ``placed`` (the
subscriptions the dispatcher's route updates account for: one per Subscribe, none twice),
``forwarded`` (Subscribes a server forwarded to another), and a replay check: ``replays``
Subscribes sent again with the same wsa:MessageID and body must get the same
SubscriptionManager EPR (``replay_same``) and leave ``placed`` unchanged
(``placed_after_replay``); the same MessageID with another NotifyTo must get a new
subscription (``replay_other_client_distinct``), never another client's.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from edn.sink import NotificationSink
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import subscribe_body
from subscription_manager.server.relay import MessageIdClient
from subscription_manager.versions import VERSIONS
from matchers.vocabulary import RANGES_DIALECT
from wsframework.addressing import EndpointReference, new_message_id
from wsframework.transport import HttpTransport

_TOKEN = "bench-token"
_D = 2


def subscribe_with_id(address: str, notify_to: str, filter_text: str, message_id: str,
                      timeout: float = 30.0) -> str:
    """Subscribe (WS-Eventing 2011) with ``message_id``; returns the manager EPR's text."""
    v = VERSIONS["2011"]
    client = MessageIdClient(HttpTransport(timeout=(2.0, timeout)), message_id,
                             wsa_version=v.wsa)
    body = subscribe_body(v, notify_to, filter=filter_text, dialect=RANGES_DIALECT,
                          expires="PT1H")
    reply = client.call(address, v.action("Subscribe"), body)
    manager = EndpointReference.from_element(reply.body.find(v.q("SubscriptionManager")), v.wsa)
    return manager.address + "|" + "|".join(etree.tostring(p).decode()
                                             for p in manager.reference_parameters)


def _pct(values, q):
    return round(float(np.percentile(values, q)) * 1000, 1) if values else None


def measure(*, servers: int = 3, clients: int = 50, subscribes: int = 300, replays: int = 20,
            partitioner: str = "rtree", workers: int = 1, seed: int = 13) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="edn-bench-placement-"))
    rng = np.random.default_rng(seed)
    lo = rng.uniform(0, 8, (subscribes, _D))
    hi = lo + rng.uniform(0.5, 2, (subscribes, _D))
    sink = NotificationSink(keep_bodies=False)
    names = [f"s{k + 1}" for k in range(servers)]
    try:
        sink.start()
        with LocalNetwork(data_dir, [(n, partitioner, workers) for n in names], token=_TOKEN,
                          d=_D, sink=sink) as net:
            net.create_topic()
            addresses = [f"{net.servers[n].base_url}/topics/grid" for n in names]
            message_ids = [new_message_id() for _ in range(subscribes)]
            latencies: list[float] = []
            failures: list[str] = []
            results: dict[int, str] = {}

            def one(i):
                started = time.monotonic()
                try:
                    results[i] = subscribe_with_id(addresses[i % servers], f"{sink.url}/n/{i}",
                                                   range_filter(lo[i], hi[i]), message_ids[i])
                    latencies.append(time.monotonic() - started)
                except Exception as exc:  # noqa: BLE001 -- every failure is a figure
                    failures.append(f"{type(exc).__name__}: {exc}"[:300])

            started = time.monotonic()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(one, range(subscribes)))
            wall = time.monotonic() - started

            def placed():
                figures = net.dispatcher_stats("server.")
                return sum(int(v) for k, v in figures.items() if k.endswith(".load"))

            # every Subscribe that succeeded is accounted for; wait for the route updates
            try:
                wait_until(lambda: placed() >= len(results), 30, what="route updates")
            except AssertionError:
                pass
            placed_now = placed()
            forwarded = sum(int(net.server_stats(n).get("forwarded_subscribes", 0))
                            for n in names)
            # replays: the same MessageID and body again, at the same server (a client
            # repeating its request), after the placements of all the others
            same = 0
            for i in list(results)[:replays]:
                again = subscribe_with_id(addresses[i % servers], f"{sink.url}/n/{i}",
                                          range_filter(lo[i], hi[i]), message_ids[i])
                if again == results[i]:
                    same += 1
            # the same MessageID from another client (another NotifyTo): its own subscription
            distinct = 0
            for i in list(results)[:min(5, replays)]:
                other = subscribe_with_id(addresses[i % servers], f"{sink.url}/other/{i}",
                                          range_filter(lo[i], hi[i]), message_ids[i])
                if other != results[i]:
                    distinct += 1
            extra = min(5, replays, len(results))
            try:
                wait_until(lambda: placed() >= placed_now + extra, 30, what="route updates")
            except AssertionError:
                pass
            placed_after = placed() - extra
    finally:
        sink.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "servers": servers, "clients": clients, "subscribes": subscribes,
        "partitioner": partitioner, "workers_per_server": workers,
        "ok": len(latencies), "failed": len(failures), "failures": failures[:5],
        "wall_s": round(wall, 2),
        "p50_ms": _pct(latencies, 50), "p95_ms": _pct(latencies, 95),
        "p99_ms": _pct(latencies, 99), "max_ms": _pct(latencies, 100),
        "placed": placed_now, "forwarded": forwarded,
        "replays": min(replays, len(results)), "replay_same": same,
        "placed_after_replay": placed_after,
        "replay_other_client_distinct": distinct,
    }


def run(quick: bool = False) -> dict:
    if quick:
        return measure(clients=20, subscribes=60, replays=10)
    return measure()
