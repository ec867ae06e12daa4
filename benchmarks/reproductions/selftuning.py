"""Self-tuning summary precision on real processes (paper V-C, Figs. 16 and 17).

The network of ``edn bench throughput`` (:mod:`benchmarks.reproductions.throughput`: a dispatcher and
subscription servers as gunicorn processes, d = 8, a capped outgoing link, saturating
batch publishers) runs with the dispatcher's self-tuning on, once per outgoing link
(2 and 6.4 Mbps). On each:

1. **Where the optimum is.** A short sweep with self-tuning off measures events/s, the
   dispatcher's CPU and its utilization at every precision (none, 10% .. precise). The
   tuner then runs with the dispatcher's defaults (the comparing rule,
   :mod:`route_manager.throughput_climb`; ``EDN_BENCH_SELFTUNING_RULE=paper`` for IV-B as
   published), nothing calibrated to this machine.
2. **Fig. 16**: self-tuning started at 10% and at 100%; the trace (step, precision,
   events/s, CPU, decision) of each, and the steps until precision is within one step of
   the measured optimum.
3. **Fig. 17**: started at 10% with uniform events; after ``change_after`` steps the
   publishers switch to events with coordinates normal(9.5, 0.25); a second sweep measures
   the optimum under the new distribution.

For each of the three runs on each link, ``settled_fraction_of_optimum`` says where the run
settled: the events/s of the precisions its last third ran at (probes included, weighted by
time) over the optimum's. Those precisions and the sweep's best three are measured after
the runs, self-tuning off, side by side: in rounds, each precision a few seconds a round
(:func:`interleaved`). On this shared machine one precision measures 10% apart from one
minute to the next, so figures taken minutes apart would judge the machine's drift as much
as the tuner's choice. ``taken_fraction_of_optimum`` is that other figure: the events/s
the dispatcher took in over the run's last third over the optimum's measured later.

The paper's experiment settings are kept: step x = 10%, n = 1 (no damping, as in its
experiments), short intervals (``interval`` seconds) so the bench takes minutes. Figures and
the traces go to ``--out``: one JSON, one PNG per link.
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ..livenet import (Publisher, Setup, batch_payloads, configure, event_workload,
                                measure, start_network)
from route_manager.precision import format_precision, parse_precision
from wsframework import progress

LEVELS = ("none", 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, "precise")


def _log(text: str) -> None:
    progress.write(text)  # stderr, above the progress bar on a terminal


def short_sweep(network, levels, warmup: float, seconds: float, bar=None) -> list[dict]:
    rows = []
    for level in levels:
        if bar is not None:
            bar.describe(f"sweep: precision {level}")
        in_force = configure(network, precision=level)
        time.sleep(warmup)
        m, extra = measure(network, seconds)
        rows.append({"precision": parse_precision(in_force["precision"]),
                     "events_per_s": round(m.events_per_s, 1), "cpu": round(m.cpu, 3),
                     "busy": round(m.busy, 3),
                     "hit_ratio": round(m.hit_ratio, 4), "cpu_servers": extra["cpu"]["servers"],
                     "cpu_machine": extra["cpu"]["machine"]})
        _log(f"    {in_force['precision']:>8}: {m.events_per_s:7.1f} events/s  dispatcher CPU "
             f"{m.cpu:.2f} busy {m.busy:.2f}  R {m.hit_ratio:.3f}  "
             f"servers CPU {extra['cpu']['servers']:.2f}")
        if bar is not None:
            bar.advance()
    return rows


def interleaved(network, levels: list[float], rounds: int, warmup: float, seconds: float,
                bar=None) -> list[dict]:
    """Events/s at each of ``levels``, self-tuning off, measured in ``rounds`` rounds of
    ``seconds / rounds`` each, the order turned by one each round, after ``warmup`` for the
    queues of the level before to drain.  On a shared machine one precision measures 10%
    apart from one minute to the next; interleaving spreads that drift over every level
    alike, so that levels are compared with each other, not with the moment each was
    measured."""
    configure(network, self_tuning="off")
    events = {level: 0.0 for level in levels}
    spent = {level: 0.0 for level in levels}
    for r in range(rounds):
        for level in levels[r % len(levels):] + levels[:r % len(levels)]:
            if bar is not None:
                bar.describe(f"optimum: precision {format_precision(level)}, round {r + 1}")
            configure(network, precision="none" if level == 0 else level)
            time.sleep(warmup)
            m, _ = measure(network, seconds / rounds)
            events[level] += m.events_per_s * m.seconds
            spent[level] += m.seconds
        if bar is not None:
            bar.advance()
    rows = [{"precision": level, "events_per_s": round(events[level] / spent[level], 1),
             "seconds": round(spent[level], 2)} for level in levels]
    for row in rows:
        _log(f"    {format_precision(row['precision']):>8}: {row['events_per_s']:7.1f} events/s "
             f"over {row['seconds']:.1f} s in {rounds} rounds")
    return rows


def candidates(sweep: list[dict], top: int, *traces: list[dict], tail: int) -> list[float]:
    """The ``top`` best precisions of ``sweep`` and every precision the runs' settled tails
    spent time at: what the optimum and the settled levels are measured at."""
    best = [r["precision"] for r in sorted(sweep, key=lambda r: -r["events_per_s"])[:top]]
    spent = [level for trace in traces for level in tail_seconds(trace, tail)]
    return sorted(set(best) | set(spent))


def tail_seconds(trace: list[dict], tail: int) -> dict[float, float]:
    """Seconds the run's last ``tail`` intervals spent at each precision (an interval runs
    at its step's ``previous`` precision)."""
    spent: dict[float, float] = {}
    if len(trace) < tail + 1:
        return spent
    for before, step in zip(trace[-tail - 1:], trace[-tail:]):
        spent[step["previous"]] = spent.get(step["previous"], 0.0) + step["time"] - before["time"]
    return spent


def trace_of(network, since: int = 0) -> list[dict]:
    figures = network.dispatcher_stats("selftuning.trace.")
    steps = [json.loads(v) for k, v in sorted(figures.items())]
    return [s for s in steps if s["step"] > since]


def last_step(network) -> int:
    return int(network.dispatcher_stats("selftuning.steps").get("selftuning.steps", 0))


def run_tuner(network, start: float, steps: int, interval: float, on_step=None,
              bar=None) -> list[dict]:
    """Self-tuning from ``start`` for ``steps`` steps; the trace, renumbered from 1.
    ``bar`` (a progress bar) advances per step taken."""
    configure(network, self_tuning="on", precision=start)  # resets the tuner at `start`
    first = last_step(network)
    deadline = time.monotonic() + steps * interval * 3 + 30
    seen = 0
    while time.monotonic() < deadline:
        time.sleep(interval / 2)
        trace = trace_of(network, first)
        if on_step is not None and len(trace) > seen:
            on_step(len(trace))
        if bar is not None and len(trace) > seen:
            bar.advance(min(len(trace), steps) - min(seen, steps))
        seen = len(trace)
        if seen >= steps:
            break
    trace = trace_of(network, first)[:steps]
    for k, step in enumerate(trace, start=1):
        step["step"] = k
    return trace


def steps_to_reach(trace: list[dict], target: float, step: float = 0.1, after: int = 0) -> int | None:
    """The first step (after ``after``) from which precision is within one step of
    ``target``."""
    for s in trace:
        if s["step"] > after and abs(s["precision"] - target) <= step + 1e-9:
            return s["step"] - after
    return None


def near_optimal(sweep: list[dict], within: float = 0.10) -> list[float]:
    """The precisions whose swept throughput is within ``within`` of the best: on a flat
    curve measured over a few seconds each, "the" optimum is one of several equals."""
    best = max(r["events_per_s"] for r in sweep)
    return [r["precision"] for r in sweep if r["events_per_s"] >= (1 - within) * best]


def in_band(trace: list[dict], band: list[float], after: int = 0) -> dict:
    """Steps (after ``after``) until precision is first in ``band``, and the share of the
    steps from then on that stay in it."""
    inside = [any(abs(s["precision"] - p) < 1e-9 for p in band)
              for s in trace if s["step"] > after]
    if True not in inside:
        return {"steps": None, "share_in_band": 0.0}
    first = inside.index(True)
    rest = inside[first:]
    return {"steps": first + 1, "share_in_band": round(sum(rest) / len(rest), 3)}


def settled(trace: list[dict], last: int = 8) -> dict:
    tail = trace[-last:]
    precisions = [s["precision"] for s in tail]
    return {"precisions": sorted(set(precisions)), "mean": round(statistics.mean(precisions), 3),
            "events_per_s": round(statistics.mean(s["events_per_s"] for s in tail), 1)}


def plot(runs: dict, change_step: int, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, (name, trace) in zip(axes, runs.items()):
        steps = [s["step"] for s in trace]
        ax.plot(steps, [s["events_per_s"] for s in trace], "o-", color="tab:blue",
                label="throughput (events/s)")
        ax.set_xlabel("self-tuning step")
        ax.set_ylabel("events / s", color="tab:blue")
        ax.set_ylim(0, max([s["events_per_s"] for s in trace] + [1]) * 1.3)
        twin = ax.twinx()
        twin.step(steps, [s["precision"] * 100 for s in trace], "s-", where="post",
                  color="tab:red", label="precision (%)")
        twin.plot(steps, [s["cpu"] * 100 for s in trace], ":", color="tab:gray",
                  label="dispatcher CPU (% of a core)")
        twin.plot(steps, [s.get("busy", 0.0) * 100 for s in trace], "--", color="tab:green",
                  lw=0.8, label="dispatcher utilization (%)")
        twin.set_ylim(-5, 125)
        twin.set_ylabel("precision %  /  CPU %")
        if name.startswith("fig17"):
            ax.axvline(change_step + 0.5, color="k", ls="--", lw=0.8)
            ax.text(change_step + 0.7, ax.get_ylim()[1] * 0.92, "uniform -> normal(9.5, .25)",
                    fontsize=7)
        ax.set_title(name, fontsize=9)
        lines = ax.get_legend_handles_labels()
        more = twin.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


LINKS_MBPS = (2.0, 6.4)  # a slow and a fast outgoing link: Figs. 16 and 17 on each
SETTINGS = ("fig16_from_10pct", "fig16_from_100pct", "fig17_after_change")


def run(quick: bool = False, out: str = "edn-bench-out", setup: Setup | None = None,
        interval: float | None = None, steps: int | None = None,
        links: tuple[float, ...] | None = None) -> dict:
    """Figs. 16 and 17 on each link of ``links`` (one network each, the dispatcher's own
    default rule unless ``EDN_BENCH_SELFTUNING_RULE`` names another) and, for each run, the
    throughput it settled at over the measured optimum (``settled_fraction_of_optimum``).
    ``quick`` is a smoke test: a small network, one link, runs too short to settle."""
    base = setup or (Setup.quick() if quick else Setup())
    links = links or ((6.4,) if quick else LINKS_MBPS)
    interval = interval or (1.0 if quick else 1.5)
    steps = steps or (20 if quick else 40)
    rule = os.environ.get("EDN_BENCH_SELFTUNING_RULE", "")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    levels = ("none", 0.3, 0.6, "precise") if quick else LEVELS
    tuning = {**base.dispatcher_settings, "selftuning_interval": interval,
              "selftuning_factor": 1, "selftuning_max_interval": interval * 8,
              "selftuning_step": 0.1, "selftuning_throughput_change": 0.2,
              **({"selftuning_rule": rule} if rule else {})}
    result: dict = {"benchmark": "selftuning", "servers": base.servers,
                    "subscriptions_per_server": base.per_server, "links_mbps": list(links),
                    "interval_s": interval, "step": 0.1, "n": 1, "steps_per_run": steps,
                    "cores": os.cpu_count(), "links": {}}
    fractions: dict[str, float] = {}
    taken: dict[str, float] = {}
    json_path = out_dir / "selftuning.json"
    result["json"] = str(json_path)
    for link in links:
        one = replace(base, link_mbps=link, dispatcher_settings=tuning)
        report = run_link(one, levels, interval, steps, quick, out_dir)
        name = f"{link:g}Mbps"
        result["links"][name] = report
        for setting in SETTINGS:
            fractions[f"{setting}@{name}"] = report["settled_fraction_of_optimum"][setting]
            taken[f"{setting}@{name}"] = report["taken_fraction_of_optimum"][setting]
        result["rule"] = report["rule"]
        result["settled_fraction_of_optimum"] = fractions
        result["taken_fraction_of_optimum"] = taken
        result["min_settled_fraction_of_optimum"] = min(fractions.values())
        json_path.write_text(json.dumps(result, indent=2))  # each link's as soon as it ends
    return result


def settled_fraction(trace: list[dict], measured: list[dict], tail: int) -> float:
    """Where a run settled, against the optimum: the events/s of the precisions its last
    ``tail`` intervals ran at (probes included, weighted by time), each as ``measured``
    (:func:`interleaved`), over the best of ``measured``."""
    spent = tail_seconds(trace, tail)
    figures = {row["precision"]: row["events_per_s"] for row in measured}
    optimum = max(figures.values(), default=0.0)
    total = sum(spent.values())
    if not spent or optimum <= 0 or total <= 0:
        return 0.0
    return round(sum(figures[level] * t for level, t in spent.items()) / total / optimum, 3)


def taken_fraction(trace: list[dict], optimum: float, tail: int) -> float:
    """The events/s a run took in over its last ``tail`` intervals (probes and their way
    back included: the dispatcher's own count over that stretch of time) over the best
    throughput measured at any one precision, counted the same way, minutes apart (so
    this carries the machine's drift as well as the tuner's choice)."""
    if len(trace) < tail + 1 or optimum <= 0:
        return 0.0
    last = trace[-tail:]
    seconds = last[-1]["time"] - trace[-tail - 1]["time"]
    events = sum(s["events_per_s"] * (s["time"] - before["time"])
                 for before, s in zip(trace[-tail - 1:], last))
    return round(events / seconds / optimum, 3) if seconds > 0 else 0.0


def run_link(setup: Setup, levels, interval: float, steps: int, quick: bool,
             out_dir: Path) -> dict:
    """Figs. 16 and 17 on one network (one link speed): sweeps, three tuner runs, a PNG."""
    change_after = max(3, steps // 2)
    tail = max(4, steps // 3)
    sweep_warm, sweep_s = (0.5, 1.5) if quick else (1.5, 3.0)
    top, refine_warm = (2, 1.5) if quick else (3, 3.0)
    rounds = 2 if quick else 3
    measured_s = tail * interval  # per level, over all rounds: as long as a settled tail
    _log(f"self-tuning: {setup.servers} servers x {setup.per_server} subscriptions, d = 8, "
         f"link {setup.link_mbps} Mbps, interval {interval} s, {steps} steps per run")
    result: dict = {"link_mbps": setup.link_mbps, "settled_tail_steps": tail}
    # a terminal's progress bar: both sweeps' levels and the three tuner runs' steps
    total_steps = 2 * len(levels) + 2 * rounds + 3 * steps + change_after
    with tempfile.TemporaryDirectory(prefix="edn-bench-st-") as tmp, progress.progress(
            f"self-tuning, {setup.link_mbps:g} Mbps", total=total_steps, unit="step") as bar:
        network, info = start_network(setup, Path(tmp), self_tuning=False, log=_log)
        try:
            uniform, uniform_symbols = event_workload(setup, 64 * 200, setup.seed + 1)
            normal, normal_symbols = event_workload(setup, 64 * 200, setup.seed + 3, "normal")
            uniform_payloads = batch_payloads(network, uniform, setup.batch, symbols=uniform_symbols)
            normal_payloads = batch_payloads(network, normal, setup.batch, 10**7,
                                             symbols=normal_symbols)
            for level in levels:
                configure(network, precision=level)  # cut once: cached at the dispatcher
            publisher = Publisher(network.dispatcher.base_url, uniform_payloads, setup.batch,
                                  setup.publishers).start()
            try:
                _log("  sweep (self-tuning off), uniform events:")
                sweep_uniform = short_sweep(network, levels, sweep_warm, sweep_s, bar)
                saturated = max(r["cpu"] for r in sweep_uniform)
                link_bound = sweep_uniform[0]["cpu"]  # no summary: link-bound, dispatcher idle-ish
                in_force = configure(network)
                rule = in_force.get("selftuning_rule", "paper")
                threshold = float(in_force["selftuning_threshold"])
                busy_threshold = float(in_force["selftuning_busy_threshold"])
                backlog = (float(in_force["selftuning_backlog_growth"]),
                           int(in_force["selftuning_backlog_floor"]))
                _log(f"  dispatcher CPU at most {saturated:.2f} of a core; rule "
                     f"{rule}; bottleneck test: CPU >= {threshold} or utilization >= "
                     f"{busy_threshold}, unless the backlog grows by > {backlog[0]:.0%} of "
                     f"the copies (>= {backlog[1]})")
                _log("  fig. 16a: from 10%")
                bar.describe(f"fig. 16a: from 10%, {setup.link_mbps:g} Mbps")
                from_low = run_tuner(network, 0.1, steps, interval, bar=bar)
                _log("  fig. 16b: from 100%")
                bar.describe(f"fig. 16b: from 100%, {setup.link_mbps:g} Mbps")
                from_high = run_tuner(network, 1.0, steps, interval, bar=bar)
                _log("  the sweep's best and the precisions both runs settled at, "
                     "interleaved:")
                measured_uniform = interleaved(
                    network, candidates(sweep_uniform, top, from_low, from_high, tail=tail),
                    rounds, refine_warm, measured_s, bar)
                _log("  fig. 17: from 10%, uniform -> normal(9.5, 0.25) events")
                changed = {}

                def switch(seen):
                    if seen >= change_after and not changed:
                        publisher.payloads = normal_payloads
                        changed["at"] = seen

                bar.describe(f"fig. 17: distribution change, {setup.link_mbps:g} Mbps")
                fig17 = run_tuner(network, 0.1, steps + change_after, interval, switch,
                                  bar=bar)
                configure(network, self_tuning="off")
                _log("  sweep (self-tuning off), normal events:")
                sweep_normal = short_sweep(network, levels, sweep_warm, sweep_s, bar)
                _log("  the sweep's best and the precisions fig. 17 settled at, interleaved:")
                measured_normal = interleaved(
                    network, candidates(sweep_normal, top, fig17, tail=tail), rounds,
                    refine_warm, measured_s, bar)
            finally:
                publisher.stop()
        finally:
            network.close()
    best = max(measured_uniform, key=lambda r: r["events_per_s"])
    best_normal = max(measured_normal, key=lambda r: r["events_per_s"])
    change_step = changed.get("at", change_after)
    band_uniform, band_normal = near_optimal(sweep_uniform), near_optimal(sweep_normal)
    settled_low, settled_high, settled_fig17 = settled(from_low), settled(from_high), settled(fig17)
    # where each run settled, its precisions and the optimum measured side by side; and the
    # events it took in over the optimum's, measured minutes apart
    runs = {"fig16_from_10pct": (from_low, measured_uniform, best),
            "fig16_from_100pct": (from_high, measured_uniform, best),
            "fig17_after_change": (fig17, measured_normal, best_normal)}
    fractions = {name: settled_fraction(trace, measured, tail)
                 for name, (trace, measured, _) in runs.items()}
    taken = {name: taken_fraction(trace, optimum["events_per_s"], tail)
             for name, (trace, _, optimum) in runs.items()}
    _log("  settled fraction of the optimum: " + ", ".join(
        f"{name} {value:.3f}" for name, value in fractions.items()))
    _log("  events taken over the optimum's: " + ", ".join(
        f"{name} {value:.3f}" for name, value in taken.items()))
    result.update({
        "setup_s": info["setup_s"], "rule": rule,
        "threshold": threshold, "busy_threshold": busy_threshold,
        "backlog_growth": backlog[0], "backlog_floor": backlog[1],
        "dispatcher_cpu_saturated": saturated, "dispatcher_cpu_no_summary": link_bound,
        "decided_by": decided_by([*from_low, *from_high, *fig17]),
        "decisions": decisions([*from_low, *from_high, *fig17]),
        "optimum_uniform": best["precision"], "optimum_uniform_tp": best["events_per_s"],
        "optimum_normal": best_normal["precision"], "optimum_normal_tp": best_normal["events_per_s"],
        "settled_fraction_of_optimum": fractions, "taken_fraction_of_optimum": taken,
        "settled_tail_seconds": {name: {format_precision(level): round(t, 1) for level, t in
                                        tail_seconds(trace, tail).items()}
                                 for name, (trace, _, _) in runs.items()},
        "from_10pct_steps_to_optimum": steps_to_reach(from_low, best["precision"]),
        "from_100pct_steps_to_optimum": steps_to_reach(from_high, best["precision"]),
        "from_10pct_settled": settled_low, "from_100pct_settled": settled_high,
        "fig17_change_step": change_step,
        "band_uniform": band_uniform, "band_normal": band_normal,
        "from_10pct_band": in_band(from_low, band_uniform),
        "from_100pct_band": in_band(from_high, band_uniform),
        "fig17_band_after_change": in_band(fig17, band_normal, after=change_step),
        "fig17_steps_to_new_optimum": steps_to_reach(fig17, best_normal["precision"],
                                                     after=change_step),
        "fig17_settled_after_change": settled_fig17,
        "sweep_uniform": sweep_uniform, "sweep_normal": sweep_normal,
        "optimum_measured_uniform": measured_uniform, "optimum_measured_normal": measured_normal,
        "trace_from_10pct": from_low, "trace_from_100pct": from_high, "trace_fig17": fig17,
    })
    png_path = out_dir / f"selftuning-{setup.link_mbps:g}Mbps.png"
    result["png"] = str(png_path)
    plot({"fig16a: start 10%": from_low, "fig16b: start 100%": from_high,
          "fig17: start 10%, distribution change": fig17}, change_step, png_path,
         f"self-tuning, {rule} rule, link {setup.link_mbps:g} Mbps (x = 10%, interval "
         f"{interval} s); measured optimum {format_precision(best['precision'])} uniform, "
         f"{format_precision(best_normal['precision'])} normal; settled at "
         + ", ".join(f"{v:.2f}" for v in fractions.values()) + " of it")
    return result


def decisions(trace: list[dict]) -> dict[str, int]:
    """How many intervals ended in each decision of the comparing rule (none: the paper's)."""
    counts: dict[str, int] = {}
    for s in trace:
        if s.get("decision"):
            counts[s["decision"]] = counts.get(s["decision"], 0) + 1
    return counts


def decided_by(trace: list[dict]) -> dict[str, int]:
    """How many steps each reading decided (:meth:`SelfTuner.bottleneck`): the dispatcher
    the bottleneck by "cpu", "busy" or "cpu+busy"; not, by "backlog" or "none"."""
    counts = dict.fromkeys(("cpu", "busy", "cpu+busy", "backlog", "none"), 0)
    for s in trace:
        counts[s["signal"]] += 1
    return counts
