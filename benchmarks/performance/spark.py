"""``edn profile`` at scale on a real Spark standalone cluster, beside ``local[*]``.

A master and two workers start with pyspark's own launch classes on loopback
(:class:`spark_jobs.cluster.StandaloneCluster`, ``EDN_BENCH_SPARK_WORKER_CORES`` cores and
``EDN_BENCH_SPARK_MEMORY`` each), and ``edn profile`` runs on it as a user runs it; then
the same profile runs in ``local[*]`` on the same machine. Full size: 1,000,000
subscriptions (uniform, d = 8, 10 servers) x 100,000 events x 10 precisions (0.1 to 1.0);
``--quick``: 20,000 x 5,000 x 4. ``EDN_BENCH_SPARK_SUBSCRIPTIONS`` / ``_EVENTS`` set other
sizes.

Figures: ``cluster_wall_s`` and ``local_wall_s`` (the command's own wall time, Spark's
start included, ``..._spark_start_s``), ``cluster_over_local``, ``hit_ratios_equal`` (every
precision's hit ratio and every server's forwarded count, cluster against local), and where
the time went in each run from Spark's event log (:mod:`spark_jobs.event_log`):
``..._stages``, the stages grouped by the line of the job that made them (the engines'
build, one task per server; the routing, one job per precision, run concurrently), each
with its span and its tasks' run time (the Python workers' included), JVM CPU and GC, and
``..._application_s``, the application's own time.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spark_jobs.cluster import StandaloneCluster
from spark_jobs.event_log import application_seconds, by_call_site, stage_times

_ROOT = Path(__file__).resolve().parents[2]


def _sizes(quick: bool) -> tuple[int, int, list[str]]:
    subscriptions = int(os.environ.get("EDN_BENCH_SPARK_SUBSCRIPTIONS",
                                       20_000 if quick else 1_000_000))
    events = int(os.environ.get("EDN_BENCH_SPARK_EVENTS", 5_000 if quick else 100_000))
    precisions = ["0.1", "0.4", "0.7", "1"] if quick else [f"{k / 10:g}" for k in range(1, 11)]
    return subscriptions, events, precisions


def _profile(master: str, out: Path, subscriptions: int, events: int, precisions: list[str],
             memory: str) -> dict:
    events_dir = out / "events"
    events_dir.mkdir(parents=True)
    command = [sys.executable, "-m", "edn.cli", "profile", "--master", master,
               "--subscriptions", str(subscriptions), "--events", str(events),
               "--precisions", *precisions, "--params", "paper", "--out", str(out), "--json",
               "--conf", "spark.eventLog.enabled=true",
               "--conf", "spark.eventLog.compress=false",
               "--conf", f"spark.eventLog.dir={events_dir.as_uri()}",
               "--conf", f"spark.driver.memory={memory}",
               "--conf", f"spark.executor.memory={memory}"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=_ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"edn profile --master {master} failed: {done.stderr[-3000:]}")
    recommendation = json.loads(done.stdout)
    with open(out / "profile.csv", newline="") as rows:
        table = sorted((r["precision"], r["server"], r["forwarded"]) for r in csv.DictReader(rows))
    log = next(events_dir.iterdir())
    return {"wall_s": round(wall, 1), "table": table,
            "application_s": application_seconds(log),
            "spark_start_s": recommendation["profile"].get("spark_start_seconds"),
            "initial_precision": recommendation["initial_precision"],
            "stages": [{k: group[k] for k in ("name", "stages", "tasks", "span_ms",
                                              "task_run_ms", "task_cpu_ms", "task_gc_ms")}
                       for group in by_call_site(stage_times(log))]}


def run(quick: bool = False) -> dict:
    subscriptions, events, precisions = _sizes(quick)
    cores = int(os.environ.get("EDN_BENCH_SPARK_WORKER_CORES", "1"))
    memory = os.environ.get("EDN_BENCH_SPARK_MEMORY", "1g" if quick else "6g")
    with tempfile.TemporaryDirectory(prefix="edn-bench-spark-") as tmp:
        with StandaloneCluster(workers=2, cores=cores, memory=memory,
                               directory=Path(tmp) / "cluster") as cluster:
            on_cluster = _profile(cluster.master_url, Path(tmp) / "on-cluster", subscriptions,
                                  events, precisions, memory)
        local = _profile("local[*]", Path(tmp) / "local", subscriptions, events, precisions,
                         memory)
    figures = {"subscriptions": subscriptions, "events": events,
               "precisions": len(precisions), "workers": 2, "cores_per_worker": cores,
               "cluster_wall_s": on_cluster["wall_s"], "local_wall_s": local["wall_s"],
               "cluster_over_local": round(on_cluster["wall_s"] / local["wall_s"], 2),
               "hit_ratios_equal": on_cluster["table"] == local["table"],
               "same_recommendation": on_cluster["initial_precision"]
               == local["initial_precision"]}
    for name, result in (("cluster", on_cluster), ("local", local)):
        figures[f"{name}_spark_start_s"] = result["spark_start_s"]
        figures[f"{name}_application_s"] = result["application_s"]
        figures[f"{name}_stages"] = result["stages"]
    return figures
