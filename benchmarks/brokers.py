"""``edn bench brokers``: Gryphon's wide-area experiments (section 4.1) on the simulator of
:mod:`route_manager.wansim`, with the EDN's summaries beside flooding and link matching.

Figures by name:

* ``table``: the same workload (10 attributes x 3 values, P = 0.98, D = 0.82) routed by every
  mode, each pooled event published once from each publisher, one at a time: link messages
  (hops) and bytes per event, matching steps and the measured CPU of the route sets (links
  and local clients, summed over the brokers) per event, and the exactness check (every
  matching subscriber got it; for exact modes, no link carried it needlessly).
  Kyra (:mod:`route_manager.wansim.kyra_mode`) is an overlay evaluated event by event: its
  physical hops, the proxy-to-broker hops apart, the servers that matched.
* ``chart2``: the highest publish rate per publisher the network carries without a queue
  reaching 80 (the seed's overload criterion), by bisection, flooding against content
  routing, as D (hence the share of matching subscriptions) varies; 15 attributes x 3 values.
* ``chart3``: matching steps per event of link matching summed along the path against
  centralized matching; it needs :mod:`matchers.pst` and says so when that is missing.

The CPU model: ``PER_MESSAGE_S`` per message (the communication stack) plus ``STEP_S`` per
matching step (the seed's estimate for a time-efficient implementation: ten microseconds) plus
the time the route sets took, measured (routing to links, and local delivery to clients). These
are the model's parameters, not measurements of a broker; the rates of chart 2 scale with them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from route_manager.wansim import BrokerNetwork, gryphon_topology, make_workload
from route_manager.wansim.kyra_mode import kyra_row
from route_manager.wansim.routing import ROUTERS, make_router

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


def table(subscriptions: int, events: int) -> list[dict]:
    topology, trees = _network()
    workload = make_workload(topology, list(PUBLISHERS), subscriptions=subscriptions,
                             events=events, attributes=10, values=3, factoring=3,
                             p=0.98, d=0.82)
    rows = []
    for name, options in _modes():
        try:
            router = make_router(name, topology, trees, workload, **options)
        except NotImplementedError as missing:
            rows.append({"mode": name, "missing": str(missing)})
            continue
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
            "steps_per_event": result.steps / published,
            "route_set_cpu_us_per_event": result.route_seconds / published * 1e6,
            "route_set_boxes": sum(getattr(router, "boxes", {}).values()) or None,
            "median_latency_ms": latencies[len(latencies) // 2] if latencies else None,
            **network.exactness(),
        })
    rows.append(kyra_row(topology, workload))
    rows[0]["matching_share"] = workload.matching_share()
    return rows


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


def chart2(subscriptions: int, events: int, ds: tuple, duration_s: float) -> list[dict]:
    topology, trees = _network()
    points = []
    for d in ds:
        workload = make_workload(topology, list(PUBLISHERS), subscriptions=subscriptions,
                                 events=events, attributes=15, values=3, factoring=1,
                                 p=0.98, d=d, seed=2)
        point = {"d": d, "matching_share": workload.matching_share()}
        for name, options in [("flooding", {}), ("summaries", {"precision": 1.0}),
                              ("linkmatching", {})]:
            try:
                router = make_router(name, topology, trees, workload, **options)
            except NotImplementedError as missing:
                point[name] = {"missing": str(missing)}
                continue
            point[router.name] = max_rate(router, duration_s=duration_s)
        points.append(point)
    return points


def chart3() -> dict:
    try:
        from benchmarks.pst import chart3_steps   # noqa: F401  (another engineer's, pending)
    except ImportError:
        return {"missing": "chart 3 needs matchers.pst and benchmarks.pst.chart3_steps, "
                           "which have not landed"}
    return {"missing": "benchmarks.pst landed after this benchmark was written: wire it here"}


def _plot(out: Path, result: dict) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    points = result["chart2"]
    fig, ax = plt.subplots(figsize=(6, 4))
    shares = [100 * p["matching_share"] for p in points]
    for key in ("flooding", "summaries@1", "linkmatching"):
        ys = [p.get(key) for p in points]
        if all(isinstance(y, (int, float)) for y in ys):
            ax.plot(shares, ys, marker="o", label=key)
    ax.set_xlabel("subscriptions matched per event (%)")
    ax.set_ylabel("max events/s per publisher without overload")
    ax.set_title("Chart 2: overload rate, Gryphon topology")
    ax.legend()
    fig.tight_layout()
    path = out / "brokers-chart2.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(str(path))
    return written


def run(quick: bool = False, out: str = "edn-bench-out") -> dict:
    started = time.perf_counter()
    if quick:
        sizes = {"table": (1000, 50), "chart2": (1000, 50, (0.7, 0.85, 0.95), 1.0)}
    else:
        sizes = {"table": (10_000, 1000),
                 "chart2": (10_000, 200, (0.6, 0.7, 0.8, 0.85, 0.9, 0.95), 3.0)}
    result = {
        "model": {"per_message_s": PER_MESSAGE_S, "step_s": STEP_S, "publishers": PUBLISHERS,
                  "overload_queue": 80},
        "table": table(*sizes["table"]),
        "chart2": chart2(*sizes["chart2"]),
        "chart3": chart3(),
    }
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    result["plots"] = _plot(out_dir, result)
    result["seconds"] = time.perf_counter() - started
    (out_dir / "brokers.json").write_text(json.dumps(result, indent=2, default=str))
    return result
