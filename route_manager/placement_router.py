"""Online subscription placement on a subscription server (paper III-A).

A Subscribe that arrives at a server is placed on the "best" server among those whose load is
below the threshold, this server included; the rules are the partitioners' own online rules
(:mod:`route_manager.partitioning`, ``assign``), fed with what the peers last reported::

    router = PlacementRouter("rtree", load_threshold=20_000)
    target = router.choose("stocks", lo, hi, view)   # a server name (view.self_name: keep it)

``view`` (a :class:`RouteView`) tells the router who the candidates are and what they hold
(:class:`Candidate`: load, routing-summary boxes, centroid and count of the subscriptions),
and how live that knowledge is (``membership`` / ``content_key``): the partitioner is rebuilt
from ``view.candidates()`` when the set of servers changes at once, and when only their
content changed at most every ``refresh_interval`` seconds; in between, every placement is
recorded by the partitioner itself (the paper's "then we update the subscriptions' centroid
at the server i"), so a burst of subscribes sees its own effect before the next peer update.

Algorithms (``ALGORITHMS``):

``random``  a uniformly random eligible server (:class:`~route_manager.partitioning.RandomPartitioner`)
``rtree``   the eligible server owning the summary rectangle of largest overlap volume with the
            subscription's rectangle; ties and zero overlap: the least loaded
            (:class:`~route_manager.partitioning.OnlineRTreePartitioner`, precise summaries)
``kmeans``  the eligible server whose subscriptions' centroid is nearest the subscription's
            centre; a server without subscriptions is taken first
            (:class:`~route_manager.partitioning.OnlineKMeansPartitioner`)
``distance`` the eligible server of least added traffic times network distance from this
            server (EDN III-D; :class:`~route_manager.partitioning.OnlineDistancePartitioner`:
            ``min_i |new \\ R_i|`` over the server's summary rectangles, times its latency
            from here plus ``distance_floor``, by default the smallest non-zero latency
            from here: the higher the floor, the less distance counts); needs ``latency`` (a
            :class:`~route_manager.latency_matrix.LatencyMatrix`, see ``load_latency``); a
            server missing from the matrix counts as the matrix's largest latency away
``local``   never forward: every subscription stays where it arrived

When every server is at the threshold the subscription stays here (a server never refuses a
subscription for want of room elsewhere).

Coordinates: every dimension is mapped affinely from the schema's space ``[NULL, max]`` onto
``[0, 10]`` before it reaches a partitioner. Overlap *ratios* do not change (the R-tree
choice is the same), the partitioners' slab bitsets cover the space evenly, and K-means
distances no longer depend on the units of the attributes (a price in cents would otherwise
outweigh everything else).

A subscription's rectangle (:func:`subscription_box`) is the bounding box of the rectangles
its filter compiles to in the topic's engine (:func:`matchers.box_filters.compile_filter`: one per
``or`` alternative of a range filter, the extracted ranges of an XPath filter, the whole space
when nothing constrains it).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from wsframework.matching.base import FilterSpec
from matchers.box_filters import compile_filter
from matchers.schema import Schema

from .latency_matrix import LatencyMatrix
from .partitioning import (CapacityExceeded, OnlineKMeansPartitioner, OnlineRTreePartitioner,
                           RandomPartitioner)
from .partitioning.distance import OnlineDistancePartitioner
from .workloads import as_generator

__all__ = ["ALGORITHMS", "Candidate", "RouteView", "Space", "PlacementRouter",
           "subscription_box"]

ALGORITHMS = ("random", "rtree", "kmeans", "distance", "local")
SCALE = 10.0  # the partitioners' native space is [0, 10]^d (paper III-C)


def subscription_box(schema: Schema, spec: FilterSpec | None) -> tuple[np.ndarray, np.ndarray]:
    """The bounding box, in ``schema`` coordinates, of the rectangles ``spec`` compiles to
    (the whole space for a subscription without a filter). Raises what
    :func:`~matchers.box_filters.compile_filter` raises for a filter the engine would refuse."""
    if spec is None or schema.d == 0:
        return schema.everything()
    compiled = compile_filter(spec, schema)
    if len(compiled.mins) == 0:
        return schema.everything()
    return compiled.mins.min(axis=0), compiled.maxs.max(axis=0)


@dataclass(frozen=True)
class Space:
    """The coordinate box ``[lo, hi]`` mapped onto ``[0, SCALE]^d``."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def of(cls, schema: Schema) -> "Space":
        lo, hi = schema.everything()
        return cls(lo, hi)

    @property
    def d(self) -> int:
        return len(self.lo)

    def normalize(self, points: np.ndarray) -> np.ndarray:
        points = np.asarray(points, dtype=np.float64)
        if self.d == 0:  # no schema: one dimension in which everything is everywhere
            return np.full(points.shape[:-1] + (1,), SCALE / 2)
        width = np.where(self.hi > self.lo, self.hi - self.lo, 1.0)
        return np.clip((points - self.lo) / width * SCALE, 0.0, SCALE)

    def normalize_box(self, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        if self.d == 0:
            return np.zeros(1), np.full(1, SCALE)
        return self.normalize(lo), self.normalize(hi)

    @property
    def dims(self) -> int:
        return max(self.d, 1)


@dataclass(frozen=True, eq=False)
class Candidate:
    """What one server (this one included) is known to hold for a route."""

    name: str
    load: int
    mins: np.ndarray           # (k, d) routing-summary boxes, schema coordinates
    maxs: np.ndarray
    centroid: np.ndarray | None  # (d,) mean centre of its subscriptions on the route
    count: int                 # subscriptions on the route (the centroid's weight)


class RouteView(Protocol):
    """The router's window on one route of one server (see the module docstring)."""

    self_name: str
    space: Space

    @property
    def self_load(self) -> int: ...

    def membership(self) -> tuple[str, ...]:
        """Candidate names, this server first (cheap: called on every placement)."""

    def content_key(self) -> object:
        """Changes when any candidate's boxes, centroid or reported load change (cheap)."""

    def candidates(self) -> Sequence[Candidate]:
        """The candidates in ``membership()`` order (may be costly)."""


class _LiveKMeans(OnlineKMeansPartitioner):
    """Online K-means whose per-server centroids come from the peers' reports."""

    def update_server(self, server: int, centroid, count: int, load: int) -> "_LiveKMeans":
        count = int(count)
        if count > 0 and centroid is not None:
            centroid = np.asarray(centroid, dtype=np.float64)
            self._sums[server] = centroid * count
            self._counts[server] = count
            self.cluster_centers_[server] = centroid
        else:
            self._sums[server] = 0.0
            self._counts[server] = 0
            self.cluster_centers_[server] = np.nan
        self.loads_[server] = int(load)
        return self


@dataclass
class _Routing:
    membership: tuple[str, ...]
    content: object
    built: float
    partitioner: object


class PlacementRouter:
    """Chooses the server for new subscriptions, per route (thread-safe)."""

    def __init__(self, algorithm: str = "rtree", load_threshold: int = 20_000, *,
                 refresh_interval: float = 0.2, random_state=None, clock=time.monotonic,
                 latency: LatencyMatrix | None = None, distance_floor: float | None = None):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown placement algorithm {algorithm!r}; "
                             f"known: {', '.join(ALGORITHMS)}")
        if int(load_threshold) < 1:
            raise ValueError("load_threshold must be >= 1")
        if algorithm == "distance" and latency is None:
            raise ValueError("the distance placement needs a latency matrix")
        self.algorithm = algorithm
        self.latency = latency
        self.distance_floor = distance_floor
        self.load_threshold = int(load_threshold)
        self.refresh_interval = float(refresh_interval)
        self._rng = as_generator(random_state)
        self._clock = clock
        self._routes: dict[str, _Routing] = {}
        self._lock = threading.Lock()

    def choose(self, route: str, lo, hi, view: RouteView) -> str:
        """The server that should host a new subscription ``[lo, hi]`` on ``route``."""
        if self.algorithm == "local":
            return view.self_name
        with self._lock:
            membership = view.membership()
            if len(membership) <= 1:
                return view.self_name
            content = view.content_key()
            state = self._routes.get(route)
            now = self._clock()
            if (state is None or state.membership != membership
                    or (state.content != content and now - state.built >= self.refresh_interval)):
                state = _Routing(membership, content, now,
                                 self._build(view.candidates(), view.space))
                self._routes[route] = state
            partitioner = state.partitioner
            partitioner.loads_[0] = int(view.self_load)  # our own load is always live
            q_lo, q_hi = view.space.normalize_box(lo, hi)
            try:
                index = partitioner.assign(q_lo, q_hi)
            except CapacityExceeded:
                return view.self_name
            return state.membership[index]

    def forget(self, route: str | None = None) -> None:
        """Drop the routing state of ``route`` (all routes when None)."""
        with self._lock:
            if route is None:
                self._routes.clear()
            else:
                self._routes.pop(route, None)

    # -- building a partitioner from the candidates ---------------------------------------------
    def _build(self, candidates: Sequence[Candidate], space: Space):
        d = space.dims
        empty = np.empty((0, d))
        n = len(candidates)
        if self.algorithm == "random":
            partitioner = RandomPartitioner(capacity=self.load_threshold,
                                            random_state=self._rng).fit(empty, empty, n)
        elif self.algorithm in ("rtree", "distance"):  # both read the servers' rectangles
            if self.algorithm == "rtree":
                partitioner = OnlineRTreePartitioner(capacity=self.load_threshold)
            else:
                partitioner = OnlineDistancePartitioner(capacity=self.load_threshold,
                                                        distance_floor=self.distance_floor)
            partitioner.fit(empty, empty, n)
            for index, candidate in enumerate(candidates):
                mins, maxs = self._boxes(candidate, space)
                partitioner.update_server(index, mins, maxs, candidate.load)
            if self.algorithm == "distance":
                unknown = float(self.latency.ms.max())
                here = candidates[0].name
                partitioner.set_distances([self.latency.distance(here, c.name, default=unknown)
                                           for c in candidates])
        else:
            partitioner = _LiveKMeans(capacity=self.load_threshold).fit(empty, empty, n)
            for index, candidate in enumerate(candidates):
                centroid = None
                if candidate.centroid is not None and candidate.count > 0:
                    centroid = space.normalize(candidate.centroid)
                partitioner.update_server(index, centroid, candidate.count, candidate.load)
        for index, candidate in enumerate(candidates):
            partitioner.loads_[index] = int(candidate.load)
        return partitioner

    @staticmethod
    def _boxes(candidate: Candidate, space: Space) -> tuple[np.ndarray, np.ndarray]:
        mins = np.asarray(candidate.mins, dtype=np.float64)
        maxs = np.asarray(candidate.maxs, dtype=np.float64)
        if space.d == 0:
            count = 1 if len(mins) or candidate.count else 0
            return np.zeros((count, 1)), np.full((count, 1), SCALE)
        if mins.size == 0:
            return np.empty((0, space.d)), np.empty((0, space.d))
        return space.normalize(mins), space.normalize(maxs)
