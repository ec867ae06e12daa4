"""One process's in-memory view of the active subscriptions, following the durable store.

Theory of operation
-------------------
The store (:mod:`.store`) is the truth every worker process follows. Each process keeps a
view of it: the active subscriptions, their filters installed in their topic's matcher, and
a pre-rendered notification template each, so that publication does no SQL and compiles
nothing (:meth:`SubscriptionView.match` reads under a shared lock).

A row enters the view through :meth:`~SubscriptionView.apply`: this process's own changes
right after they are committed (``local=True``), other processes' through
:meth:`~SubscriptionView.sync`, which reads the rows stamped above the last generation it
applied. Newer rows win and older ones are ignored; a subscription that left the view is
remembered for a while (:meth:`~SubscriptionView.forget_gone` prunes it) so that a late,
older row -- a slow request thread applying what it stored -- cannot bring it back.

Topics come and go under the view: a topic created again (another process's namespace
change) gets its subscriptions' filters back; a deleted topic's filters are forgotten (the
manager ends those subscriptions in the store).

The owner's hooks (``on_added`` / ``on_removed``) run outside the view's locks, in whichever
thread made or learned the change; a failing hook is logged, not propagated.
"""
from __future__ import annotations

import logging
import threading
import time
from array import array
from typing import Callable, NamedTuple, Sequence

from wsframework.matching import (FilterFailures, FilterSpec, InvalidFilter, Matcher,
                                  UnsupportedDialect)
from wsframework.matching.limits import FilterLimits, check_filter_limits
from wsframework.matching.packed_forms import PackedForms
from wsframework.namespace import NamespaceEntry, UnknownEntry

from .exceptions import RefusedFilter
from .messages import WRAP
from .notifications import (NotificationTemplate, reference_parameters, shared_template,
                            template_for)
from .rwlock import RWLock
from .store import Subscription, SubscriptionStore

log = logging.getLogger(__name__)

__all__ = ["SubscriptionView"]

Hook = Callable[..., None]  # hook(subscription, *, local: bool)


class Loaded(NamedTuple):
    """What :meth:`SubscriptionView.load` found for its owner to act on."""
    gone_topics: set[str]  # uids of topics that hold active rows but no longer exist
    refused: dict[str, RefusedFilter]  # id -> why this process refuses its stored filter


class SubscriptionView:
    """The active subscriptions of ``store`` on ``topics``, with their filters installed in
    ``matcher_for(entry)``; ``on_added(subscription, local=...)`` / ``on_removed`` hear about
    subscriptions entering and leaving."""

    def __init__(self, store: SubscriptionStore, topics, *,
                 matcher_for: Callable[[NamespaceEntry], Matcher],
                 on_added: Hook, on_removed: Hook, filter_limits: FilterLimits | None = None):
        self.store = store
        self.topics = topics
        self._matcher_for = matcher_for
        self._on_added = on_added
        self._on_removed = on_removed
        self.filter_limits = filter_limits or FilterLimits()
        self.lock = RWLock()
        self.subscriptions: dict[str, Subscription] = {}
        # the templates of subscriptions whose NotifyTo carries reference parameters; the
        # others share one per SOAP and WS-Addressing version and format (template_of)
        self.templates: dict[str, NotificationTemplate] = {}
        # What each topic's matcher holds for us: id -> the subscription itself, where the
        # matcher holds its filter as it is (no object apiece: a server holds a million),
        # else an _Installed; and topic uid -> the matcher holding its filters, so that
        # removal needs no topic lookup (it runs under the write lock, for every expiry and
        # unsubscribe).
        self._installed: dict[str, Subscription | _Installed] = {}
        self._topic_matchers: dict[str, Matcher] = {}
        self._unfiltered: dict[str, dict[str, None]] = {}
        # Subscriptions that left the view: id -> (seq, when).
        self._gone: dict[str, tuple[int, float]] = {}
        self._sync_lock = threading.Lock()
        self._applied = -1

    def __len__(self) -> int:
        return len(self.subscriptions)

    # -- matching ----------------------------------------------------------------------------
    def match(self, entry: NamespaceEntry, events: list, action: str,
              failures: list[FilterFailures]) -> list[list[str]]:
        """Per event of ``events``, the ids of the subscriptions to ``entry`` whose filters it
        matches (and of those without a filter), in one call of the topic's matcher
        (``match_many_reporting``: an engine shares work across a batch); event ``i`` tells
        the filters that failed or overran to ``failures[i]``."""
        matcher = self._matcher_for(entry)
        with self.lock.read():
            if len(matcher):
                answers = matcher.match_many_reporting(events, failures,
                                                       variables={"action": action})
            else:
                answers = [[] for _ in events]
            everything = self._unfiltered.get(entry.uid)
            if everything:
                answers = [ids + list(everything) for ids in answers]
        return answers

    def entry_of(self, subscription: Subscription) -> NamespaceEntry | None:
        """The topic ``subscription`` belongs to, if it still exists (same uid)."""
        try:
            entry = self.topics.get(subscription.topic)
        except UnknownEntry:
            return None
        return entry if entry.uid == subscription.topic_uid else None

    def unfiltered_count(self, entry: NamespaceEntry) -> int:
        """How many of the view's subscriptions to ``entry`` have no filter (hold the read
        lock)."""
        return len(self._unfiltered.get(entry.uid, ()))

    # -- filters -----------------------------------------------------------------------------
    def install(self, entry: NamespaceEntry, subscription: Subscription) -> None:
        """Put the subscription's filter into its topic's matcher (validating it) before the
        subscription is stored; :class:`RefusedFilter` if the matcher refuses it."""
        with self.lock.write():
            self._install(entry, subscription)

    def install_many(self, entry: NamespaceEntry, subscriptions: list[Subscription],
                     packed: Sequence[bytes | None] | None = None,
                     ) -> dict[str, RefusedFilter]:
        """:meth:`install` for many new subscriptions to ``entry`` at once (the matcher's
        bulk path, :meth:`~wsframework.matching.Matcher.add_packed_filters`, given
        ``packed``: the filters' stored compiled forms, position by position); returns id ->
        :class:`RefusedFilter` for those refused, the others installed."""
        refusals: dict[str, RefusedFilter] = {}
        with self.lock.write():
            batch: list[Subscription] = []
            positions = array("q")  # each one's position in ``packed``: no object apiece
            matcher = self._matcher_for(entry)
            for position, subscription in enumerate(subscriptions):
                spec = subscription.filter
                if spec is None or subscription.id in self._installed:
                    self._install(entry, subscription)
                    continue
                try:
                    check_filter_limits(spec, self.filter_limits)
                    matcher.check_dialect(spec)
                except (InvalidFilter, UnsupportedDialect) as exc:
                    refusals[subscription.id] = RefusedFilter(subscription.version, exc)
                    continue
                batch.append(subscription)
                positions.append(position)
            self._add_batch(entry, matcher, batch, positions, packed, refusals)
        return refusals

    def _add_batch(self, entry: NamespaceEntry, matcher: Matcher, batch: list[Subscription],
                   positions: array, packed: Sequence[bytes | None] | None,
                   refusals: dict[str, RefusedFilter]) -> None:
        """``batch``'s filters in one call of the matcher's bulk path; when it refuses one
        (and so adds none), each half again, down to the refused ones. Each compiled form
        is made as the matcher reads it, so that the matcher need not hold them all."""
        try:
            if isinstance(packed, PackedForms):  # a start's: read in one buffer
                # positions rise, so as many as there are forms are all of them, in order
                forms = packed if len(positions) == len(packed) else packed.select(positions)
                matcher.add_packed_forms([s.id for s in batch], [s.filter for s in batch],
                                         forms)
            else:
                matcher.add_packed_filters(
                    (s.id, s.filter, packed[p] if packed is not None else None)
                    for s, p in zip(batch, positions))
        except (InvalidFilter, UnsupportedDialect) as exc:
            if len(batch) == 1:
                refusals[batch[0].id] = RefusedFilter(batch[0].version, exc)
                return
            half = len(batch) // 2
            self._add_batch(entry, matcher, batch[:half], positions[:half], packed, refusals)
            self._add_batch(entry, matcher, batch[half:], positions[half:], packed, refusals)
            return
        self._topic_matchers[entry.uid] = matcher
        for subscription in batch:
            self._installed[subscription.id] = _installed_record(entry, subscription)

    def packed_filter(self, subscription_id: str) -> bytes | None:
        """The installed filter's compiled form, for the store to keep beside its text
        (:meth:`~wsframework.matching.Matcher.packed_filter`); None if there is none."""
        with self.lock.read():
            matcher = self._holder(subscription_id)
            return matcher.packed_filter(subscription_id) if matcher is not None else None

    def _holder(self, subscription_id: str) -> Matcher | None:
        """The matcher holding the subscription's filter, if one does."""
        installed = self._installed.get(subscription_id)
        if installed is None or installed.filter is None:
            return None
        return self._topic_matchers.get(installed.topic_uid)

    def uninstall(self, subscription_id: str) -> None:
        with self.lock.write():
            self._uninstall(subscription_id)

    def _install(self, entry: NamespaceEntry, subscription: Subscription) -> None:
        installed = self._installed.get(subscription.id)
        if installed is not None and installed.topic_uid == entry.uid and \
                installed.filter == subscription.filter:
            if installed is not subscription:  # the newer row: the older one may go
                self._installed[subscription.id] = _installed_record(entry, subscription)
            return
        if installed is not None:
            self._uninstall(subscription.id)
        spec = subscription.filter
        matcher = None
        if spec is None:
            self._unfiltered.setdefault(entry.uid, {})[subscription.id] = None
        else:
            matcher = self._matcher_for(entry)
            try:
                # bounded before any engine compiles (and recurses over) the expression
                check_filter_limits(spec, self.filter_limits)
                matcher.add_filter(subscription.id, spec)
            except (InvalidFilter, UnsupportedDialect) as exc:  # adm:InvalidRequest elsewhere
                raise RefusedFilter(subscription.version, exc) from None
            self._topic_matchers[entry.uid] = matcher
        self._installed[subscription.id] = _installed_record(entry, subscription)

    def _uninstall(self, subscription_id: str) -> None:
        matcher = self._holder(subscription_id)
        installed = self._installed.pop(subscription_id, None)
        if installed is None:
            return
        if installed.filter is None:
            self._unfiltered.get(installed.topic_uid, {}).pop(subscription_id, None)
        elif matcher is not None and subscription_id in matcher:
            matcher.remove_filter(subscription_id)

    def _reinstall(self, entry: NamespaceEntry, subscription: Subscription) -> None:
        try:
            self._install(entry, subscription)
        except RefusedFilter as refused:  # stored by a process with other plugins
            log.error("cannot install the filter of subscription %s: %s", subscription.id,
                      refused)

    def template_of(self, subscription_id: str) -> NotificationTemplate | None:
        """The notification template of a subscription in the view, else None."""
        own = self.templates.get(subscription_id)
        if own is not None:
            return own
        subscription = self.subscriptions.get(subscription_id)
        if subscription is None:
            return None
        return shared_template(subscription.soap_version, subscription.version.wsa,
                               subscription.format == WRAP)

    def _keep_own_template(self, subscription: Subscription) -> None:
        """(Under the write lock.) Keep a template for ``subscription`` if its NotifyTo
        carries reference parameters (it then has one of its own); forget any other."""
        notify_to = subscription.notify_to
        if not (notify_to.reference_parameters or notify_to.reference_properties):
            self.templates.pop(subscription.id, None)  # (no blocks to serialize: a start
            return                                      # passes here a million times)
        params = reference_parameters(subscription)
        if params:
            self.templates[subscription.id] = template_for(subscription, params)
        else:
            self.templates.pop(subscription.id, None)

    # -- applying stored rows ----------------------------------------------------------------
    def apply(self, subscription: Subscription, *, local: bool) -> None:
        """Make the view agree with one stored row (newer rows win; older ones are ignored)."""
        added = removed = None
        with self.lock.write():
            old = self.subscriptions.get(subscription.id)
            seen = old.seq if old is not None else self._gone.get(subscription.id, (None,))[0]
            if seen is not None and seen >= subscription.seq:
                return
            if subscription.is_active:
                entry = self.entry_of(subscription)
                if entry is not None:
                    self._reinstall(entry, subscription)
                self.subscriptions[subscription.id] = subscription
                if old is None or old.notify_to != subscription.notify_to or \
                        old.format != subscription.format:
                    self._keep_own_template(subscription)
                added = subscription if old is None else None
            else:
                self._uninstall(subscription.id)
                self.templates.pop(subscription.id, None)
                self._gone[subscription.id] = (subscription.seq, time.monotonic())
                if self.subscriptions.pop(subscription.id, None) is not None:
                    removed = subscription
        if added is not None:
            _safely(self._on_added, added, local)
        if removed is not None:
            _safely(self._on_removed, removed, local)

    def load(self) -> Loaded:
        """Take every active stored subscription into the view (a start). Returns the uids
        of topics that hold some of them but no longer exist, and the subscriptions whose
        stored filters this process refuses (its filter limits or dialects changed since
        they were accepted): they are in the view but match nothing, for the owner to end.
        Into a view that is not empty, rows are applied one by one and a refused filter is
        only logged."""
        refused: dict[str, RefusedFilter] = {}
        with self._sync_lock:
            generation = self.store.generation()
            active, packed = self.store.active_packed()
            # Topics are committed before their subscriptions: syncing the namespace after
            # reading the subscriptions means a missing topic really is gone.
            self.topics.sync()
            if self.subscriptions or self._gone:
                for subscription in active:
                    self.apply(subscription, local=False)
            else:
                refused = self._load_into_empty(active, packed)
            del packed
            self._applied = generation
        live = {entry.uid for entry in self.topics.entries()}
        return Loaded({s.topic_uid for s in active if s.topic_uid not in live}, refused)

    def _load_into_empty(self, active: list[Subscription],
                         packed: PackedForms) -> dict[str, RefusedFilter]:
        """:meth:`apply` for every active row (one per id) into an empty view, each topic's
        filters installed in one batch (the matcher's bulk path: an engine indexes them all
        at once, taking the compiled forms stored in ``packed``, position by position);
        returns id -> :class:`RefusedFilter` for the filters refused."""
        refused: dict[str, RefusedFilter] = {}
        by_topic: dict[str, tuple[NamespaceEntry, list[Subscription], array]] = {}
        # each topic looked up once, not once per row: (name, uid) -> its batch, or None
        batches: dict[tuple[str, str], tuple[list[Subscription], array] | None] = {}
        subscriptions = self.subscriptions
        with self.lock.write():
            for position, subscription in enumerate(active):
                key = (subscription.topic, subscription.topic_uid)
                batch = batches.get(key, ())
                if batch == ():
                    entry = self.entry_of(subscription)
                    batch = None if entry is None else by_topic.setdefault(
                        entry.uid, (entry, [], array("q")))[1:]
                    batches[key] = batch
                if batch is not None:
                    batch[0].append(subscription)
                    batch[1].append(position)
                subscriptions[subscription.id] = subscription
                self._keep_own_template(subscription)
            for entry, subscriptions, positions in by_topic.values():
                forms = packed if len(positions) == len(packed) else packed.select(positions)
                refused.update(self.install_many(entry, subscriptions, forms))
        for subscription in active:
            _safely(self._on_added, subscription, False)
        return refused

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
                self.apply(subscription, local=False)
            self._applied = max([generation] + [s.seq for s in changes])
        return True

    def advance(self, seq: int) -> None:
        """This process committed the change stamped ``seq``."""
        # Our own commit moved the generation by one; if another process committed in
        # between, stay behind so the next sync fetches its rows.
        with self._sync_lock:
            if seq == self._applied + 1:
                self._applied = seq

    def committed(self, subscription: Subscription) -> None:
        """Take in a row this process just committed (and the generation it moved)."""
        self.advance(subscription.seq)
        self.apply(subscription, local=True)

    def forget_gone(self, older_than: float) -> None:
        """Forget subscriptions that left the view before ``older_than`` (monotonic)."""
        with self.lock.write():
            for subscription_id in [i for i, (_, when) in self._gone.items() if when < older_than]:
                del self._gone[subscription_id]

    # -- topics ------------------------------------------------------------------------------
    def topic_added(self, entry: NamespaceEntry) -> None:
        """Install the filters of the view's subscriptions to ``entry``."""
        with self.lock.write():
            for subscription in list(self.subscriptions.values()):
                if subscription.topic_uid == entry.uid:
                    self._reinstall(entry, subscription)

    def topic_removed(self, entry: NamespaceEntry) -> None:
        """Forget the filters installed for ``entry`` (its matcher is gone with it)."""
        with self.lock.write():
            for subscription_id, installed in list(self._installed.items()):
                if installed.topic_uid == entry.uid:
                    del self._installed[subscription_id]
            self._unfiltered.pop(entry.uid, None)
            self._topic_matchers.pop(entry.uid, None)


class _Installed(NamedTuple):
    """What a topic's matcher holds for a subscription the view cannot point at instead:
    one whose filter still carries its request's element (kept without it), or one
    installed under another topic uid than its own."""

    topic_uid: str
    filter: FilterSpec | None


def _installed_record(entry: NamespaceEntry,
                      subscription: Subscription) -> Subscription | _Installed:
    """The subscription itself where the matcher holds its filter as it is, else a record."""
    spec = subscription.filter
    if subscription.topic_uid == entry.uid and (spec is None or spec.content is None):
        return subscription
    return _Installed(entry.uid, spec.without_content() if spec is not None else None)


def _safely(hook: Hook, subscription: Subscription, local: bool) -> None:
    try:
        hook(subscription, local=local)
    except Exception:
        log.exception("subscription hook %s failed", getattr(hook, "__name__", hook))
