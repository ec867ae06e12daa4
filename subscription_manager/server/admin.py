"""The admin messages a subscription server answers beyond the base ones (``{server}/admin``,
:mod:`route_manager.protocol`): ``PeerUpdate`` (a peer's routing summary and load),
``ExportSubscriptions`` / ``ImportSubscriptions`` / ``MoveSubscriptions`` (offline
partitioning, :mod:`.moves`), ``ExportBoxes`` (pages of a topic's rectangles for profiles,
:mod:`.box_export`), ``MeasureLatency`` (round trips to its peers,
:mod:`.latency_probe`), ``ClaimPlacement`` (where a Subscribe whose placement key this
server owns is made, :mod:`.placement_claims`) and ``GetStats`` (this server's counters,
:meth:`stats`).

:class:`ServerAdmin` is a part of :class:`~subscription_manager.server.EdnSubscriptionManager`,
which builds it once the parts it answers for exist.
"""
from __future__ import annotations

from typing import Callable

from route_manager import protocol
from route_manager.exceptions import server_address
from route_manager.peers import PeerSummary, PeerTable
from wsframework.admin import AdminEndpoint, contracts
from wsframework.matching.errors import MatcherError
from wsframework.messaging import IncomingMessage

from .exceptions import UnusablePeerSummary
from .latency_probe import LatencyProbe
from .moves import Mover
from .peer_health import PeerHealth

__all__ = ["ServerAdmin"]

DEFAULT_BOXES_PAGE = 2_000  # ExportBoxes without Max


class ServerAdmin:
    """Registers the server's admin operations with ``admin``: peer updates go to
    ``peers`` (``health`` learns the peer answers), moves to ``mover``, and ``GetStats``
    answers ``stats()``; ``claim(key, target)`` settles a placement claim (the standing
    server). ``name``: this server's; ``count(name)``: its counters."""

    def __init__(self, admin: AdminEndpoint, *, name: str, peers: PeerTable, health: PeerHealth,
                 mover: Mover, stats: Callable[[], dict[str, object]],
                 claim: Callable[[str, str], str], count: Callable[..., None]):
        self.name = name
        self.peers = peers
        self.health = health
        self.mover = mover
        self.claim = claim
        self.stats = stats
        self.count = count
        admin.register(protocol.PeerUpdate, self._peer_update)
        admin.register(protocol.ExportSubscriptions, self._export)
        admin.register(protocol.ExportBoxes, self._export_boxes)
        admin.register(protocol.ImportSubscriptions, self._import)
        admin.register(protocol.MoveSubscriptions, self._move)
        self.latency = LatencyProbe(name, peers.address_of)
        admin.register(protocol.MeasureLatency, self._measure_latency)
        admin.register(protocol.ClaimPlacement, self._claim_placement)
        admin.register(contracts.GetStats, self._get_stats)

    # == peers =============================================================================
    def _peer_update(self, request, message: IncomingMessage):
        summary = None
        if request.Summary is not None:
            try:
                summary = PeerSummary.from_element(request.Summary)
            except MatcherError as exc:
                raise UnusablePeerSummary(request.Server, exc) from None
        if request.Server != self.name:
            self.peers.update(request.Server, server_address(request.Server, request.Address),
                              request.Route, request.Load, summary)
            self.health.mark_up(request.Server)
        self.count("peer_updates_received")
        return protocol.PeerUpdateResponse(Server=self.name)

    # == offline partitioning ==============================================================
    def _export(self, request, message):
        return protocol.ExportSubscriptionsResponse(Subscriptions=self.mover.export(request.Topic))

    def _export_boxes(self, request, message):
        return protocol.ExportBoxesResponse(Boxes=self.mover.boxes_page(
            request.Topic, request.After or "", request.Max or DEFAULT_BOXES_PAGE))

    def _import(self, request, message):
        return protocol.ImportSubscriptionsResponse(
            Imported=self.mover.import_(request.Topic, request.Subscriptions))

    def _move(self, request, message):
        return protocol.MoveSubscriptionsResponse(
            Moved=self.mover.move(request.Topic, request.Target, request.Id or []))

    # == the network =======================================================================
    def _measure_latency(self, request, message):
        return self.latency.answer(request, message)

    def _claim_placement(self, request, message):
        self.count("placement_claims_answered")
        return protocol.ClaimPlacementResponse(Target=self.claim(request.Key, request.Target))

    # == statistics ========================================================================
    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in sorted(self.stats().items()) if k.startswith(prefix)])
