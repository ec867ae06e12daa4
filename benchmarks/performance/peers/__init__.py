"""``edn bench peers``: the same range subscriptions and the same events through the EDN and
through the broker a user would pick instead, each checked against one oracle.

Systems (:mod:`.edn_system`, :mod:`.activemq`): the EDN (a dispatcher and 4 servers), and
ActiveMQ Classic with JMS selectors over STOMP, persistent (selector-aware virtual-topic
queues, the journal synced before a send is acknowledged, as the EDN syncs its log) and
non-persistent (topics). A peer that is not installed is installed from Debian's packages
when this runs as root with apt-get (:mod:`.install`), else skipped with the reason in
``<peer>_skipped``.

Each size (``n`` subscriptions, ``m`` events; :class:`.workload.Workload`) runs every system
in two modes: ``paced`` (``window`` events at a time, each window's deliveries awaited before
the next) and ``burst`` (every event at once). Figures, per system, mode and size
(``<system>_<mode>_<n>_<figure>``): ``events_per_s`` and ``deliveries_per_s`` from the first
publication to the last delivery, ``cpu_ms_per_event`` (the system's own processes: not the
clients), ``latency_p50_ms``/``latency_p99_ms`` from an event's publication to each of its
deliveries, ``exact`` with ``lost``/``extra``/``duplicates``; ``<system>_subscribe_s_<n>``;
and ``edn_over_<peer>_<mode>_<n>``, the EDN's events/s over the peer's, from the same run.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from . import activemq, install
from .edn_system import EdnSystem
from .workload import Workload

FULL_SIZES = ((1_000, 2_000), (10_000, 1_000), (100_000, 200))
QUICK_SIZES = ((300, 200),)
MODES = ("paced", "burst")
WINDOW = 20


def _systems(tmp: Path, work: Workload, skipped: dict):
    yield "edn", lambda: EdnSystem(tmp, work)
    if "activemq" not in skipped:
        for kind in ("persistent", "nonpersistent"):
            yield f"activemq_{kind}", lambda kind=kind: activemq.ActiveMqSystem(tmp, work, kind)


def run(quick: bool = False) -> dict:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    timeout = 120.0 if quick else 900.0
    figures: dict = {}
    skipped = install.ensure_peers()
    for peer, reason in skipped.items():
        figures[f"{peer}_skipped"] = reason
    for n, m in sizes:
        work = Workload.make(n, m)
        figures[f"oracle_deliveries_{n}"] = work.expected()
        events_per_s: dict[tuple[str, str], float] = {}
        for name, build in _systems(Path(tempfile.mkdtemp(prefix=f"edn-peers-{n}-")), work, skipped):
            with build() as system:
                figures[f"{name}_subscribe_s_{n}"] = round(system.subscribe_seconds, 2)
                for mode in MODES:
                    outcome = system.run(mode, window=WINDOW, timeout=timeout)
                    for key, value in outcome.figures().items():
                        figures[f"{name}_{mode}_{n}_{key}"] = value
                    events_per_s[name, mode] = outcome.figures()["events_per_s"]
        for (name, mode), rate in events_per_s.items():
            if name != "edn" and rate > 0:
                figures[f"edn_over_{name}_{mode}_{n}"] = round(events_per_s["edn", mode] / rate, 2)
    return figures
