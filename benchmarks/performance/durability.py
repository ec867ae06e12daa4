"""The cost of the dispatcher's durable log on the throughput benchmark's setup.

The quick network of ``edn bench throughput`` (:func:`benchmarks.livenet.precision_sweep`:
real processes, a dispatcher and four servers) is measured with ``durable_log`` on and off, alternating (on, off, off, on, ...) in
one run, at ``none`` and ``precise`` and with the outgoing link uncapped, so the dispatcher's
CPU (where the log's commits are paid) is the bottleneck rather than the link. Figures:
events/s per precision and setting for every trial, their medians, and the ratio of the
medians (log on / log off). The servers' outbox cost is in ``edn bench eventing``'s
figures run with ``durable_outbox`` on and off.
"""
from __future__ import annotations

import dataclasses
import statistics

from ..livenet import Setup, precision_sweep

LEVELS = ("none", "precise")


def run(quick: bool = False) -> dict:
    trials = 2 if quick else 4
    rows: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
    errors = 0
    for trial in range(trials):
        order = ("on", "off") if trial % 2 == 0 else ("off", "on")
        for state in order:
            setup = dataclasses.replace(
                Setup.quick(), link_mbps=10_000.0, levels=LEVELS,
                dispatcher_settings={"durable_log": "true" if state == "on" else "false"})
            swept = precision_sweep(setup, log=lambda text: None)
            errors += swept.publisher_errors
            for point in swept.rows:
                rows[state].setdefault(point["label"], []).append(point["tp_measured"])
    figures: dict = {"trials": trials, "link_mbps": 10_000.0, "publisher_errors": errors}
    for level in LEVELS:
        on, off = rows["on"].get(level, []), rows["off"].get(level, [])
        figures[f"{level}_log_on_eps"] = [round(v, 1) for v in on]
        figures[f"{level}_log_off_eps"] = [round(v, 1) for v in off]
        if on and off:
            figures[f"{level}_median_on_vs_off"] = round(statistics.median(on)
                                                         / statistics.median(off), 3)
    return figures
