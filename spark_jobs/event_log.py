"""Where a Spark application's time went, from its event log (``spark.eventLog.enabled``:
one JSON object per line, as Spark's history server reads it; a file, or the directory of
a rolling log).

:func:`stage_times` gives, per completed stage, its wall time (submission to completion) and
what its tasks spent, summed over them: running on the executors (``executorRunTime``, the
Python worker's time included), the executors' CPU, deserializing the task, and garbage
collection. A stage whose tasks' run time is far above its wall time ran them in parallel.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["stage_times", "application_seconds", "by_call_site"]

_METRICS = {  # accumulable name -> (key, scale to milliseconds)
    "internal.metrics.executorRunTime": ("task_run_ms", 1.0),
    "internal.metrics.executorCpuTime": ("task_cpu_ms", 1e-6),
    "internal.metrics.executorDeserializeTime": ("task_deserialize_ms", 1.0),
    "internal.metrics.jvmGCTime": ("task_gc_ms", 1.0),
}


def _files(path: Path) -> list[Path]:
    """The log's files in order: one file, or a rolling log's directory (Spark 4's
    default, ``eventlog_v2_<app>``) of ``events_<n>_<app>`` files and an appstatus marker."""
    if not path.is_dir():
        return [path]
    parts = [p for p in path.iterdir() if p.name.startswith("events_")]
    return sorted(parts, key=lambda p: int(p.name.split("_")[1]))


_CODECS = (".zstd", ".lz4", ".lzf", ".snappy")


def _events(path: Path):
    for part in _files(path):
        if part.suffix in _CODECS:
            raise ValueError(f"{part} is compressed: read logs written with "
                             "spark.eventLog.compress=false")
        with open(part, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def stage_times(path: str | Path) -> list[dict]:
    """One dict per completed stage of the log at ``path`` (a file or a rolling log's
    directory), in stage order: ``stage``, ``name`` (the call site that made it), ``tasks``,
    ``submitted_ms`` and ``completed_ms`` (epoch milliseconds), ``wall_ms`` and the task
    sums of :data:`_METRICS`. Stages of concurrent jobs overlap: their wall times add up to
    more than the application's."""
    stages = []
    for event in _events(Path(path)):
        if event.get("Event") != "SparkListenerStageCompleted":
            continue
        info = event["Stage Info"]
        submitted = info.get("Submission Time", 0) or 0
        completed = info.get("Completion Time", 0) or 0
        stage = {"stage": info["Stage ID"], "name": info.get("Stage Name", ""),
                 "tasks": info.get("Number of Tasks", 0), "submitted_ms": submitted,
                 "completed_ms": completed, "wall_ms": completed - submitted}
        for key, _ in _METRICS.values():
            stage[key] = 0.0
        for accumulable in info.get("Accumulables", ()):
            known = _METRICS.get(accumulable.get("Name"))
            if known is not None:
                stage[known[0]] = round(float(accumulable.get("Value", 0)) * known[1], 1)
        stages.append(stage)
    return sorted(stages, key=lambda s: s["stage"])


def application_seconds(path: str | Path) -> float | None:
    """From the application's start to its end, as the log records them (None if either is
    missing: the application did not end cleanly)."""
    start = end = None
    for event in _events(Path(path)):
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            start = event.get("Timestamp")
        elif kind == "SparkListenerApplicationEnd":
            end = event.get("Timestamp")
    return None if start is None or end is None else (end - start) / 1000


def by_call_site(stages: list[dict]) -> list[dict]:
    """``stages`` (:func:`stage_times`) grouped by name, the call site that made them (one
    group per line of the job: the concurrent jobs of one ``collect`` in a loop fall
    together): ``stages``, ``tasks``, ``span_ms`` (first submission to last completion) and
    the task sums; the groups by their tasks' run time, largest first."""
    groups: dict[str, dict] = {}
    for stage in stages:
        group = groups.setdefault(stage["name"], {
            "name": stage["name"], "stages": 0, "tasks": 0, "first": stage["submitted_ms"],
            "last": stage["completed_ms"], **{key: 0.0 for key, _ in _METRICS.values()}})
        group["stages"] += 1
        group["tasks"] += stage["tasks"]
        group["first"] = min(group["first"], stage["submitted_ms"])
        group["last"] = max(group["last"], stage["completed_ms"])
        for key, _ in _METRICS.values():
            group[key] = round(group[key] + stage[key], 1)
    out = []
    for group in groups.values():
        first, last = group.pop("first"), group.pop("last")
        out.append({**group, "span_ms": last - first})
    return sorted(out, key=lambda g: -g["task_run_ms"])
