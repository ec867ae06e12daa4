"""The per-task kernels of the profile job, shared by the Spark job and its single-process
twin (:func:`spark_jobs.profile.profile_local`): both run exactly these functions on
the same inputs, so their hit ratios are equal to the last event.

Nothing here imports Spark.  Inputs are numpy arrays and the topic schema as XML bytes (an
:class:`~matchers.schema.Schema` holds compiled XPath objects and does not pickle); the
R-trees are built here, in the process that uses them, never shipped
(an index is rebuilt from the arrays where it is queried, not pickled).

Two kernels:

* :func:`server_kernel` -- one subscription server: its filtering engine
  (:class:`~matchers.rtree_engine.RTreeMatchingEngine`, bulk-loaded from the arrays, as a
  server holds them), the maximal rectangles its summaries are cut from (the engine's own
  ``summary(1.0)``), and the engine's matching time for each sample event.
* :func:`route_chunk` -- one precision x one chunk of events: the dispatcher's route set
  (:class:`~matchers.route_set.RTreeRouteSet` holding every server's precise summary, set
  to that precision as the dispatcher sets it; the cut is :func:`cut_summary`, which is
  also what ``RTreeMatchingEngine.summary(precision)`` returns) routes every event of the
  chunk, timed with ``time.perf_counter``; the result is the
  per-server forwarding counts and the routing seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from lxml import etree

from matchers.route_set import CALIBRATION_POINTS, RTreeRouteSet
from matchers.rtree_engine import RTreeMatchingEngine
from matchers.schema import Schema
from matchers.summary import Summary, str_groups, summary_target

__all__ = [
    "ROUTING_MODES",
    "ChunkResult",
    "ServerPart",
    "build_route_set",
    "chunk_bounds",
    "cut_summary",
    "route_chunk",
    "schema_from_xml",
    "server_kernel",
]

ROUTING_MODES = ("single", "batch")
# "wall": time.perf_counter (the default: what a dispatcher alone on its CPU sees);
# "cpu": time.thread_time, this thread's CPU time (steadier on a shared, loaded machine,
# where a descheduled task would otherwise be charged for other processes' time)
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
_SCHEMAS: dict[bytes, Schema] = {}


def schema_from_xml(xml: bytes) -> Schema:
    """The schema of ``xml`` (an ``edn:Schema``), parsed once per process."""
    schema = _SCHEMAS.get(xml)
    if schema is None:
        schema = _SCHEMAS[xml] = Schema.from_config(etree.fromstring(xml))
    return schema


def chunk_bounds(n: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of consecutive chunks of at most ``chunk_size`` events."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be >= 1")
    return [(start, min(start + chunk_size, n)) for start in range(0, n, chunk_size)]


# -- one server -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class ServerPart:
    """What :func:`server_kernel` learns about one server."""

    server: str
    rectangles: int               # subscription rectangles held (the precision denominator)
    maximal_mins: np.ndarray      # (k, d): the precise summary, summaries are cut from it
    maximal_maxs: np.ndarray
    match_seconds: np.ndarray     # (sample,) the engine's matching time per sample event
    matches: np.ndarray           # (sample,) filters matched per sample event
    build_seconds: float          # bulk load + maximal rectangles


def server_kernel(server: str, schema_xml: bytes, mins: np.ndarray, maxs: np.ndarray,
                  sample: np.ndarray, clock: str = "wall") -> ServerPart:
    """Build ``server``'s engine from its rectangles and time it on the ``sample`` events.

    Matching is timed per event with the engine's coordinate query
    (:meth:`~matchers.rtree_engine.RTreeMatchingEngine.match_box`): what a server's
    ``match`` does after reading the event into a point (XML parsing and notification
    are not part of T_s here).
    """
    schema = schema_from_xml(schema_xml)
    d = schema.d
    mins = np.asarray(mins, dtype=np.float64).reshape(-1, d)
    maxs = np.asarray(maxs, dtype=np.float64).reshape(-1, d)
    sample = np.asarray(sample, dtype=np.float64).reshape(-1, d)
    start = time.perf_counter()
    engine = RTreeMatchingEngine(schema)
    if len(mins):
        engine.bulk_load([f"r{i}" for i in range(len(mins))], mins, maxs)
    precise = engine.summary(1.0)
    build = time.perf_counter() - start
    seconds = np.zeros(len(sample))
    matches = np.zeros(len(sample), dtype=np.int64)
    if len(mins):
        for point in sample[:CALIBRATION_POINTS]:  # warm the caches outside the timing
            engine.match_box(point)
        clock = CLOCKS[clock]
        match = engine.match_box
        for i, point in enumerate(sample):
            begin = clock()
            found = match(point)
            seconds[i] = clock() - begin
            matches[i] = len(found)
    return ServerPart(server, engine.rectangle_count, np.array(precise.mins),
                      np.array(precise.maxs), seconds, matches, build)


# -- summaries and routing ----------------------------------------------------------------------

def cut_summary(maximal_mins: np.ndarray, maximal_maxs: np.ndarray, rectangles: int,
                precision: float) -> tuple[np.ndarray, np.ndarray]:
    """The summary ``RTreeMatchingEngine.summary(precision)`` gives a server holding
    ``rectangles`` rectangles whose maximal rectangles are these: all of them when there
    are no more than ``ceil(precision x rectangles)``, else that many STR groups of them
    (:meth:`~matchers.summary.MaximalRectangles.boxes_at`)."""
    target = summary_target(precision, rectangles)
    mins = np.asarray(maximal_mins, dtype=np.float64)
    maxs = np.asarray(maximal_maxs, dtype=np.float64)
    if target <= 0 or len(mins) == 0:
        return mins[:0], maxs[:0]
    if len(mins) <= target:
        return mins, maxs
    return str_groups(mins, maxs, target)


def build_route_set(schema_xml: bytes, servers: Sequence[str],
                    parts: Sequence[tuple[int, np.ndarray, np.ndarray]],
                    precision: float | None) -> tuple[RTreeRouteSet, list[int]]:
    """The dispatcher's route set at ``precision`` (None: no summary, every event to every
    server), from ``(rectangles, maximal_mins, maximal_maxs)`` per server; also the number
    of summary boxes of each server.

    Built as the dispatcher builds it: each server's precise summary with its rectangle
    count, then ``set_precision`` (the route set cuts the summaries itself, exactly as
    :func:`cut_summary` does)."""
    schema = schema_from_xml(schema_xml)
    routes = RTreeRouteSet(schema)
    boxes = []
    for server, (rectangles, mins, maxs) in zip(servers, parts):
        if precision is None:
            boxes.append(0)
        else:
            boxes.append(min(summary_target(precision, rectangles), len(mins)) if len(mins) else 0)
        routes.set_summary(server, Summary(schema.dims, mins, maxs), rectangles=rectangles)
    routes.set_precision(0.0 if precision is None else precision)
    return routes, boxes


@dataclass(frozen=True, eq=False)
class ChunkResult:
    """One precision x one chunk of events."""

    precision_index: int
    chunk_index: int
    events: int
    forwarded: np.ndarray   # (servers,) events of the chunk forwarded to each server
    seconds: float          # routing time of the whole chunk (all servers)
    mask: np.ndarray        # (sample rows of this chunk, servers) bool: forwarded?
    strategy: str = ""      # the route set's measured choice it was timed with


def route_chunk(routes: RTreeRouteSet, servers: Sequence[str], points: np.ndarray, *,
                precision_index: int, chunk_index: int, mode: str = "single",
                sample_rows: int = 0, clock: str = "wall") -> ChunkResult:
    """Route ``points`` with ``routes`` and time it.

    ``mode="single"`` routes one event per call (``route``), as the dispatcher does for
    each published message; ``"batch"`` routes the chunk in one ``route_batch`` call (an
    ``edn:EventBatch``).  The route set first sees the chunk's first events untimed, so
    that its per-table strategy calibration (``CALIBRATION_POINTS``) is not in the timing.
    The first ``sample_rows`` rows of the forwarding matrix are kept (for the servers'
    matching time per forwarded event).  ``clock``: see :data:`CLOCKS`.
    """
    now = CLOCKS[clock]
    if mode not in ROUTING_MODES:
        raise ValueError(f"routing mode must be one of {ROUTING_MODES}, got {mode!r}")
    points = np.ascontiguousarray(points, dtype=np.float64)
    m = len(points)
    warm = points[:CALIBRATION_POINTS + 1]
    if mode == "single":
        for point in warm:
            routes.route(point)
        route = routes.route
        start = now()
        chosen = [route(point) for point in points]
        seconds = now() - start
    else:
        if m:
            routes.route_batch(np.vstack([warm] * (-(-CALIBRATION_POINTS // len(warm)))))
        start = now()
        chosen = routes.route_batch(points) if m else []
        seconds = now() - start
    position = {server: i for i, server in enumerate(servers)}
    hit = np.zeros((m, len(servers)), dtype=bool)
    for row, targets in enumerate(chosen):
        for server in targets:
            hit[row, position[server]] = True
    strategy = routes.describe().get("single_strategy" if mode == "single" else "batch_strategy",
                                     "")
    return ChunkResult(precision_index, chunk_index, m, hit.sum(axis=0).astype(np.int64),
                       seconds, hit[:max(0, min(sample_rows, m))].copy(), str(strategy))
