"""Route-time and hit-ratio profiles per summary precision (paper V-B: "T_d and R are obtained
from offline simulations"), and their single-process twin.

A profile runs in two stages, each a list of independent tasks:

1. **servers** -- one task per server (:func:`~.profile_tasks.server_kernel`): its engine, its
   maximal rectangles, its matching time per sample event.
2. **routing** -- one task per (precision, chunk of events) (:class:`RoutingContext`): the
   route set at that precision, cut from the maximal rectangles, routes the chunk.

:func:`profile_local` runs both stages here, in order; the Spark job
(:mod:`spark_jobs.job`) runs the same tasks on executors.  :func:`assemble` turns
the task results into a :class:`Profile` either way, so hit ratios of the two are equal.

Per precision (and per server) a profile gives the number of summary boxes, the hit ratio
R (forwarded / (events x servers)), the routing time T_d per event per server (the route
set's time per event divided by N_s, as the paper defines it; ``strategy`` names the route
set's measured routing method the timing ran with, as it calibrates itself per table) and
the servers' matching time T_s per forwarded event; :meth:`Profile.operating_points` hands the curve to
:mod:`route_manager.models.throughput`.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from route_manager.models.throughput import OperatingPoint
from .inputs import ProfileInputs
from .profile_tasks import (CLOCKS, ROUTING_MODES, ChunkResult, ServerPart, build_route_set, chunk_bounds,
                     route_chunk, server_kernel)

__all__ = [
    "DEFAULT_PRECISIONS",
    "Profile",
    "ProfileOptions",
    "ProfileRow",
    "RoutingContext",
    "assemble",
    "parse_precisions",
    "precision_label",
    "profile_local",
]

DEFAULT_PRECISIONS: tuple = tuple(round(0.1 * i, 1) for i in range(1, 11)) + (None,)
ALL_SERVERS = "*"


def precision_label(precision: float | None) -> str:
    return "none" if precision is None else f"{precision:g}"


def parse_precisions(values: Iterable) -> tuple:
    """Precisions in (0, 1] and ``None`` / "none" (no summary), de-duplicated, in the given
    order (1.0 may be written "precise")."""
    out: list = []
    for value in values:
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            value = None
        elif isinstance(value, str) and value.strip().lower() == "precise":
            value = 1.0
        else:
            value = float(value)
            if not 0 < value <= 1:
                raise ValueError(f"a precision lies in (0, 1], got {value}")
        if value not in out:
            out.append(value)
    if not out:
        raise ValueError("no precisions")
    return tuple(out)


@dataclass(frozen=True)
class ProfileOptions:
    precisions: tuple = DEFAULT_PRECISIONS
    chunk_size: int = 2500        # events per routing task
    mode: str = "single"          # "single": one route() per event, as the dispatcher does
    match_sample: int = 10_000    # events timed on each server's engine (T_s)
    clock: str = "wall"           # "wall" (perf_counter) or "cpu" (thread CPU time)

    def __post_init__(self) -> None:
        object.__setattr__(self, "precisions", parse_precisions(self.precisions))
        if self.mode not in ROUTING_MODES:
            raise ValueError(f"routing mode must be one of {ROUTING_MODES}")
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {tuple(CLOCKS)}")
        if self.chunk_size < 1 or self.match_sample < 0:
            raise ValueError("chunk_size >= 1 and match_sample >= 0")


# -- the routing stage, one context per process ------------------------------------------------

class RoutingContext:
    """Route sets per precision, built on first use in the process that routes and kept for
    the next tasks of the same precision (the two most recent: tasks arrive ordered by
    precision)."""

    def __init__(self, schema_xml: bytes, servers: Sequence[str],
                 parts: Sequence[tuple[int, np.ndarray, np.ndarray]], events: np.ndarray,
                 options: ProfileOptions) -> None:
        self.schema_xml = schema_xml
        self.servers = tuple(servers)
        self.parts = list(parts)
        self.events = events
        self.options = options
        self.bounds = chunk_bounds(len(events), options.chunk_size)
        self._routes: OrderedDict[int, tuple] = OrderedDict()

    def tasks(self) -> list[tuple[int, int]]:
        """(precision index, chunk index), ordered by precision."""
        return [(p, c) for p in range(len(self.options.precisions))
                for c in range(len(self.bounds))]

    def route_set(self, precision_index: int):
        found = self._routes.get(precision_index)
        if found is None:
            precision = self.options.precisions[precision_index]
            found = build_route_set(self.schema_xml, self.servers, self.parts, precision)
            self._routes[precision_index] = found
            while len(self._routes) > 2:
                self._routes.popitem(last=False)
        else:
            self._routes.move_to_end(precision_index)
        return found

    def run(self, precision_index: int, chunk_index: int) -> tuple[ChunkResult, list[int]]:
        routes, boxes = self.route_set(precision_index)
        start, stop = self.bounds[chunk_index]
        sample_rows = max(0, min(self.options.match_sample, stop) - start)
        result = route_chunk(routes, self.servers, self.events[start:stop],
                             precision_index=precision_index, chunk_index=chunk_index,
                             mode=self.options.mode, sample_rows=sample_rows,
                             clock=self.options.clock)
        return result, boxes


def server_parts_for_routing(parts: Sequence[ServerPart]) -> list[tuple[int, np.ndarray, np.ndarray]]:
    return [(part.rectangles, part.maximal_mins, part.maximal_maxs) for part in parts]


# -- the result ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProfileRow:
    precision: float | None     # None: no summary
    precision_label: str
    server: str                 # "*": all servers
    rectangles: int
    summary_boxes: int
    events: int
    forwarded: int
    hit_ratio: float            # R
    t_d: float                  # routing seconds per event per server (paper's T_d)
    t_route: float              # routing seconds per event (all servers)
    t_s: float | None           # the servers' matching seconds per forwarded event
    tasks: int
    strategy: str = ""          # the route set's routing strategy/ies the timing used

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Profile:
    rows: list[ProfileRow]
    meta: dict = field(default_factory=dict)

    @property
    def servers(self) -> list[str]:
        return [r.server for r in self.rows if r.server != ALL_SERVERS
                and r.precision_label == self.rows[0].precision_label]

    def aggregate(self) -> list[ProfileRow]:
        return [r for r in self.rows if r.server == ALL_SERVERS]

    def hit_ratios(self) -> dict[str, float]:
        return {r.precision_label: r.hit_ratio for r in self.aggregate()}

    def operating_points(self) -> list[OperatingPoint]:
        return [OperatingPoint(r.precision, r.t_d, r.hit_ratio, r.t_s) for r in self.aggregate()]

    def to_records(self) -> list[dict]:
        return [r.as_dict() for r in self.rows]


def assemble(inputs: ProfileInputs, options: ProfileOptions, parts: Sequence[ServerPart],
             results: Sequence[tuple[ChunkResult, list[int]]], meta: dict | None = None) -> Profile:
    """The profile from the two stages' task results (in any order)."""
    servers = inputs.servers
    n_servers = len(servers)
    events = len(inputs.events)
    by_name = {part.server: part for part in parts}
    parts = [by_name[name] for name in servers]
    sample = min(options.match_sample, events)
    rows: list[ProfileRow] = []
    for pi, precision in enumerate(options.precisions):
        mine = sorted((r for r in results if r[0].precision_index == pi),
                      key=lambda r: r[0].chunk_index)
        if not mine:
            raise ValueError(f"no routing results for precision {precision_label(precision)}")
        chunks = [c for c, _ in mine]
        if sum(c.events for c in chunks) != events:
            raise ValueError(f"precision {precision_label(precision)}: results cover "
                             f"{sum(c.events for c in chunks)} of {events} events")
        boxes = mine[0][1]
        strategy = "+".join(sorted({c.strategy for c in chunks if c.strategy}))
        forwarded = np.sum([c.forwarded for c in chunks], axis=0)
        seconds = float(sum(c.seconds for c in chunks))
        mask = np.vstack([c.mask for c in chunks])[:sample]
        t_route = seconds / events
        t_d = t_route / n_servers
        label = precision_label(precision)
        total_match, total_forwarded = 0.0, 0
        for s, part in enumerate(parts):
            column = mask[:, s] if len(mask) else np.zeros(0, dtype=bool)
            sent = int(column.sum())
            match_seconds = float(part.match_seconds[:sample][column].sum()) if sent else 0.0
            if part.rectangles == 0:
                match_seconds = 0.0  # nothing to match (the engine was never asked)
            total_match += match_seconds
            total_forwarded += sent
            rows.append(ProfileRow(precision, label, servers[s], part.rectangles, int(boxes[s]),
                                   events, int(forwarded[s]), float(forwarded[s]) / events,
                                   t_d, t_route, match_seconds / sent if sent else None,
                                   len(chunks), strategy))
        total = int(forwarded.sum())
        rows.append(ProfileRow(precision, label, ALL_SERVERS, sum(p.rectangles for p in parts),
                               int(sum(boxes)), events, total, total / (events * n_servers),
                               t_d, t_route,
                               total_match / total_forwarded if total_forwarded else None,
                               len(chunks), strategy))
    pairs = sample * n_servers
    matched = sum(int((part.matches[:sample] > 0).sum()) for part in parts)
    info = {
        "servers": list(servers),
        "events": events,
        "rectangles": inputs.rectangle_count,
        "maximal_rectangles": int(sum(len(p.maximal_mins) for p in parts)),
        "d": inputs.d,
        "precisions": [precision_label(p) for p in options.precisions],
        "routing_mode": options.mode,
        "clock": options.clock,
        "chunk_size": options.chunk_size,
        "match_sample": sample,
        # Fraction of (sample event, server) pairs with a matching subscription: the hit
        # ratio a perfect router would reach (precise summaries reach exactly this).
        "exact_hit_ratio_sample": matched / pairs if pairs else math.nan,
        "server_build_seconds": round(sum(p.build_seconds for p in parts), 3),
        "source": inputs.source,
    }
    info.update(meta or {})
    return Profile(rows, info)


# -- the single-process twin ----------------------------------------------------------------------

def profile_local(inputs: ProfileInputs, options: ProfileOptions | None = None, *,
                  progress: Callable[[str], None] | None = None, bar=None) -> Profile:
    """The profile computed in this process with the same kernels as the Spark job.
    ``bar``: a :class:`wsframework.progress.Progress`, advanced per routing task."""
    options = options or ProfileOptions()
    sample = inputs.events[:options.match_sample]
    parts = [server_kernel(name, inputs.schema_xml, mins, maxs, sample, options.clock)
             for name, (mins, maxs) in zip(inputs.servers, inputs.rectangles)]
    if progress:
        progress(f"servers: {len(parts)} engines built")
    context = RoutingContext(inputs.schema_xml, inputs.servers, server_parts_for_routing(parts),
                             inputs.events, options)
    tasks = context.tasks()
    if bar is not None:
        bar.expect(len(tasks))
    results = []
    for pi, ci in tasks:
        results.append(context.run(pi, ci))
        if bar is not None:
            bar.advance()
    return assemble(inputs, options, parts, results, {"engine": "local"})
