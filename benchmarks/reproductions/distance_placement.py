"""Distance-aware placement (EDN III-D) against the distance-blind R-tree rules, on a synthetic
two-region network: the mean subscriber-to-holder distance (ms from a subscription's entry
server to the server that holds it) and the hit ratio (paper III-C: events forwarded /
(events x servers), precise summaries).

The network: ``servers`` split into two regions; within a region the servers are
``near_ms`` apart give or take 50% (seeded), across regions ``far_ms``. Subscriptions are
uniform rectangles in [0, 10]^d, each entering at a uniformly drawn server (content and
location independent: the hard case), or, with ``locality`` p, a share p of them at a server
of the region their centre's first coordinate points to (below 5: the first region; the
spatial locality of subscriptions the paper's III-D cites), events uniform. Load threshold
factor 2 (the paper's default).

Algorithms, all on the same subscriptions, entries and events:

* ``local``: every subscription stays at its entry server (distance 0: the bound on
  locality, blind to content);
* ``online_rtree``: the paper's online R-tree (max overlap), blind to distance;
* ``online_added_traffic``: least added traffic ``min_i |new \\ R_i|``, distances all equal
  (the distance rule with the distance taken out: separates the rule from the weighting;
  since ``|new \\ R| = |new| - |new & R|`` it is the max-overlap rule, and with equal loads
  the same tie order, so its figures should equal ``online_rtree``'s);
* ``online_distance``: least added traffic times (distance + floor), the entry server's row of
  the matrix (floor: the smallest non-zero latency); also with the floor set to ``F`` ms
  (``online_distance_floor_F``): the higher the floor, the less a distance counts;
* ``offline_rtree``: TGS bulk loading; ``offline_distance``: TGS cuts weighted by distance
  with the entry-location order (:mod:`route_manager.partitioning.distance`), and with the
  floor set (``offline_distance_floor_F``).

Run: ``python -m benchmarks.reproductions.distance_placement [--subscriptions N] [--servers K] ...``
(prints JSON: ``<algorithm>.mean_distance_ms``, ``.hit_ratio``, ``.cross_region``, and
``.seconds``).
"""
from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from route_manager.models import hit_ratio as hr
from route_manager import workloads
from route_manager.partitioning import (OfflineDistanceRTreePartitioner,
                                        OfflineRTreePartitioner, OnlineDistancePartitioner,
                                        OnlineRTreePartitioner)

__all__ = ["two_region_latency", "study"]


def two_region_latency(servers: int, near_ms: float, far_ms: float, seed) -> np.ndarray:
    """A symmetric (servers, servers) matrix: the first half one region, the rest the other;
    ``near_ms`` +-50% inside a region, ``far_ms`` +-5% across, 0 on the diagonal."""
    rng = workloads.as_generator(seed)
    region = np.arange(servers) >= servers // 2
    jitter = np.triu(rng.uniform(0.5, 1.5, (servers, servers)), 1)
    jitter = jitter + jitter.T
    far_jitter = np.triu(rng.uniform(0.95, 1.05, (servers, servers)), 1)
    far_jitter = far_jitter + far_jitter.T
    latency = np.where(region[:, None] == region[None, :], near_ms * jitter, far_ms * far_jitter)
    np.fill_diagonal(latency, 0.0)
    return latency


def _online_distance(mins, maxs, entry, latency, capacity, floor=None, blind=False):
    part = OnlineDistancePartitioner(capacity=capacity, distance_floor=floor).fit(
        mins[:0], maxs[:0], len(latency))
    equal = np.ones(len(latency))
    labels = np.empty(len(mins), dtype=np.int64)
    for i in range(len(mins)):
        part.set_distances(equal if blind else latency[entry[i]])
        labels[i] = part.assign(mins[i], maxs[i])
    return labels


def study(subscriptions: int = 4000, servers: int = 8, d: int = 4, events: int = 5000,
          near_ms: float = 2.0, far_ms: float = 70.0, floors=(10.0, 35.0, 70.0, 140.0),
          seed: int = 1, locality: float = 0.0) -> dict:
    """Figures per algorithm (module docstring)."""
    mins, maxs = workloads.uniform_rectangles(subscriptions, d, seed=seed)
    points = workloads.uniform_events(events, d, seed=seed + 1)
    rng = np.random.default_rng(seed + 2)
    entry = rng.integers(0, servers, subscriptions)
    latency = two_region_latency(servers, near_ms, far_ms, seed + 3)
    region = np.arange(servers) >= servers // 2
    local = rng.random(subscriptions) < locality
    first_region = (mins[:, 0] + maxs[:, 0]) / 2 < (workloads.LOW + workloads.HIGH) / 2
    half = servers // 2
    in_region = np.where(first_region, rng.integers(0, half, subscriptions),
                         rng.integers(half, servers, subscriptions))
    entry = np.where(local, in_region, entry)
    capacity = math.ceil(2.0 * subscriptions / servers)
    runs = {
        "local": lambda: entry,
        "online_rtree": lambda: OnlineRTreePartitioner(load_factor=2.0).fit(
            mins, maxs, servers).labels_,
        "online_added_traffic": lambda: _online_distance(mins, maxs, entry, latency, capacity,
                                                         blind=True),
        "online_distance": lambda: _online_distance(mins, maxs, entry, latency, capacity),
        **{f"online_distance_floor_{f:g}": (lambda f=f: _online_distance(
            mins, maxs, entry, latency, capacity, floor=f)) for f in floors},
        "offline_rtree": lambda: OfflineRTreePartitioner().fit(mins, maxs, servers).labels_,
        "offline_distance": lambda: OfflineDistanceRTreePartitioner(
            latency=latency, entry=entry).fit(mins, maxs, servers).labels_,
        **{f"offline_distance_floor_{f:g}": (lambda f=f: OfflineDistanceRTreePartitioner(
            latency=latency, entry=entry, distance_floor=f).fit(mins, maxs, servers).labels_)
           for f in floors},
    }
    figures: dict = {"meta": {"subscriptions": subscriptions, "servers": servers, "d": d,
                              "events": events, "near_ms": near_ms, "far_ms": far_ms,
                              "capacity": capacity, "seed": seed,
                              "locality": locality}}
    for name, run in runs.items():
        started = time.perf_counter()
        labels = np.asarray(run())
        seconds = time.perf_counter() - started
        summaries = hr.precise_summaries(mins, maxs, labels, servers)
        figures[name] = {
            "mean_distance_ms": round(float(latency[entry, labels].mean()), 3),
            "cross_region": round(float(np.mean(region[entry] != region[labels])), 4),
            "hit_ratio": round(float(hr.hit_ratio(points, summaries)), 4),
            "max_load": int(np.bincount(labels, minlength=servers).max()),
            "seconds": round(seconds, 2),
        }
    return figures


def run(quick: bool = False) -> dict:
    """``edn bench distance``: the independent case and the spatial-locality case (80% of
    subscriptions entering in the region their content points to)."""
    if quick:
        return {"independent": study(400, 4, 3, 500, floors=(35.0,))}
    return {"independent": study(), "locality_0.8": study(locality=0.8)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subscriptions", type=int, default=4000)
    p.add_argument("--servers", type=int, default=8)
    p.add_argument("--dims", type=int, default=4)
    p.add_argument("--events", type=int, default=5000)
    p.add_argument("--near-ms", type=float, default=2.0)
    p.add_argument("--far-ms", type=float, default=70.0)
    p.add_argument("--floors", type=float, nargs="*", default=[10.0, 35.0, 70.0, 140.0],
                   metavar="MS", help="distance floors to try besides the default")
    p.add_argument("--locality", type=float, default=0.0, metavar="P",
                   help="share of subscriptions entering in the region their content points "
                        "to (default 0: entry independent of content)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    print(json.dumps(study(args.subscriptions, args.servers, args.dims, args.events,
                           args.near_ms, args.far_ms, tuple(args.floors), seed=args.seed,
                           locality=args.locality),
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
