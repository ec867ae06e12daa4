"""The base subscription manager (paper Fig. 11): a standalone WS-Eventing event source.

Addresses (``{base}`` is the service's base URL):

* ``{base}/topics/T`` -- the event source for topic T. ``wse:Subscribe`` (either version)
  creates a subscription; any other message is a publication: its body is the event.
* ``{base}/subscriptions`` -- the subscription manager (Renew, GetStatus, Unsubscribe),
  the subscription named by a reference parameter: ``wse:Identifier`` (2004/08) or
  ``evt:SubscriptionId`` in ``urn:wsframework:eventing`` (2011).

Each process keeps an in-memory view: the active subscriptions, their filters installed in
their topic's matcher (``entry.matcher`` from the namespace, or :meth:`matcher_for`), and a
pre-rendered notification template each. The durable store is the truth that every worker
process follows (:meth:`sync`, checked at the start of each request and by the sweeper);
a change is committed before the reply is sent, so ``kill -9`` loses nothing acknowledged.

Publication does no SQL and compiles nothing: match (under a shared read lock), serialize
the event once, hand one small job per matching subscription to the delivery queue.

Extension points for subclasses (the EDN subscription manager):

* :meth:`matcher_for` -- the matcher that holds a topic's filters;
* :meth:`on_subscription_added` / :meth:`on_subscription_removed` -- the in-memory view
  changed (``local`` says whether this process made the change or learned it from the
  store);
* :meth:`on_event_matched` -- see and edit the matched subscription ids of an event;
* :meth:`deliver` -- how an event's notifications leave (default: the push delivery queue).

The view is loaded during construction, so hooks may fire inside ``__init__``: a subclass
sets up what its hooks need *before* calling ``super().__init__``. Hooks run outside the
manager's own locks (possibly under the namespace's, when a topic change ends
subscriptions), in whichever thread made or learned the change.
"""
from __future__ import annotations

import copy
import functools
import logging
import threading
import time
import uuid
from typing import Iterable

from lxml import etree

from matchers import InvalidFilter, Matcher, UnsupportedDialect
from wsframework import addressing as wsa
from wsframework.addressing import EndpointReference, request_headers
from wsframework.exceptions import SENDER, SoapFault
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from wsframework.namespace import NamespaceEntry, UnknownEntry
from wsframework.publisher import PUBLISH_ACTION
from wsframework.settings import Settings, read_settings
from wsframework.soap import SoapVersion, build_envelope

from . import messages as msg
from .delivery import NOTIFICATION, SUBSCRIPTION_END, Delivery, Deliverer
from .exceptions import RefusedEndpoint, RefusedFilter, UnknownSubscription
from .expiry import Grant
from .notifications import NotificationTemplate, notification_action
from .rwlock import RWLock
from .settings import EventingSettings
from .store import Subscription, SubscriptionStore
from .targets import TargetPolicy, TargetRefused
from .versions import (END_CANCELLING, END_DELIVERY_FAILURE, END_SHUTTING_DOWN, V2004, V2011,
                       EventingVersion, check_pairing, version_of)

log = logging.getLogger(__name__)

__all__ = ["SubscriptionManager", "MANAGER_PATH"]

MANAGER_PATH = "/subscriptions"
TOPICS_PREFIX = "/topics/"
_HOUSEKEEPING_INTERVAL = 600.0


class SubscriptionManager:
    """Event source and subscription manager for every topic of ``service.topics``."""

    def __init__(self, service, *, resolver=None, clock=time.time, settings=None,
                 settings_groups: tuple[type[Settings], ...] = (), start_sweeper: bool = True):
        """``settings`` override ``service.config.settings``; the merged mapping is read into
        :class:`EventingSettings` and the role's other ``settings_groups`` (the server's
        EdnSettings), and a key none of them knows is refused."""
        self.service = service
        merged = dict(service.config.settings or {})
        merged.update(settings or {})
        groups = tuple(dict.fromkeys((EventingSettings, *settings_groups)))
        self.settings = read_settings(merged, *groups)[0]
        self.topics = service.topics
        self.clock = clock
        self.store = SubscriptionStore(service.store)
        self.expiry_policy = self.settings.expiry_policy()
        self.targets = TargetPolicy(allow_private=self.settings.allow_private,
                                    allow_loopback=self.settings.allow_loopback,
                                    resolver=resolver, cache_ttl=self.settings.target_cache_ttl)
        self.deliverer = Deliverer(service.transport, self.settings.delivery_policy(),
                                   check_target=self.targets.check, is_wanted=self._is_wanted,
                                   on_give_up=self._gave_up)
        self.manager_address = service.base_url + MANAGER_PATH

        self._rw = RWLock()
        self._subscriptions: dict[str, Subscription] = {}
        self._templates: dict[str, NotificationTemplate] = {}
        # What each topic's matcher holds for us: id -> (topic uid, filter spec or None,
        # the matcher holding the filter or None).
        self._installed: dict[str, tuple[str, object, Matcher | None]] = {}
        self._unfiltered: dict[str, dict[str, None]] = {}
        # Subscriptions that left the view: id -> (seq, when), so a late, older row (a slow
        # request thread applying what it stored) cannot bring one back. Pruned by the sweeper.
        self._gone: dict[str, tuple[int, float]] = {}
        self._sync_lock = threading.Lock()
        self._applied = -1
        self._published = 0
        self._stop = threading.Event()
        self._closed = False

        self._register_routes(service.messaging)
        self.topics.on_change(self._on_topic_change)
        self._load()
        self._sweeper = None
        if start_sweeper and self.settings.sweep_interval > 0:
            self._sweeper = threading.Thread(target=self._sweep_loop, name="eventing-sweeper",
                                             daemon=True)
            self._sweeper.start()
        service.add_component(self)
        self._register_wsdl()

    # == extension points ==================================================================
    def matcher_for(self, entry: NamespaceEntry) -> Matcher:
        """The matcher holding ``entry``'s subscription filters."""
        return entry.matcher

    def on_subscription_added(self, subscription: Subscription, *, local: bool) -> None:
        """Called (outside locks) when a subscription enters this process's view."""

    def on_subscription_removed(self, subscription: Subscription, *, local: bool) -> None:
        """Called (outside locks) when a subscription leaves this process's view; its
        ``status`` says why (expired, unsubscribed, ended)."""

    def on_event_matched(self, entry: NamespaceEntry, event: etree._Element, action: str,
                         subscription_ids: list[str]) -> list[str]:
        """The ids an event matched; return the ids to notify (default: all of them)."""
        return subscription_ids

    def deliver(self, subscriptions: list[Subscription], action: str, event: bytes) -> int:
        """Send one notification of ``event`` (serialized) to each subscription; returns how
        many were queued. The whole fan-out is queued in one step."""
        jobs = []
        for subscription in subscriptions:
            template = self._templates.get(subscription.id)
            if template is not None:
                jobs.append(Delivery(
                    template.url, template.content_type,
                    notification_action(subscription, action),
                    render=functools.partial(template.render, action, event),
                    subscription_id=subscription.id, kind=NOTIFICATION))
        return self.deliverer.submit_many(jobs) if jobs else 0

    def default_action(self, entry: NamespaceEntry) -> str:
        """The notification action of an event published without its own action."""
        return self.topics.address_of(entry.name) + "/Event"

    # == routes ============================================================================
    def _register_routes(self, messaging) -> None:
        messaging.route("eventing.topics", MessageFilter(path_prefix=TOPICS_PREFIX),
                        self._on_topic_message, priority=10)
        messaging.route("eventing.manager", MessageFilter(path=MANAGER_PATH),
                        self._on_manager_message, priority=10)

    def _on_topic_message(self, message: IncomingMessage) -> Reply | None:
        self.sync()
        version = version_of(message.body)
        if version is not None or message.action in _subscribe_actions():
            if version is None or etree.QName(message.body).localname != "Subscribe":
                raise wsa.action_not_supported(message.wsa_version, message.action)
            return self.handle_subscribe(message, version)
        return self.handle_publication(message)

    def _on_manager_message(self, message: IncomingMessage) -> Reply:
        self.sync()
        version = version_of(message.body)
        operation = etree.QName(message.body).localname if version is not None else None
        if operation not in msg.OPERATIONS:
            raise wsa.action_not_supported(message.wsa_version, message.action)
        check_pairing(version, message.wsa_version)
        if message.action != version.action(operation):
            raise wsa.action_not_supported(message.wsa_version, message.action)
        subscription_id = msg.subscription_id_from(
            version, message.reference_parameter(version.identifier_tag))
        if subscription_id is None:
            raise UnknownSubscription(version, None, operation)
        if operation == "Renew":
            return self.handle_renew(message, version, subscription_id)
        if operation == "GetStatus":
            return self.handle_get_status(message, version, subscription_id)
        return self.handle_unsubscribe(message, version, subscription_id)

    def _topic_entry(self, message: IncomingMessage) -> NamespaceEntry:
        name = self.topics.name_from_path(message.path) or ""
        resolved = self.topics.resolve(name) if name else None
        if resolved is None or resolved[1]:
            to = message.addressing.to if message.addressing and message.addressing.to else message.address
            raise wsa.destination_unreachable(message.wsa_version, to)
        return resolved[0]

    # == Subscribe =========================================================================
    def handle_subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        check_pairing(version, message.wsa_version)
        if message.action != version.action("Subscribe"):
            raise wsa.action_not_supported(message.wsa_version, message.action)
        entry = self._topic_entry(message)
        request = msg.parse_subscribe(message.body, version)
        self._check_targets(version, request.notify_to, request.end_to)
        now = self.clock()
        grant = self._grant(version, request.expires, now)
        subscription = Subscription(
            id=uuid.uuid4().hex, topic=entry.name, topic_uid=entry.uid, version=version,
            soap_version=message.soap_version.value, filter=request.filter,
            notify_to=request.notify_to, end_to=request.end_to, format=request.format,
            expires=grant.expires, expires_kind=grant.kind, created=now)
        stored = self.create_subscription(entry, subscription)
        manager = msg.manager_epr(version, self.manager_address, stored.id)
        log.info("subscription %s to %s (%s) notifies %s", stored.id, entry.name, version,
                 stored.notify_to.address)
        return Reply(version.action("SubscribeResponse"),
                     msg.subscribe_response(version, manager, self._render_grant(version, grant, now)))

    def create_subscription(self, entry: NamespaceEntry, subscription: Subscription) -> Subscription:
        """Install the filter (validating it), store durably, then take it into the view."""
        with self._rw.write():
            self._install(entry, subscription)
        try:
            stored = self.store.insert(subscription)
        except BaseException:
            with self._rw.write():
                self._uninstall(subscription.id)
            raise
        self._advance(stored.seq)
        self._apply(stored, local=True)
        return stored

    def _check_targets(self, version: EventingVersion, *eprs: EndpointReference | None) -> None:
        for epr in eprs:
            if epr is None:
                continue
            try:
                self.targets.check(epr.address)
            except TargetRefused as refused:  # the same refusal is no fault to a delivery
                raise RefusedEndpoint(version, epr.address, refused.reason) from None

    def _grant(self, version: EventingVersion, request, now: float) -> Grant:
        return self.expiry_policy.grant(request, now, version=version.name)

    @staticmethod
    def _render_grant(version: EventingVersion, grant: Grant, now: float) -> str | None:
        return grant.render(now, infinite=None if version is V2004 else "PT0S")

    # == Renew / GetStatus / Unsubscribe ===================================================
    def _current(self, version: EventingVersion, subscription_id: str, operation: str,
                 now: float) -> Subscription:
        current = self.store.get(subscription_id)
        if (current is None or current.version is not version or not current.is_active
                or current.expired_at(now)):
            raise UnknownSubscription(version, subscription_id, operation)
        return current

    def handle_renew(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        request = msg.parse_renew(message.body, version)
        now = self.clock()
        self._current(version, subscription_id, "Renew", now)
        grant = self._grant(version, request.expires, now)
        renewed = self.store.renew(subscription_id, grant.expires, grant.kind, now)
        if renewed is None:  # lost a race with Unsubscribe, the sweeper or a delivery failure
            raise UnknownSubscription(version, subscription_id, "Renew")
        self._advance(renewed.seq)
        self._apply(renewed, local=True)
        return Reply(version.action("RenewResponse"),
                     msg.renew_response(version, self._render_grant(version, grant, now)))

    def handle_get_status(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        now = self.clock()
        current = self._current(version, subscription_id, "GetStatus", now)
        grant = Grant(current.expires, current.expires_kind)
        return Reply(version.action("GetStatusResponse"),
                     msg.get_status_response(version, self._render_grant(version, grant, now)))

    def handle_unsubscribe(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        now = self.clock()
        self._current(version, subscription_id, "Unsubscribe", now)
        gone = self.store.unsubscribe(subscription_id, now)
        if gone is None:
            raise UnknownSubscription(version, subscription_id, "Unsubscribe")
        self._advance(gone.seq)
        self._apply(gone, local=True)
        log.info("subscription %s unsubscribed", subscription_id)
        return Reply(version.action("UnsubscribeResponse"), msg.unsubscribe_response(version))

    # == publication =======================================================================
    def handle_publication(self, message: IncomingMessage) -> None:
        entry = self._topic_entry(message)
        if message.body is None:
            raise SoapFault(SENDER, "a publication needs the event as the body's element")
        action = message.action if message.action and message.action != PUBLISH_ACTION \
            else self.default_action(entry)
        # The event becomes the root of its own document: absolute paths in filters
        # (``/q:quote``) then start at the event, not at the SOAP envelope.
        self.publish(entry, copy.deepcopy(message.body), action)
        return None

    def publish(self, entry: NamespaceEntry, event: etree._Element, action: str) -> int:
        """Match ``event`` against ``entry``'s subscriptions and queue a notification for
        each match; returns how many were queued."""
        matcher = self.matcher_for(entry)
        with self._rw.read():
            ids = matcher.match(event, variables={"action": action}) if len(matcher) else []
            everything = self._unfiltered.get(entry.uid)
            if everything:
                ids = ids + list(everything)
        self._published += 1
        ids = self.on_event_matched(entry, event, action, ids)
        if not ids:
            return 0
        now = self.clock()
        subscriptions = self._subscriptions
        targets = [s for s in map(subscriptions.get, ids) if s is not None and not s.expired_at(now)]
        if not targets:
            return 0
        return self.deliver(targets, action, etree.tostring(event))

    # == the in-memory view ================================================================
    def _install(self, entry: NamespaceEntry, subscription: Subscription) -> None:
        """Put the subscription's filter into its topic's matcher (caller holds the write
        lock); :class:`RefusedFilter` if the matcher refuses it."""
        installed = self._installed.get(subscription.id)
        if installed is not None and installed[:2] == (entry.uid, subscription.filter):
            return
        if installed is not None:
            self._uninstall(subscription.id)
        spec = subscription.filter
        matcher = None
        if spec is None:
            self._unfiltered.setdefault(entry.uid, {})[subscription.id] = None
        else:
            matcher = self.matcher_for(entry)
            try:
                matcher.add_filter(subscription.id, spec)
            except (InvalidFilter, UnsupportedDialect) as exc:  # adm:InvalidRequest elsewhere
                raise RefusedFilter(subscription.version, exc) from None
        # the matcher is kept so that removal needs no topic lookup (it runs under the
        # write lock, for every expiry and unsubscribe)
        self._installed[subscription.id] = (entry.uid, spec, matcher)

    def _uninstall(self, subscription_id: str) -> None:
        installed = self._installed.pop(subscription_id, None)
        if installed is None:
            return
        topic_uid, spec, matcher = installed
        if spec is None:
            self._unfiltered.get(topic_uid, {}).pop(subscription_id, None)
        elif subscription_id in matcher:
            matcher.remove_filter(subscription_id)

    def _entry_of(self, subscription: Subscription) -> NamespaceEntry | None:
        try:
            entry = self.topics.get(subscription.topic)
        except UnknownEntry:
            return None
        return entry if entry.uid == subscription.topic_uid else None

    def _apply(self, subscription: Subscription, *, local: bool) -> None:
        """Make the view agree with one stored row (newer rows win; older ones are ignored)."""
        added = removed = None
        with self._rw.write():
            old = self._subscriptions.get(subscription.id)
            seen = old.seq if old is not None else self._gone.get(subscription.id, (None,))[0]
            if seen is not None and seen >= subscription.seq:
                return
            if subscription.is_active:
                entry = self._entry_of(subscription)
                if entry is not None:
                    try:
                        self._install(entry, subscription)
                    except RefusedFilter as refused:  # stored by a process with other plugins
                        log.error("cannot install the filter of subscription %s: %s",
                                  subscription.id, refused)
                self._subscriptions[subscription.id] = subscription
                if old is None or old.notify_to != subscription.notify_to or \
                        old.format != subscription.format:
                    self._templates[subscription.id] = NotificationTemplate(subscription)
                added = subscription if old is None else None
            else:
                self._uninstall(subscription.id)
                self._templates.pop(subscription.id, None)
                self._gone[subscription.id] = (subscription.seq, time.monotonic())
                if self._subscriptions.pop(subscription.id, None) is not None:
                    removed = subscription
        if added is not None:
            self._safely(self.on_subscription_added, added, local=local)
        if removed is not None:
            self._safely(self.on_subscription_removed, removed, local=local)

    @staticmethod
    def _safely(hook, subscription, **kwargs) -> None:
        try:
            hook(subscription, **kwargs)
        except Exception:
            log.exception("subscription hook %s failed", getattr(hook, "__name__", hook))

    def _is_wanted(self, subscription_id: str) -> bool:
        subscription = self._subscriptions.get(subscription_id)
        return subscription is not None and not subscription.expired_at(self.clock())

    # == following the store ===============================================================
    def _load(self) -> None:
        with self._sync_lock:
            generation = self.store.generation()
            active = self.store.active()
            # Topics are committed before their subscriptions: syncing the namespace after
            # reading the subscriptions means a missing topic really is gone.
            self.topics.sync()
            for subscription in active:
                self._apply(subscription, local=False)
            self._applied = generation
        live = {entry.uid for entry in self.topics.entries()}
        orphans = {s.topic_uid for s in active if s.topic_uid not in live}
        for topic_uid in orphans:
            self._end(self.store.end_topic(topic_uid, END_CANCELLING), END_CANCELLING,
                      "the topic no longer exists")
        log.info("event source loaded %d active subscriptions", len(self._subscriptions))

    def sync(self) -> bool:
        """Apply changes other processes committed; True if there were any. One indexed
        read when nothing changed."""
        generation = self.store.generation()
        if generation == self._applied:
            return False
        with self._sync_lock:
            generation = self.store.generation()
            if generation == self._applied:
                return False
            changes = self.store.changed_since(self._applied)
            for subscription in changes:
                self._apply(subscription, local=False)
            self._applied = max([generation] + [s.seq for s in changes])
        return True

    def _advance(self, seq: int) -> None:
        # Our own commit moved the generation by one; if another process committed in
        # between, stay behind so the next sync fetches its rows.
        with self._sync_lock:
            if seq == self._applied + 1:
                self._applied = seq

    def _on_topic_change(self, event: str, entry: NamespaceEntry) -> None:
        if event == "added":
            with self._rw.write():
                for subscription in list(self._subscriptions.values()):
                    if subscription.topic_uid == entry.uid:
                        try:
                            self._install(entry, subscription)
                        except RefusedFilter as refused:
                            log.error("cannot install the filter of subscription %s: %s",
                                      subscription.id, refused)
        elif event == "removed":
            with self._rw.write():
                for subscription_id, (topic_uid, _, _) in list(self._installed.items()):
                    if topic_uid == entry.uid:
                        del self._installed[subscription_id]
                self._unfiltered.pop(entry.uid, None)
            ended = self.store.end_topic(entry.uid, END_CANCELLING)
            self._end(ended, END_CANCELLING, f"the topic {entry.name} was deleted")

    # == ending subscriptions ==============================================================
    def _end(self, ended: Iterable[Subscription], status: str, reason: str) -> None:
        """Take subscriptions this process ended (it won the conditional UPDATE) out of the
        view and tell their EndTo."""
        for subscription in ended:
            self._apply(subscription, local=True)
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

    def _gave_up(self, job: Delivery) -> None:
        if job.kind != NOTIFICATION or job.subscription_id is None:
            return
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
            self._apply(subscription, local=True)
        self.sync()
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
        process has not heard about for ``forget_after`` seconds."""
        self.store.purge(self.clock() - self.settings.purge_after)
        horizon = time.monotonic() - forget_after
        with self._rw.write():
            for subscription_id in [i for i, (_, when) in self._gone.items() if when < horizon]:
                del self._gone[subscription_id]

    # == reporting and shutdown ============================================================
    @property
    def counters(self) -> dict[str, int]:
        stats = self.deliverer.stats()
        stats["subscriptions"] = len(self._subscriptions)
        stats["published"] = self._published
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

    # == WSDL ==============================================================================
    def _register_wsdl(self) -> None:
        from wsdl.eventing import register
        register(self.service, self)


@functools.lru_cache(maxsize=None)
def _subscribe_actions() -> frozenset[str]:
    return frozenset({V2004.action("Subscribe"), V2011.action("Subscribe")})
