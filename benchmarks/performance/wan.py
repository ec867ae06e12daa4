"""``edn bench wan``: the EDN across the hosts of a lab at 0, 20 and 50 ms per hop, in one run.

The network (:class:`~benchmarks.lab.edn_network.LabNetwork`): two root dispatchers, four
servers (R-tree placement), a publisher host and a subscriber host, 200 range subscriptions.
A hop is host to host: each host's link gets half the hop's delay each way (and a tenth of it
as jitter), so a round trip between two hosts is two hops. For each hop delay, the same live
network (the links change under it):

* ``summary_propagation_ms``: p50 and max over single Subscribes, from the Subscribe's
  acknowledgement until both roots route it (their route tables count it);
* ``normal``: p50 and p99 from publication to notification at 20 events/s;
* ``after_fault``: the same for the events published in the period after a 5 s cut between
  a server and the subscriber's host healed, with the time from the heal until the held
  notifications were all delivered;
* ``events_per_s``: a closed loop of publishers (``edn:EventBatch`` of 20 events, three at
  once) at the first root: events acknowledged per second; ``notifications_per_s`` into the
  subscriber host meanwhile, and ``server_to_host_per_s``: the busiest server's
  notifications to that host over the time it took to deliver them all (the sink is the
  project's threaded Python sink in this process: it, not the link, may be the bound).

Then placement on unequal distances: servers ``s1``, ``s2`` one hop of 5 ms from everyone,
``s3``, ``s4`` 50 ms. ``edn latency measure`` writes the latency file from the live network;
the same 200 Subscribes, each entering at a random server, are placed by the R-tree
partitioner and by the distance-aware one fed that file, on fresh servers each; figures:
mean entry-to-holder distance (ms, from the measured file) and the roots' hit ratio (copies
sent / (events x servers)) over 500 events.

Needs root (a lab of hosts).
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.lab import Lab, why_not_available
from benchmarks.lab.edn_network import LabNetwork
from benchmarks.lab.history import first_arrivals, latencies

HOPS_MS = (0, 20, 50)
RATE = 20.0


def run(quick: bool = False) -> dict:
    logging.getLogger("wsframework.publisher").setLevel(logging.ERROR)
    reason = why_not_available()
    if reason:
        raise RuntimeError(f"the WAN benchmark needs a lab of hosts: {reason}")
    hops = HOPS_MS[:2] if quick else HOPS_MS
    settings = dict(subscriptions=60 if quick else 200, normal_s=4.0 if quick else 8.0,
                    burst_s=3.0 if quick else 8.0, cut_s=3.0 if quick else 5.0)
    figures: dict = {"hops_ms": list(hops), "subscriptions": settings["subscriptions"]}
    with Lab(LabNetwork.host_names(servers=4)) as lab:
        net = LabNetwork(lab, servers=4, rate=RATE).start()
        net.subscribe(settings["subscriptions"])
        for hop in hops:
            figures[f"hop{hop}"] = at_hop(net, hop, **settings)
        figures["placement"] = placement(lab, net, quick)
    return figures


def set_hop(lab: Lab, hop_ms: float, hosts=None) -> None:
    half = hop_ms / 2
    for host in hosts or list(lab.hosts):
        lab.damage(host, delay_ms=half, jitter_ms=half / 5)


def at_hop(net: LabNetwork, hop: float, *, subscriptions: int, normal_s: float, burst_s: float,
           cut_s: float) -> dict:
    set_hop(net.lab, hop)
    out: dict = {"summary_propagation_ms": propagation(net, 6)}
    # paced: the normal period, a cut between a server and the subscriber, the period after
    began = time.time()
    net.start_publishing()
    time.sleep(normal_s)  # a period of traffic: its length is what is measured
    cut_at = time.time()
    net.lab.cut("s1", "subscriber")
    time.sleep(cut_s)
    net.lab.heal()
    healed = time.time()
    time.sleep(normal_s)
    net.stop_publishing()
    net.wait(net.drained_quickly, "every notification delivered", 120)
    net.record_notifications()
    history = net.history
    first = first_arrivals(history)  # read once for the three figures
    out["normal"] = _percentiles(latencies(history, began, cut_at, first))
    out["after_fault"] = _percentiles(latencies(history, healed, healed + normal_s, first))
    held = [n.arrived_at for n in first
            if n.arrived_at >= healed and history.publications[n.event_id].sent_at < healed]
    out["after_fault"]["heal_to_drained_s"] = round(max(held) - healed, 3) if held else 0.0
    # closed loop
    out.update(net.closed_loop(burst_s, threads=3, batch=20))
    net.reset_history()
    return out


def propagation(net: LabNetwork, count: int) -> dict:
    seconds = [net.subscribe_one_timed(k) for k in range(count)]
    return {"p50": round(1000 * float(np.median(seconds)), 1),
            "max": round(1000 * max(seconds), 1)}


def _percentiles(values: np.ndarray) -> dict:
    if not len(values):
        return {"n": 0}
    return {"n": int(len(values)), "p50_s": round(float(np.percentile(values, 50)), 3),
            "p99_s": round(float(np.percentile(values, 99)), 3)}


def placement(lab: Lab, net: LabNetwork, quick: bool) -> dict:
    """R-tree against distance-aware placement on unequal distances (see the module)."""
    set_hop(lab, 5.0)
    set_hop(lab, 50.0, ["s3", "s4"])
    matrix_file = Path(tempfile.mkdtemp(prefix="edn-wan-")) / "latency.json"
    measured = lab["subscriber"].run(
        subprocess.run, [sys.executable, "-m", "edn.cli", "latency", "measure",
                         "--at", net.roots[0].base_url, "--out", str(matrix_file),
                         f"--admin-token={net.token}"],
        capture_output=True, text=True, timeout=120)
    if measured.returncode != 0:
        return {"error": f"edn latency measure failed: {measured.stderr[-400:]}"}
    matrix = json.loads(matrix_file.read_text())
    out = {"latency_ms": matrix}
    count = 60 if quick else 200
    for partitioner in ("rtree", "distance"):
        out[partitioner] = net.placement_trial(partitioner, matrix_file, matrix, count,
                                               events=200 if quick else 500)
    return out
