"""The EDN subscription manager (paper Fig. 11): the base WS-Eventing event source of one
subscription server, extended for the network.

What it adds to :class:`~subscription_manager.manager.SubscriptionManager`, one idea per
module, each a part the manager holds (built with what it uses):

* :mod:`.summaries` -- ``manager.summaries``: topics are matched by
  :class:`~matchers.rtree_engine.RTreeMatchingEngine` (a topic bound to another engine gets
  one built from its options, :meth:`matcher_for`); the subscriptions' centres, the load,
  and the summary told to peers;
* :mod:`.subscribe_placement` -- ``manager.placement``: the server a Subscribe is made on
  (:mod:`route_manager.placement_router`: the best one under the load threshold), settled
  for a request with a wsa:MessageID by the owner of its key (:mod:`.placement_claims`);
* :mod:`.relay` -- ``manager.relay``: a Subscribe placed on another server is forwarded
  there, and Renew / GetStatus / Unsubscribe for a subscription that moved away are
  forwarded to where it lives;
* :mod:`.admin` -- ``manager.server_admin``: admin messages ``PeerUpdate``,
  ``ExportSubscriptions``, ``ImportSubscriptions``, ``MoveSubscriptions``, ``GetStats``;
* :mod:`.moves` -- ``manager.mover``: export / import / move and the forwarding records;
* :mod:`.network` -- ``manager.network``: registration, route updates, peer exchange;
* :mod:`.peer_health` -- ``manager.health``: which peers answer.

This module composes them, decides where each request is answered (placed, relayed, or
here), and publishes the ``edn:EventBatch`` messages the dispatcher sends
(``{server}/topics/T``) through the base's one publication path
(:meth:`~subscription_manager.manager.SubscriptionManager.publish_many`): the whole batch
matched in one call, the events with subscribers serialized once each, and the batch
committed to the outbox in one transaction with the dispatcher's position.
"""
from __future__ import annotations

import collections
import logging
import threading

from matchers.rtree_engine import RTreeMatchingEngine
from route_manager.protocol import (EVENT_BATCH_ACTION, NETWORK_ACTIONS, PLACED, batch_events,
                                     batch_position, require_event_batch)
from route_manager.peers import PeerTable
from route_manager.placement_router import PlacementRouter
from wsframework.admin import AdminClient, carries_credential
from wsframework.admission import AdmissionSettings
from wsframework.exceptions import AccessDenied
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from wsframework.namespace import NamespaceEntry, UnknownEntry
from wsframework.transport import HttpTransport

from ..manager import TOPICS_PREFIX, SubscriptionManager
from ..settings import EventingSettings
from ..operations import Made, Refused
from ..store import Subscription
from ..versions import EventingVersion, check_pairing
from .admin import ServerAdmin
from .bulk_placement import BulkPlacement
from .exceptions import PlacementRefused, TopicNotHere
from .moves import Mover
from .network import NetworkAgent
from .placement_claims import PlacementClaims
from .subscribe_placement import SubscriptionPlacement
from .relay import SubscriptionRelay
from .settings import EdnSettings
from .peer_health import PeerHealth
from .summaries import RoutingSummaries

__all__ = ["EdnSubscriptionManager"]

log = logging.getLogger(__name__)


class EdnSubscriptionManager(SubscriptionManager):
    # Read once, with the base's, from the role's one mapping (the base manager refuses a
    # key no group knows); the server role declares the same groups (build_server.settings).
    settings_groups = (EdnSettings, EventingSettings, AdmissionSettings)

    def build_parts(self) -> None:
        """What the hooks need before the view is loaded: the role's settings, the
        counters, the routing summaries (the topics' engines)."""
        self.edn: EdnSettings = self.role_settings[EdnSettings].named_after(self.service.base_url)
        self._counters: collections.Counter = collections.Counter()
        self._counter_lock = threading.Lock()
        self.summaries = RoutingSummaries(self.view, routing_precision=self.edn.routing_precision)
        self.health = PeerHealth(self.edn.peer_interval)

    def __init__(self, service, **kwargs):
        super().__init__(service, **kwargs)
        # Admin calls and forwarded subscribes; HTTP with this role's read timeout.
        self._own_transport = isinstance(service.transport, HttpTransport)
        peer_transport = (HttpTransport(timeout=(2.0, self.edn.forward_timeout))
                          if self._own_transport else service.transport)
        self.peers = PeerTable(service.store)
        latency = self.edn.latency()
        if latency is not None and self.edn.name not in latency:
            log.warning("this server's name %r is not in the latency file %s: every other "
                        "server counts as the farthest", self.edn.name, self.edn.latency_file)
        self.router = PlacementRouter(self.edn.partitioner, self.edn.load_threshold,
                                      refresh_interval=self.edn.refresh,
                                      random_state=self.edn.placement_seed, latency=latency,
                                      distance_floor=self.edn.placement_distance_floor)
        self.mover = Mover(
            store=service.store, subscriptions=self.store, view=self.view,
            notify_gate=self.notify_gate, transport=service.transport,
            base_url=service.base_url, topic=self.topic, matcher_for=self.matcher_for,
            clock=self.clock, sync=self.sync, admin_client=self.admin_client, count=self.count,
            move_chunk=self.edn.move_chunk, routes_changed=self._routes_changed)
        self.relay = SubscriptionRelay(
            peers=self.peers, peer_transport=peer_transport,
            admin_token=service.config.admin_token, forward_timeout=self.edn.forward_timeout,
            forwarding=self.mover.forwarding, health=self.health,
            count=self.count)
        claims = PlacementClaims(
            name=self.edn.name, peers=self.peers, health=self.health,
            transport=self.relay.forward_transport, admin_token=service.config.admin_token,
            timeout=self.edn.forward_timeout, count=self.count)
        self.placement = SubscriptionPlacement(
            service.store, name=self.edn.name, router=self.router, peers=self.peers,
            health=self.health, summaries=self.summaries, filter_limits=self.view.filter_limits,
            routing_precision=self.edn.routing_precision, claims=claims)
        self.bulk_placement = BulkPlacement(
            name=self.edn.name, placement=self.placement, peers=self.peers, health=self.health,
            transport=lambda: self.peer_transport, admin_token=service.config.admin_token,
            count=self.count)
        self.network = NetworkAgent(
            self.edn, store=service.store, subscriptions=self.store, topics=self.topics,
            peers=self.peers, summaries=self.summaries, health=self.health,
            base_url=service.base_url, sync=self.sync,
            admin_client=self.admin_client, count=self.count)
        self.topics.on_change(self._forget_engine)
        service.messaging.route("edn.event-batch",
                                MessageFilter(action=EVENT_BATCH_ACTION,
                                              path_prefix=TOPICS_PREFIX),
                                self._on_event_batch, priority=20)
        service.gate.let_through(EVENT_BATCH_ACTION)  # the dispatcher's events
        for action in NETWORK_ACTIONS:  # peers' updates, claims and imports, the dispatcher's
            service.gate.let_through(action)
        self.server_admin = ServerAdmin(service.admin, name=self.edn.name, peers=self.peers,
                                 health=self.health, mover=self.mover, stats=self.stats,
                                 claim=self.placement.claim, count=self.count)

    def topic(self, name: str) -> NamespaceEntry:
        """The local topic ``name``; :class:`~.exceptions.TopicNotHere` if there is none."""
        try:
            return self.topics.get(name)
        except UnknownEntry:
            raise TopicNotHere(name) from None

    def default_action(self, entry: NamespaceEntry) -> str:
        # Subscribers see the network's topic address, whichever server holds them.
        return f"{self.edn.dispatcher}/topics/{entry.name}/Event"

    # == the base manager's hooks: the routing summaries follow the view ===================
    def matcher_for(self, entry: NamespaceEntry) -> RTreeMatchingEngine:
        return self.summaries.matcher_for(entry)

    def load(self) -> int:
        """Subscriptions held by this server (all topics): the paper's server load."""
        return self.summaries.load()

    def _forget_engine(self, event: str, entry: NamespaceEntry) -> None:
        if event == "removed":
            self.summaries.forget_engine(entry)
            self.router.forget(entry.name)

    def subscribe_many(self, entry: NamespaceEntry, version: EventingVersion, bodies: list,
                       *, soap_version: str, place: bool = False) -> list[Made | Refused]:
        """A bulk subscribe: made here, or with ``place`` each request on the server the
        router chooses (:mod:`.bulk_placement`)."""
        if not place:
            return super().subscribe_many(entry, version, bodies, soap_version=soap_version)

        def make_here(entry, version, share, soap_version):
            return super(EdnSubscriptionManager, self).subscribe_many(
                entry, version, share, soap_version=soap_version)
        return self.bulk_placement.subscribe_many(entry, version, bodies, soap_version,
                                                  make_here)

    def on_bulk_subscribed(self, entry: NamespaceEntry, made: int) -> None:
        """Subscriptions came in bulk: their filters paged for batches, and the route
        update sent before the answer (the dispatcher routes to them from then on)."""
        engine = self.matcher_for(entry)
        with self.view.lock.write():
            engine.pack()
        self.count("bulk_subscribed", made)
        try:
            self._routes_changed([entry.name])
        except Exception as exc:  # the background loop retries
            log.warning("route update after a bulk subscribe failed: %s", exc)

    def _routes_changed(self, topics: list[str]) -> None:
        """Subscriptions came or went in bulk (an import, a move): route updates now, before
        answering, so that the dispatcher routes accordingly from then on."""
        self.network.push_summaries(topics=topics, force=True)

    # == requests: placed, relayed, or answered here ======================================
    def handle_subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        version = check_pairing(version, message.wsa_version)
        if message.header(PLACED) is not None:  # placed here by a peer: made here
            if not carries_credential(message, self.service.config.admin_token):
                raise PlacementRefused()
            reply = super().handle_subscribe(message, version)
            self.count("placed_here_by_peers")
            return reply
        entry = self._topic_entry(message)
        target = self.placement.target(entry, message, version)
        if target != self.edn.name:
            reply = self.relay.forward_subscribe(message, version, entry, target)
            if reply is not None:
                self.count(f"placements.{target}")
                return reply
        self.count(f"placements.{self.edn.name}")
        return super().handle_subscribe(message, version)

    def handle_renew(self, message, version: EventingVersion, subscription_id: str,
                     stored: Subscription | None) -> Reply:
        reply = self._relayed_if_moved(message, version, "Renew", subscription_id, stored)
        return reply or super().handle_renew(message, version, subscription_id, stored)

    def handle_get_status(self, message, version: EventingVersion, subscription_id: str,
                          stored: Subscription | None) -> Reply:
        reply = self._relayed_if_moved(message, version, "GetStatus", subscription_id, stored)
        return reply or super().handle_get_status(message, version, subscription_id, stored)

    def handle_unsubscribe(self, message, version: EventingVersion, subscription_id: str,
                           stored: Subscription | None) -> Reply:
        reply = self._relayed_if_moved(message, version, "Unsubscribe", subscription_id, stored)
        return reply or super().handle_unsubscribe(message, version, subscription_id, stored)

    def _relayed_if_moved(self, message, version: EventingVersion, operation: str,
                          subscription_id: str, stored: Subscription | None) -> Reply | None:
        """The answer of the server a subscription moved to, or None when it lives here."""
        target = self.relay.moved_to(subscription_id, stored)
        if target is None:
            return None
        return self.relay.forward_manager(message, version, operation, subscription_id, target)

    # == statistics ========================================================================
    def stats(self) -> dict[str, object]:
        """This server's counters (also the GetStats admin message)."""
        figures: dict[str, object] = dict(self.counters)
        figures.update(self.edn_counters)
        figures["load"] = self.load()
        figures.update(self.network.figures())
        figures["leader"] = int(self.network.election.held)
        figures["peers"] = len(self.peers.servers())
        figures["forwarding_records"] = self.mover.forwarding.count()
        return figures

    # == counters ==========================================================================
    def count(self, name: str, n: int = 1) -> None:
        if n:
            with self._counter_lock:
                self._counters[name] += n

    @property
    def edn_counters(self) -> dict[str, int]:
        with self._counter_lock:
            return dict(self._counters)

    # == peers =============================================================================
    def mark_down(self, peer: str) -> None:
        self.health.mark_down(peer)

    def mark_up(self, peer: str) -> None:
        self.health.mark_up(peer)

    def is_down(self, peer: str) -> bool:
        return self.health.is_down(peer)

    @property
    def peer_transport(self):
        """The transport of admin calls and relayed requests to other servers (the relay's:
        replacing it here replaces it there)."""
        return self.relay.peer_transport

    @peer_transport.setter
    def peer_transport(self, transport) -> None:
        self.relay.peer_transport = transport

    def admin_client(self, address: str) -> AdminClient:
        return AdminClient(address, self.service.config.admin_token, transport=self.peer_transport)

    # == events from the dispatcher ========================================================
    def _on_event_batch(self, message: IncomingMessage) -> None:
        # Only the dispatcher sends batches (with the network's credential): a publisher
        # publishes at the dispatcher, whose routing and accounting a batch would bypass.
        if not carries_credential(message, self.service.config.admin_token):
            raise AccessDenied("an EventBatch needs the network's admin credential")
        self.service.gate.event_seen()
        self.sync()
        entry = self._topic_entry(message)
        body = message.body
        require_event_batch(body)
        events = batch_events(body)
        published = self.publish_many(entry, events, action=self.default_action(entry),
                                      position=batch_position(body))
        for index in sorted(published.refused):  # the batch's other events still count
            log.warning("event refused from a batch: %s", published.refused[index])
        self.count("events_refused", len(published.refused))
        self.count("events_received", published.received)
        self.count("replayed_events_skipped", published.skipped)
        return None

    # == control ===========================================================================
    def flush_summaries(self) -> int:
        """Send the route updates that are due now (synchronously); returns how many."""
        return self.network.push_summaries()

    def step(self) -> None:
        """One synchronous round of registration, route updates and peer exchange."""
        self.network.step()

    def start(self) -> None:
        """Run the network conversation in background threads (elected worker only)."""
        self.network.start()

    def close(self) -> None:
        self.network.close()
        self.bulk_placement.close()
        super().close()
        if self._own_transport:
            self.peer_transport.close()
