"""The subscription-partitioning study of the paper's section III-C (Figs. 3-6 and the text's
load-balancing, offline-share and dimension results), as hit ratios.

Defaults are the paper's: 10,000 subscriptions per server, load threshold 20,000 (load
balancing factor 2), rectangles and events uniform in [0,10]^4, 10,000 events, N_s = 10 for
the Zipf figures. Event routing always uses precise summaries (the paper routes events with
the R-tree "regardless of which subscription routing scheme is used"); Fig. 4 varies the
precision of the *subscription-routing* summaries. Every figure of one workload uses the same
subscriptions and events (seeded), so algorithms are compared on identical data.

Keys are flattened paths: ``fig3.servers_10.offline_rtree`` is a hit ratio;
``derived.*`` are ratios between them for comparison with the paper's text; ``meta.*``
describes the run; ``notes.*`` are strings that explain deviations. The full run spreads its
independent experiments over the machine's cores (at most 2 processes by default; set
``EDN_BENCH_WORKERS``).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

from route_manager.models import hit_ratio as hr
from route_manager import workloads
from route_manager.partitioning import (
    KMeansPartitioner,
    OfflineOnlineRTreePartitioner,
    OfflineRTreePartitioner,
    OnlineKMeansPartitioner,
    OnlineRTreePartitioner,
    RandomPartitioner,
)
from wsframework.progress import progress

ALGORITHMS = {
    "random": lambda lf: RandomPartitioner(load_factor=lf, random_state=7),
    "online_rtree": lambda lf: OnlineRTreePartitioner(load_factor=lf),
    "offline_rtree": lambda lf: OfflineRTreePartitioner(load_factor=lf),
    "offline_online_rtree": lambda lf: OfflineOnlineRTreePartitioner(load_factor=lf),
    "kmeans": lambda lf: KMeansPartitioner(load_factor=lf, random_state=7),
    "online_kmeans": lambda lf: OnlineKMeansPartitioner(load_factor=lf),
}
# Relative cost, for scheduling the longest jobs first.
_COST = {"random": 0.02, "offline_rtree": 0.1, "kmeans": 0.1, "online_kmeans": 0.1,
         "online_rtree": 1.3, "offline_online_rtree": 1.5}


def _key(value) -> str:
    return str(value).replace(".", "_")


class Config:
    def __init__(self, quick: bool):
        self.quick = quick
        self.per_server = 500 if quick else 10_000
        self.events = 1_000 if quick else 10_000
        self.d = 4
        self.servers = (2, 4) if quick else (5, 10, 20, 30, 40, 50)
        self.base_servers = 4 if quick else 10
        self.fig4_servers = (2, 4) if quick else (10, 20)
        self.depths = (1, 2) if quick else (1, 2, 3, 4)
        self.alphas = (1.0, 4.0) if quick else (0.25, 0.5, 1.0, 2.0, 4.0)
        self.factors = (1.0, 2.0) if quick else (1.0, 1.5, 2.0, 2.5, 3.0)
        self.shares = (0.0, 0.5, 1.0) if quick else (0.0, 0.3, 0.5, 1.0)
        self.dims = (2, 6) if quick else tuple(range(2, 11))
        self.precision_depths = (1, 2) if quick else (1, 2, 3, 4, 5)
        self.fanout = 8
        self.bins = 10


# ---- one experiment = one job (picklable arguments, returns a dict of figures) -------------

def _uniform(n_servers: int, d: int, cfg: Config):
    mins, maxs = workloads.uniform_rectangles(n_servers * cfg.per_server, d,
                                              seed=1000 * d + n_servers)
    events = workloads.uniform_events(cfg.events, d, seed=77 + d)
    return mins, maxs, events


def _hit(events, mins, maxs, labels, n_servers) -> float:
    return round(hr.hit_ratio(events, hr.precise_summaries(mins, maxs, labels, n_servers)), 4)


def job_uniform(cfg: Config, prefix: str, algorithm: str, n_servers: int, d: int,
                load_factor: float = 2.0, **params) -> dict:
    mins, maxs, events = _uniform(n_servers, d, cfg)
    est = ALGORITHMS[algorithm](load_factor).set_params(**params) if params else \
        ALGORITHMS[algorithm](load_factor)
    est.fit(mins, maxs, n_servers)
    out = {prefix: _hit(events, mins, maxs, est.labels_, n_servers)}
    if algorithm in ("online_rtree", "offline_online_rtree", "offline_rtree"):
        out[prefix + ".max_load"] = int(est.loads_.max())
        out[prefix + ".empty_servers"] = int((est.loads_ < 0.01 * cfg.per_server).sum())
    return out


def job_fig4(cfg: Config, algorithm: str, n_servers: int, depth: int) -> dict:
    mins, maxs, events = _uniform(n_servers, cfg.d, cfg)
    est = ALGORITHMS[algorithm](2.0).set_params(summary_depth=depth, fanout=cfg.fanout)
    est.fit(mins, maxs, n_servers)
    key = f"fig4.servers_{n_servers}.{algorithm}.depth_{depth}"
    return {key + ".hit_ratio": _hit(events, mins, maxs, est.labels_, n_servers),
            key + ".mean_depth": round(est.mean_summary_depth_, 2)}


def job_fig4_precise(cfg: Config, algorithm: str, n_servers: int) -> dict:
    mins, maxs, events = _uniform(n_servers, cfg.d, cfg)
    est = ALGORITHMS[algorithm](2.0).set_params(fanout=cfg.fanout).fit(mins, maxs, n_servers)
    key = f"fig4.servers_{n_servers}.{algorithm}.depth_precise"
    return {key + ".hit_ratio": _hit(events, mins, maxs, est.labels_, n_servers),
            key + ".mean_depth": round(est.mean_summary_depth_, 2)}


def job_zipf(cfg: Config, algorithm: str, alpha: float) -> dict:
    n_servers = cfg.base_servers
    mins, maxs = workloads.zipf_rectangles(n_servers * cfg.per_server, cfg.d, alpha,
                                           seed=5000 + int(alpha * 100), bins=cfg.bins)
    uniform_events = workloads.uniform_events(cfg.events, cfg.d, seed=78)
    zipf_events = workloads.zipf_events(cfg.events, cfg.d, alpha, seed=79, bins=cfg.bins,
                                        ranking_seed=80)
    est = ALGORITHMS[algorithm](2.0).fit(mins, maxs, n_servers)
    summaries = hr.precise_summaries(mins, maxs, est.labels_, n_servers)
    return {f"fig5.alpha_{_key(alpha)}.{algorithm}": round(hr.hit_ratio(uniform_events,
                                                                         summaries), 4),
            f"fig6.alpha_{_key(alpha)}.{algorithm}": round(hr.hit_ratio(zipf_events,
                                                                         summaries), 4)}


def job_precision(cfg: Config) -> dict:
    """Event routing with depth-limited summaries of the offline R-tree partition: how much
    traffic each summary precision costs (input to the throughput study, section IV)."""
    n_servers = cfg.base_servers
    mins, maxs, events = _uniform(n_servers, cfg.d, cfg)
    labels = OfflineRTreePartitioner().fit(mins, maxs, n_servers).labels_
    out = {}
    for depth in cfg.precision_depths:
        summaries = hr.depth_summaries(mins, maxs, labels, n_servers, depth, cfg.fanout)
        boxes = sum(len(s[0]) for s in summaries)
        key = f"event_routing_precision.servers_{n_servers}.offline_rtree.depth_{depth}"
        out[key + ".hit_ratio"] = round(hr.hit_ratio(events, summaries), 4)
        out[key + ".precision"] = round(boxes / len(mins), 5)
    return out


def _jobs(cfg: Config):
    """(cost, function, args, kwargs) for every experiment; shared points are computed once
    (the load-factor-2 point, the 0% / 50% / 100% offline shares and Fig. 4's precise point
    come from Fig. 3's runs at the base server count)."""
    jobs = []
    n_base, d = cfg.base_servers, cfg.d
    for n in cfg.servers:
        for alg in ALGORITHMS:
            jobs.append((_COST[alg] * n, job_uniform,
                         (cfg, f"fig3.servers_{n}.{alg}", alg, n, d), {}))
    for n in cfg.fig4_servers:
        for alg in ("online_rtree", "offline_online_rtree"):
            for depth in cfg.depths:
                jobs.append((1.3 * _COST[alg] * n, job_fig4, (cfg, alg, n, depth), {}))
            if n not in cfg.servers:
                jobs.append((_COST[alg] * n, job_fig4_precise, (cfg, alg, n), {}))
    for alpha in cfg.alphas:
        for alg in ALGORITHMS:
            jobs.append((_COST[alg] * n_base, job_zipf, (cfg, alg, alpha), {}))
    for factor in cfg.factors:
        if factor == 2.0:
            continue
        for alg in ALGORITHMS:
            if alg == "offline_rtree":
                continue  # sizes forced equal: the factor does not apply
            jobs.append((_COST[alg] * n_base, job_uniform,
                         (cfg, f"load_factor.factor_{_key(factor)}.{alg}", alg, n_base, d,
                          factor), {}))
    for share in cfg.shares:
        if share in (0.0, 0.5, 1.0):
            continue
        jobs.append((_COST["offline_online_rtree"] * n_base, job_uniform,
                     (cfg, f"offline_share.share_{int(share * 100)}.rtree",
                      "offline_online_rtree", n_base, d), {"offline_share": share}))
    for dim in cfg.dims:
        if dim == d:
            continue
        for alg in ("random", "offline_rtree", "offline_online_rtree"):
            jobs.append((_COST[alg] * n_base * (1 + dim / 4), job_uniform,
                         (cfg, f"dimensions.d_{dim}.{alg}", alg, n_base, dim), {}))
    jobs.append((0.5, job_precision, (cfg,), {}))
    jobs.sort(key=lambda job: -job[0])
    return jobs


def _timed(func, args, kwargs):
    start = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - start, func.__name__


def _derive(cfg: Config, figures: dict) -> dict:
    """Copy the shared points into the other figures and add the paper's comparisons."""
    out = {}
    n_base = cfg.base_servers
    base = f"fig3.servers_{n_base}"
    for alg in ALGORITHMS:
        if alg != "offline_rtree" and 2.0 in cfg.factors:
            out[f"load_factor.factor_2_0.{alg}"] = figures[f"{base}.{alg}"]
    share_source = {0.0: "online_rtree", 0.5: "offline_online_rtree", 1.0: "offline_rtree"}
    for share, alg in share_source.items():
        if share in cfg.shares:
            out[f"offline_share.share_{int(share * 100)}.rtree"] = figures[f"{base}.{alg}"]
    for dim_alg in ("random", "offline_rtree", "offline_online_rtree"):
        out[f"dimensions.d_{cfg.d}.{dim_alg}"] = figures[f"{base}.{dim_alg}"]
    for n in cfg.fig4_servers:
        if n in cfg.servers:
            for alg in ("online_rtree", "offline_online_rtree"):
                out[f"fig4.servers_{n}.{alg}.depth_precise.hit_ratio"] = \
                    figures[f"fig3.servers_{n}.{alg}"]
    merged = {**figures, **out}
    for n in cfg.servers:
        r, off = merged[f"fig3.servers_{n}.random"], merged[f"fig3.servers_{n}.offline_rtree"]
        out[f"derived.fig3.servers_{n}.offline_rtree_reduction_vs_random"] = round(1 - off / r, 3)
        out[f"derived.fig3.servers_{n}.online_minus_offline_rtree"] = round(
            merged[f"fig3.servers_{n}.online_rtree"] - off, 4)
    for fig in ("fig5", "fig6"):
        for alpha in cfg.alphas:
            r = merged[f"{fig}.alpha_{_key(alpha)}.random"]
            off = merged[f"{fig}.alpha_{_key(alpha)}.offline_rtree"]
            out[f"derived.{fig}.alpha_{_key(alpha)}.random_over_offline_rtree"] = (
                round(r / off, 2) if off > 0 else None)
    for dim in cfg.dims:
        r, off = merged[f"dimensions.d_{dim}.random"], merged[f"dimensions.d_{dim}.offline_rtree"]
        out[f"derived.dimensions.d_{dim}.offline_rtree_reduction_vs_random"] = round(1 - off / r, 3)
    online = merged.get("offline_share.share_0.rtree")
    if online:
        for share in cfg.shares:
            if share > 0:
                out[f"derived.offline_share.share_{int(share * 100)}.reduction_vs_online"] = round(
                    1 - merged[f"offline_share.share_{int(share * 100)}.rtree"] / online, 3)
    return out


def run(quick: bool = False) -> dict:
    cfg = Config(quick)
    start = time.perf_counter()
    jobs = _jobs(cfg)
    workers = int(os.environ.get("EDN_BENCH_WORKERS", min(2, os.cpu_count() or 1)))
    figures: dict = {}
    seconds: dict = {}
    results = []
    with progress("partitioning experiments", total=len(jobs), unit="job") as bar:
        if quick or workers <= 1:
            for _, f, a, k in jobs:
                results.append(_timed(f, a, k))
                bar.advance()
        else:
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=multiprocessing.get_context("fork")) as pool:
                for fut in [pool.submit(_timed, f, a, k) for _, f, a, k in jobs]:
                    results.append(fut.result())
                    bar.advance()
    for out, secs, name in results:
        figures.update(out)
        group = next(iter(out)).split(".")[0]
        seconds[group] = seconds.get(group, 0.0) + secs
    figures.update(_derive(cfg, figures))
    figures = dict(sorted(figures.items()))
    meta = {
        "meta.quick": quick,
        "meta.subscriptions_per_server": cfg.per_server,
        "meta.load_threshold": 2 * cfg.per_server,
        "meta.events": cfg.events,
        "meta.dimensions": cfg.d,
        "meta.zipf_bins_per_dimension": cfg.bins,
        "meta.zipf_servers": cfg.base_servers,
        "meta.summary_rtree_fanout": cfg.fanout,
        "meta.workers": 1 if (quick or workers <= 1) else workers,
        "meta.wall_seconds": round(time.perf_counter() - start, 1),
    }
    meta.update({f"meta.job_seconds.{k}": round(v, 1) for k, v in sorted(seconds.items())})
    notes = {
        "notes.workload": "full paper sizes (no shrinking)" if not quick else
        "quick smoke run: 500 subscriptions per server, 1,000 events, few points",
        "notes.rectangles": "per dimension min/max of two uniform draws in [0,10] (mean side "
                            "10/3); Zipf: 10 bins per dimension, rectangles cover whole bins",
        "notes.fig4": "subscription-routing summary = node boxes at that depth of a TGS "
                      "R-tree (fan-out 8) per server, rebuilt when the server's load grew 50%, "
                      "least-enlargement growth in between; event routing precise",
        "notes.load_factor": "offline_rtree omitted: its partition sizes are forced equal",
        "notes.online_rtree": "max-overlap routing favours servers that already hold many "
                              "rectangles until they reach the threshold; with load factor 2 "
                              "about half the servers stay (nearly) empty (*.empty_servers), "
                              "which holds its hit ratio near 0.5 at every server count",
        "notes.fig6": "Zipf events use a random popularity ranking of the cells; at alpha 4 "
                      "92% of events fall in one cell no subscription covers, so every "
                      "ratio is 0 and random/offline is undefined (null)",
        "notes.kmeans": "kmeans = offline K-means (delta 1) + threshold enforcement; "
                        "online_kmeans = nearest running centroid",
    }
    return {**meta, **notes, **figures}
