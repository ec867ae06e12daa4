"""One dispatcher against a dispatch tree, side by side (docs/tree-throughput.md).

Two networks of real processes on loopback hold the same subscriptions on the same servers:

* **flat** -- one dispatcher over ``servers`` subscription servers (paper Fig. 1);
* **tree** -- a root dispatcher over ``children`` child dispatchers (``edn serve dispatcher
  --parent``), each over ``servers / children`` of the servers.

Workload: narrow random range subscriptions in d = 4 (half-widths uniform in
[0, ``half_width``]), each with an ``@sym`` equality no summary carries (as in
:mod:`benchmarks.livenet`: it keeps notifications rare, so the servers' CPU stays small),
imported in bulk. Placement is an offline R-tree built top down (TGS, paper III-A): the
subscriptions are cut into ``children`` groups and each group into ``servers / children``
partitions, so every server's summary is compact and the servers under one child are
neighbours; the flat network uses the very same partitions.

Both networks run at once and the publisher alternates between them, ``rounds`` windows each
(a warm-up, then ``seconds`` measured): on a shared 2-core machine only a ratio measured side
by side means anything. Precision is fixed at precise everywhere (self-tuning off; a child
still cuts its report to ``tree_report_max_bytes``), the link is uncapped: what differs is the
topology alone.

Per window: events/s at the root (with backpressure, the rate they leave at), every
dispatcher's measured T_f, T_d, T_c and R (its counters, :mod:`route_manager.models.measurement`),
each process's CPU from /proc (as livenet), the hit ratio per level (copies forwarded at a
level / (events x nodes one level down)); and beside them the model
(:func:`route_manager.models.throughput.tree_throughput`) fed with those parameters: each node's
CPU per event from eq. (3), the dedicated-CPU throughput (every node on its own core, the
paper's setting), the shared-machine bound, and the hit ratio precise summaries would give
(an exact oracle over a sample of the events).

Then the Bloom-summary figures of :func:`benchmarks.reproductions.bloom.bloom_comparison`, when that module
exists. ``--quick``: 8 servers x 1,000 subscriptions, 2 children, one short window each.
"""
from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edn.localnet.network import LocalNetwork, wait_until
from route_manager.models.measurement import Counters, Measurement, between
from route_manager.partitioning import tgs
from route_manager.models.throughput import TreeNode, tree_level_hit_ratios, tree_throughput
from wsframework.admin import AdminClient, contracts

from ..livenet import Publisher, batch_payloads, group_cpu_seconds, import_partitions

TOPIC = "grid"
MACHINE_CORES = os.cpu_count() or 1  # every process of both networks shares them


@dataclass(frozen=True)
class Setup:
    servers: int = 20
    per_server: int = 10_000
    children: int = 4
    d: int = 4
    half_width: float = 0.8
    symbols: int = 16
    batch: int = 64
    publishers: int = 4
    events: int = 64 * 200        # distinct events in the pre-built batches (cycled)
    oracle_events: int = 1000     # events of the exact hit-ratio oracle
    warmup: float = 3.0
    seconds: float = 8.0
    rounds: int = 3
    seed: int = 7

    @classmethod
    def quick(cls) -> "Setup":
        return cls(servers=8, per_server=1000, children=2, events=64 * 40, oracle_events=300,
                   warmup=1.0, seconds=3.0, rounds=1)

    @property
    def per_child(self) -> int:
        return self.servers // self.children


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- workload ----------------------------------------------------------------------------------

def narrow_rectangles(setup: Setup) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(setup.seed)
    n = setup.servers * setup.per_server
    centre = rng.uniform(0, 10, (n, setup.d))
    half = rng.uniform(0, setup.half_width, (n, setup.d))
    return np.round(np.clip(centre - half, 0, 10), 3), np.round(np.clip(centre + half, 0, 10), 3)


def tree_partition(lo: np.ndarray, hi: np.ndarray, children: int, per_child: int) -> np.ndarray:
    """Server of each subscription, server ``k`` under child ``k // per_child``: TGS cuts the
    subscriptions into ``children`` groups, then each group into ``per_child``. Grouping the
    partitions of a one-level cut afterwards (by their centres) makes the children's
    summaries overlap more: neighbours in a flat cut are not neighbours in a tree's."""
    top = tgs.partition(lo, hi, children)
    labels = np.empty(len(lo), dtype=np.int64)
    for group in range(children):
        members = np.flatnonzero(top == group)
        labels[members] = group * per_child + tgs.partition(lo[members], hi[members], per_child)
    return labels


def oracle_hit_ratios(lo, hi, labels, setup: Setup, points: np.ndarray) -> tuple[float, float]:
    """The hit ratios precise summaries give (a box summary covers exactly the union of its
    server's ranges; the @sym equality is not summarized): per server, and per child (an
    event goes down to a child when any server under it has a range containing it)."""
    hit = np.zeros((len(points), setup.servers), dtype=bool)
    for server in range(setup.servers):
        mine_lo, mine_hi = lo[labels == server], hi[labels == server]
        for start in range(0, len(points), 50):
            p = points[start:start + 50, None, :]
            hit[start:start + 50, server] = ((mine_lo[None] <= p) & (mine_hi[None] >= p)).all(2).any(1)
    below = np.stack([hit[:, k * setup.per_child:(k + 1) * setup.per_child].any(1)
                      for k in range(setup.children)], axis=1)
    return float(hit.mean()), float(below.mean())


# -- the networks ------------------------------------------------------------------------------

def server_names(setup: Setup) -> list[str]:
    return [f"s{k + 1:02d}" for k in range(setup.servers)]


def start_network(setup: Setup, kind: str, data_dir: Path, work: dict) -> LocalNetwork:
    """A running network (``kind`` flat or tree) with every subscription imported and routed
    up to the root, at precision precise everywhere."""
    names = server_names(setup)
    children = None
    if kind == "tree":
        children = {f"c{g + 1}": names[g * setup.per_child:(g + 1) * setup.per_child]
                    for g in range(setup.children)}
    args = ["--no-self-tuning", "--max-body", str(64 * 1024 * 1024), "--log-level", "warning"]
    network = LocalNetwork(data_dir, [(name, "local", 1) for name in names],
                           token=secrets.token_urlsafe(16), d=setup.d, keep_bodies=False,
                           load_threshold=10 * setup.per_server, dispatcher_args=args,
                           children=children)
    for process in network.servers.values():
        # as livenet: peers' subscription-routing summaries are unused with imported
        # subscriptions; keep them tiny and rare so the servers' CPU goes to events
        process.extra_args += ["--max-body", str(64 * 1024 * 1024), "--log-level", "warning",
                               "--set", "routing_precision=0.0005", "--set", "peer_interval=30"]
    try:
        network.start()
        network.create_topic(TOPIC)
        import_partitions(network, work["lo"], work["hi"], work["labels"], setup.per_server,
                          symbols=work["symbols"], timeout=900)
        for process in network.dispatchers():
            _configure(network, process, precision="precise")
    except BaseException:
        network.close()
        raise
    return network


def _configure(network: LocalNetwork, process, **settings) -> None:
    AdminClient(process.base_url, network.token).call(contracts.Configure(Setting=[
        contracts.Figure(Name=k, Value=str(v)) for k, v in settings.items()]))


# -- readings ----------------------------------------------------------------------------------

_SECONDS = ("time", "cpu", "route_cpu", "forward_cpu", "busy")


def _counters(network: LocalNetwork, process) -> tuple[Counters, dict[str, int], int]:
    """One reading of a dispatcher's counters, the copies it sent to each node below, and
    the boxes its route set holds."""
    figures = network.node_stats(process)
    reading = Counters(**{name: (float if name in _SECONDS else int)(float(figures[f"counters.{name}"]))
                          for name in _SECONDS + ("events", "copies", "sent", "bytes_out")},
                       servers=int(figures["servers"]))
    sent = {key.split(".")[1]: int(value) for key, value in figures.items()
            if key.startswith("server.") and key.endswith(".sent")}
    return reading, sent, int(figures.get("route_boxes", 0))


def snapshot(network: LocalNetwork) -> dict:
    """Counters of every dispatcher and CPU seconds of every process (and this one)."""
    dispatchers = {"root": network.dispatcher, **network.children}
    return {"counters": {name: _counters(network, p) for name, p in dispatchers.items()},
            "cpu": {name: group_cpu_seconds(p.proc.pid)
                    for name, p in [*dispatchers.items(), *network.servers.items()]},
            "bench": time.process_time(), "time": time.monotonic()}


@dataclass
class Window:
    """What one measured window of one network gives."""

    measurements: dict[str, Measurement]     # dispatcher -> its model parameters
    sent: dict[str, dict[str, int]]          # dispatcher -> node below -> copies sent
    cpu_s: dict[str, float]                  # process -> CPU seconds over the window
    bench_cpu_s: float
    wall: float
    boxes: dict[str, int]                    # dispatcher -> boxes in its route set (at the end)

    @property
    def events(self) -> int:
        return self.measurements["root"].events

    @property
    def events_per_s(self) -> float:
        return self.measurements["root"].events_per_s


def between_snapshots(a: dict, b: dict) -> Window:
    measurements, sent, boxes = {}, {}, {}
    for name, (reading_b, sent_b, boxes_b) in b["counters"].items():
        reading_a, sent_a, _ = a["counters"][name]
        boxes[name] = boxes_b
        measurements[name] = between(reading_a, reading_b)
        sent[name] = {node: sent_b[node] - sent_a.get(node, 0) for node in sent_b}
    return Window(measurements, sent, {k: b["cpu"][k] - a["cpu"][k] for k in b["cpu"]},
                  b["bench"] - a["bench"], b["time"] - a["time"], boxes)


def measure_window(network: LocalNetwork, payloads: list[bytes], setup: Setup) -> Window:
    publisher = Publisher(network.dispatcher.base_url, payloads, setup.batch,
                          setup.publishers).start()
    try:
        time.sleep(setup.warmup)  # the first batches calibrate routing tables: no condition
        a = snapshot(network)
        time.sleep(setup.seconds)
        b = snapshot(network)
    finally:
        publisher.stop()
    try:  # the other network's window should not pay for this one's backlog
        wait_until(network.quiet, timeout=60, what="an idle network", poll=0.5)
    except AssertionError:
        _log("  (the network was still draining after 60 s)")
    return between_snapshots(a, b)


# -- the model beside the measurement ----------------------------------------------------------

def model_nodes(window: Window) -> list[TreeNode]:
    """The tree of the model from one window: every dispatcher with its measured T_f, T_d,
    T_c and R, and every server as a leaf whose cost per copy is its measured CPU per copy
    received (T_s F). Shares: events (copies) a node got per event published at the root."""
    events = window.events
    nodes = []
    parent_of = {}
    for name, m in window.measurements.items():
        level = 0 if name == "root" else 1
        share = 1.0 if name == "root" else m.events / events
        nodes.append(TreeNode(name, level, fan_out=m.servers, t_f=m.t_f, t_d=m.t_d, t_c=m.t_c,
                              hit_ratio=min(1.0, max(0.0, m.hit_ratio)),
                              share=min(1.0, share)))
        for below in window.sent[name]:
            parent_of[below] = level
    for name, seconds in window.cpu_s.items():
        if name in window.measurements:
            continue
        copies = sum(sent.get(name, 0) for sent in window.sent.values())
        nodes.append(TreeNode(name, parent_of.get(name, 0) + 1, fan_out=0,
                              t_f=seconds / copies if copies else 0.0,
                              share=min(1.0, copies / events)))
    return nodes


def figures_of(window: Window, oracle: list[float]) -> dict:
    """Measured figures of one window and the model's beside them."""
    if not window.events:
        raise RuntimeError("no event was routed in a measured window (a starved machine?)")
    nodes = model_nodes(window)
    events = window.events
    rate = window.events_per_s
    dispatchers = [n for n in nodes if n.fan_out]
    leaves = [n for n in nodes if not n.fan_out]
    servers_cpu = sum(window.cpu_s[n.name] for n in leaves)
    # the processes the model's nodes do not cover: this process (publishers, the sink)
    other = window.bench_cpu_s / events
    dedicated = tree_throughput(nodes)
    shared = tree_throughput(nodes, cores=MACHINE_CORES, other_cpu_per_event=other)
    root = window.measurements["root"]
    out = {
        "events_per_s": round(rate, 1),
        "model_dedicated_events_per_s": round(dedicated.throughput, 1),
        "model_dedicated_bottleneck": dedicated.bottleneck,
        "model_shared_events_per_s": round(shared.throughput, 1),
        "root_cpu_us_per_event": _us(window.cpu_s["root"] / events),
        "model_root_cpu_us_per_event": _us(nodes[0].cost),
        "root_t_f_us": _us(root.t_f), "root_t_d_us": round(root.t_d * 1e6, 3),
        "root_t_c_us": _us(root.t_c), "root_fan_out": root.servers,
        "root_route_boxes": window.boxes["root"],
        "hit_ratio_per_level": [round(r, 4) for r in _measured_level_ratios(window)],
        "model_hit_ratio_per_level": [round(r, 4) for r in tree_level_hit_ratios(dispatchers)],
        "oracle_hit_ratio_per_level": [round(r, 4) for r in oracle],
        "dispatchers_cpu_us_per_event": _us(sum(window.cpu_s[n.name] for n in dispatchers) / events),
        "model_dispatchers_cpu_us_per_event": _us(sum(n.share * n.cost for n in dispatchers)),
        "servers_cpu_us_per_event": _us(servers_cpu / events),
        "bench_cpu_us_per_event": _us(other),
        "machine_cpu_load": round((sum(window.cpu_s.values()) + window.bench_cpu_s) / window.wall, 2),
        "root_cpu_load": round(window.cpu_s["root"] / window.wall, 3),
        "nodes": {n.name: {"share": round(n.share, 4), "fan_out": n.fan_out,
                           "cpu_us_per_event_seen": _us(n.cost),
                           "measured_cpu_us_per_event_seen": _us(
                               window.cpu_s[n.name] / (n.share * events)) if n.share else None,
                           "model_events_per_s": round(dedicated.cpu[n.name], 1)}
                  for n in dispatchers},
    }
    return out


def _measured_level_ratios(window: Window) -> list[float]:
    """Copies each level of dispatchers forwarded / (events published x nodes below it)."""
    events = window.events
    root = window.measurements["root"]
    ratios = [sum(window.sent["root"].values()) / (events * root.servers)]
    children = [m for name, m in window.measurements.items() if name != "root"]
    if children:
        below = sum(m.servers for m in children)
        copies = sum(sum(window.sent[name].values()) for name in window.measurements if name != "root")
        ratios.append(copies / (events * below))
    return ratios


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


# -- the run -----------------------------------------------------------------------------------

def _median_figures(rows: list[dict]) -> dict:
    """The median over rounds of every figure: scalars, and lists of numbers element by
    element (nested figures: the last round's)."""
    out = dict(rows[-1])
    for key, value in rows[-1].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = round(statistics.median(row[key] for row in rows), 4)
        elif isinstance(value, list) and all(isinstance(v, (int, float)) for v in value):
            out[key] = [round(statistics.median(row[key][i] for row in rows), 4)
                        for i in range(len(value))]
    return out


def compare(setup: Setup, log=_log) -> dict:
    lo, hi = narrow_rectangles(setup)
    rng = np.random.default_rng(setup.seed + 2)
    symbols = rng.integers(0, setup.symbols, len(lo))
    started = time.perf_counter()
    labels = tree_partition(lo, hi, setup.children, setup.per_child)
    work = {"lo": lo, "hi": hi, "symbols": symbols, "labels": labels}
    log(f"  offline R-tree placement in {time.perf_counter() - started:.1f} s")
    events_rng = np.random.default_rng(setup.seed + 1)
    points = np.round(events_rng.uniform(0, 10, (setup.events, setup.d)), 3)
    event_symbols = events_rng.integers(0, setup.symbols, setup.events)
    oracle_servers, oracle_children = oracle_hit_ratios(
        lo, hi, labels, setup, points[:setup.oracle_events])
    oracles = {"flat": [oracle_servers], "tree": [oracle_children, oracle_servers]}
    rows: dict[str, list[dict]] = {"flat": [], "tree": []}
    setup_s = {}
    with tempfile.TemporaryDirectory(prefix="edn-bench-topology-") as tmp:
        networks: dict[str, LocalNetwork] = {}
        try:
            for kind in ("flat", "tree"):
                started = time.perf_counter()
                networks[kind] = start_network(setup, kind, Path(tmp) / kind, work)
                setup_s[kind] = round(time.perf_counter() - started, 1)
                log(f"  {kind}: {setup.servers} servers x {setup.per_server} subscriptions "
                    f"ready in {setup_s[kind]:.0f} s")
            payloads = {kind: batch_payloads(network, points, setup.batch, symbols=event_symbols)
                        for kind, network in networks.items()}
            for kind, network in networks.items():
                # a first load builds and calibrates each routing table (up to a second of
                # CPU at this size, counted as routing): not part of any measured window
                measure_window(network, payloads[kind], replace(setup, seconds=0.0))
            for round_ in range(setup.rounds):
                # alternate the order too, so neither kind always follows the other's drain
                for kind in (("flat", "tree") if round_ % 2 == 0 else ("tree", "flat")):
                    window = measure_window(networks[kind], payloads[kind], setup)
                    rows[kind].append(figures_of(window, oracles[kind]))
                    row = rows[kind][-1]
                    log(f"  round {round_ + 1} {kind}: {row['events_per_s']} events/s, root "
                        f"{row['root_cpu_us_per_event']} us/event (model "
                        f"{row['model_root_cpu_us_per_event']}), R per level "
                        f"{row['hit_ratio_per_level']}, machine load {row['machine_cpu_load']}")
        finally:
            for network in networks.values():
                network.close()
    flat, tree = _median_figures(rows["flat"]), _median_figures(rows["tree"])
    return {
        "flat": flat, "tree": tree,
        "rounds": {kind: rows[kind] for kind in rows},
        "tree_over_flat_root_cpu_per_event": _ratio(tree["root_cpu_us_per_event"],
                                                    flat["root_cpu_us_per_event"]),
        "model_tree_over_flat_root_cpu_per_event": _ratio(tree["model_root_cpu_us_per_event"],
                                                          flat["model_root_cpu_us_per_event"]),
        "tree_over_flat_events_per_s": _ratio(tree["events_per_s"], flat["events_per_s"]),
        "model_tree_over_flat_dedicated_events_per_s": _ratio(
            tree["model_dedicated_events_per_s"], flat["model_dedicated_events_per_s"]),
        "model_tree_over_flat_shared_events_per_s": _ratio(
            tree["model_shared_events_per_s"], flat["model_shared_events_per_s"]),
        "setup_s": setup_s,
    }


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a and b else None


def bloom_figures(quick: bool) -> dict:
    try:  # written alongside this benchmark; absent in older trees
        from .bloom import bloom_comparison
    except ImportError as exc:
        return {"note": f"benchmarks.reproductions.bloom not available ({exc}); no Bloom figures"}
    return bloom_comparison(quick)


def run(quick: bool = False) -> dict:
    setup = Setup.quick() if quick else Setup()
    _log(f"topology: {setup.servers} servers x {setup.per_server} subscriptions (d = {setup.d}) "
         f"under one dispatcher and under a root with {setup.children} children, real "
         f"processes on {MACHINE_CORES} shared cores")
    figures = {"benchmark": "topology", "servers": setup.servers,
               "subscriptions_per_server": setup.per_server, "children": setup.children,
               "d": setup.d, "half_width": setup.half_width, "rounds": setup.rounds,
               "seconds_per_window": setup.seconds, "precision": "precise",
               **compare(setup)}
    _log("topology: Bloom summaries")
    figures["bloom"] = bloom_figures(quick)
    return figures
