"""The base subscription manager (paper Fig. 11): a standalone WS-Eventing event source.

Addresses (``{base}`` is the service's base URL):

* ``{base}/topics/T`` -- the event source for topic T. ``wse:Subscribe`` (either version)
  creates a subscription; any other message is a publication: its body is the event.
* ``{base}/subscriptions`` -- the subscription manager (Renew, GetStatus, Unsubscribe),
  the subscription named by a reference parameter: ``wse:Identifier`` (2004/08) or
  ``evt:SubscriptionId`` in ``urn:wsframework:eventing`` (2011).

This module composes the parts and holds what happens to a subscription after it is made:
SubscriptionEnd, expiry sweeps, shutdown. The parts, one idea each:

* :mod:`.operations` -- Subscribe / Renew / GetStatus / Unsubscribe (``manager.operations``,
  called by the ``handle_*`` methods);
* :mod:`.view` -- the process's in-memory view (filters installed in their topic's matcher,
  notification templates) that follows the durable store (:meth:`sync`, checked at the start
  of each request and by the sweeper), and the topics' coming and going under it;
* :mod:`.publication` -- the one publication path (:meth:`publish_many`): event limits,
  matching, strikes, NotifyWhen, the outbox transaction;
* :mod:`.outbox_deliveries` -- from the outbox to the push delivery queue (:mod:`.delivery`)
  and back;
* :mod:`.outbox` -- accepted events, pending notifications, retries, dead letters.

Extension points for subclasses (the EDN subscription manager):

* :meth:`build_parts` -- build the subclass's parts, before the view is loaded;
* :meth:`matcher_for` -- the matcher that holds a topic's filters;
* :meth:`on_subscription_added` / :meth:`on_subscription_removed` -- the in-memory view
  changed (``local`` says whether this process made the change or learned it from the
  store);
* :meth:`on_event_matched` -- see and edit the matched subscription ids of an event;
* :meth:`handle_subscribe` / :meth:`handle_renew` / :meth:`handle_get_status` /
  :meth:`handle_unsubscribe` -- how each request is answered (default: :mod:`.operations`).

The view is loaded during construction, so hooks may fire inside ``__init__``: a subclass
builds what its hooks need in :meth:`build_parts`, which runs just before. Hooks run outside the
manager's own locks (possibly under the namespace's, when a topic change ends
subscriptions), in whichever thread made or learned the change.
"""
from __future__ import annotations

import copy
import functools
import logging
import threading
import time
from typing import ClassVar, Iterable

from lxml import etree

from wsframework import addressing as wsa
from wsframework.admission import AdmissionSettings
from wsframework.addressing import request_headers
from wsframework.exceptions import AccessDenied, sender_fault
from wsframework.matching import Matcher, UnsupportedDialect
from wsframework.memory import collection_paused, settle_after_load
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from wsframework.namespace import NamespaceEntry
from wsframework.publisher import PUBLISH_ACTION
from wsframework.settings import Settings, read_settings
from wsframework.transport import HttpTransport, LeanHttpTransport
from wsframework.urlpolicy import UrlPolicy
from wsframework.soap import SoapVersion, build_envelope
from wsframework.xmlparse import parse_xml

from . import messages as msg
from .bulk_subscribe import register_bulk_subscribe
from .deadletters import register_dead_letter_admin
from .delivery_job import SUBSCRIPTION_END, Delivery
from .event_limits import EventLimits
from .exceptions import RefusedEvent, RefusedFilter, UnknownSubscription
from .notify_index import NotifyGate
from .operations import Made, Refused, SubscriptionOperations
from .outbox import Outbox
from .outbox_deliveries import OutboxDeliveries
from .publication import Publication, Published
from .settings import EventingSettings
from .notify_state import NotifyState
from .store import Subscription, SubscriptionStore
from .strike_table import StrikeTable
from .strikes import FilterStrikes
from .versions import (END_CANCELLING, END_DELIVERY_FAILURE, END_SHUTTING_DOWN, V2004, V2011,
                       EventingVersion, check_pairing, version_of)
from .view import SubscriptionView

log = logging.getLogger(__name__)

__all__ = ["SubscriptionManager", "MANAGER_PATH", "TOPICS_PREFIX"]

MANAGER_PATH = "/subscriptions"
TOPICS_PREFIX = "/topics/"
_HOUSEKEEPING_INTERVAL = 600.0
_REASON_SHOWN = 300  # characters of a refusal a SubscriptionEnd's Reason carries
# A start that loaded at least this many subscriptions hands what it freed back to the
# system (wsframework.memory): a full collection first, worth its time only after a large load.
SETTLE_AFTER_LOADING = 10_000


class SubscriptionManager:
    """Event source and subscription manager for every topic of ``service.topics``."""

    # The settings groups this manager reads (a subclass adds its own, the EDN's EdnSettings).
    settings_groups: ClassVar[tuple[type[Settings], ...]] = (EventingSettings, AdmissionSettings)

    def __init__(self, service, *, resolver=None, clock=time.time, settings=None,
                 settings_groups: tuple[type[Settings], ...] = (), start_sweeper: bool = True):
        """``settings`` override ``service.config.settings``; the merged mapping is read
        once, into the class's :attr:`settings_groups` and the role's ``settings_groups``,
        and a key none of them knows is refused. ``role_settings`` holds every group read
        (by type); ``settings`` is the :class:`EventingSettings`."""
        self.service = service
        merged = dict(service.config.settings or {})
        merged.update(settings or {})
        groups = tuple(dict.fromkeys((EventingSettings, AdmissionSettings, *self.settings_groups,
                                      *settings_groups)))
        self.role_settings: dict[type[Settings], Settings] = dict(
            zip(groups, read_settings(merged, *groups)))
        self.settings = self.role_settings[EventingSettings]
        self.role_settings[AdmissionSettings].apply_to(service.gate)
        service.gate.let_through(PUBLISH_ACTION)  # a publisher's events
        self.topics = service.topics
        self.clock = clock
        self.store = SubscriptionStore(service.store)
        self.expiry_policy = self.settings.expiry_policy()
        # One reading of every address a peer makes this service contact: NotifyTo and EndTo
        # here, ReplyTo and FaultTo in the messaging layer.
        self.targets = UrlPolicy(allow_private=self.settings.allow_private,
                                 allow_loopback=self.settings.allow_loopback,
                                 resolver=resolver, cache_ttl=self.settings.target_cache_ttl,
                                 max_length=self.settings.max_url_length)
        service.messaging.reply_policy = self.targets
        # The durable outbox (accepted events, pending notifications, dead letters, batch
        # positions) in the service's store; ``durable_outbox=false`` keeps only positions.
        self.outbox = Outbox(service.store, clock=clock, lease=self.settings.outbox_lease)
        self._own_delivery_transport = None
        self.manager_address = service.base_url + MANAGER_PATH
        # edn:NotifyWhen: L per subscription (durable) and the decision made in the outbox's
        # transaction (.notify_index)
        self.notify_state = NotifyState(service.store)
        self.notify_gate = NotifyGate()
        self.view = SubscriptionView(self.store, self.topics, matcher_for=self.matcher_for,
                                     on_added=self.on_subscription_added,
                                     on_removed=self._left_view,
                                     filter_limits=self.settings.filter_limits())
        self.deliveries = OutboxDeliveries(
            self.outbox, self.view, self._delivery_transport(service.transport),
            self.settings.delivery_policy(), clock=clock, approve_target=self.targets.approve,
            approval_ttl=min(1.0, self.settings.target_cache_ttl),
            end_on_dead_letter=self.settings.end_subscription_on_dead_letter,
            on_delivery_failure=self._delivery_failed)
        self.deliverer = self.deliveries.deliverer
        self.event_limits = EventLimits(self.settings.event_max_elements,
                                        self.settings.event_max_depth)
        # counted in the store: shared by every worker, kept across restarts
        self.strikes = FilterStrikes(self.settings.filter_strikes, StrikeTable(self.store),
                                     active=lambda: self.view.subscriptions,
                                     struck_out=self._struck_out, clock=clock)
        self.publication = Publication(
            self.view, self.outbox, self.deliveries, self.notify_gate,
            event_limits=self.event_limits, strikes=self.strikes,
            filter_budget=self.settings.filter_budget, durable=self.settings.durable_outbox,
            clock=clock, on_event_matched=self.on_event_matched)
        self.operations = SubscriptionOperations(
            self.store, self.view, notify_state=self.notify_state, settings=self.settings,
            expiry_policy=self.expiry_policy, targets=self.targets,
            manager_address=self.manager_address, topic_entry=self._topic_entry, clock=clock)
        self._stop = threading.Event()
        self._closed = False
        self.build_parts()

        self._register_routes(service.messaging)
        register_dead_letter_admin(service.admin, self.outbox,
                                   after_redeliver=self._after_redeliver)
        register_bulk_subscribe(service.admin, self.subscribe_many, topics=self.topics,
                                before=self.sync)
        self.topics.on_change(self._on_topic_change)
        self._load()
        self.notify_gate.load(service.store.connection(), list(self.view.subscriptions.values()))
        try:  # rows of processes that died before this one started
            self.recover_outbox()
        except Exception:
            log.exception("recovering the outbox at startup failed")
        self._sweeper = None
        if start_sweeper and self.settings.sweep_interval > 0:
            self._sweeper = threading.Thread(target=self._sweep_loop, name="eventing-sweeper",
                                             daemon=True)
            self._sweeper.start()
        service.add_component(self)

    # == extension points ==================================================================
    def build_parts(self) -> None:
        """Build a subclass's parts: called once the settings, store, view, outbox and
        publication exist, before the view is loaded (the hooks below fire from then on)."""

    def matcher_for(self, entry: NamespaceEntry) -> Matcher:
        """The matcher holding ``entry``'s subscription filters."""
        return entry.matcher

    def on_subscription_added(self, subscription: Subscription, *, local: bool) -> None:
        """Called (outside locks) when a subscription enters this process's view."""

    def subscribe_many(self, entry: NamespaceEntry, version: EventingVersion, bodies: list,
                       *, soap_version: str, place: bool = False) -> list[Made | Refused]:
        """A bulk subscribe (:mod:`.bulk_subscribe`): each of ``bodies`` made here, then
        :meth:`on_bulk_subscribed`. ``place`` (placing each request in the network) means
        nothing to a standalone source, which makes them all here."""
        answers = self.operations.subscribe_many(entry, version, bodies,
                                                 soap_version=soap_version)
        made = sum(isinstance(a, Made) for a in answers)
        if made:
            self.on_bulk_subscribed(entry, made)
        return answers

    def on_bulk_subscribed(self, entry: NamespaceEntry, made: int) -> None:
        """Called once a bulk subscribe (:mod:`.bulk_subscribe`) stored ``made``
        subscriptions to ``entry``, before it is answered."""

    def on_subscription_removed(self, subscription: Subscription, *, local: bool) -> None:
        """Called (outside locks) when a subscription leaves this process's view; its
        ``status`` says why (expired, unsubscribed, ended)."""

    def _left_view(self, subscription: Subscription, *, local: bool) -> None:
        if subscription.notify_when is not None:
            self.notify_gate.forget(subscription.id)
        self.on_subscription_removed(subscription, local=local)

    def on_event_matched(self, entry: NamespaceEntry, event: etree._Element, action: str,
                         subscription_ids: list[str]) -> list[str]:
        """The ids an event matched; return the ids to notify (default: all of them)."""
        return subscription_ids

    def handle_subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        """Answer a Subscribe (:mod:`.operations`); the EDN manager places it first."""
        return self.operations.subscribe(message, version)

    # ``stored``: the subscription's row as this request read it (None: there is none)
    def handle_renew(self, message, version: EventingVersion, subscription_id: str,
                     stored: Subscription | None) -> Reply:
        return self.operations.renew(message, version, subscription_id, stored)

    def handle_get_status(self, message, version: EventingVersion, subscription_id: str,
                          stored: Subscription | None) -> Reply:
        return self.operations.get_status(message, version, subscription_id, stored)

    def handle_unsubscribe(self, message, version: EventingVersion, subscription_id: str,
                           stored: Subscription | None) -> Reply:
        return self.operations.unsubscribe(message, version, subscription_id, stored)

    def deliver(self, subscriptions: list[Subscription], action: str,
                event: etree._Element | bytes) -> int:
        """Send one notification of ``event`` (an element, or its serialized bytes) to each
        subscription, bypassing matching; returns how many were queued (durable first, as
        :meth:`.publication.Publication.deliver_many`)."""
        if isinstance(event, bytes):
            event = parse_xml(event)
        return self.publication.deliver_many([(subscriptions, action, event)])

    def _delivery_transport(self, transport):
        """The service's transport, or, when that is real HTTP and ``delivery_client`` is
        lean, a :class:`LeanHttpTransport` of this manager's own (a tenth of the CPU per
        POST; ``benchmarks/performance/delivery.py`` measures both)."""
        if self.settings.delivery_client != "lean" or not isinstance(transport, HttpTransport):
            return transport
        self._own_delivery_transport = LeanHttpTransport(
            timeout=(self.settings.delivery_connect_timeout, self.settings.delivery_read_timeout),
            pool_size=self.settings.delivery_policy().per_host_max)
        return self._own_delivery_transport

    # == the outbox ========================================================================
    def recover_outbox(self) -> int:
        """Claim the rows of processes that are gone, delete the delivered rows noted so far,
        and queue this process's rows that are due and not in memory (claimed rows, retries
        persisted before a restart, jobs a full queue dropped). Returns how many were
        queued."""
        self.sync()  # rows name subscriptions other workers made
        return self.deliveries.recover()

    def _after_redeliver(self) -> None:
        try:
            self.recover_outbox()
        except Exception:  # the rows are committed; the next sweep queues them
            log.exception("queueing redelivered dead letters failed")

    def default_action(self, entry: NamespaceEntry) -> str:
        """The notification action of an event published without its own action."""
        return self.topics.address_of(entry.name) + "/Event"

    # == routes ============================================================================
    def _register_routes(self, messaging) -> None:
        messaging.route("eventing.topics", MessageFilter(path_prefix=TOPICS_PREFIX),
                        self._on_topic_message, priority=10)
        messaging.route("eventing.manager", MessageFilter(path=MANAGER_PATH),
                        self._on_manager_message, priority=10)
        # Per-subscription manager addresses (pairings identified by address, see .versions)
        messaging.route("eventing.manager.by-address",
                        MessageFilter(path_prefix=MANAGER_PATH + "/"),
                        self._on_manager_message, priority=10)

    def _on_topic_message(self, message: IncomingMessage) -> Reply | None:
        self.sync()
        version = version_of(message.body)
        topic = self.topics.name_from_path(message.path) or ""
        if version is not None or message.action in _subscribe_actions():
            if version is None or etree.QName(message.body).localname != "Subscribe":
                raise wsa.action_not_supported(message.wsa_version, message.action)
            access = self.service.access  # wsframework.access
            message.principal = access.acting(message, access.require(message, "subscribe", topic))
            return self.handle_subscribe(message, version)
        self.service.access.require(message, "publish", topic)
        self.service.gate.event_seen()
        return self.handle_publication(message)

    def _on_manager_message(self, message: IncomingMessage) -> Reply:
        self.sync()
        version = version_of(message.body)
        operation = etree.QName(message.body).localname if version is not None else None
        if operation not in msg.OPERATIONS:
            raise wsa.action_not_supported(message.wsa_version, message.action)
        version = check_pairing(version, message.wsa_version)
        if message.action != version.action(operation):
            raise wsa.action_not_supported(message.wsa_version, message.action)
        subscription_id = (msg.subscription_id_in_path(MANAGER_PATH, message.path)
                           if message.path != MANAGER_PATH else msg.subscription_id_from(
                               version, message.reference_parameter(version.identifier_tag)))
        if subscription_id is None:
            raise UnknownSubscription(version, None, operation)
        stored = self.store.get(subscription_id)  # read once, for every step of the request
        self._check_owner(message, stored, operation)
        if operation == "Renew":
            return self.handle_renew(message, version, subscription_id, stored)
        if operation == "GetStatus":
            return self.handle_get_status(message, version, subscription_id, stored)
        return self.handle_unsubscribe(message, version, subscription_id, stored)

    def _check_owner(self, message: IncomingMessage, subscription: Subscription | None,
                     operation: str) -> None:
        """Renew, GetStatus and Unsubscribe of a subscription a principal made come from
        that principal, the network, or an admin of its topic (wsframework.access)."""
        access = self.service.access
        message.principal = access.acting(message, access.principal(message))
        if subscription is not None and not access.may_manage(message.principal,
                                                              subscription.owner,
                                                              subscription.topic):
            raise AccessDenied(f"{operation}: the subscription belongs to another principal")

    def _topic_entry(self, message: IncomingMessage) -> NamespaceEntry:
        name = self.topics.name_from_path(message.path) or ""
        resolved = self.topics.resolve(name) if name else None
        if resolved is None or resolved[1]:
            to = message.addressing.to if message.addressing and message.addressing.to else message.address
            raise wsa.destination_unreachable(message.wsa_version, to)
        return resolved[0]

    # == publication =======================================================================
    def handle_publication(self, message: IncomingMessage) -> None:
        entry = self._topic_entry(message)
        if message.body is None:
            raise sender_fault("a publication needs the event as the body's element")
        action = message.action if message.action and message.action != PUBLISH_ACTION \
            else self.default_action(entry)
        # The event becomes the root of its own document: absolute paths in filters
        # (``/q:quote``) then start at the event, not at the SOAP envelope.
        published = self.publish_many(entry, [copy.deepcopy(message.body)], action=action)
        if published.refused:
            raise RefusedEvent(f"event refused: {published.refused[0]}")
        return None

    def publish(self, entry: NamespaceEntry, event: etree._Element, action: str) -> int:
        """:meth:`publish_many` of one event; returns how many notifications were queued."""
        return self.publish_many(entry, [event], action=action).queued

    def publish_many(self, entry: NamespaceEntry, events: list[etree._Element], *,
                     action: str | None = None,
                     position: tuple[str | None, int | None] | None = None) -> Published:
        """Publish ``events`` to ``entry``'s subscriptions (the one path of every
        publication: :meth:`.publication.Publication.publish_many`); ``action`` defaults
        to the topic's, ``position`` is the dispatcher's and its first event's sequence
        number."""
        return self.publication.publish_many(
            entry, events, action=action if action is not None else self.default_action(entry),
            position=position)

    def _struck_out(self, ended: Subscription, reason: str, strikes: int) -> None:
        """This process ended a subscription whose filter reached ``filter_strikes``
        (:mod:`.strikes`). The status is SourceCancelling: the source ends it for a reason
        of its own (DeliveryFailure would blame the sink, which did nothing wrong)."""
        self._end([ended], END_CANCELLING,
                  f"the subscription's filter failed or overran its time budget on "
                  f"{strikes} events (last: {reason})")

    # == following the store and the namespace =============================================
    def sync(self) -> bool:
        """Apply changes other processes committed; True if there were any."""
        return self.view.sync()

    def _load(self) -> None:
        with collection_paused():
            loaded = self.view.load()
            if len(self.view) >= SETTLE_AFTER_LOADING:
                # while the collector is still off: its first pass once on would walk every
                # object the load made (the youngest generation), a second full pass
                settle_after_load()
        for topic_uid in loaded.gone_topics:
            self._end(self.store.end_topic(topic_uid, END_CANCELLING), END_CANCELLING,
                      "the topic no longer exists")
        if loaded.refused:
            self._end_refused(loaded.refused)
        log.info("event source loaded %d active subscriptions", len(self.view))

    def _end_refused(self, refused: dict[str, RefusedFilter]) -> None:
        """End the loaded subscriptions whose stored filters this process's filter limits
        refuse (lowered since they were accepted): kept, they would match nothing while
        their subscribers wait. SubscriptionEnd (SourceCancelling) tells each why; another
        worker may end them first, and then that one tells. A filter of a dialect no
        matcher here knows is only logged: a plugin missing from this installation (a
        broken environment, one host of a shared store set up wrong) must not end
        subscriptions that a complete one serves."""
        unknown = {i: r for i, r in refused.items() if isinstance(r.error, UnsupportedDialect)}
        if unknown:
            first_id, first = next(iter(unknown.items()))
            log.error("%d stored subscription(s) have filters of a dialect no matcher here "
                      "knows (e.g. %s: %s): they match nothing until the plugin is back",
                      len(unknown), first_id, first)
        refused = {i: r for i, r in refused.items() if i not in unknown}
        if not refused:
            return
        first_id, first = next(iter(refused.items()))
        log.warning("%d stored subscription(s) have filters over this source's filter limits "
                    "(e.g. %s: %s): ending them", len(refused), first_id, first)
        for subscription in self.store.end_many(list(refused), END_CANCELLING):
            self.view.apply(subscription, local=True)
            why = str(refused[subscription.id])  # a compiler's message may quote the filter
            self.send_subscription_end(subscription, END_CANCELLING,
                                       f"the filter is no longer accepted here: "
                                       f"{why[:_REASON_SHOWN]}")

    def _on_topic_change(self, event: str, entry: NamespaceEntry) -> None:
        if event == "added":
            self.view.topic_added(entry)
        elif event == "removed":
            self.view.topic_removed(entry)
            ended = self.store.end_topic(entry.uid, END_CANCELLING)
            self._end(ended, END_CANCELLING, f"the topic {entry.name} was deleted")

    # == ending subscriptions ==============================================================
    def _end(self, ended: Iterable[Subscription], status: str, reason: str) -> None:
        """Take subscriptions this process ended (it won the conditional UPDATE) out of the
        view and tell their EndTo."""
        for subscription in ended:
            self.view.apply(subscription, local=True)
            self.send_subscription_end(subscription, status, reason)

    def send_subscription_end(self, subscription: Subscription, status: str, reason: str) -> bool:
        if subscription.end_to is None:
            return False
        version = subscription.version
        action = version.action("SubscriptionEnd")
        manager = msg.manager_epr(version, self.manager_address, subscription.id)
        body = msg.subscription_end(version, manager, status, reason)
        soap = SoapVersion(subscription.soap_version)
        payload = build_envelope(soap, body, request_headers(version.wsa, subscription.end_to, action))
        log.info("subscription %s ended (%s): %s", subscription.id, status, reason)
        return self.deliverer.submit(Delivery(subscription.end_to.address, soap.content_type,
                                              action, payload=payload,
                                              subscription_id=subscription.id,
                                              kind=SUBSCRIPTION_END))

    def _delivery_failed(self, job: Delivery) -> None:
        """A notification was given up on (:mod:`.outbox_deliveries`): its subscription
        ends with SubscriptionEnd/DeliveryFailure."""
        ended = self.store.end(job.subscription_id, END_DELIVERY_FAILURE)
        if ended is not None:
            self._end([ended], END_DELIVERY_FAILURE,
                      f"notifications to {job.url} failed: {job.last_error}")

    # == expiry ============================================================================
    def sweep(self, now: float | None = None) -> int:
        """End expired subscriptions (no SubscriptionEnd: the subscriber knew the deadline)
        and catch up with other processes; returns how many this call expired."""
        self.topics.sync()
        expired = self.store.expire_due(self.clock() if now is None else now)
        for subscription in expired:
            self.view.apply(subscription, local=True)
        self.sync()
        try:
            self.recover_outbox()
        except Exception:
            log.exception("outbox sweep failed")
        return len(expired)

    def _sweep_loop(self) -> None:
        last_purge = 0.0
        while not self._stop.wait(self.settings.sweep_interval):
            try:
                self.sweep()
                now = time.monotonic()
                if now - last_purge > _HOUSEKEEPING_INTERVAL:
                    last_purge = now
                    self.housekeeping()
            except Exception:
                log.exception("expiry sweep failed")

    def housekeeping(self, *, forget_after: float = 3600.0) -> None:
        """Purge long-terminal rows from the store and forget ended subscriptions this
        process has not heard about for ``forget_after`` seconds; drop the NotifyWhen L of
        subscriptions that are no longer active."""
        self.store.purge(self.clock() - self.settings.purge_after)
        self.notify_state.purge()
        self.view.forget_gone(time.monotonic() - forget_after)

    # == reporting and shutdown ============================================================
    @property
    def counters(self) -> dict[str, int]:
        stats = self.deliverer.stats()
        stats["subscriptions"] = len(self.view)
        stats["published"] = self.publication.published
        stats["filter_failures"] = self.strikes.failures
        stats.update(self.notify_gate.counts)
        stats.update(self.outbox.stats())
        return stats

    def close(self) -> None:
        """Stop the sweeper; end every active subscription with SubscriptionEnd/
        SourceShuttingDown (unless ``keep_subscriptions_on_shutdown``); finish deliveries."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=5)
        if not self.settings.keep_subscriptions_on_shutdown:
            try:
                self._end(self.store.end_all(END_SHUTTING_DOWN), END_SHUTTING_DOWN,
                          "the event source is shutting down")
            except Exception:
                log.exception("ending subscriptions at shutdown failed")
        self.deliverer.close(self.settings.delivery_timeout)
        if self._own_delivery_transport is not None:
            self._own_delivery_transport.close()
        try:
            self.outbox.flush()
        except Exception:
            log.exception("deleting delivered outbox rows at shutdown failed")


@functools.lru_cache(maxsize=None)
def _subscribe_actions() -> frozenset[str]:
    return frozenset({V2004.action("Subscribe"), V2011.action("Subscribe")})
