"""The event path at its limit: the dispatcher's, the servers' and the sink's figures, in one run.

Live part (real processes: a dispatcher and ``servers`` subscription servers under gunicorn
on loopback, set up as the throughput benchmark's: 10 servers x 10,000 subscriptions in
d = 8, offline R-tree placement, 64-event batches; :mod:`benchmarks.livenet`), with the
link cap lifted (``link_mbps``), at three precisions -- none, 0.5 and precise -- each after a
warm-up, over ``seconds``, reading the dispatcher's counters and every process's CPU:

* ``dispatcher_cpu_us_per_event`` -- dispatcher process CPU per routed event at 0.5;
* ``server_cpu_us_per_copy`` -- all servers' CPU per forwarded copy at ``none`` (every
  event to every server, exact matching, almost no notification: the servers' own cost);
* ``t_c_us_precise`` -- T_c (the dispatcher's forwarding CPU per copy) at precise;
* ``live_events_per_s`` -- events/s at the best of the three precisions (and per level);

then, by the modules that measure them on their own:

* ``server_cpu_us_per_copy_inprocess`` -- :mod:`benchmarks.performance.serverpath` (one server's WSGI
  application in process, no HTTP: the matching path alone) beside the event-by-event
  reference path;
* ``notifications_per_s``, ``sink_ceiling_per_s`` -- :mod:`benchmarks.performance.delivery`;
* ``hem_1m_ms_per_event``, ``hem_1m_matches_per_event`` -- :mod:`benchmarks.performance.hem`.

Every process shares this machine (publishers and sink included), as the recorded figures
did (2 cores). ``--quick`` shrinks every part (smoke test; its figures mean little).
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

from route_manager.precision import format_precision, parse_precision
from wsframework import progress

from ..livenet import (Publisher, Setup, batch_payloads, configure, event_workload, measure,
                      start_network, warm_cuts)

LEVELS = ("none", 0.5, "precise")


def _log(text: str) -> None:
    progress.write(text)  # stderr, above the progress bar on a terminal


def live(setup: Setup, log=_log, bar: progress.Progress | None = None) -> dict:
    """Events/s, CPU per event and per copy, and the model's times at each of ``setup.levels``
    (``bar``, a progress bar, advances per level)."""
    bar = bar or progress.Progress()
    with tempfile.TemporaryDirectory(prefix="edn-bench-eventpath-") as tmp:
        network, info = start_network(setup, Path(tmp), log=log)
        try:
            points, symbols = event_workload(setup, 64 * 200, setup.seed + 1)
            warm_cuts(network, setup.levels)
            publisher = Publisher(network.dispatcher.base_url,
                                  batch_payloads(network, points, setup.batch, symbols=symbols),
                                  setup.batch, setup.publishers).start()
            rows = {}
            try:
                for level in setup.levels:
                    configure(network, precision=parse_precision(level))
                    time.sleep(setup.warmup)  # the warm-up has no condition to wait on
                    m, extra = measure(network, setup.seconds)
                    cpu = extra["cpu"]
                    label = format_precision(parse_precision(level))
                    copies_per_s = m.copies_per_s
                    rows[label] = {
                        "events_per_s": round(m.events_per_s, 1),
                        "hit_ratio": round(m.hit_ratio, 4),
                        "cpu_dispatcher": cpu["dispatcher"], "cpu_servers": cpu["servers"],
                        "cpu_bench": cpu["bench"],
                        "dispatcher_cpu_us_per_event": _per(cpu["dispatcher"], m.events_per_s),
                        "server_cpu_us_per_copy": _per(cpu["servers"], copies_per_s),
                        "t_f_us": round(m.t_f * 1e6, 1), "t_d_us": round(m.t_d * 1e6, 2),
                        "t_c_us": round(m.t_c * 1e6, 1),
                        "backpressure_timeouts": extra["backpressure_timeouts"],
                        "route_strategy": extra["strategy"]}
                    log(f"  {label}: {rows[label]}")
                    bar.advance()
            finally:
                publisher.stop()
        finally:
            network.close()
    best = max(rows, key=lambda k: rows[k]["events_per_s"])
    mid = format_precision(parse_precision(0.5))
    return {
        "dispatcher_cpu_us_per_event": rows.get(mid, {}).get("dispatcher_cpu_us_per_event"),
        "server_cpu_us_per_copy": rows.get("none", {}).get("server_cpu_us_per_copy"),
        "t_c_us_precise": rows.get("precise", {}).get("t_c_us"),
        "live_events_per_s": rows[best]["events_per_s"], "live_best_precision": best,
        "live_publisher_errors": publisher.errors, "live_setup_s": info["setup_s"],
        "live": rows}


def _per(cores: float, per_s: float) -> float | None:
    return round(cores / per_s * 1e6, 1) if per_s > 0 else None


def run(quick: bool = False) -> dict:
    base = Setup.quick() if quick else Setup()
    setup = replace(base, link_mbps=10_000.0, levels=LEVELS,
                    warmup=1.0 if quick else 3.0, seconds=2.0 if quick else 8.0)
    _log(f"eventpath: live network, {setup.servers} servers x {setup.per_server} "
         f"subscriptions, link uncapped")
    from . import delivery, hem, serverpath
    # a terminal's progress bar: each level of the live network, then the three parts
    with progress.progress("eventpath", total=len(setup.levels) + 3, unit="step") as bar:
        bar.describe("live network")
        figures = {"benchmark": "eventpath", "servers": setup.servers,
                   "subscriptions_per_server": setup.per_server, **live(setup, bar=bar)}
        _log("eventpath: server path in process")
        bar.describe("server path")
        server = serverpath.run(quick=quick)
        bar.advance()
        _log("eventpath: notification delivery")
        bar.describe("notification delivery")
        delivered = delivery.run(quick=quick)
        bar.advance()
        _log("eventpath: HEM workload")
        bar.describe("HEM workload")
        matched = hem.run(quick=quick)
        bar.advance()
    figures["server_cpu_us_per_copy_inprocess"] = server.get("server_cpu_us_per_copy")
    figures["serverpath"] = server
    figures["notifications_per_s"] = delivered.get("notifications_per_s")
    figures["sink_ceiling_per_s"] = delivered.get("sink_ceiling_per_s")
    figures["delivery"] = delivered
    figures["hem_1m_ms_per_event"] = matched.get("hem_1m_ms_per_event")
    figures["hem_1m_matches_per_event"] = matched.get("hem_1m_matches_per_event")
    figures["hem"] = matched
    return figures
