"""The admin messages a subscription server answers beyond the base ones (``{server}/admin``,
:mod:`route_manager.edn_wire`): ``PeerUpdate`` (a peer's routing summary and load),
``ExportSubscriptions`` / ``ImportSubscriptions`` / ``MoveSubscriptions`` (offline
partitioning, :mod:`.moves`) and ``GetStats`` (this server's counters, :meth:`stats`).

:class:`ServerAdmin` is a mixin of :class:`~subscription_manager.server.EdnSubscriptionManager`;
the host calls :meth:`_register_admin` once its parts exist, and provides ``edn``,
``peers``, ``mover``, ``network``, ``counters``, ``edn_counters``, ``load``, ``mark_up`` and
``count``.
"""
from __future__ import annotations

from route_manager import edn_wire
from route_manager.exceptions import server_address
from route_manager.peers import PeerSummary
from wsframework.admin import AdminEndpoint, contracts
from wsframework.matching.errors import MatcherError
from wsframework.messaging import IncomingMessage

from .exceptions import UnusablePeerSummary

__all__ = ["ServerAdmin"]


class ServerAdmin:
    """The server's admin operations; mixed into the EDN subscription manager."""

    def _register_admin(self, admin: AdminEndpoint) -> None:
        admin.register(edn_wire.PeerUpdate, self._peer_update)
        admin.register(edn_wire.ExportSubscriptions, self._export)
        admin.register(edn_wire.ImportSubscriptions, self._import)
        admin.register(edn_wire.MoveSubscriptions, self._move)
        admin.register(contracts.GetStats, self._get_stats)

    # == peers =============================================================================
    def _peer_update(self, request, message: IncomingMessage):
        summary = None
        if request.Summary is not None:
            try:
                summary = PeerSummary.from_element(request.Summary)
            except MatcherError as exc:
                raise UnusablePeerSummary(request.Server, exc) from None
        if request.Server != self.edn.name:
            self.peers.update(request.Server, server_address(request.Server, request.Address),
                              request.Route, request.Load, summary)
            self.mark_up(request.Server)
        self.count("peer_updates_received")
        return edn_wire.PeerUpdateResponse(Server=self.edn.name)

    # == offline partitioning ==============================================================
    def _export(self, request, message):
        return edn_wire.ExportSubscriptionsResponse(Subscriptions=self.mover.export(request.Topic))

    def _import(self, request, message):
        return edn_wire.ImportSubscriptionsResponse(
            Imported=self.mover.import_(request.Topic, request.Subscriptions))

    def _move(self, request, message):
        return edn_wire.MoveSubscriptionsResponse(
            Moved=self.mover.move(request.Topic, request.Target, request.Id or []))

    # == statistics ========================================================================
    def stats(self) -> dict[str, object]:
        figures: dict[str, object] = dict(self.counters)
        figures.update(self.edn_counters)
        figures["load"] = self.load()
        figures.update(self.network.figures())
        figures["leader"] = int(self.network.election.held)
        figures["peers"] = len(self.peers.servers())
        figures["forwarding_records"] = self.mover.forwarding.count()
        return figures

    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in sorted(self.stats().items()) if k.startswith(prefix)])
