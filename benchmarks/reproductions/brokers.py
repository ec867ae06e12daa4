"""``edn bench brokers``: Gryphon's wide-area experiments (section 4.1) on the simulator of
:mod:`simulation`, with the EDN's summaries beside flooding and link matching.

Figures by name:

* ``table``: Chart 3's workload (10 attributes x 3 values, 3 factoring attributes, P = 0.98,
  D = 0.82) routed by every mode (flooding, link matching, summaries at several precisions,
  Kyra), each pooled event published once from each publisher, one at a time: link messages
  and bytes per event, the hops from publisher to each delivering broker, matching work per
  event (link matching's steps, the measured CPU of the route sets, and the modelled CPU of
  every broker together), median latency, and the exactness check (every matching
  subscriber got it; for exact modes, no link carried it needlessly).
  Kyra (:mod:`simulation.kyra_mode`) is an overlay evaluated event by event: its
  physical hops, the proxy-to-broker hops apart, the servers that matched.
* ``chart2``: the highest publish rate per publisher the network carries without a queue
  reaching 80 (the paper's overload criterion), by bisection, flooding against link matching
  and summaries at precision 1, as D (hence the share of matching subscriptions) varies; 15
  attributes x 3 values, 1 factoring attribute.  Beside each simulated rate, the
  ``bottleneck``: the broker with the most CPU per round of events (one from each publisher)
  and the rate that CPU allows, from the routing decisions alone, at ``STEP_S`` and at
  ``STEP_S / 10`` (how the answer moves with the cost of a matching step).
* ``chart3``: :func:`benchmarks.reproductions.pst.chart3_figures` (matching steps per event, centralized
  against link matching summed along paths of 1 to 6 hops), quick when quick.

The CPU model: ``PER_MESSAGE_S`` per message (the communication stack) plus ``STEP_S`` per
matching step (the paper's estimate for a time-efficient implementation: ten microseconds) plus
the time the route sets took, measured (routing to links, and local delivery to clients). These
are the model's parameters, not measurements of a broker; the rates of chart 2 scale with them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from simulation import BrokerNetwork, gryphon_topology, make_workload
from simulation.kyra_mode import kyra_row
from simulation.routing import ROUTERS, make_router
from wsframework.progress import Progress, progress

PUBLISHERS = ("0.4", "1.7", "2.10")    # P1, P2, P3: a grandchild in each region
PER_MESSAGE_S = 0.5e-3
STEP_S = 10e-6
PRECISIONS = (1.0, 0.5, 0.1, 0.0)


def _network():
    topology = gryphon_topology()
    return topology, {p: topology.spanning_tree(p) for p in PUBLISHERS}


def _modes() -> list[tuple[str, dict]]:
    modes = [("flooding", {})] + [("summaries", {"precision": p}) for p in PRECISIONS]
    for name in ROUTERS:
        if name not in ("flooding", "summaries"):
            modes.append((name, {}))
    return modes


def table(subscriptions: int, events: int, bar: Progress | None = None) -> list[dict]:
    bar = bar or Progress()
    topology, trees = _network()
    workload = make_workload(topology, list(PUBLISHERS), subscriptions=subscriptions,
                             events=events, attributes=10, values=3, factoring=3,
                             p=0.98, d=0.82)
    rows, first = [], None
    for name, options in _modes():
        bar.describe(f"table: {name}")
        bar.advance()
        try:
            router = make_router(name, topology, trees, workload, **options)
        except NotImplementedError as missing:
            rows.append({"mode": name, "missing": str(missing)})
            continue
        if first is None:
            first = router
        router.share_local_delivery(first)
        # one event at a time (0.5 s apart): routing and unloaded latency, never overload
        network = BrokerNetwork(router, per_message_s=PER_MESSAGE_S, step_s=STEP_S,
                                overload_queue=10**9)
        for i, publisher_event in enumerate((p, e) for p in PUBLISHERS for e in range(events)):
            network.kernel.schedule(0.5 * i, network.publish, *publisher_event)
        network.kernel.run(until=float("inf"))
        result, published = network.result, network.result.published
        latencies = sorted(result.latencies_ms)
        rows.append({
            "mode": router.name,
            "link_messages_per_event": result.link_messages / published,
            "link_bytes_per_event": result.link_bytes / published,
            "delivery_hops_mean": _delivery_hops(network),
            "steps_per_event": result.steps / published,
            "route_set_cpu_us_per_event": result.route_seconds / published * 1e6,
            "broker_cpu_ms_per_event": result.busy_seconds / published * 1e3,
            "route_set_boxes": sum(getattr(router, "boxes", {}).values()) or None,
            "pst_nodes": getattr(router, "pst_nodes", None),
            "trit_positions_per_broker": _mean(getattr(router, "positions", {})),
            "median_latency_ms": latencies[len(latencies) // 2] if latencies else None,
            **network.exactness(),
        })
    bar.describe("table: kyra")
    rows.append(kyra_row(topology, workload, per_message_s=PER_MESSAGE_S))
    bar.advance()
    rows[0]["matching_share"] = workload.matching_share()
    return rows


def _mean(per_broker: dict) -> float | None:
    return sum(per_broker.values()) / len(per_broker) if per_broker else None


def _delivery_hops(network: BrokerNetwork) -> float | None:
    """Mean hops on the publisher's tree from the publisher to each broker that delivered
    (the same trees for every tree-routed mode: a check, not a difference)."""
    workload, trees = network.router.workload, network.trees
    hops = [trees[network.result.origin[uid][0]].hops(b)
            for uid, clients in network.result.deliveries.items()
            for b in {workload.brokers[c // workload.clients_per_broker] for c in clients}]
    return sum(hops) / len(hops) if hops else None


def max_rate(router, *, duration_s: float, low: float = 1.0, high: float = 4000.0,
             tolerance: float = 5.0) -> float:
    """Bisection on events/s per publisher: the highest rate whose run never overloads."""
    if BrokerNetwork(router, per_message_s=PER_MESSAGE_S, step_s=STEP_S,
                     record=False).run_poisson(low, duration_s).overloaded:
        return 0.0
    while high - low > tolerance:
        middle = (low + high) / 2
        overloaded = BrokerNetwork(router, per_message_s=PER_MESSAGE_S, step_s=STEP_S,
                                   record=False).run_poisson(middle, duration_s).overloaded
        low, high = (low, middle) if overloaded else (middle, high)
    return low


def bottleneck(router, step_s: float = STEP_S) -> dict:
    """The broker with the most modelled CPU per round (one pooled event from each publisher,
    averaged over the pool), from the routing decisions alone, and the publish rate per
    publisher that CPU allows (1 / the CPU of a round): what the simulation's bisection
    should find, give or take the queueing that 80 messages allow over its run.  With the
    messages it handles per round and the matching steps it spends per message, which say
    whether it is the traffic or the matching that limits it."""
    workload, busy, messages, steps = router.workload, {}, {}, {}
    for publisher in PUBLISHERS:
        for event in range(len(workload.events[publisher])):
            stack = [publisher]
            while stack:
                broker = stack.pop()
                decision = router.decide(broker, publisher, event)
                busy[broker] = (busy.get(broker, 0.0) + PER_MESSAGE_S
                                + decision.steps * step_s + decision.seconds)
                messages[broker] = messages.get(broker, 0) + 1
                steps[broker] = steps.get(broker, 0) + decision.steps
                stack.extend(decision.forward)
    rounds = len(workload.events[PUBLISHERS[0]])
    worst = max(busy, key=busy.get)
    return {"broker": worst, "cpu_ms_per_round": busy[worst] / rounds * 1e3,
            "messages_per_round": messages[worst] / rounds,
            "steps_per_message": steps[worst] / messages[worst],
            "rate": rounds / busy[worst]}


def chart2(subscriptions: int, events: int, ds: tuple, duration_s: float,
           bar: Progress | None = None) -> list[dict]:
    bar = bar or Progress()
    topology, trees = _network()
    points = []
    for d in ds:
        workload = make_workload(topology, list(PUBLISHERS), subscriptions=subscriptions,
                                 events=events, attributes=15, values=3, factoring=1,
                                 p=0.98, d=d, seed=2)
        point = {"d": d, "matching_share": workload.matching_share(), "bottleneck": {}}
        first = None
        for name, options in [("flooding", {}), ("summaries", {"precision": 1.0}),
                              ("linkmatching", {})]:
            bar.describe(f"chart 2: d {d}, {name}")
            bar.advance()
            try:
                router = make_router(name, topology, trees, workload, **options)
            except NotImplementedError as missing:
                point[name] = {"missing": str(missing)}
                continue
            first = first or router
            router.share_local_delivery(first)
            point[router.name] = max_rate(router, duration_s=duration_s)
            point["bottleneck"][router.name] = {
                **bottleneck(router),
                "rate_at_tenth_step_cost": bottleneck(router, STEP_S / 10)["rate"]}
        points.append(point)
    return points


def chart3(quick: bool) -> dict:
    """Another engineer's :func:`benchmarks.reproductions.pst.chart3_figures`, called when it exists."""
    try:
        from benchmarks.reproductions.pst import chart3_figures
    except ImportError:
        return {"missing": "benchmarks.reproductions.pst.chart3_figures has not landed"}
    return chart3_figures(quick=quick)


def _plot(out: Path, result: dict) -> list[str]:
    """PNGs of chart 2 and chart 3 (matplotlib is optional: none without it)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    for name, draw in (("chart2", _draw_chart2), ("chart3", _draw_chart3)):
        fig, ax = plt.subplots(figsize=(6, 4))
        if draw(ax, result[name]):
            fig.tight_layout()
            path = out / f"brokers-{name}.png"
            fig.savefig(path, dpi=100)
            written.append(str(path))
        plt.close(fig)
    return written


def _draw_chart2(ax, points: list) -> bool:
    shares = [100 * p["matching_share"] for p in points]
    for key in ("flooding", "summaries@1", "linkmatching"):
        ys = [p.get(key) for p in points]
        if all(isinstance(y, (int, float)) for y in ys):
            ax.plot(shares, ys, marker="o", label=key)
    ax.set_xscale("log")
    ax.set_xlabel("subscriptions matched per event (%)")
    ax.set_ylabel("max events/s per publisher without overload")
    ax.set_title("Chart 2: overload rate, Gryphon topology")
    ax.legend()
    return True


def _draw_chart3(ax, figures: dict) -> bool:
    """Steps per event against subscriptions: centralized, and link matching summed over
    paths of each length (the figures :func:`benchmarks.reproductions.pst.chart3_figures` names)."""
    sizes = figures.get("subscriptions")
    if not sizes or "centralized_steps" not in figures:
        return False
    ax.plot(sizes, figures["centralized_steps"], marker="s", color="black", label="centralized")
    if "centralized_steps_without_factoring" in figures:
        ax.plot(sizes, figures["centralized_steps_without_factoring"], linestyle="--",
                color="gray", label="centralized, no factoring")
    for hops, steps in sorted(figures.get("link_steps_by_hops", {}).items(),
                              key=lambda item: int(item[0])):
        ax.plot(sizes, steps, marker=".", label=f"LM {hops} hop{'s' if int(hops) > 1 else ''}")
    ax.set_xlabel("subscriptions")
    ax.set_ylabel("matching steps per event")
    ax.set_title("Chart 3: centralized against link matching")
    ax.legend(fontsize="small")
    return True


def run(quick: bool = False, out: str = "edn-bench-out") -> dict:
    started = time.perf_counter()
    if quick:
        sizes = {"table": (500, 20), "chart2": (500, 30, (0.7, 0.95), 0.5)}
    else:
        sizes = {"table": (10_000, 1000),
                 "chart2": (10_000, 200, (0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98), 3.0)}
    # a terminal's progress bar: each mode of the table, Kyra, each router at each d, chart 3
    steps = len(_modes()) + 1 + 3 * len(sizes["chart2"][2]) + 1
    with progress("brokers", total=steps, unit="step") as bar:
        result = {
            "model": {"per_message_s": PER_MESSAGE_S, "step_s": STEP_S,
                      "publishers": PUBLISHERS, "overload_queue": 80},
            "table": table(*sizes["table"], bar=bar),
            "chart2": chart2(*sizes["chart2"], bar=bar),
        }
        bar.describe("chart 3")
        result["chart3"] = chart3(quick)
        bar.advance()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    result["plots"] = _plot(out_dir, result)
    result["seconds"] = time.perf_counter() - started
    (out_dir / "brokers.json").write_text(json.dumps(result, indent=2, default=str))
    return result
