"""Where a Subscribe goes (paper III-A): the best server under the load threshold, chosen by
:class:`~route_manager.placement.PlacementRouter` from this server's summary and its peers'.

When the choice is another server the Subscribe is relayed there (:mod:`.relay`) marked
``edn:Placed`` and carrying the network's admin credential; the server that receives a
placed Subscribe checks the credential and keeps it, whatever its own router would say. An
invalid Subscribe, or one the chosen server cannot be reached for, is answered here.

:class:`SubscriptionPlacement` is a mixin of
:class:`~subscription_manager.edn.EdnSubscriptionManager`; the host provides ``edn``,
``router``, ``peers``, ``matcher_for``, ``centroid``, ``load``, ``reading``, ``is_down``,
``count`` and ``_forward_subscribe`` (:class:`~.relay.SubscriptionRelay`).
"""
from __future__ import annotations

import numpy as np

from matchers.rtree_engine import RTreeMatchingEngine
from route_manager.edn_wire import PLACED
from route_manager.placement import Candidate, Space, subscription_box
from wsframework.admin import carries_credential
from wsframework.exceptions import SoapFault
from wsframework.matching.errors import MatcherError
from wsframework.matching.limits import check_filter_limits
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry

from .. import messages as msg
from ..versions import EventingVersion, check_pairing
from .exceptions import PlacementRefused

__all__ = ["SubscriptionPlacement", "PLACED"]



class SubscriptionPlacement:
    """Subscribe, placed on the best server; mixed into the EDN subscription manager."""

    def handle_subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        version = check_pairing(version, message.wsa_version)
        if message.header(PLACED) is not None:
            self._check_credential(message)
            reply = super().handle_subscribe(message, version)
            self.count("placed_here_by_peers")
            return reply
        entry = self._topic_entry(message)
        target = self._place(entry, message, version)
        if target != self.edn.name:
            reply = self._forward_subscribe(message, version, entry, target)
            if reply is not None:
                self.count(f"placements.{target}")
                return reply
        self.count(f"placements.{self.edn.name}")
        return super().handle_subscribe(message, version)

    def _place(self, entry: NamespaceEntry, message: IncomingMessage,
               version: EventingVersion) -> str:
        if message.action != version.action("Subscribe"):
            return self.edn.name  # the base answers with the right fault
        try:
            request = msg.parse_subscribe(message.body, version)
            engine = self.matcher_for(entry)
            if request.filter is not None:
                engine.check_dialect(request.filter)
                # before compiling: the local answer then refuses it with the right fault
                check_filter_limits(request.filter, self.view.filter_limits)
            lo, hi = subscription_box(engine.schema, request.filter)
        except (SoapFault, MatcherError):
            return self.edn.name  # an invalid request: the local answer is the fault
        return self.router.choose(entry.name, lo, hi, _RouteView(self, entry, engine))

    def _check_credential(self, message: IncomingMessage) -> None:
        if not carries_credential(message, self.service.config.admin_token):
            raise PlacementRefused()


class _RouteView:
    """The placement router's view of one route (see :class:`route_manager.placement.RouteView`)."""

    def __init__(self, manager, entry: NamespaceEntry, engine: RTreeMatchingEngine):
        self.manager = manager
        self.entry = entry
        self.engine = engine
        self.self_name = manager.edn.name
        self.space = Space.of(engine.schema)
        self._members: tuple[str, ...] | None = None

    @property
    def self_load(self) -> int:
        return self.manager.load()

    def membership(self) -> tuple[str, ...]:
        if self._members is None:
            peers = sorted(n for n in self.manager.peers.servers()
                           if n != self.self_name and not self.manager.is_down(n))
            self._members = (self.self_name, *peers)
        return self._members

    def content_key(self) -> object:
        return (self.entry.uid, self.engine.summary_generation, self.manager.peers.generation())

    def candidates(self) -> list[Candidate]:
        m = self.manager
        with m.reading():
            own = self.engine.summary(m.edn.routing_precision)
        centroid, count = m.centroid(self.entry)
        found = [Candidate(self.self_name, m.load(), own.mins, own.maxs, centroid, count)]
        states = {s.name: s for s in m.peers.route_states(self.entry.name)}
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
