"""Benchmarks behind ``edn bench NAME [--json]``.

Each benchmark is a function ``run(quick: bool) -> dict`` of named figures, registered in
BENCHMARKS with a one-line description. Speeds are compared as ratios measured side by side
in one run: these machines are shared and noisy.
"""
from __future__ import annotations

import importlib

BENCHMARKS: dict[str, tuple[str, str]] = {
    "messaging": ("benchmarks.messaging:run", "parse + dispatch + reply of SOAP messages in process"),
    "partitioning": ("benchmarks.partitioning:run",
                     "subscription partitioning hit ratios, paper section III-C (Figs. 3-6)"),
    "matchers": ("benchmarks.matchers:run",
                 "R-tree engine vs brute force vs per-filter XPath, route set, summaries, eCube"),
    "eventing": ("benchmarks.eventing:run",
                 "event source over HTTP: durable Subscribe/s and notifications/s to a local sink"),
}


def run_benchmark(name: str, *, quick: bool = False) -> dict:
    try:
        target, _ = BENCHMARKS[name]
    except KeyError:
        raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)(quick=quick)
