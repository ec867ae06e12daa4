"""Where a Subscribe goes (paper III-A): the best server under the load threshold, chosen by
:class:`~route_manager.placement_router.PlacementRouter` from this server's summary and its peers'.

A Subscribe with a wsa:MessageID is placed once, network-wide: its placement key
(:func:`~subscription_manager.operations.request_key` over the topic's name) has an owner
among the servers (:mod:`.placement_claims`), which keeps the first choice claimed for the
key; this server keeps the choice that stands too, in its store, for
:data:`PLACEMENT_MEMORY` seconds. So a client that repeats the request, here or at another
server, reaches the server that made the subscription and gets it back (that server answers
a repeated request with the existing subscription), although the summaries and loads may
choose another server by then. Two copies racing agree too: the first claim committed at the
owner wins.

When the choice is another server the Subscribe is relayed there (:mod:`.relay`) marked
``edn:Placed`` and carrying the network's admin credential; the server that receives a
placed Subscribe checks the credential and keeps it, whatever its own router would say. An
invalid Subscribe, or one the chosen server cannot be reached for, is answered here.

:class:`SubscriptionPlacement` is a part of
:class:`~subscription_manager.server.EdnSubscriptionManager`: it chooses the server
(:meth:`SubscriptionPlacement.target`); the manager's ``handle_subscribe`` relays or makes
the subscription.
"""
from __future__ import annotations

import time

import numpy as np

from matchers.rtree_engine import RTreeMatchingEngine
from route_manager.protocol import MAX_SERVER_NAME, PLACED
from route_manager.peers import PeerTable
from route_manager.placement_router import Candidate, PlacementRouter, Space, subscription_box
from wsframework.exceptions import SoapFault
from wsframework.matching.errors import MatcherError
from wsframework.matching.limits import FilterLimits, check_filter_limits
from wsframework.messaging import IncomingMessage
from wsframework.migrations import migrate
from wsframework.namespace import NamespaceEntry
from wsframework.store import Store

from .. import messages as msg
from ..operations import request_key
from ..versions import EventingVersion
from .exceptions import UnusableClaim
from .peer_health import PeerHealth
from .placement_claims import PlacementClaims, valid_key, valid_server_name
from .summaries import RoutingSummaries

__all__ = ["SubscriptionPlacement", "PLACED", "PLACEMENT_MEMORY"]

#: how long (seconds) a placement is remembered for repeated Subscribes
PLACEMENT_MEMORY = 3600.0
#: the most placements remembered (the newest are kept): Subscribes with new MessageIDs are
#: the peer's to send, so the table is trimmed every PLACEMENT_TRIM_EVERY placements
PLACEMENT_MEMORY_ROWS = 100_000
PLACEMENT_TRIM_EVERY = 1000
_PLACEMENTS = "edn_placements"
_PLACEMENTS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_PLACEMENTS} (
    request_key TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS {_PLACEMENTS}_created ON {_PLACEMENTS}(created);
"""


class SubscriptionPlacement:
    """The server a Subscribe goes to, remembered per request in ``store`` (the service's
    store). ``name``: this server's; ``router``: the placement rule; ``peers`` and
    ``health``: the other servers and which of them answer; ``summaries``: this server's
    engines, centres and load; ``filter_limits``: the bounds a filter must keep;
    ``claims``: the owners of placement keys, which settle the choice network-wide."""

    def __init__(self, store: Store, *, name: str, router: PlacementRouter, peers: PeerTable,
                 health: PeerHealth, summaries: RoutingSummaries, filter_limits: FilterLimits,
                 routing_precision: float, claims: PlacementClaims):
        self.store = store
        self.name = name
        self.router = router
        self.peers = peers
        self.health = health
        self.claims = claims
        self.summaries = summaries
        self.filter_limits = filter_limits
        self.routing_precision = routing_precision
        self._placements_made = 0
        migrate(store, "placements", [_PLACEMENTS_SCHEMA])

    def target(self, entry: NamespaceEntry, message: IncomingMessage,
               version: EventingVersion) -> str:
        """The name of the server ``message`` (a Subscribe to ``entry``) is to be made on:
        the one chosen for an earlier copy of the request (here or at any server, as the
        key's owner settled it), or the router's choice now. An invalid request stays here
        unremembered: the local answer is its fault."""
        key = request_key(message, entry.name)
        remembered = self._remembered(key) if key is not None else None
        if remembered is not None:
            return remembered
        target = self._place(entry, message, version)
        if target is None:
            return self.name
        if key is not None:
            standing = self.claims.settle(key, target, version)
            target = self._remember(key, standing if standing is not None else target)
        return target

    def claim(self, key: str, target: str) -> str:
        """A peer's claim of ``target`` for the placement key ``key`` (this server owns the
        key): the choice that stands, the first claimed. :class:`~.exceptions.UnusableClaim`
        for a key or a server name no server makes."""
        if not valid_key(key):
            raise UnusableClaim("the key is no SHA-256 digest in lowercase hexadecimal")
        if not valid_server_name(target):
            raise UnusableClaim(f"the target is no server name (1 to {MAX_SERVER_NAME} "
                                "printable characters, no white space)")
        return self._remember(key, target)

    def _place(self, entry: NamespaceEntry, message: IncomingMessage,
               version: EventingVersion) -> str | None:
        """The router's choice for a valid Subscribe; None for an invalid one."""
        if message.action != version.action("Subscribe"):
            return None  # the base answers with the right fault
        return self.choose(entry, message.body, version)

    def choose(self, entry: NamespaceEntry, body, version: EventingVersion, *,
               pending_here: int = 0) -> str | None:
        """The router's choice for the ``wse:Subscribe`` ``body`` (recorded by the router,
        so the next choice sees it); None for an invalid request, whose local answer is its
        fault. ``pending_here``: subscriptions already placed here and not made yet (a bulk
        subscribe's), counted in this server's load."""
        try:
            request = msg.parse_subscribe(body, version)
            engine = self.summaries.matcher_for(entry)
            if request.filter is not None:
                engine.check_dialect(request.filter)
                # before compiling: the local answer then refuses it with the right fault
                check_filter_limits(request.filter, self.filter_limits)
            lo, hi = subscription_box(engine.schema, request.filter)
        except (SoapFault, MatcherError):
            return None  # an invalid request: the local answer is the fault
        return self.router.choose(entry.name, lo, hi,
                                  _RouteView(self, entry, engine, pending_here))

    # -- placements remembered for repeated Subscribes ------------------------------------
    def _remembered(self, key: str) -> str | None:
        rows = self.store.query(
            f"SELECT target FROM {_PLACEMENTS} WHERE request_key = ? AND created > ?",
            (key, time.time() - PLACEMENT_MEMORY))
        return rows[0][0] if rows else None

    def _remember(self, key: str, target: str) -> str:
        """Keep ``target`` for ``key`` unless a copy of the request got here first; returns
        the choice that stands. Placements older than :data:`PLACEMENT_MEMORY` go."""
        now = time.time()
        self._placements_made += 1
        with self.store.transaction() as conn:
            conn.execute(f"DELETE FROM {_PLACEMENTS} WHERE created <= ?",
                         (now - PLACEMENT_MEMORY,))
            if self._placements_made % PLACEMENT_TRIM_EVERY == 0:
                conn.execute(f"DELETE FROM {_PLACEMENTS} WHERE created < (SELECT created FROM "
                             f"{_PLACEMENTS} ORDER BY created DESC LIMIT 1 OFFSET ?)",
                             (PLACEMENT_MEMORY_ROWS - 1,))
            conn.execute(f"INSERT OR IGNORE INTO {_PLACEMENTS} (request_key, target, created) "
                         "VALUES (?, ?, ?)", (key, target, now))
            return conn.execute(f"SELECT target FROM {_PLACEMENTS} WHERE request_key = ?",
                                (key,)).fetchone()[0]


class _RouteView:
    """The placement router's view of one route (see :class:`route_manager.placement_router.RouteView`)."""

    def __init__(self, placement: SubscriptionPlacement, entry: NamespaceEntry,
                 engine: RTreeMatchingEngine, pending_here: int = 0):
        self.placement = placement
        self.pending_here = pending_here
        self.entry = entry
        self.engine = engine
        self.self_name = placement.name
        self.space = Space.of(engine.schema)
        self._members: tuple[str, ...] | None = None

    @property
    def self_load(self) -> int:
        return self.placement.summaries.load() + self.pending_here

    def membership(self) -> tuple[str, ...]:
        if self._members is None:
            peers = sorted(n for n in self.placement.peers.servers()
                           if n != self.self_name and not self.placement.health.is_down(n))
            self._members = (self.self_name, *peers)
        return self._members

    def content_key(self) -> object:
        return (self.entry.uid, self.engine.summary_generation,
                self.placement.peers.generation())

    def candidates(self) -> list[Candidate]:
        placement = self.placement
        with placement.summaries.reading():
            own = self.engine.summary(placement.routing_precision)
        centroid, count = placement.summaries.centroid(self.entry)
        found = [Candidate(self.self_name, placement.summaries.load(), own.mins, own.maxs,
                           centroid, count)]
        states = {s.name: s for s in placement.peers.route_states(self.entry.name)}
        dims = self.engine.schema.dims
        d = len(dims)
        for name in self.membership()[1:]:
            state = states.get(name)
            if state is None:
                found.append(Candidate(name, 0, np.empty((0, d)), np.empty((0, d)), None, 0))
                continue
            usable = state.dims == dims
            found.append(Candidate(
                name, state.load,
                state.mins if usable else np.empty((0, d)),
                state.maxs if usable else np.empty((0, d)),
                state.centroid if usable and state.centroid is not None
                and len(state.centroid) == d else None,
                state.count if usable else 0))
        return found
