"""``edn bench faults``: a fault campaign across the hosts of a lab, and a check of its
history (see :mod:`benchmarks.lab.history`).

The network (:mod:`benchmarks.lab.edn_network`) runs with its subscriptions routed and a paced publisher; each
fault of :mod:`.catalogue` is injected alone after a normal period, held, and healed; then a
random schedule of them; then a final heal and drain, after which the history is checked:
acknowledged notifications lost, notifications no filter selects, duplicates (with their
MessageIDs), subscriptions lost, resurrected or held twice, and per fault the time from heal
to the first held-back notification and to the last, and the latency from publication to
notification during it and in the normal period after it. Every process must be alive at
the end.

Needs root (a lab of hosts); ``--quick`` is the CI campaign (two roots, two servers, six
faults, under three minutes).
"""
from __future__ import annotations

import json
import logging
import random
import tempfile
import time
from pathlib import Path

from benchmarks.lab import Lab, Link, why_not_available

from .catalogue import Fault, catalogue, disk_mount, unmount
from benchmarks.lab.history import FaultWindow, check
from benchmarks.lab.edn_network import LabNetwork


def run(quick: bool = False, out: str | None = None) -> dict:
    # the publisher's failovers are part of the history; one warning each would drown the run
    logging.getLogger("wsframework.publisher").setLevel(logging.ERROR)
    reason = why_not_available()
    if reason:
        raise RuntimeError(f"the fault campaign needs a lab of hosts: {reason}")
    settings = dict(
        tree=not quick, subscriptions=60 if quick else 200, rate=10.0 if quick else 20.0,
        normal_s=3.0 if quick else 6.0, random_faults=0 if quick else 6,
        link=Link(delay_ms=5, jitter_ms=1) if quick else Link(delay_ms=20, jitter_ms=5))
    return campaign(**settings, out=Path(out) if out else None)


def campaign(*, tree: bool, subscriptions: int, rate: float, normal_s: float,
             random_faults: int, link: Link, seed: int = 5, drain_s: float = 120.0,
             faults: list[Fault] | None = None, out: Path | None = None) -> dict:
    """The campaign; with ``out``, its whole history is written to ``out/faults-history.json``
    (every publication, notification and fault, for a reader's own checks)."""
    rng = random.Random(seed)
    schedule = list(faults if faults is not None else catalogue(tree, quick=not tree))
    alone = len(schedule)
    schedule += [_randomized(rng.choice(schedule), rng) for _ in range(random_faults)]
    disk_dir = Path(tempfile.mkdtemp(prefix="edn-faults-disk-"))
    full = [f.needs[0] for f in schedule if f.kind == "full disk"]
    mounted = full[0] if full else None  # the server whose data lives on a small tmpfs
    started = time.time()
    servers = 3 if tree else 2  # with the tree, s3 is behind the child dispatcher
    with Lab(LabNetwork.host_names(servers, tree), link=link) as lab:
        try:
            data_dirs = {mounted: disk_mount(disk_dir)} if mounted else {}
            net = LabNetwork(lab, servers=servers, tree=tree, rate=rate).start(data_dirs)
            net.subscribe(subscriptions)
            net.start_publishing()
            recovery = []
            for k, fault in enumerate(schedule):
                _wait_normal(net, normal_s)
                recovery.append(_inject(net, fault, random_part=k >= alone))
            _wait_normal(net, normal_s)
            net.stop_publishing()
            for added in net.pending_routes:
                net.wait_routed(added)
            drained = _until(net.drained, drain_s)
            net.wait(net.quiet, "a quiet network", drain_s)
            net.record_notifications()
            verdict = check(net.history, net.holders())
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / "faults-history.json").write_text(json.dumps(net.history.as_json()))
            verdict["alive"] = {name: p.alive() for name, p in net.processes.items()}
        finally:
            if mounted:
                for process in lab.processes:
                    process.stop()
                unmount(disk_dir)
    for figures, seconds in zip(verdict["faults"], recovery):
        figures["back_in_view_s"] = seconds
    verdict.update({
        "hosts": len(LabNetwork.host_names(servers, tree)),
        "link": f"{link.delay_ms:g} ms +-{link.jitter_ms:g} ms",
        "subscriptions": subscriptions, "rate_events_per_s": rate,
        "faults_alone": alone, "faults_random": random_faults,
        "drained_after_final_heal": drained,
        "notes": net.notes,
        "full_disk_subscribe_answers": net.disk_answers,
        "seconds": round(time.time() - started, 1),
    })
    return verdict


def _randomized(fault: Fault, rng: random.Random) -> Fault:
    seconds = fault.seconds if fault.kind in ("pause", "kill -9") else rng.uniform(3, 15)
    return Fault(f"random: {fault.name}", fault.kind, fault.begin, fault.end, round(seconds, 1),
                 fault.during, fault.needs)


def _wait_normal(net: LabNetwork, seconds: float) -> None:
    time.sleep(seconds)  # a period of normal traffic: what it measures is the time itself


def _inject(net: LabNetwork, fault: Fault, random_part: bool) -> float | None:
    """Begin, hold, act, end; returns seconds from the end until every dispatcher and
    server is answering and routing again (None: not within a minute)."""
    window: FaultWindow = net.history.began(fault.name, time.time())
    held_until = time.monotonic() + fault.seconds
    _step(net, fault, "begin", fault.begin)
    if fault.during is not None:
        _step(net, fault, "act", fault.during)
    remaining = held_until - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)  # the fault's duration is the figure being held
    if not _step(net, fault, "end", fault.end):
        net.recover()
    window.healed_at = time.time()
    began = time.monotonic()
    try:
        net.wait(net.everyone_routing, f"the network back after {fault.name}", 60.0)
    except TimeoutError:
        net.notes.append(f"not back within 60 s after {fault.name}")
        return None
    return round(time.monotonic() - began, 2)


def _step(net: LabNetwork, fault: Fault, what: str, action) -> bool:
    """One step of a fault; a failure is noted (the campaign goes on) and False."""
    try:
        action(net)
        return True
    except Exception as exc:
        net.notes.append(f"{fault.name}: {what} failed: {type(exc).__name__}: {exc}"[:400])
        return False


def _until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False
