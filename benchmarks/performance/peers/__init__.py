"""``edn bench peers``: the same range subscriptions and the same events through the EDN and
through the broker a user would pick instead, each checked against one oracle.

Systems (:mod:`.edn_system`, :mod:`.activemq`, :mod:`.rabbitmq`, :mod:`.mosquitto`): the EDN
(a dispatcher and 4 servers); ActiveMQ Classic with JMS selectors over STOMP, persistent
(selector-aware virtual-topic queues, the journal synced before a send is acknowledged, as
the EDN syncs its log) and non-persistent (topics); RabbitMQ's headers exchange (equality
only: a queue bound per grid cell a box touches, the consumer filtering exactly), persistent
and not; and Mosquitto's topics (MQTT, routing by grid cell only: the floor), in memory. A
peer that is not installed is installed from Debian's packages
when this runs as root with apt-get (:mod:`.install`), else skipped with the reason in
``<peer>_skipped``.

Each size (``n`` subscriptions, ``m`` events; :class:`.workload.Workload`) runs every system
in two modes: ``paced`` (``window`` events at a time, each window's deliveries awaited before
the next) and ``burst`` (every event at once). Figures, per system, mode and size
(``<system>_<mode>_<n>_<figure>``): ``events_per_s`` and ``deliveries_per_s`` from the first
publication to the last delivery, ``cpu_ms_per_event`` (the system's own processes: not the
clients), ``latency_p50_ms``/``latency_p99_ms`` from an event's publication to each of its
deliveries, ``exact`` with ``lost``/``extra``/``duplicates``; ``<system>_subscribe_s_<n>``;
``edn_over_<peer>_<mode>_<n>``, the EDN's events/s over the peer's, from the same run; and
``<peer>_failed_<n>`` where a peer could not make its subscriptions or run (its figures at
that size are missing, the others stand).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from . import activemq, install, mosquitto, rabbitmq
from .edn_system import EdnSystem
from .workload import Workload

FULL_SIZES = ((1_000, 2_000), (10_000, 1_000), (100_000, 200))
QUICK_SIZES = ((300, 200),)
MODES = ("paced", "burst")
WINDOW = 20


def _systems(tmp: Path, work: Workload, skipped: dict, subscribe_timeout: float):
    """(name, factory) of each system to run: every one not skipped, or those named in
    $EDN_BENCH_PEERS (a comma-separated list of system names, e.g. ``edn,rabbitmq_persistent``)."""
    chosen = {name.strip() for name in os.environ.get("EDN_BENCH_PEERS", "").split(",") if name.strip()}
    for name, factory in _all_systems(tmp, work, skipped, subscribe_timeout):
        if not chosen or name in chosen:
            yield name, factory


def _all_systems(tmp: Path, work: Workload, skipped: dict, subscribe_timeout: float):
    yield "edn", lambda: EdnSystem(tmp, work)
    if "activemq" not in skipped:
        for kind in ("persistent", "nonpersistent"):
            yield f"activemq_{kind}", lambda kind=kind: activemq.ActiveMqSystem(
                tmp, work, kind, subscribe_timeout=subscribe_timeout)
    if "rabbitmq" not in skipped:
        for kind in ("persistent", "nonpersistent"):
            yield f"rabbitmq_{kind}", lambda kind=kind: rabbitmq.RabbitMqSystem(
                tmp, work, kind, subscribe_timeout=subscribe_timeout)
    if "mosquitto" not in skipped:
        yield "mosquitto_nonpersistent", lambda: mosquitto.MosquittoSystem(
            tmp, work, subscribe_timeout=subscribe_timeout)


def _progress(line: str) -> None:
    print(f"peers: {line}", file=sys.stderr, flush=True)


def _run_systems(tmp: Path, work: Workload, skipped: dict, timeout: float,
                 subscribe_timeout: float, figures: dict, events_per_s: dict) -> None:
    n = work.n
    for name, build in _systems(tmp, work, skipped, subscribe_timeout=subscribe_timeout):
        try:
            with build() as system:
                figures[f"{name}_subscribe_s_{n}"] = round(system.subscribe_seconds, 2)
                _progress(f"{name}: {n} subscriptions made in {system.subscribe_seconds:.1f} s")
                for mode in MODES:
                    outcome = system.run(mode, window=WINDOW, timeout=timeout)
                    _progress(f"{name} {mode} at {n}: {outcome.figures()}")
                    for key, value in outcome.figures().items():
                        figures[f"{name}_{mode}_{n}_{key}"] = value
                    events_per_s[name, mode] = outcome.figures()["events_per_s"]
        except Exception as exc:  # one system failing at one size leaves the others' figures
            if name == "edn":
                raise
            figures[f"{name}_failed_{n}"] = f"{type(exc).__name__}: {exc}"[:500]
            _progress(f"{name} at {n} failed: {exc}")


def run(quick: bool = False) -> dict:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    timeout = 120.0 if quick else 900.0  # for each mode's deliveries
    subscribe_timeout = 120.0 if quick else 600.0
    figures: dict = {}
    skipped = install.ensure_peers()
    for peer, reason in skipped.items():
        figures[f"{peer}_skipped"] = reason
    for n, m in sizes:
        work = Workload.make(n, m)
        figures[f"oracle_deliveries_{n}"] = work.expected()
        events_per_s: dict[tuple[str, str], float] = {}
        with tempfile.TemporaryDirectory(prefix=f"edn-peers-{n}-") as tmp:
            _run_systems(Path(tmp), work, skipped, timeout, subscribe_timeout, figures,
                         events_per_s)
        for (name, mode), rate in events_per_s.items():
            if name != "edn" and rate > 0 and ("edn", mode) in events_per_s:
                figures[f"edn_over_{name}_{mode}_{n}"] = round(events_per_s["edn", mode] / rate, 2)
    return figures
