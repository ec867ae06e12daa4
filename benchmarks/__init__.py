"""Benchmarks behind ``edn bench NAME [--json]``.

Each benchmark is a function ``run(quick: bool) -> dict`` of named figures, registered in
BENCHMARKS with a one-line description. Speeds are compared as ratios measured side by side
in one run: these machines are shared and noisy.

The benchmarks live by what they show, and the three subpackages never import one another
(an import-linter contract):

* :mod:`benchmarks.performance` -- how fast the product's own paths run;
* :mod:`benchmarks.robustness` -- whether every role keeps serving right under hostile input,
  slow clients, kills and concurrency;
* :mod:`benchmarks.reproductions` -- the papers' figures and studies of their designs.

What they share: :mod:`benchmarks.livenet` (a populated network of real processes under
publisher load, and its precision sweep) and :mod:`benchmarks.command` (``edn bench``).
"""
from __future__ import annotations

import importlib

BENCHMARKS: dict[str, tuple[str, str]] = {
    "messaging": ("benchmarks.performance.messaging:run", "parse + dispatch + reply of SOAP messages in process"),
    "partitioning": ("benchmarks.reproductions.partitioning:run",
                     "subscription partitioning hit ratios, paper section III-C (Figs. 3-6)"),
    "matchers": ("benchmarks.performance.matchers:run",
                 "R-tree engine vs brute force vs per-filter XPath, route set, summaries, eCube"),
    "eventing": ("benchmarks.performance.eventing:run",
                 "event source over HTTP: durable Subscribe/s and notifications/s to a local sink"),
    "throughput": ("benchmarks.reproductions.throughput:run",
                   "measured vs predicted throughput vs summary precision on real processes "
                   "(paper Fig. 12)"),
    "slowclients": ("benchmarks.robustness.slowclients:run",
                    "every role (source, server, dispatcher) under 2,000 idle, 200 slowloris "
                    "and 50 slow-body connections: p95/p99 latency and failures of each role's "
                    "normal requests (loopback)"),
    "worstfilters": ("benchmarks.robustness.worstfilters:run",
                     "publish and /health latency on a source with the worst accepted filters "
                     "subscribed beside normal ones, side by side with normal ones alone"),
    "durability": ("benchmarks.performance.durability:run",
                   "events/s of the throughput network with the dispatcher's durable log on and "
                   "off, alternating in one run"),
    "selftuning": ("benchmarks.reproductions.selftuning:run",
                   "self-tuning precision from 10% and 100%, and after an event distribution "
                   "change (paper Figs. 16, 17)"),
    "climbnoise": ("benchmarks.reproductions.climb_noise:run",
                   "the comparing self-tuner run in process on the curves the selftuning "
                   "bench measured, with random interval noise: share of runs settled at "
                   "0.95 of the optimum or more, by how far a probe must beat home"),
    "placement": ("benchmarks.robustness.placement:run", "50 concurrent Subscribes across 3 EDN servers (real processes): failures, p99 latency, one subscription per MessageID"),
    "faults": ("benchmarks.robustness.faults:run",
               "a fault campaign across a lab of hosts (partitions of every link kind, one-way "
               "cuts, loss, reordering, latency, SIGSTOP, kill -9, clock skew, a full disk), "
               "then its history checked: acknowledged notifications lost, unexpected, "
               "duplicates, subscriptions lost, recovery times (needs root)"),
    "wan": ("benchmarks.performance.wan:run",
            "the EDN across a lab of hosts at 0, 20 and 50 ms per hop: events/s, latency "
            "before and after a cut, one server's notifications/s to a host, summary "
            "propagation, and distance-aware against R-tree placement on measured latencies "
            "(needs root)"),
    "kill": ("benchmarks.robustness.kill:run", "kill -9 of a server, the dispatcher and a source during bursts: notifications lost, duplicates, recovery time"),
    "control": ("benchmarks.performance.control:run",
                "the control path on real processes: Subscribes/s into 4 servers with "
                "placement, bulk subscribes/s into one server, summary propagation p99"),
    "eventpath": ("benchmarks.performance.eventpath:run",
                  "the event path's figures: dispatcher CPU per event, server CPU per copy, T_c at "
                  "precise, live events/s (real processes, link uncapped), notifications/s, "
                  "the HEM workload at 1M subscriptions"),
    "topology": ("benchmarks.reproductions.topology:run",
                 "one dispatcher vs a 2-level dispatch tree over the same 20 servers (real "
                 "processes, side by side): root CPU per event, hit ratio per level, events/s, "
                 "each beside the tree throughput model; Bloom summary figures"),
    "hem": ("benchmarks.performance.hem:run", "the cell-bitmap engine on HEM's workload (1M subscriptions, "
                                  "d = 20, 10 ranges of width 0.3): ms per event, checked"),
    "serverpath": ("benchmarks.performance.serverpath:run", "a server's CPU per forwarded copy in process "
                                                "(batch path beside the event-by-event one)"),
    "tls": ("benchmarks.performance.tls:run",
            "TLS beside plain HTTP in one run: live events/s with mutual TLS on every hop, one "
            "source's notifications/s over HTTPS, handshakes per 10,000 notifications, "
            "handshake p50, health p95 under 2,000 stalled handshakes"),
    "storage": ("benchmarks.performance.storage:run",
                "what acknowledged-means-on-disk costs: durable Subscribes/s, publications/s "
                "and live events/s with --durable-sync normal and full, alternated in one "
                "run, and this disk's fdatasync time"),
    "delivery": ("benchmarks.performance.delivery:run", "notifications/s from a source to a fast sink, and "
                                            "the sink's own ceiling"),
    "backlog": ("benchmarks.performance.backlog:run",
                "delivery behind: a 200,000-notification durable backlog drained to one sink "
                "host, one host 40 ms away (simulated by the sink), a 10 s outage's drain"),
    "brokers": ("benchmarks.reproductions.brokers:run", "Gryphon's 39-broker wide-area simulation: flooding, "
                                          "link matching, summaries, Kyra (overload rate, "
                                          "steps, hops, bytes, exactness)"),
    "linkroutes": ("benchmarks.reproductions.linkroutes:run",
                   "the linkmatching dispatcher's route set: PST link matcher vs the scan it "
                   "replaced, us per event, steps, rebuild cost (Gryphon Chart 3 workload)"),
    "distance": ("benchmarks.reproductions.distance_placement:run",
                 "distance-aware placement (EDN III-D): mean entry-to-holder distance, "
                 "cross-region share and hit ratio, online and offline, on a 2-region matrix"),
    "richer": ("benchmarks.reproductions.richer_subscriptions:run",
               "richer subscriptions (Chandramouli et al.): NotifyWhen messages saved and its "
               "index beside a scan, S-CN interval sets, range-aggregate S-CN vs unicast "
               "(the paper's Tables 2 and 3)"),
    "peers": ("benchmarks.performance.peers:run",
              "the same range subscriptions and events through the EDN, ActiveMQ (JMS "
              "selectors over STOMP) and RabbitMQ (headers exchange), persistent and not, "
              "and Mosquitto (MQTT topics, in memory), checked against one oracle: events/s, deliveries/s, CPU per event, latency "
              "p50/p99, paced and in a burst"),
    "spark": ("benchmarks.performance.spark:run",
              "edn profile on a real Spark standalone cluster (a master and two workers on "
              "loopback) beside local[*]: wall times, equal answers, stage times from the "
              "event logs"),
    "fuzz": ("benchmarks.robustness.fuzz:run", "fuzzed messages and malformed HTTP against every role (real processes): outcomes, liveness, RSS"),
}
#: benchmarks that write JSON and PNG files into a directory (``edn bench NAME --out DIR``)
WRITES_FILES = {"throughput", "selftuning", "brokers", "faults"}
DEFAULT_OUT = "edn-bench-out"


def run_benchmark(name: str, *, quick: bool = False, out: str | None = None) -> dict:
    """Run one benchmark; ``out`` (a directory) goes to the benchmarks that write files
    (plots next to their JSON; default ./edn-bench-out)."""
    try:
        target, _ = BENCHMARKS[name]
    except KeyError:
        raise SystemExit(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    module, _, func = target.partition(":")
    run = getattr(importlib.import_module(module), func)
    if name in WRITES_FILES:
        return run(quick=quick, out=out or DEFAULT_OUT)
    return run(quick=quick)
