"""The partitioning study of section III-C at sizes one process does not hold comfortably:
hit ratio against the number of servers for each partitioner (Fig. 3) and against the Zipf
exponent (Figs. 5 and 6), at 10,000 subscriptions per server up to 1M subscriptions.

A study is a list of configurations (workload, number of servers, partitioner).  Nothing
large is shipped: the workloads are deterministic functions of their spec
(:func:`~.inputs.workload_rectangles`, :func:`~.inputs.events_from_spec`), so every
executor regenerates the rectangles and events it needs from a few numbers and keeps them
for the next task.  Two stages:

1. **partition** -- one task per configuration runs the partitioner
   (:func:`~.inputs.make_partitioner`) and returns the labels; K-means runs on the driver
   through Spark's own ML library instead (:class:`SparkKMeansPartitioner`: Lloyd's
   algorithm over the rectangle centres distributed by ``pyspark.ml.clustering.KMeans``,
   then the load threshold enforced as :class:`~route_manager.partitioning.KMeansPartitioner`
   does).
2. **hit ratios** -- one task per (configuration, event set, chunk of events); the labels
   are broadcast, each executor builds the servers' precise summaries
   (:class:`~route_manager.models.hit_ratio.ContainmentIndex`, as the single-process benchmark
   does) once per configuration and counts the events forwarded to each server
   (:func:`forwarded_counts`, also the kernel of :func:`study_local`).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Callable, Sequence

import numpy as np

from route_manager.models import hit_ratio as hr
from route_manager.partitioning import KMeansPartitioner
from route_manager.partitioning.kmeans import padded_centroids
from .inputs import PARTITIONERS, events_from_spec, make_partitioner, workload_rectangles
from .profile_tasks import chunk_bounds

__all__ = ["StudyConfig", "StudyPlan", "SparkKMeansPartitioner", "forwarded_counts",
           "run_study", "study_local", "plan_study"]


@dataclass(frozen=True)
class StudyConfig:
    workload: str          # uniform | zipf
    servers: int
    partitioner: str
    subscriptions: int
    d: int
    alpha: float = 0.0     # Zipf exponent (zipf only)
    seed: int = 1

    @property
    def key(self) -> str:
        alpha = f"/alpha={self.alpha:g}" if self.workload == "zipf" else ""
        return f"{self.workload}{alpha}/servers={self.servers}/{self.partitioner}"

    def rectangles(self) -> tuple[np.ndarray, np.ndarray]:
        return _cached_rectangles(self.workload, self.subscriptions, self.d, self.alpha, self.seed)

    def event_sets(self) -> tuple[str, ...]:
        return ("uniform", "zipf") if self.workload == "zipf" else ("uniform",)


@dataclass(frozen=True)
class StudyPlan:
    configs: tuple[StudyConfig, ...]
    events: int = 10_000
    chunk_size: int = 2_500
    seed: int = 1
    load_factor: float = 2.0
    kmeans_init: str = "k-means||"   # Spark ML's initialisation ("random": fewer jobs)
    kmeans_max_iter: int = 20

    def events_for(self, config: StudyConfig, kind: str) -> np.ndarray:
        alpha = config.alpha if kind == "zipf" else 0.0
        return _cached_events(kind, self.events, config.d, alpha, self.seed + 77)

    def tasks(self) -> list[tuple[int, str, int]]:
        bounds = chunk_bounds(self.events, self.chunk_size)
        return [(i, kind, c) for i, config in enumerate(self.configs)
                for kind in config.event_sets() for c in range(len(bounds))]


def plan_study(*, workload: str = "uniform", servers: Sequence[int] = (10, 20, 50, 100),
               per_server: int = 10_000, subscriptions: int | None = None, d: int = 4,
               partitioners: Sequence[str] = ("random", "offline_rtree", "kmeans"),
               alphas: Sequence[float] = (0.25, 0.5, 1.0, 2.0, 4.0), events: int = 10_000,
               chunk_size: int = 2_500, seed: int = 1, load_factor: float = 2.0,
               kmeans_init: str = "k-means||", kmeans_max_iter: int = 20) -> StudyPlan:
    """Fig. 3 (``workload="uniform"``: every server count x partitioner) or Figs. 5/6
    (``"zipf"``: every alpha x partitioner at each server count)."""
    for name in partitioners:
        if name not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {name!r}; known: {', '.join(PARTITIONERS)}")
    configs = []
    for n in servers:
        total = subscriptions or n * per_server
        for alpha in (alphas if workload == "zipf" else (0.0,)):
            for name in partitioners:
                configs.append(StudyConfig(workload, int(n), name, int(total), d, float(alpha),
                                           seed))
    return StudyPlan(tuple(configs), events, chunk_size, seed, load_factor, kmeans_init,
                     kmeans_max_iter)


# -- deterministic inputs, regenerated where they are used --------------------------------------

_RECTANGLES: OrderedDict = OrderedDict()
_EVENTS: OrderedDict = OrderedDict()
_INDEXES: OrderedDict = OrderedDict()


def _remember(cache: OrderedDict, key, make: Callable, keep: int):
    value = cache.get(key)
    if value is None:
        value = cache[key] = make()
        while len(cache) > keep:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return value


def _cached_rectangles(workload: str, n: int, d: int, alpha: float, seed: int):
    return _remember(_RECTANGLES, (workload, n, d, alpha, seed),
                     lambda: workload_rectangles(workload, n, d, seed=seed, alpha=alpha), 2)


def _cached_events(kind: str, n: int, d: int, alpha: float, seed: int):
    return _remember(_EVENTS, (kind, n, d, alpha, seed),
                     lambda: events_from_spec(kind, n, d, seed=seed, alpha=alpha), 4)


def _server_indexes(key, mins, maxs, labels, servers: int) -> list[hr.ContainmentIndex]:
    def make():
        order = np.argsort(labels, kind="stable")
        starts = np.searchsorted(labels[order], np.arange(servers + 1))
        return [hr.ContainmentIndex(mins[order[a:b]], maxs[order[a:b]])
                for a, b in zip(starts[:-1], starts[1:])]

    return _remember(_INDEXES, key, make, 1)


def forwarded_counts(indexes: Sequence[hr.ContainmentIndex], points: np.ndarray) -> np.ndarray:
    """(servers,) how many of ``points`` each server's precise summary holds (the kernel of
    :func:`route_manager.models.hit_ratio.forwarding_matrix`, summed)."""
    return np.array([int(index.any_contains(points).sum()) for index in indexes], dtype=np.int64)


def partition_labels(plan: StudyPlan, config: StudyConfig) -> tuple[np.ndarray, float]:
    mins, maxs = config.rectangles()
    start = time.perf_counter()
    labels = make_partitioner(config.partitioner, load_factor=plan.load_factor,
                              seed=plan.seed + 6).fit(mins, maxs, config.servers).labels_
    return labels.astype(np.int32), time.perf_counter() - start


def count_task(plan: StudyPlan, labels: np.ndarray, token: str, task: tuple[int, str, int]):
    """One (configuration, event set, chunk): forwarded events per server."""
    index, kind, chunk = task
    config = plan.configs[index]
    mins, maxs = config.rectangles()
    indexes = _server_indexes((token, index), mins, maxs, np.asarray(labels), config.servers)
    start, stop = chunk_bounds(plan.events, plan.chunk_size)[chunk]
    points = plan.events_for(config, kind)[start:stop]
    return index, kind, chunk, stop - start, forwarded_counts(indexes, points)


# -- results ---------------------------------------------------------------------------------------

@dataclass
class StudyResult:
    rows: list[dict]
    meta: dict = field(default_factory=dict)

    def hit_ratios(self) -> dict[tuple[str, str], float]:
        return {(r["config"], r["events_kind"]): r["hit_ratio"] for r in self.rows}


def _assemble(plan: StudyPlan, counts: list, fit_seconds: dict, meta: dict) -> StudyResult:
    totals: dict = {}
    seen: dict = {}
    for index, kind, _, n, forwarded in counts:
        key = (index, kind)
        totals[key] = totals.get(key, 0) + forwarded
        seen[key] = seen.get(key, 0) + n
    rows = []
    for (index, kind), forwarded in sorted(totals.items()):
        config = plan.configs[index]
        if seen[(index, kind)] != plan.events:
            raise ValueError(f"{config.key}: counted {seen[(index, kind)]} of {plan.events} events")
        rows.append({**asdict(config), "config": config.key, "events_kind": kind,
                     "figure": "fig3" if config.workload == "uniform" else
                     ("fig5" if kind == "uniform" else "fig6"),
                     "events": plan.events,
                     "hit_ratio": float(forwarded.sum()) / (plan.events * config.servers),
                     "max_server_hit_ratio": float(forwarded.max()) / plan.events,
                     "partition_seconds": round(fit_seconds.get(index, float("nan")), 3)})
    return StudyResult(rows, meta)


def study_local(plan: StudyPlan, *, progress: Callable[[str], None] | None = None,
                bar=None) -> StudyResult:
    """The study in this process, with the same kernels (K-means: the numpy partitioner).
    ``bar``: a :class:`wsframework.progress.Progress`, advanced per partitioning and per
    hit-ratio task."""
    labels, seconds = {}, {}
    tasks = plan.tasks()
    if bar is not None:
        bar.expect(len(plan.configs) + len(tasks))
    for i, config in enumerate(plan.configs):
        labels[i], seconds[i] = partition_labels(plan, config)
        if progress:
            progress(f"partitioned {config.key} in {seconds[i]:.1f} s")
        if bar is not None:
            bar.advance()
    counts = []
    for task in tasks:
        counts.append(count_task(plan, labels[task[0]], "local", task))
        if bar is not None:
            bar.advance()
    return _assemble(plan, counts, seconds, {"engine": "local"})


# -- K-means on Spark ML ------------------------------------------------------------------------------

class SparkKMeansPartitioner(KMeansPartitioner):
    """Offline K-means over the rectangle centres with ``pyspark.ml.clustering.KMeans``
    (k-means|| initialisation, Lloyd iterations on the executors), then the load threshold
    enforced as :class:`KMeansPartitioner` does.  ``session``: the SparkSession (default: the
    active one); ``tol``: Spark's convergence distance; ``init_mode``: Spark's
    initialisation, ``"k-means||"`` or ``"random"`` (the paper's arbitrary start, and
    fewer Spark jobs)."""

    def __init__(self, session=None, load_factor: float = 2.0, capacity: int | None = None,
                 max_iter: int = 20, tol: float = 1e-4, random_state: int | None = 7,
                 init_mode: str = "k-means||", slices: int | None = None):
        super().__init__(load_factor, capacity, max_iter=max_iter, random_state=random_state)
        self.session = session
        self.tol = tol
        self.init_mode = init_mode
        self.slices = slices

    def _fit(self, mins, maxs):
        from pyspark.ml.clustering import KMeans
        from pyspark.ml.feature import VectorAssembler
        from pyspark.sql import SparkSession

        spark = self.session or SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("SparkKMeansPartitioner needs a SparkSession")
        points = (mins + maxs) * 0.5
        k = self.n_servers_
        if len(points) <= k:
            super()._fit(mins, maxs)
            return
        sc = spark.sparkContext
        slices = self.slices or max(2, sc.defaultParallelism * 2)
        pieces = np.array_split(points, slices)
        # plain float columns cross into the JVM faster than vector objects; the vectors are
        # assembled there
        columns = [f"c{j}" for j in range(points.shape[1])]
        rows = sc.parallelize(pieces, slices).flatMap(lambda block: map(tuple, block.tolist()))
        frame = VectorAssembler(inputCols=columns, outputCol="features").transform(
            spark.createDataFrame(rows, columns)).select("features").cache()
        seed = 7 if self.random_state is None else int(self.random_state)
        model = KMeans(k=k, maxIter=self.max_iter, tol=self.tol, seed=seed,
                       initMode=self.init_mode).fit(frame)
        frame.unpersist()
        # Spark may return fewer distinct centres: the extra servers stay empty
        centroids = padded_centroids(
            np.array([np.asarray(c) for c in model.clusterCenters()], dtype=np.float64), k)
        self.n_iter_ = int(model.summary.numIter) if model.hasSummary else self.max_iter
        self._finish(points, centroids)


def _partition_task(plan: StudyPlan, index: int):
    labels, seconds = partition_labels(plan, plan.configs[index])
    return index, labels, seconds


def run_study(spark, plan: StudyPlan, *, progress: Callable[[str], None] | None = None,
              bar=None) -> StudyResult:
    """The study on ``spark`` (see the module docstring). ``bar``: a
    :class:`wsframework.progress.Progress`, advanced as each configuration is partitioned
    and as its hit ratios are counted."""
    import uuid

    say = progress or (lambda text: None)
    advance = bar.advance if bar is not None else (lambda: None)
    if bar is not None:
        bar.expect(2 * len(plan.configs))
    sc = spark.sparkContext
    started = time.perf_counter()
    labels: dict[int, np.ndarray] = {}
    seconds: dict[int, float] = {}
    spark_kmeans = [i for i, c in enumerate(plan.configs) if c.partitioner == "kmeans"]
    others = [i for i in range(len(plan.configs)) if i not in spark_kmeans]
    # costliest first: online R-tree routing is sequential per subscription
    others.sort(key=lambda i: -plan.configs[i].subscriptions
                * (20 if "online" in plan.configs[i].partitioner else 1))
    say(f"partition: {len(others)} partitioner runs as tasks, {len(spark_kmeans)} K-means "
        f"on Spark ML")
    token = uuid.uuid4().hex
    by_config: dict[int, list] = {}
    for task in plan.tasks():
        by_config.setdefault(task[0], []).append(task)

    def one_config(index: int):
        shared = sc.broadcast(labels[index])
        tasks = by_config[index]
        out = sc.parallelize(tasks, len(tasks)).map(
            lambda task, shared=shared: count_task(plan, shared.value, token, task)).collect()
        shared.unpersist()
        config = plan.configs[index]
        ratios = {}
        for kind in config.event_sets():
            forwarded = sum(int(c[4].sum()) for c in out if c[1] == kind)
            ratios[kind] = forwarded / (plan.events * config.servers)
        text = "  ".join(f"R[{k} events] {v:.4f}" for k, v in ratios.items())
        say(f"hit ratio {config.key}: {text} ({time.perf_counter() - started:.1f} s)")
        advance()
        return out

    counts: list = []
    # hit ratios of a configuration start as soon as its labels exist (Spark runs them
    # beside the K-means jobs)
    with ThreadPoolExecutor(max_workers=max(1, min(len(by_config), 8))) as pool:
        pending = []
        if others:
            for index, found, secs in sc.parallelize(others, len(others)).map(
                    partial(_partition_task, plan)).collect():
                labels[index], seconds[index] = found, secs
                say(f"partitioned {plan.configs[index].key} in {secs:.1f} s")
                advance()
                pending.append(pool.submit(one_config, index))
        for index in spark_kmeans:
            config = plan.configs[index]
            mins, maxs = config.rectangles()
            start = time.perf_counter()
            model = SparkKMeansPartitioner(spark, load_factor=plan.load_factor,
                                           random_state=plan.seed + 6,
                                           init_mode=plan.kmeans_init,
                                           max_iter=plan.kmeans_max_iter).fit(mins, maxs,
                                                                              config.servers)
            labels[index] = model.labels_.astype(np.int32)
            seconds[index] = time.perf_counter() - start
            say(f"partitioned {config.key} (Spark ML, {model.n_iter_} iterations) in "
                f"{seconds[index]:.1f} s")
            advance()
            pending.append(pool.submit(one_config, index))
        for future in pending:
            counts.extend(future.result())
    return _assemble(plan, counts, seconds, {"engine": "spark", "master": sc.master,
                                             "job_seconds": round(time.perf_counter() - started, 2)})
