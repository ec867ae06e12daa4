"""The EDN subscription manager (paper Fig. 11): the base WS-Eventing event source of one
subscription server, extended for the network.

What it adds to :class:`~subscription_manager.manager.SubscriptionManager`:

* topics are matched by :class:`~matchers.rtree_engine.RTreeMatchingEngine` (a topic bound
  to another engine gets one built from its options, :meth:`matcher_for`);
* ``edn:EventBatch`` messages from the dispatcher (``{server}/topics/T``) are published
  locally, event by event: exact matching, then notification;
* a Subscribe is placed (:mod:`route_manager.placement`) on the best server under the load
  threshold; when that is another server the Subscribe is forwarded there unchanged, marked
  ``edn:Placed`` and carrying the network's admin credential, and the answer is relayed: the
  SubscriptionManager EPR the client gets names the server that holds the subscription;
* Renew / GetStatus / Unsubscribe for a subscription that moved away are forwarded to where
  it lives (:mod:`.moves`);
* admin messages: ``PeerUpdate`` (a peer's routing summary), ``ExportSubscriptions``,
  ``ImportSubscriptions``, ``MoveSubscriptions``, ``GetStats`` (this server's counters);
* the network conversation (registration, route updates, peer exchange) in
  :class:`~.network.NetworkAgent` (``manager.network``).
"""
from __future__ import annotations

import collections
import copy
import hmac
import logging
import threading
import time

import numpy as np
from lxml import etree

from wsframework.matching.errors import MatcherError
from matchers.rtree_engine import RTreeMatchingEngine
from route_manager import edn_wire
from route_manager.forwarding import EDN_NS, EVENT_BATCH, EVENT_BATCH_ACTION
from route_manager.peers import PeerSummary, PeerTable
from route_manager.placement import Candidate, PlacementRouter, Space, subscription_box
from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.elements import detached
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from wsframework.namespace import NamespaceEntry, UnknownEntry
from wsframework.ns import qname
from wsframework.transport import HttpTransport, TransportError

from .. import messages as msg
from ..manager import MANAGER_PATH, TOPICS_PREFIX, SubscriptionManager
from ..store import Subscription
from ..versions import EventingVersion, check_pairing
from .moves import Mover
from .network import NetworkAgent
from .settings import EdnSettings

log = logging.getLogger(__name__)

__all__ = ["EdnSubscriptionManager", "PLACED"]

PLACED = qname(EDN_NS, "Placed")


class EdnSubscriptionManager(SubscriptionManager):
    def __init__(self, service, *, settings=None, **kwargs):
        merged = dict(service.config.settings or {})
        merged.update(settings or {})
        self.edn = EdnSettings.from_mapping(merged, service.base_url)
        # What the hooks need exists before the base loads the view (hooks fire in there).
        self._engines: dict[str, RTreeMatchingEngine] = {}   # topic uid -> engine (fallback)
        self._centres: dict[str, tuple[str, np.ndarray]] = {}  # sub id -> (topic uid, centre)
        self._sums: dict[str, list] = {}                       # topic uid -> [sum, count]
        self._centre_lock = threading.Lock()
        self._counters: collections.Counter = collections.Counter()
        self._counter_lock = threading.Lock()
        self._down: dict[str, float] = {}
        super().__init__(service, settings=settings, **kwargs)
        # Admin calls and forwarded subscribes; HTTP with this role's read timeout.
        self._own_transport = isinstance(service.transport, HttpTransport)
        self.peer_transport = (HttpTransport(timeout=(2.0, self.edn.forward_timeout))
                               if self._own_transport else service.transport)
        self.peers = PeerTable(service.store)
        self.router = PlacementRouter(self.edn.partitioner, self.edn.load_threshold,
                                      refresh_interval=self.edn.refresh,
                                      random_state=self.edn.placement_seed)
        self.mover = Mover(self)
        self.network = NetworkAgent(self)
        self.topics.on_change(self._forget_engine)
        service.messaging.route("edn.event-batch",
                                MessageFilter(action=EVENT_BATCH_ACTION, path_prefix=TOPICS_PREFIX),
                                self._on_event_batch, priority=20)
        admin = service.admin
        admin.register(edn_wire.PeerUpdate, self._peer_update)
        admin.register(edn_wire.ExportSubscriptions, self._export)
        admin.register(edn_wire.ImportSubscriptions, self._import)
        admin.register(edn_wire.MoveSubscriptions, self._move)
        admin.register(contracts.GetStats, self._get_stats)

    # == engines ===========================================================================
    def matcher_for(self, entry: NamespaceEntry) -> RTreeMatchingEngine:
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

    def _forget_engine(self, event: str, entry: NamespaceEntry) -> None:
        if event == "removed":
            self._engines.pop(entry.uid, None)
            self.router.forget(entry.name)

    def reading(self):
        """The view's shared lock: hold it to read an engine (summaries) safely."""
        return self._rw.read()

    def topic(self, name: str) -> NamespaceEntry:
        """The local topic ``name``; an ``adm:UnknownTopic`` fault if there is none."""
        try:
            return self.topics.get(name)
        except UnknownEntry:
            raise sender_fault(f"no topic named {name!r} here",
                               contracts.FAULT_UNKNOWN_TOPIC) from None

    def default_action(self, entry: NamespaceEntry) -> str:
        # Subscribers see the network's topic address, whichever server holds them.
        return f"{self.edn.dispatcher}/topics/{entry.name}/Event"

    # == the subscriptions' centres (K-means placement) ====================================
    def on_subscription_added(self, subscription: Subscription, *, local: bool) -> None:
        entry = self._entry_of(subscription)
        if entry is None:
            return
        try:
            lo, hi = subscription_box(self.matcher_for(entry).schema, subscription.filter)
        except MatcherError:
            return
        centre = (lo + hi) / 2.0
        with self._centre_lock:
            if subscription.id in self._centres:
                return
            self._centres[subscription.id] = (entry.uid, centre)
            acc = self._sums.setdefault(entry.uid, [np.zeros_like(centre), 0])
            acc[0] = acc[0] + centre
            acc[1] += 1

    def on_subscription_removed(self, subscription: Subscription, *, local: bool) -> None:
        with self._centre_lock:
            found = self._centres.pop(subscription.id, None)
            if found is None:
                return
            uid, centre = found
            acc = self._sums.get(uid)
            if acc is not None:
                acc[1] -= 1
                acc[0] = acc[0] - centre if acc[1] > 0 else np.zeros_like(centre)

    def route_count(self, entry: NamespaceEntry) -> int:
        with self._centre_lock:
            acc = self._sums.get(entry.uid)
            return acc[1] if acc else 0

    def centroid(self, entry: NamespaceEntry) -> tuple[np.ndarray | None, int]:
        with self._centre_lock:
            acc = self._sums.get(entry.uid)
            if not acc or acc[1] <= 0:
                return None, 0
            return acc[0] / acc[1], acc[1]

    def load(self) -> int:
        """Subscriptions held by this server (all topics): the paper's server load."""
        return len(self._subscriptions)

    def peer_summary(self, entry: NamespaceEntry) -> PeerSummary:
        """What this server tells its peers about ``entry`` (subscription routing)."""
        engine = self.matcher_for(entry)
        with self.reading():
            summary = engine.summary(self.edn.routing_precision)
        centroid, count = self.centroid(entry)
        return PeerSummary(summary, centroid, count)

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
        self._down[peer] = time.monotonic() + 5 * self.edn.peer_interval

    def mark_up(self, peer: str) -> None:
        self._down.pop(peer, None)

    def is_down(self, peer: str) -> bool:
        until = self._down.get(peer)
        return until is not None and until > time.monotonic()

    def admin_client(self, address: str) -> AdminClient:
        return AdminClient(address, self.service.config.admin_token, transport=self.peer_transport)

    def _peer_update(self, request, message: IncomingMessage):
        summary = None
        if request.Summary is not None:
            try:
                summary = PeerSummary.from_element(request.Summary)
            except MatcherError as exc:
                raise sender_fault(f"unusable peer summary from {request.Server}: {exc}",
                                   contracts.FAULT_INVALID_REQUEST) from None
        if request.Server != self.edn.name:
            self.peers.update(request.Server, request.Address, request.Route, request.Load,
                              summary)
            self.mark_up(request.Server)
        self.count("peer_updates_received")
        return edn_wire.PeerUpdateResponse(Server=self.edn.name)

    # == events from the dispatcher ========================================================
    def _on_event_batch(self, message: IncomingMessage) -> None:
        self.sync()
        entry = self._topic_entry(message)
        body = message.body
        if body is None or body.tag != EVENT_BATCH:
            raise sender_fault("an EventBatch message needs an edn:EventBatch body")
        action = self.default_action(entry)
        events = 0
        for event in body:
            if isinstance(event.tag, str):
                self.publish(entry, copy.deepcopy(event), action)
                events += 1
        self.count("events_received", events)
        return None

    # == Subscribe: placement ==============================================================
    def handle_subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        check_pairing(version, message.wsa_version)
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
            lo, hi = subscription_box(engine.schema, request.filter)
        except (SoapFault, MatcherError):
            return self.edn.name  # an invalid request: the local answer is the fault
        return self.router.choose(entry.name, lo, hi, _RouteView(self, entry, engine))

    def _check_credential(self, message: IncomingMessage) -> None:
        header = message.header(contracts.ADMIN_TOKEN_QNAME)
        offered = (header.text or "").strip().encode() if header is not None else b""
        if not offered or not hmac.compare_digest(offered, self.service.config.admin_token.encode()):
            raise sender_fault("edn:Placed needs the network's admin credential",
                               contracts.FAULT_ACCESS_DENIED)

    def _credential_headers(self) -> list[etree._Element]:
        placed = etree.Element(PLACED, nsmap={"edn": EDN_NS})
        placed.text = "1"
        token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": contracts.ADMIN_NS})
        token.text = self.service.config.admin_token
        return [placed, token]

    def _forward_subscribe(self, message: IncomingMessage, version: EventingVersion,
                           entry: NamespaceEntry, target: str) -> Reply | None:
        """Relay the Subscribe to ``target``; None when it is unreachable (place here)."""
        address = self.peers.address_of(target)
        if address is None:
            return None
        client = SoapClient(self.peer_transport, soap_version=message.soap_version,
                            wsa_version=version.wsa)
        body = detached(message.body)
        try:
            reply = client.call(f"{address}/topics/{entry.name}", version.action("Subscribe"),
                                body, self._credential_headers())
        except SoapFault as fault:
            self.count("forward_faults")
            raise _as_eventing_fault(fault, version)
        except TransportError as exc:
            if _maybe_delivered(exc):
                raise version.faults.unable_to_process(
                    f"the server chosen for the subscription ({target}) did not answer in "
                    "time; the subscription may exist there") from None
            log.warning("placement on %s failed (%s): keeping the subscription here", target, exc)
            self.mark_down(target)
            self.count("forward_unreachable")
            return None
        if reply.body is None:
            raise version.faults.unable_to_process(
                f"the server chosen for the subscription ({target}) answered without a body")
        self.count("forwarded_subscribes")
        return Reply(version.action("SubscribeResponse"), detached(reply.body))

    # == Renew / GetStatus / Unsubscribe of moved subscriptions ============================
    def handle_renew(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "Renew", subscription_id, target)
        return super().handle_renew(message, version, subscription_id)

    def handle_get_status(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "GetStatus", subscription_id, target)
        return super().handle_get_status(message, version, subscription_id)

    def handle_unsubscribe(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "Unsubscribe", subscription_id, target)
        return super().handle_unsubscribe(message, version, subscription_id)

    def _moved_to(self, subscription_id: str) -> str | None:
        current = self.store.get(subscription_id)
        if current is not None and current.is_active:
            return None
        return self.mover.forwarding.lookup(subscription_id)

    def _forward_manager(self, message, version: EventingVersion, operation: str,
                         subscription_id: str, target: str) -> Reply:
        epr = msg.manager_epr(version, target + MANAGER_PATH, subscription_id)
        client = SoapClient(self.peer_transport, soap_version=message.soap_version,
                            wsa_version=version.wsa)
        try:
            reply = client.call(epr, version.action(operation), detached(message.body))
        except SoapFault as fault:
            raise _as_eventing_fault(fault, version)
        except TransportError as exc:
            raise version.faults.unable_to_process(
                f"the server holding the subscription is unreachable: {exc}") from None
        self.count("forwarded_manager_requests")
        if operation == "Unsubscribe":
            self.mover.forwarding.drop(subscription_id)
        body = detached(reply.body) if reply.body is not None else None
        return Reply(version.action(msg.OPERATIONS[operation]), body)

    # == offline partitioning ==============================================================
    def _export(self, request, message):
        return edn_wire.ExportSubscriptionsResponse(Subscriptions=self.mover.export(request.Topic))

    def _import(self, request, message):
        return edn_wire.ImportSubscriptionsResponse(
            Imported=self.mover.import_(request.Topic, request.Subscriptions))

    def _move(self, request, message):
        return edn_wire.MoveSubscriptionsResponse(
            Moved=self.mover.move(request.Topic, request.Target, request.Id or []))

    # == statistics and control ============================================================
    def stats(self) -> dict[str, object]:
        figures: dict[str, object] = dict(self.counters)
        figures.update(self.edn_counters)
        figures["load"] = self.load()
        figures["registered"] = int(self.network.registered.is_set())
        figures["leader"] = int(self.network.election.held)
        figures["peers"] = len(self.peers.servers())
        figures["forwarding_records"] = self.mover.forwarding.count()
        return figures

    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in sorted(self.stats().items()) if k.startswith(prefix)])

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
        super().close()
        if self._own_transport:
            self.peer_transport.close()


class _RouteView:
    """The placement router's view of one route (see :class:`route_manager.placement.RouteView`)."""

    def __init__(self, manager: EdnSubscriptionManager, entry: NamespaceEntry,
                 engine: RTreeMatchingEngine):
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


def _as_eventing_fault(fault: SoapFault, version: EventingVersion) -> SoapFault:
    """A relayed fault keeps its code, subcodes and detail; an eventing fault is sent with
    the version's fault action again."""
    if fault.action is None and any(str(s).startswith("{%s}" % version.namespace)
                                    for s in fault.subcodes):
        fault.action = version.fault_action
    return fault


def _maybe_delivered(exc: TransportError) -> bool:
    """True when the request may have reached the peer (it timed out reading the answer)."""
    try:
        import requests
    except ImportError:  # pragma: no cover
        return False
    cause = exc.__cause__
    return isinstance(cause, requests.exceptions.ReadTimeout)
