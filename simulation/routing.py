"""Where a broker sends an event: one :class:`Router` per routing mode, each deciding with
the real routing code, never a copy of it.

A router answers ``decide(broker, publisher, event)`` with the brokers downstream on the
publisher's spanning tree that get the event, the local subscriptions it is delivered to and
the matching steps spent.  Decisions are pure functions of (broker, publisher, event), so they
are cached: a simulation at many publish rates routes each pooled event once per broker.

Local delivery (a broker's own clients) is the same in every mode (:class:`Router`), so
that modes differ only in their routing.

Modes: ``flooding`` (every tree child), ``summaries`` (per broker and spanning tree, an
:class:`~matchers.route_set.RTreeRouteSet` holding for each tree child the summary of the
subscriptions behind it, cut to a precision), ``linkmatching`` (:mod:`matchers.pst`'s
LinkMatcher, one per broker: :mod:`.linkmatching`), and any router given to
:func:`register_router` (the hook for Kyra's cliques and zones)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from matchers.route_set import RTreeRouteSet
from matchers.summary import Summary

from .topology import SpanningTree, Topology
from .workload import DONT_CARE, Workload

__all__ = ["Decision", "Router", "FloodingRouter", "SummaryRouter", "ROUTERS",
           "register_router", "make_router"]


@dataclass(frozen=True)
class Decision:
    forward: tuple          # downstream brokers that get the event
    local: tuple            # this broker's clients with a subscription it matches
    steps: int              # matching steps counted by the router
    seconds: float = 0.0    # CPU measured instead of counted (route sets), per event


def box_summary(workload: Workload, subs: np.ndarray) -> tuple[Summary, int] | None:
    """The subscriptions ``subs`` as a summary, one box each (duplicates dropped): a point
    on each tested attribute, the attribute's whole value range on each ``*``; with the
    number of boxes (its rectangles, the denominator of precision)."""
    if not len(subs):
        return None
    rows = np.unique(workload.subscriptions[subs], axis=0)
    mins = np.where(rows == DONT_CARE, 0, rows).astype(np.float64)
    maxs = np.where(rows == DONT_CARE, workload.values - 1, rows).astype(np.float64)
    return Summary(workload.names, mins, maxs), len(rows)


def timed_routes(routes: RTreeRouteSet, events: np.ndarray) -> tuple[list, float]:
    """Each event's frozenset of route ids, and the measured seconds per event of one
    ``route_batch`` (after an untimed call that lets the route set pick its strategy)."""
    events = events.astype(np.float64)
    if not len(routes):
        return [frozenset()] * len(events), 0.0
    routes.route_batch(events)
    start = time.perf_counter()
    hits = routes.route_batch(events)
    return hits, (time.perf_counter() - start) / len(events)


class Router:
    """Base: the cache and local delivery.  Subclasses implement :meth:`route`.

    Local delivery is the same in every mode: per broker, an RTreeRouteSet with one precise
    summary per client (its subscriptions' boxes), its CPU measured."""

    name = "router"
    #: True when no link may carry an event without a matching subscriber behind it
    exact_links = False

    def __init__(self, topology: Topology, trees: dict, workload: Workload) -> None:
        self.topology, self.trees, self.workload = topology, trees, workload
        owners = np.array([workload.broker_of(i) for i in range(len(workload.subscriptions))])
        self.subs_at = {b: np.flatnonzero(owners == b) for b in topology.brokers}
        self._cache: dict = {}
        self._local: dict = {}    # (broker, publisher) -> (per-event client sets, seconds)

    def decide(self, broker: str, publisher: str, event: int) -> Decision:
        key = (broker, publisher, event)
        found = self._cache.get(key)
        if found is None:
            forward, steps = self.route(broker, self.trees[publisher], publisher, event)
            clients, local_seconds = self._local_clients(broker, publisher)
            found = self._cache[key] = Decision(
                tuple(forward), tuple(sorted(clients[event])), int(steps),
                self.route_seconds(broker, publisher) + local_seconds)
        return found

    def share_local_delivery(self, other: "Router") -> None:
        """Use ``other``'s local delivery tables (the same in every mode, so built once when
        several modes route one workload)."""
        if other.workload is not self.workload or other.topology is not self.topology:
            raise ValueError("local delivery is shared only between routers of one workload")
        self._local = other._local

    def _local_clients(self, broker: str, publisher: str):
        key = (broker, publisher)
        if key not in self._local:
            routes = RTreeRouteSet()
            subs = self.subs_at[broker]
            for client in np.unique(self.workload.subscriber[subs]).tolist():
                mine = subs[self.workload.subscriber[subs] == client]
                summary, rectangles = box_summary(self.workload, mine)
                routes.set_summary(str(client), summary, rectangles=rectangles)
            hits, seconds = timed_routes(routes, self.workload.events[publisher])
            self._local[key] = ([[int(c) for c in hit] for hit in hits], seconds)
        return self._local[key]

    def route(self, broker: str, tree: SpanningTree, publisher: str, event: int):
        """(downstream brokers, routing steps)."""
        raise NotImplementedError

    def route_seconds(self, broker: str, publisher: str) -> float:
        """Measured routing CPU per event at ``broker`` (0: all of it is in the steps)."""
        return 0.0


class FloodingRouter(Router):
    name = "flooding"

    def route(self, broker, tree, publisher, event):
        return tree.children[broker], 0


class SummaryRouter(Router):
    """The EDN's routing (section III-D): per tree child, the union of the boxes of the
    subscriptions behind it, in an RTreeRouteSet at ``precision``.  A subscription is one box:
    a point on each tested attribute, the whole value range on each ``*``.  Bloom filters are
    not used: with a handful of values per attribute a box is already exact on each one.
    An R-tree does not count steps, so its routing CPU is measured instead: the wall time
    of one ``route_batch`` over the publisher's pool of events, per event (batched, so a
    lower bound of routing events one by one); :attr:`boxes` keeps each table's size."""

    name = "summaries"

    def __init__(self, topology, trees, workload, precision: float = 1.0) -> None:
        super().__init__(topology, trees, workload)
        self.precision = precision
        self.exact_links = precision >= 1.0
        self.name = f"summaries@{precision:g}"
        self._routes: dict = {}   # (broker, publisher) -> (per-event sets, seconds per event)
        self.boxes: dict = {}     # (broker, publisher) -> boxes in the route set

    def _table(self, broker: str, tree: SpanningTree, publisher: str):
        key = (broker, publisher)
        if key not in self._routes:
            routes = RTreeRouteSet()
            for child in tree.children[broker]:
                subs = np.concatenate([self.subs_at[b] for b in tree.subtree(child)])
                made = box_summary(self.workload, subs)
                if made is not None:
                    routes.set_summary(child, made[0], rectangles=made[1])
            if len(routes):
                routes.set_precision(self.precision)
            boxes = routes.describe()["boxes"]
            hits, seconds = timed_routes(routes, self.workload.events[publisher])
            self._routes[key], self.boxes[key] = (hits, seconds), boxes
        return self._routes[key]

    def route(self, broker, tree, publisher, event):
        hits, _ = self._table(broker, tree, publisher)
        return sorted(hits[event]), 0

    def route_seconds(self, broker: str, publisher: str) -> float:
        return self._routes[(broker, publisher)][1] if (broker, publisher) in self._routes else 0.0


def link_matching_router(topology, trees, workload) -> Router:
    """Gryphon's link matching (:mod:`.linkmatching`), imported on use: it needs
    :mod:`matchers.pst`, and that module needs this one."""
    from .linkmatching import LinkMatchingRouter

    return LinkMatchingRouter(topology, trees, workload)


ROUTERS: dict[str, Callable] = {
    "flooding": FloodingRouter,
    "summaries": SummaryRouter,
    "linkmatching": link_matching_router,
}


def register_router(name: str, factory: Callable) -> None:
    """Plug a routing mode in (Kyra's cliques and zones): ``factory(topology, trees,
    workload)`` returns a :class:`Router`."""
    if name in ROUTERS:
        raise ValueError(f"router {name!r} is already registered")
    ROUTERS[name] = factory


def make_router(name: str, topology, trees, workload, **options) -> Router:
    try:
        factory = ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}; known: {', '.join(sorted(ROUTERS))}")
    return factory(topology, trees, workload, **options)
