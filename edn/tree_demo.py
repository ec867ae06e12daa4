"""``edn demo --topology tree``: the event distribution network as a dispatch tree (paper II).

A root dispatcher, two child dispatchers (``edn serve dispatcher --parent ROOT``) and two
subscription servers under each, all real gunicorn processes on loopback; range
subscriptions made through WS-Eventing at the servers; events published at the root. Each
child reports one sub-tree summary per topic (the union of its servers' summaries) and the
root routes an event only down the subtrees whose summaries it matches. Printed: the hit
ratio at each level (copies the level forwarded / (events x nodes one level down)), the
events per second end to end, and the exactness check against what a single event source
would deliver. Everything started is stopped.
"""
from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path

import numpy as np

CHILDREN = {"c1": ["s1", "s2"], "c2": ["s3", "s4"]}


def _say(text: str) -> None:
    print(text, flush=True)


def run_tree_demo(args) -> int:
    from edn.localnet.network import LocalNetwork
    from edn.sink import FastSink
    from route_manager.precision import format_precision
    from route_manager.workloads import uniform_events, uniform_rectangles

    d = 4
    n_subscriptions, n_events = args.subscriptions, args.events
    servers = [(name, "rtree", 1) for below in CHILDREN.values() for name in below]
    token = secrets.token_urlsafe(16)
    # the flat demo's workload: the same subscriptions and events, so the figures compare
    lo, hi = uniform_rectangles(n_subscriptions, d, seed=11)
    lo, hi = np.round(lo, 3), np.round(hi, 3)
    _say(f"dispatch tree demo: a root dispatcher, {len(CHILDREN)} child dispatchers with "
         f"{len(servers) // len(CHILDREN)} subscription servers each (real gunicorn processes "
         f"on loopback, SQLite), {n_subscriptions} range subscriptions uniform in "
         f"[0,10]^{d} made through WS-Eventing, {n_events} events published at the root")
    with tempfile.TemporaryDirectory(prefix="edn-demo-tree-") as tmp, \
            FastSink(record=True) as sink, \
            LocalNetwork(Path(tmp), servers, token=token, d=d, sink=sink, children=CHILDREN,
                         load_threshold=max(1, 2 * n_subscriptions // len(servers))) as network:
        _say(f"  root {network.dispatcher.base_url}; "
             + "; ".join(f"{name} {p.base_url} -> {', '.join(CHILDREN[name])}"
                         for name, p in network.children.items()))
        network.create_topic()
        _say("  topic created at the root; every child and server hosts it")
        started = time.perf_counter()
        if getattr(args, "one_by_one", False):
            network.subscribe(lo, hi)
        else:
            network.subscribe_in_bulk(lo, hi)
        _say(f"  subscribed {n_subscriptions} in {time.perf_counter() - started:.1f}s; the "
             f"root's route updates account for all of them (sub-tree loads)")
        points = np.round(uniform_events(n_events, d, seed=100), 3)
        started = time.perf_counter()
        first, last = network.publish(points)
        network.wait_counted(first, last, timeout=300)
        elapsed = time.perf_counter() - started
        expected = network.wait_delivered(first, last, timeout=300)
        received = network.received(first, last)
        ratios = network.level_hit_ratios()
        exact = received == expected
        _say(f"  {n_events} events: {n_events / elapsed:.1f} events/s end to end, "
             f"{len(received)}/{len(expected)} notifications")
        _say(f"  hit ratio at the root (copies / (events x {len(CHILDREN)} children)): "
             f"{ratios[0]:.3f}")
        _say(f"  hit ratio at the children (copies / (events x {len(servers)} servers)): "
             f"{ratios[1]:.3f}")
        for name, child in network.children.items():
            asked = float(network.node_stats(child, "tree.parent.0.precision")
                          ["tree.parent.0.precision"])
            own = network.node_stats(child, "precision")["precision"]
            _say(f"  {name}: the root routes it at precision {format_precision(asked)}; it "
                 f"routes its servers at {own} (each dispatcher tunes its own level)")
        if getattr(args, "console", False):
            _say_exact(exact)
            from edn.demo_console import keep_running
            keep_running(network.dispatcher, token, network.servers, sink=sink,
                         others=network.children)
    if not getattr(args, "console", False):
        _say_exact(exact)
    _say("stopped everything the demo started")
    return 0 if exact else 1


def _say_exact(exact: bool) -> None:
    _say(f"\nthe tree delivered exactly what a single event source would: "
         f"{'yes' if exact else 'NO'}")
