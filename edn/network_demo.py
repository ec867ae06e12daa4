"""The network half of ``edn demo`` (see :mod:`edn.demo`)."""
from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path

import numpy as np


def _say(text: str) -> None:
    print(text, flush=True)


def _measure(network, points, label: str) -> dict:
    started = time.perf_counter()
    first, last = network.publish(points)
    published = time.perf_counter() - started
    network.wait_counted(first, last, timeout=300)  # end to end: the last notification in
    elapsed = time.perf_counter() - started
    expected = network.wait_delivered(first, last, timeout=300)  # then check each one
    received = network.received(first, last)
    figures = network.dispatcher_stats()
    copies = int(figures["copies_out"])
    row = {
        "label": label,
        "events": len(points),
        "hit_ratio": float(figures["hit_ratio"]),
        "publish_per_s": len(points) / published,
        "events_per_s": len(points) / elapsed,
        "notifications": len(received),
        "expected": len(expected),
        "exact": received == expected,
        "copies": copies,
    }
    _say(f"  {label:<22} hit ratio {row['hit_ratio']:.3f}   {row['events_per_s']:7.1f} events/s "
         f"end to end   {row['notifications']:>6}/{row['expected']:<6} notifications   "
         f"exact: {'yes' if row['exact'] else 'NO'}")
    return row


def run_network_demo(args) -> int:
    from edn.localnet.network import LocalNetwork
    from edn.sink import FastSink
    from route_manager.workloads import uniform_events, uniform_rectangles

    d, n_servers = 4, args.servers
    n_subscriptions, n_events = args.subscriptions, args.events
    token = secrets.token_urlsafe(16)
    lo, hi = uniform_rectangles(n_subscriptions, d, seed=11)
    lo, hi = np.round(lo, 3), np.round(hi, 3)
    one_by_one = getattr(args, "one_by_one", False)
    how = ("with one WS-Eventing Subscribe each" if one_by_one else
           "by a placed bulk subscribe (WS-Eventing Subscribe bodies, each placed as a "
           "Subscribe would be)")
    _say(f"event distribution network demo: 1 dispatcher + {n_servers} subscription servers "
         f"(real gunicorn processes on loopback, SQLite), {n_subscriptions} range subscriptions "
         f"uniform in [0,10]^{d} made {how}, {n_events} events per measurement")
    rows = []
    with tempfile.TemporaryDirectory(prefix="edn-demo-") as tmp:
        for round_, partitioner in enumerate(args.partitioners):
            servers = [(f"s{i + 1}", partitioner, 1) for i in range(n_servers)]
            # Load threshold: twice the average load, the paper's load-balancing factor 2.
            threshold = max(1, 2 * n_subscriptions // n_servers)
            _say(f"\n[{partitioner}] starting the network ...")
            # The sink must outrun the network (~10,000 notifications in a second): the
            # asyncio sink in its own process, recording what it gets for the exactness check.
            with FastSink(record=True) as sink, LocalNetwork(
                    Path(tmp) / partitioner, servers, token=token, d=d,
                    load_threshold=threshold, sink=sink) as network:
                network.create_topic()
                started = time.perf_counter()
                if one_by_one:
                    network.subscribe(lo, hi)
                else:
                    network.subscribe_in_bulk(lo, hi)
                took = time.perf_counter() - started
                loads = {name: int(network.server_stats(name, "load")["load"]) for name in servers_names(servers)}
                _say(f"  subscribed {n_subscriptions} in {took:.1f}s ({n_subscriptions / took:.0f}/s); "
                     f"placement: {loads}")
                points = np.round(uniform_events(n_events, d, seed=100 + round_), 3)
                rows.append(_measure(network, points, f"{partitioner} (online)"))
                if partitioner == "random" and not args.no_repartition:
                    result = network.repartition("rtree")
                    network.wait_routed()
                    _say(f"  offline re-partition (bulk-loading R-tree): moved {result.Moved} subscriptions")
                    before = int(network.dispatcher_stats("copies_out")["copies_out"])
                    row = _measure_after(network, points, before)
                    rows.append(row)
                if getattr(args, "console", False) and round_ == len(args.partitioners) - 1:
                    _summary(rows)  # before the wait, where a newcomer reads it
                    from edn.demo_console import keep_running
                    keep_running(network.dispatcher, token, network.servers, sink=sink)
    if not getattr(args, "console", False):
        _summary(rows)
    _say("stopped everything the demo started")
    return 0 if all(row["exact"] for row in rows) else 1


def _summary(rows: list[dict]) -> None:
    _say("\nsummary (hit ratio = copies forwarded / (events x servers); lower is less traffic)")
    _say(f"  {'partitioner':<24}{'hit ratio':>10}{'events/s':>10}   exact")
    for row in rows:
        _say(f"  {row['label']:<24}{row['hit_ratio']:>10.3f}{row['events_per_s']:>10.1f}   "
             f"{'yes' if row['exact'] else 'NO'}")
    exact = all(row["exact"] for row in rows)
    _say(f"\nevery network delivered exactly what a single event source would: {'yes' if exact else 'NO'}")


def servers_names(servers):
    return [name for name, _, _ in servers]


def _measure_after(network, points, copies_before: int) -> dict:
    """Measure again on a running network: the hit ratio of this batch only."""
    events_before = int(network.dispatcher_stats("events_in")["events_in"])
    started = time.perf_counter()
    first, last = network.publish(points)
    network.wait_counted(first, last, timeout=300)
    elapsed = time.perf_counter() - started
    expected = network.wait_delivered(first, last, timeout=300)
    figures = network.dispatcher_stats()
    events = int(figures["events_in"]) - events_before
    copies = int(figures["copies_out"]) - copies_before
    servers = int(figures["servers"])
    received = network.received(first, last)
    row = {"label": "offline R-tree", "events": len(points), "hit_ratio": copies / (events * servers),
           "events_per_s": len(points) / elapsed, "notifications": len(received),
           "expected": len(expected), "exact": received == expected}
    _say(f"  {'offline R-tree':<22} hit ratio {row['hit_ratio']:.3f}   {row['events_per_s']:7.1f} "
         f"events/s end to end   {row['notifications']:>6}/{row['expected']:<6} notifications   "
         f"exact: {'yes' if row['exact'] else 'NO'}")
    return row
