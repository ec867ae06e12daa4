"""What a subscription server knows about its own subscriptions, for routing and placement:
one R-tree engine per topic, the subscriptions' centres (K-means placement), its load, and
the summary it tells its peers (paper II, III-A).

:class:`RoutingSummaries` is a part of
:class:`~subscription_manager.server.EdnSubscriptionManager`, built with the manager's view
before the view is loaded; the manager's ``matcher_for`` calls it. The centres are the
engines' (each keeps the sum of its filters' centres), so nothing is kept per subscription
here.
"""
from __future__ import annotations

import numpy as np

from matchers.pst.links_route_set import MAX_PREDICATES
from matchers.rtree_engine import RTreeMatchingEngine
from route_manager.peers import PeerSummary
from wsframework.matching.errors import MatcherError
from wsframework.namespace import NamespaceEntry

from ..view import SubscriptionView

__all__ = ["RoutingSummaries", "box_predicates"]


def box_predicates(engine: RTreeMatchingEngine) -> dict | None:
    """One predicate per subscription rectangle: its dimensions whose interval is one point
    (``attribute = coordinate``). A dimension tested by a range, or a subscription that is
    no box at all (its rectangle is everything), adds no test: the predicate then *covers*
    the subscription instead of equalling it (a Y the server itself narrows), never misses
    an event. None (everything) past :data:`MAX_PREDICATES` rectangles.

    Reads the engine's rectangle table, the only place that holds every subscription's box;
    hold the view's read lock."""
    table = engine._table
    if table.boxes > MAX_PREDICATES:
        return None
    dims = engine.schema.dims
    out = {}
    for filter_id, seq in table.seq_of.items():
        for k, row in enumerate(table.rows(seq).tolist()):
            lo, hi = table.mins[row], table.maxs[row]
            tests = tuple(sorted((dims[i], float(lo[i])) for i in range(len(dims))
                                 if lo[i] == hi[i]))
            out[f"{filter_id}#{k}" if k else str(filter_id)] = tests
    return out


class RoutingSummaries:
    """Engines, centres, load and peer summaries of the subscriptions in ``view``, summaries
    cut to ``routing_precision`` for the peers."""

    def __init__(self, view: SubscriptionView, *, routing_precision: float):
        self.view = view
        self.routing_precision = routing_precision
        self._engines: dict[str, RTreeMatchingEngine] = {}   # topic uid -> engine (fallback)

    # == engines ===========================================================================
    def matcher_for(self, entry: NamespaceEntry) -> RTreeMatchingEngine:
        """The topic's R-tree engine (a topic bound to another engine gets one built from
        its options)."""
        if isinstance(entry.matcher, RTreeMatchingEngine):
            return entry.matcher
        engine = self._engines.get(entry.uid)
        if engine is None:
            try:
                engine = RTreeMatchingEngine(entry.config_element())
            except MatcherError:
                engine = RTreeMatchingEngine(None)
            engine = self._engines.setdefault(entry.uid, engine)
        return engine

    def forget_engine(self, entry: NamespaceEntry) -> None:
        """The topic was removed: its fallback engine goes."""
        self._engines.pop(entry.uid, None)

    def reading(self):
        """The view's shared lock: hold it to read an engine (summaries) safely."""
        return self.view.lock.read()

    # == the subscriptions' centres (K-means placement) ====================================
    def _centres(self, entry: NamespaceEntry) -> tuple[np.ndarray, int]:
        """The sum of the centres of the topic's subscriptions' boxes, and their number: the
        engine's filters (it keeps the sum as they come and go) and the subscriptions
        without a filter, whose box is the whole space."""
        engine = self.matcher_for(entry)
        with self.reading():
            total, count = engine.centre_total()
            unfiltered = self.view.unfiltered_count(entry)
        if unfiltered:
            lo, hi = engine.schema.everything()
            total = total + unfiltered * (lo + hi) / 2.0
        return total, count + unfiltered

    def route_count(self, entry: NamespaceEntry) -> int:
        return self._centres(entry)[1]

    def centroid(self, entry: NamespaceEntry) -> tuple[np.ndarray | None, int]:
        total, count = self._centres(entry)
        if count <= 0:
            return None, 0
        return total / count, count

    # == what the server tells others ======================================================
    def load(self) -> int:
        """Subscriptions held by this server (all topics): the paper's server load."""
        return len(self.view.subscriptions)

    def equality_predicates(self, entry: NamespaceEntry) -> dict | None:
        """The topic's subscriptions as link matching's predicates (``--routing
        linkmatching``; :mod:`matchers.pst.links_route_set`): id -> equality tests, or None
        (everything) when there are too many to report."""
        engine = self.matcher_for(entry)
        with self.reading():
            return box_predicates(engine)

    def peer_summary(self, entry: NamespaceEntry) -> PeerSummary:
        """What this server tells its peers about ``entry`` (subscription routing)."""
        engine = self.matcher_for(entry)
        with self.reading():
            summary = engine.summary(self.routing_precision)
        centroid, count = self.centroid(entry)
        return PeerSummary(summary, centroid, count)
