"""The profile job on Spark: the tasks of :mod:`.profile` run on executors.

Split and data flow (nothing but numpy arrays and bytes crosses a process boundary; every
R-tree is built from the arrays in the process that queries it, never pickled):

1. **servers** -- one task per server.  Broadcast: all rectangles (one ``(n, d)`` pair of
   arrays plus offsets per server) and the match sample of events.  Each task builds its
   server's engine and returns the maximal rectangles and per-event matching times.
2. **routing** -- one Spark job per precision, each one task per chunk of events, submitted
   together (FIFO, so the cores stay busy) from driver threads, so that a progress line
   reports each precision as it completes.  Broadcast: the events and every server's
   maximal rectangles; each executor process cuts the summaries at a task's precision
   (:func:`~.profile_tasks.cut_summary`) and builds the route set once, keeping it for the next
   chunk of the same precision (:class:`~.profile.RoutingContext`).

Results are assembled on the driver by the same :func:`~.profile.assemble` as the
single-process twin.
"""
from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable

import numpy as np

from .inputs import ProfileInputs
from .profile_tasks import server_kernel
from .profile import (Profile, ProfileOptions, RoutingContext, assemble, precision_label,
                      server_parts_for_routing)

__all__ = ["run_profile"]

# executor side: the routing context of the current run (one per Python worker process)
_CONTEXT: dict = {}


def _server_task(shared, index: int):
    data = shared.value
    start, stop = data["offsets"][index], data["offsets"][index + 1]
    return server_kernel(data["servers"][index], data["schema_xml"], data["mins"][start:stop],
                         data["maxs"][start:stop], data["sample"], data["clock"])


def _routing_task(shared, token: str, task: tuple[int, int]):
    context = _CONTEXT.get(token)
    if context is None:
        data = shared.value
        context = RoutingContext(data["schema_xml"], data["servers"], data["parts"],
                                 data["events"], data["options"])
        _CONTEXT.clear()
        _CONTEXT[token] = context
    return context.run(*task)


def run_profile(spark, inputs: ProfileInputs, options: ProfileOptions | None = None, *,
                progress: Callable[[str], None] | None = None, bar=None) -> Profile:
    """The profile of ``inputs``, computed on ``spark``'s executors. ``bar``: a
    :class:`wsframework.progress.Progress`, advanced per routing task as each precision's
    job completes."""
    options = options or ProfileOptions()
    say = progress or (lambda text: None)
    sc = spark.sparkContext
    started = time.perf_counter()
    servers = inputs.servers
    sizes = [len(mins) for mins, _ in inputs.rectangles]
    d = inputs.d
    shared = sc.broadcast({
        "servers": servers,
        "schema_xml": inputs.schema_xml,
        "offsets": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        "mins": np.vstack([m for m, _ in inputs.rectangles]) if sum(sizes) else np.zeros((0, d)),
        "maxs": np.vstack([m for _, m in inputs.rectangles]) if sum(sizes) else np.zeros((0, d)),
        "sample": inputs.events[:options.match_sample],
        "clock": options.clock,
    })
    say(f"servers: building {len(servers)} engines from {sum(sizes):,} rectangles "
        f"(one task per server)")
    parts = sc.parallelize(range(len(servers)), len(servers)).map(
        partial(_server_task, shared)).collect()
    shared.unpersist()
    stage1 = time.perf_counter() - started
    maximal = sum(len(p.maximal_mins) for p in parts)
    say(f"servers: done in {stage1:.1f} s; {maximal:,} maximal rectangles of {sum(sizes):,}")

    token = uuid.uuid4().hex
    context = RoutingContext(inputs.schema_xml, servers, server_parts_for_routing(parts),
                             inputs.events, options)
    routing = sc.broadcast({"servers": servers, "schema_xml": inputs.schema_xml,
                            "parts": context.parts, "events": inputs.events, "options": options})
    chunks = len(context.bounds)
    say(f"routing: {len(options.precisions)} precisions x {chunks} chunks of "
        f"<= {options.chunk_size:,} events ({options.mode} routing)")
    task = partial(_routing_task, routing, token)
    if bar is not None:
        bar.expect(len(options.precisions) * chunks)
    n_servers, events = len(servers), len(inputs.events)

    def one_precision(pi: int):
        tasks = [(pi, ci) for ci in range(chunks)]
        out = sc.parallelize(tasks, len(tasks)).map(task).collect()
        if bar is not None:
            bar.advance(len(tasks))
        boxes = sum(out[0][1])
        forwarded = sum(int(r.forwarded.sum()) for r, _ in out)
        seconds = sum(r.seconds for r, _ in out)
        strategy = "+".join(sorted({r.strategy for r, _ in out if r.strategy}))
        say(f"precision {precision_label(options.precisions[pi]):>4}: {boxes:>9,} boxes  "
            f"R {forwarded / (events * n_servers):.4f}  "
            f"T_d {seconds / events / n_servers * 1e6:8.2f} us ({strategy})  "
            f"({time.perf_counter() - started:.1f} s)")
        return out

    with ThreadPoolExecutor(max_workers=len(options.precisions)) as pool:
        futures = []
        for pi in range(len(options.precisions)):
            futures.append(pool.submit(one_precision, pi))
            time.sleep(0.05)  # submit in precision order (FIFO scheduling follows it)
        results = [item for future in futures for item in future.result()]
    routing.unpersist()
    wall = time.perf_counter() - started
    return assemble(inputs, options, parts, results, {
        "engine": "spark", "master": sc.master, "default_parallelism": sc.defaultParallelism,
        "job_seconds": round(wall, 2), "servers_stage_seconds": round(stage1, 2)})
