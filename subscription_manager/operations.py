"""Subscribe, Renew, GetStatus and Unsubscribe: the WS-Eventing operations of the event
source (both versions), a part of :class:`~subscription_manager.manager.SubscriptionManager`.

Each operation parses its request (:mod:`.messages`), decides against the durable store
(:mod:`.store`, conditional transitions), takes the committed row into the process's view
(:mod:`.view`) and answers; the reply is sent only after the change is committed, so
``kill -9`` loses nothing acknowledged. Refusals are precise exceptions (:mod:`.exceptions`,
:mod:`.expiry`) that the messaging edge answers with the version's fault.

The manager's ``handle_*`` methods call it (a subclass overrides those: the EDN manager
places and forwards, and calls them through ``super()``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import uuid
from typing import Callable

from wsframework import addressing as wsa
from wsframework.addressing import EndpointReference
from wsframework.canonical import canonical_xml
from wsframework.exceptions import SoapFault
from wsframework.faults import fault_for, translation_for
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry
from wsframework.urlpolicy import UrlPolicy, UrlRefused

from . import messages as msg
from .exceptions import RefusedEndpoint, TooManySubscriptions, UnknownSubscription
from .expiry import ExpiryPolicy, ExpiryRequest, Grant
from .notify_when import status_element
from .notify_state import NotifyState
from .settings import EventingSettings
from .store import DuplicateRequest, LimitReached, Subscription, SubscriptionStore
from .versions import EventingVersion, check_pairing
from .view import SubscriptionView

log = logging.getLogger(__name__)

__all__ = ["SubscriptionOperations", "request_key", "MAX_MESSAGE_ID", "Made", "Refused"]

#: the longest wsa:MessageID that makes a Subscribe idempotent; a longer one is accepted but
#: not remembered (every copy of such a request makes its own subscription)
MAX_MESSAGE_ID = 256


def request_key(message: IncomingMessage, topic: str) -> str | None:
    """The idempotency key of a Subscribe: a digest of the topic, the wsa:MessageID and the
    whole Subscribe body (exclusive C14N: NotifyTo, EndTo, filter, expiry, format). None
    without a MessageID, or with one longer than :data:`MAX_MESSAGE_ID` characters.

    ``topic`` is the topic's uid for the store's key (a topic deleted and created again is
    another topic), its name for the placement key an EDN server settles the request's
    server under (the name is the same on every server, the uid is each server's own).

    A repeated request (a client's retry, a forward retried after a timeout) has the same
    key; another client that reuses a MessageID it saw has another NotifyTo, or another
    filter or expiry, so another key: it gets its own subscription, never learns the
    first one's identifier. Only the digest is stored (64 characters, whatever was sent)."""
    message_id = message.addressing.message_id if message.addressing is not None else None
    if not message_id or len(message_id) > MAX_MESSAGE_ID or message.body is None:
        return None
    digest = hashlib.sha256()
    for part in (topic.encode(), message_id.encode("utf-8", "replace"), canonical_xml(message.body)):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _owner(message: IncomingMessage) -> str | None:
    """The principal a new subscription belongs to (None: its identifier alone manages it)."""
    principal = message.principal
    return principal if principal and not principal.startswith("#") else None


def _without_request_element(subscription: Subscription) -> Subscription:
    """``subscription`` with its filter's ``content`` (the request's ``wse:Filter``
    element, which would keep the whole request document alive) dropped."""
    spec = subscription.filter
    if spec is None or spec.content is None:
        return subscription
    return dataclasses.replace(subscription, filter=spec.without_content())


@dataclasses.dataclass(frozen=True)
class Made:
    """A subscription a bulk subscribe made: its identifier and the expiry granted (as a
    SubscribeResponse renders it; None: none)."""

    id: str
    expires: str | None
    #: the subscription manager's address when another server holds it (a placed bulk
    #: subscribe); None: the one addressed
    manager: str | None = None


@dataclasses.dataclass(frozen=True)
class Refused:
    """A request of a bulk subscribe refused: the fault a Subscribe would have got, its
    reason cut to :data:`MAX_REFUSAL_REASON` characters (a reason may quote the request's
    filter, and one answer carries up to 10,000 of them)."""

    code: str
    reason: str

    @classmethod
    def of(cls, fault: SoapFault) -> "Refused":
        reason = fault.reason or ""
        if len(reason) > MAX_REFUSAL_REASON:
            reason = reason[:MAX_REFUSAL_REASON - 1] + "\u2026"
        return cls(fault.subcode or fault.code, reason)


MAX_REFUSAL_REASON = 240


class SubscriptionOperations:
    """The four operations over ``store`` (durable subscriptions) and ``view`` (this
    process's); ``notify_state``: NotifyWhen's L (GetStatus reports it); ``settings``: the
    subscription limits; ``expiry_policy``: the grants; ``targets``: the address policy
    NotifyTo and EndTo must pass; ``manager_address``: the subscription manager's address
    (in the EPRs answered); ``topic_entry(message)``: the topic a message is addressed to."""

    def __init__(self, store: SubscriptionStore, view: SubscriptionView, *,
                 notify_state: NotifyState, settings: EventingSettings,
                 expiry_policy: ExpiryPolicy, targets: UrlPolicy, manager_address: str,
                 topic_entry: Callable[[IncomingMessage], NamespaceEntry], clock):
        self.store = store
        self.view = view
        self.notify_state = notify_state
        self.settings = settings
        self.expiry_policy = expiry_policy
        self.targets = targets
        self.manager_address = manager_address
        self._topic_entry = topic_entry
        self.clock = clock

    # == Subscribe =========================================================================
    def subscribe(self, message: IncomingMessage, version: EventingVersion) -> Reply:
        version = check_pairing(version, message.wsa_version)
        if message.action != version.action("Subscribe"):
            raise wsa.action_not_supported(message.wsa_version, message.action)
        entry = self._topic_entry(message)
        request = msg.parse_subscribe(message.body, version)
        self._check_targets(version, request.notify_to, request.end_to)
        now = self.clock()
        key = request_key(message, entry.uid)
        existing = self.store.by_request_key(key, now) if key is not None else None
        if existing is not None:
            return self._repeated_subscribe(version, existing, now)
        grant = self._grant(version, request.expires, now)
        subscription = Subscription(
            id=uuid.uuid4().hex, topic=entry.name, topic_uid=entry.uid, version=version,
            soap_version=message.soap_version.value, filter=request.filter,
            notify_to=request.notify_to, end_to=request.end_to, format=request.format,
            expires=grant.expires, expires_kind=grant.kind, created=now,
            notify_when=request.notify_when, owner=_owner(message))
        try:
            stored = self.create_subscription(entry, subscription, request_key=key)
        except DuplicateRequest as duplicate:  # a copy of this request won the race
            return self._repeated_subscribe(version, duplicate.existing, now)
        manager = msg.manager_epr(version, self.manager_address, stored.id)
        log.info("subscription %s to %s (%s) notifies %s", stored.id, entry.name, version,
                 stored.notify_to.address)
        return Reply(version.action("SubscribeResponse"),
                     msg.subscribe_response(version, manager, self._render_grant(version, grant, now)))

    def _repeated_subscribe(self, version: EventingVersion, existing: Subscription,
                            now: float) -> Reply:
        """The answer to a Subscribe made before (same idempotency key): the existing
        subscription's manager and its current expiry; nothing is created or renewed."""
        log.info("repeated Subscribe: subscription %s already exists", existing.id)
        manager = msg.manager_epr(version, self.manager_address, existing.id)
        grant = Grant(existing.expires, existing.expires_kind)
        return Reply(version.action("SubscribeResponse"),
                     msg.subscribe_response(version, manager, self._render_grant(version, grant, now)))

    def create_subscription(self, entry: NamespaceEntry, subscription: Subscription, *,
                            request_key: str | None = None) -> Subscription:
        """Check the subscription limits (cheaply, before compiling anything), install the
        filter (validating it), store durably (the limits decided in the insert's
        transaction), then take it into the view.

        What the process keeps is the filter without its ``content`` (the request's
        ``wse:Filter`` element, which kept the whole request document alive for as long as
        the subscription: about 4 KB each); the matcher sees the element while it installs
        the filter, and rows read back from the store never carry it anyway."""
        limits = self.settings.subscription_limits()
        now = self.clock()
        try:
            self.store.check_limits(subscription, limits, now)
        except LimitReached as reached:
            raise TooManySubscriptions(subscription.version, reached.scope, reached.limit) from None
        self.view.install(entry, subscription)
        subscription = _without_request_element(subscription)
        try:
            stored = self.store.insert(subscription, limits, now, request_key=request_key,
                                       packed_filter=self.view.packed_filter(subscription.id))
        except LimitReached as reached:  # another worker took the last place meanwhile
            self.view.uninstall(subscription.id)
            raise TooManySubscriptions(subscription.version, reached.scope, reached.limit) from None
        except BaseException:
            self.view.uninstall(subscription.id)
            raise
        self.view.committed(stored)
        return stored

    def subscribe_many(self, entry: NamespaceEntry, version: EventingVersion,
                       bodies: list, *, soap_version: str) -> list[Made | Refused]:
        """Subscribe each of ``bodies`` (``wse:Subscribe`` elements of ``version``) to
        ``entry``, validated and limited as one Subscribe each, and stored in one
        transaction: one answer per body, in order. The subscriptions deliver in
        ``soap_version`` and belong to no principal (their identifiers manage them); a body
        repeated makes another subscription (there is no wsa:MessageID to recognise it by)."""
        now = self.clock()
        answers: list[Made | Refused | None] = [None] * len(bodies)
        parsed: list[tuple[int, Subscription, Grant]] = []
        for index, body in enumerate(bodies):
            try:
                subscription, grant = self._bulk_request(entry, version, body, now,
                                                         soap_version)
            except Exception as exc:
                if not isinstance(exc, SoapFault) and translation_for(exc) is None:
                    raise  # no refusal: a failure of this service's
                answers[index] = Refused.of(fault_for(exc))
                continue
            # one FilterSpec, without the request's element, for the row, the view and
            # the matcher
            parsed.append((index, _without_request_element(subscription), grant))
        refusals = self.view.install_many(entry, [s for _, s, _ in parsed])
        pending = []
        for index, subscription, grant in parsed:
            if subscription.id in refusals:
                answers[index] = Refused.of(fault_for(refusals[subscription.id]))
            else:
                pending.append((index, subscription, grant))
        try:
            stored, refused = self.store.insert_many(
                [s for _, s, _ in pending], self.settings.subscription_limits(), now,
                {s.id: self.view.packed_filter(s.id) for _, s, _ in pending})
        except BaseException:
            for _, subscription, _ in pending:
                self.view.uninstall(subscription.id)
            raise
        by_id = {s.id: s for s in stored}
        for index, subscription, grant in pending:
            if subscription.id in refused:
                self.view.uninstall(subscription.id)
                reached = refused[subscription.id]
                answers[index] = Refused.of(fault_for(TooManySubscriptions(
                    version, reached.scope, reached.limit)))
                continue
            self.view.committed(by_id[subscription.id])  # in seq order, as committed
            answers[index] = Made(subscription.id, self._render_grant(version, grant, now))
        log.info("bulk subscribe to %s: %d made, %d refused", entry.name, len(stored),
                 len(bodies) - len(stored))
        return answers

    def _bulk_request(self, entry: NamespaceEntry, version: EventingVersion, body, now: float,
                      soap_version: str) -> tuple[Subscription, Grant]:
        """One request of a bulk subscribe checked as a Subscribe is (but for its filter,
        which the matcher checks with the others): the subscription and its grant; the
        refusal a Subscribe would get."""
        if body.tag != version.q("Subscribe"):
            raise version.faults.invalid_message(
                f"a bulk subscribe's request is a {version.q('Subscribe')} element")
        request = msg.parse_subscribe(body, version)
        self._check_targets(version, request.notify_to, request.end_to)
        grant = self._grant(version, request.expires, now)
        subscription = Subscription(
            id=uuid.uuid4().hex, topic=entry.name, topic_uid=entry.uid, version=version,
            soap_version=soap_version, filter=request.filter, notify_to=request.notify_to,
            end_to=request.end_to, format=request.format, expires=grant.expires,
            expires_kind=grant.kind, created=now, notify_when=request.notify_when, owner=None)
        return subscription, grant

    def _check_targets(self, version: EventingVersion, *eprs: EndpointReference | None) -> None:
        for epr in eprs:
            if epr is None:
                continue
            try:
                self.targets.check(epr.address)
            except UrlRefused as refused:  # the same refusal is no fault to a delivery
                raise RefusedEndpoint(version, epr.address, refused.reason) from None

    def _grant(self, version: EventingVersion, request: ExpiryRequest, now: float) -> Grant:
        return self.expiry_policy.grant(request, now, version=version.family)

    @staticmethod
    def _render_grant(version: EventingVersion, grant: Grant, now: float) -> str | None:
        return grant.render(now, infinite=None if version.is_2004 else "PT0S")

    # == Renew / GetStatus / Unsubscribe ===================================================
    @staticmethod
    def _current(version: EventingVersion, subscription_id: str, operation: str, now: float,
                 current: Subscription | None) -> Subscription:
        """``current`` (the subscription's stored row as the request read it) when it is
        active and unexpired, in the request's eventing version family."""
        # Any pairing of the subscription's eventing version may manage it; the answer is in
        # the request's addressing version.
        if (current is None or current.version.family != version.family or not current.is_active
                or current.expired_at(now)):
            raise UnknownSubscription(version, subscription_id, operation)
        return current

    def renew(self, message, version: EventingVersion, subscription_id: str,
              stored: Subscription | None) -> Reply:
        request = msg.parse_renew(message.body, version)
        now = self.clock()
        self._current(version, subscription_id, "Renew", now, stored)
        grant = self._grant(version, request.expires, now)
        renewed = self.store.renew(subscription_id, grant.expires, grant.kind, now)
        if renewed is None:  # lost a race with Unsubscribe, the sweeper or a delivery failure
            raise UnknownSubscription(version, subscription_id, "Renew")
        self.view.committed(renewed)
        return Reply(version.action("RenewResponse"),
                     msg.renew_response(version, self._render_grant(version, grant, now)))

    def get_status(self, message, version: EventingVersion, subscription_id: str,
                   stored: Subscription | None) -> Reply:
        now = self.clock()
        current = self._current(version, subscription_id, "GetStatus", now, stored)
        grant = Grant(current.expires, current.expires_kind)
        extensions = ()
        if current.notify_when is not None:  # L, as committed with its notification
            extensions = (status_element(self.notify_state.last_value(current.id)[0]),)
        return Reply(version.action("GetStatusResponse"),
                     msg.get_status_response(version, self._render_grant(version, grant, now),
                                             extensions))

    def unsubscribe(self, message, version: EventingVersion, subscription_id: str,
                    stored: Subscription | None) -> Reply:
        now = self.clock()
        self._current(version, subscription_id, "Unsubscribe", now, stored)
        gone = self.store.unsubscribe(subscription_id, now)
        if gone is None:
            raise UnknownSubscription(version, subscription_id, "Unsubscribe")
        self.view.committed(gone)
        log.info("subscription %s unsubscribed", subscription_id)
        return Reply(version.action("UnsubscribeResponse"), msg.unsubscribe_response(version))
