"""Throughput vs summary precision on real processes (paper V-B, Fig. 12).

A dispatcher and ``servers`` subscription servers run as ``edn serve`` processes (gunicorn,
one worker each) on loopback, through :class:`~edn.localnet.network.LocalNetwork` (set up by
:mod:`benchmarks.livenet`). Each server holds ``per_server`` range subscriptions in d = 8,
imported in bulk (``ImportSubscriptions``, so setting up costs seconds, not hours of
WS-Eventing round trips); they are placed at random (the paper's Fig. 7 setting:
random rectangles randomly partitioned) and are narrow (centre uniform in [0, 10]^8, half
widths uniform in [0, ``half_width``]) so that few events match a subscription exactly: the
servers then spend little CPU on notifications (each goes to a NotificationSink), which keeps
them from being the bottleneck on a small machine. The dispatcher's outgoing link is capped
(``--link-mbps``, the token bucket of :mod:`route_manager.forwarding`), and its queues are
kept short by backpressure, so a link-bound dispatcher slows its publishers down instead of
dropping events.

For each precision (none, 10% .. 100%) publisher threads in this process saturate the
dispatcher with pre-built ``edn:EventBatch`` messages (``batch`` events each, one
keep-alive connection per thread: batching avoids the ~4,400 requests/s HTTP ceiling
measured on this machine), and after a warm-up the dispatcher's own counters give, over ``seconds``:
events/s (routed = sent: backpressure), and the model's T_f, T_d, T_c, R, S_m
(:mod:`route_manager.models.measurement`). The predicted throughput is the model's
min(TP_D, TP_OL) with the median measured T_f, T_c, S_m of all points, each point's own T_d
and R, and B = the link cap (:mod:`route_manager.models.throughput`). Process CPU is read from
/proc for every process kind (dispatcher, servers, this process: publishers and sink) to
show where the bottleneck is.

Figures: per precision ``tp_measured``, ``tp_predicted``, ``tp_d``, ``tp_ol``, ``t_d_us``,
``hit_ratio``, ``cpu_dispatcher``, ``cpu_servers``, ``cpu_bench``; the measured optimum and
its ratios to precise and to no summary; the JSON and a PNG (measured and predicted
throughput, TP_D and TP_OL, vs precision) are written to ``--out``.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from route_manager.models.throughput import OperatingPoint, SystemParameters, predict
from wsframework import progress

from ..livenet import D, Setup, precision_sweep


def predict_rows(rows: list[dict], setup: Setup) -> dict:
    """The model (eqs. 3 and 4) at each point: one T_f for the whole curve (the median of
    the points, as the paper uses one T_f), and each point's measured T_d, R, T_c and S_m.
    T_c and S_m are taken per point because the forwarding channels batch: the fewer copies
    a server gets, the smaller its batches, so the per-copy cost (one HTTP POST shared by a
    batch) and the envelope bytes per copy grow as precision rises; a single T_c would
    misprice both ends of the curve."""
    t_f = statistics.median(r["t_f_us"] for r in rows) * 1e-6
    bandwidth = setup.link_mbps * 1e6 / 8
    for row in rows:
        params = SystemParameters(n_servers=setup.servers, t_f=t_f, t_c=row["t_c_us"] * 1e-6,
                                  bandwidth=bandwidth, message_size=row["message_bytes"] or 1.0)
        prediction = predict(params, OperatingPoint(row["precision"] or None, row["t_d_us"] * 1e-6,
                                                    min(1.0, row["hit_ratio"])))
        # V-B's two equations: the incoming link (loopback, uncapped) and the servers (their
        # CPU is measured and reported instead) are not modelled.
        row["tp_d"] = round(prediction.tp_d, 1)
        row["tp_ol"] = round(prediction.tp_ol, 1)
        row["tp_predicted"] = round(min(prediction.tp_d, prediction.tp_ol), 1)
        row["predicted_bottleneck"] = ("dispatcher" if prediction.tp_d <= prediction.tp_ol
                                       else "outgoing-link")
    return {"t_f_us": round(t_f * 1e6, 1), "bandwidth_bytes_per_s": bandwidth,
            "t_c_us_range": [min(r["t_c_us"] for r in rows), max(r["t_c_us"] for r in rows)],
            "message_bytes_range": [min(r["message_bytes"] for r in rows),
                                    max(r["message_bytes"] for r in rows)]}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


def summarize(rows: list[dict]) -> dict:
    best = max(rows, key=lambda r: r["tp_measured"])
    precise = next(r for r in rows if r["precision"] == 1.0)
    none = next(r for r in rows if r["precision"] == 0.0)
    best_predicted = max(rows, key=lambda r: r.get("tp_predicted", 0))
    errors = [abs(r["tp_predicted"] - r["tp_measured"]) / r["tp_measured"] for r in rows
              if r["tp_measured"] > 0]
    return {
        "optimal_precision": best["label"], "optimal_tp": best["tp_measured"],
        "precise_tp": precise["tp_measured"], "none_tp": none["tp_measured"],
        # None when that level measured nothing (a stalled network says so in its own row)
        "optimum_vs_precise": _ratio(best["tp_measured"], precise["tp_measured"]),
        "optimum_vs_none": _ratio(best["tp_measured"], none["tp_measured"]),
        "interior_optimum": best["precision"] not in (0.0, 1.0),
        "predicted_optimal_precision": best_predicted["label"],
        # over the levels that measured something; None when none did
        "prediction_error_median": round(statistics.median(errors), 3) if errors else None,
    }


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["precision"] * 100 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(xs, [r["tp_measured"] for r in rows], "o-", label="TP measured")
    ax.plot(xs, [r["tp_predicted"] for r in rows], "s--", label="TP predicted = min(TP_D, TP_OL)")
    ax.plot(xs, [r["tp_d"] for r in rows], ":", label="TP_D (eq. 3, measured T_f, T_d, T_c, R)")
    ax.plot(xs, [r["tp_ol"] for r in rows], "-.", label="TP_OL (eq. 4, link cap, measured S_m, R)")
    top = max(max(r["tp_measured"] for r in rows), max(r["tp_predicted"] for r in rows))
    ax.set_ylim(0, top * 1.6)
    ax.set_xticks(xs)
    ax.set_xticklabels(["none" if x == 0 else f"{x:.0f}%" for x in xs])
    ax.set_xlabel("summary precision")
    ax.set_ylabel("events / s")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool = False, out: str = "edn-bench-out", setup: Setup | None = None,
        log=None) -> dict:
    setup = setup or (Setup.quick() if quick else Setup())
    log = log or progress.write  # stderr, above the progress bar on a terminal
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log(f"throughput vs precision: {setup.servers} servers, {setup.per_server} subscriptions "
        f"each, d = {D}, link cap {setup.link_mbps} Mbps")
    swept = precision_sweep(setup, log=log)
    rows, info, matches = swept.rows, swept.info, swept.matches_per_event
    model = predict_rows(rows, setup)
    result = {
        "benchmark": "throughput", "servers": setup.servers, "subscriptions_per_server":
        setup.per_server, "d": D, "half_width": setup.half_width, "partition": setup.partition,
        "link_mbps": setup.link_mbps,
        "batch": setup.batch, "publishers": setup.publishers, "seconds_per_point": setup.seconds,
        "setup_s": info["setup_s"], "exact_matches_per_event": round(matches, 3),
        "notifications": swept.notifications, "publisher_errors": swept.publisher_errors,
        "model": model, **summarize(rows), "points": rows,
        "cores": os.cpu_count(),
    }
    json_path = out_dir / "throughput.json"
    png_path = out_dir / "throughput.png"
    result["json"] = str(json_path)
    result["png"] = str(png_path)
    plot(rows, png_path, f"{setup.servers} servers x {setup.per_server} subscriptions, d = {D}, "
                         f"link {setup.link_mbps} Mbps (measured on {os.cpu_count()} cores)")
    json_path.write_text(json.dumps(result, indent=2))
    return result
