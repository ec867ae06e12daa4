"""Publication: what happens to events published to a topic, the one path of every
publication (a plain publication is a list of one event; a dispatcher's ``edn:EventBatch``
the list of its events, with the dispatcher's position).

Publication compiles nothing. Events over the event limits are refused (:mod:`.event_limits`);
events a replayed batch holds at or below the dispatcher's last applied sequence are skipped;
the rest are matched in one call of the topic's matcher under the view's shared read lock
(:meth:`.view.SubscriptionView.match`); failed filters earn strikes (:mod:`.strikes`);
expired subscriptions are left out; each event with subscribers is serialized once; the
events and one row per notification are committed to the durable outbox in one transaction
(:mod:`.outbox`, NotifyWhen decided inside it: :mod:`.notify_index`), then one small job per
row goes to the delivery queue (:mod:`.outbox_deliveries`). A publisher's success answer
therefore means: durable against a ``kill -9``; delivered at least once, with the row's
fixed ``wsa:MessageID``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from lxml import etree

from wsframework.matching import FilterFailures
from wsframework.namespace import NamespaceEntry

from .delivery_job import NOTIFICATION, Delivery
from .event_limits import EventLimits
from .notifications import notification_action
from .notify_index import NotifyGate, notify_when_selection
from .outbox import Outbox
from .outbox_deliveries import OutboxDeliveries
from .store import Subscription
from .strikes import FilterStrikes
from .view import SubscriptionView

__all__ = ["Publication", "Published"]


@dataclasses.dataclass(frozen=True)
class Published:
    """What :meth:`SubscriptionManager.publish_many` did: notifications ``queued``, events
    matched (``received``), replayed events ``skipped``, and the events ``refused`` (index
    -> why)."""
    queued: int
    received: int
    skipped: int
    refused: dict[int, str]


class Publication:
    """Publishes events to the subscriptions of this process's view. ``on_event_matched``
    sees (and may edit) the ids each event matched; ``published`` counts the events
    matched."""

    def __init__(self, view: SubscriptionView, outbox: Outbox, deliveries: OutboxDeliveries,
                 notify_gate: NotifyGate, *, event_limits: EventLimits, strikes: FilterStrikes,
                 filter_budget: float, durable: bool, clock,
                 on_event_matched: Callable[[NamespaceEntry, etree._Element, str, list[str]],
                                            list[str]]):
        self.view = view
        self.outbox = outbox
        self.deliveries = deliveries
        self.notify_gate = notify_gate
        self.event_limits = event_limits
        self.strikes = strikes
        self.filter_budget = filter_budget
        self.durable = durable
        self.clock = clock
        self._on_event_matched = on_event_matched
        self.published = 0

    def publish_many(self, entry: NamespaceEntry, events: list[etree._Element], *,
                     action: str,
                     position: tuple[str | None, int | None] | None = None) -> Published:
        """Publish ``events`` to ``entry``'s subscriptions: the one path of every publication
        (a plain publication is a list of one, the dispatcher's ``edn:EventBatch`` a list of
        its events).

        An event over the event limits is refused (and the others published); with
        ``position`` (the dispatcher and the sequence number of the first event), an event
        at or below the dispatcher's last applied sequence is skipped (a replayed batch). The
        rest are matched in one call of the topic's matcher; strikes are counted event by
        event (a subscription its strikes end is not notified of the later events); expired
        subscriptions are left out; the notifications of all the events, NotifyWhen decided,
        are made durable in one outbox transaction (with the position, when given) and
        queued. An event with subscribers is taken out of its parent (if it has one): it
        then serializes as a copy of itself would, with the namespace declarations it uses,
        not every one in scope."""
        refused = self.event_limits.refusals(events)
        dispatcher, first_seq = position if position is not None else (None, None)
        replayable = dispatcher is not None and first_seq is not None
        # checked again in the outbox's transaction, against a concurrent copy of the batch
        applied = self.outbox.position(dispatcher) if replayable else 0
        kept, seqs = [], []
        skipped = 0
        for index, event in enumerate(events):
            if index in refused:
                continue
            if replayable:
                seq = first_seq + index
                if seq <= applied:
                    skipped += 1
                    continue
                seqs.append(seq)
            kept.append(event)
        matched = []
        for event, targets in zip(kept, self._match(entry, kept, action)):
            if targets:
                parent = event.getparent()
                if parent is not None:
                    parent.remove(event)
                matched.append((targets, action, event))
            else:
                matched.append((targets, action, None))
        if replayable and matched:
            queued = self.deliver_many(matched, dispatcher=dispatcher, seqs=seqs)
        else:
            queued = self.deliver_many([m for m in matched if m[0]])
        return Published(queued=queued, received=len(kept), skipped=skipped, refused=refused)

    def _match(self, entry: NamespaceEntry, events: list[etree._Element],
               action: str) -> list[list[Subscription]]:
        """Per event, the active, unexpired subscriptions it is to be notified to."""
        if not events:
            return []
        failures = [FilterFailures(self.filter_budget) for _ in events]
        answers = self.view.match(entry, events, action, failures)
        self.published += len(events)
        subscriptions = self.view.subscriptions
        targets = []
        now = None
        for event, ids, failed in zip(events, answers, failures):
            if failed:
                self.strikes.count(failed.failed)
            ids = self._on_event_matched(entry, event, action, ids)
            if not ids:
                targets.append([])
                continue
            if now is None:
                now = self.clock()
            targets.append([s for s in map(subscriptions.get, ids)
                            if s is not None and not s.expired_at(now)])
        return targets

    def deliver_many(self, events: list[tuple[list[Subscription], str, etree._Element | None]],
                     *, dispatcher: str | None = None, seqs: list[int] | None = None) -> int:
        """Queue one notification of each event (its element, serialized once here) to each
        of its subscriptions, in one outbox transaction: when this returns, every
        notification is durable (or, with ``dispatcher``/``seqs``, the events at or below
        the dispatcher's last applied sequence were skipped; an event without subscriptions
        then only advances the position, and its element may be None). NotifyWhen is
        decided in that transaction. Returns how many notifications were queued."""
        if not events:
            return 0
        prepared = []
        for subscriptions, action, event in events:
            pairs = [(s, t) for s, t in ((s, self.view.template_of(s.id)) for s in subscriptions)
                     if t is not None]
            body = etree.tostring(event) if pairs else b""
            prepared.append((pairs, action, event, body, _share(body, pairs)))
        kept, select = notify_when_selection(
            self.notify_gate, [(event, [s for s, _ in pairs]) for pairs, _, event, _, _ in prepared])
        room = None
        if not self.durable and dispatcher is None and select is None:
            accepted = None
        else:
            # rows past the delivery queue's room (in jobs and in bytes) stay on disk for it
            # to page in later
            room = (self.deliveries.room_for([(len(pairs), share)
                                              for pairs, _, _, _, share in prepared])
                    if self.durable else None)
            try:
                accepted = self.outbox.accept(
                    [(pairs[0][0].topic if pairs else "", action, body, [s.id for s, _ in pairs])
                     for pairs, action, _, body, _ in prepared],
                    durable=self.durable, dispatcher=dispatcher, seqs=seqs, select=select,
                    in_memory=room)
            except BaseException:
                if select is not None:  # L changed in memory, not in the store
                    self.notify_gate.reset()
                raise
        jobs = []
        spilled = 0  # rows past the room: durable and due, for the queue to page in
        for index, (pairs, action, _, body, size) in enumerate(prepared):
            rows = accepted[index] if accepted is not None else None
            if accepted is not None and rows is None:
                continue  # a replayed event, applied before
            if index in kept:  # NotifyWhen decided: the rows are the kept ones, in order
                pairs = [(s, t) for s, t in pairs if s.id in kept[index]]
            for position, (subscription, template) in enumerate(pairs):
                if room is not None and len(jobs) >= room:
                    spilled += 1
                    continue
                row = rows[position] if rows else None
                url = subscription.notify_to.address
                jobs.append(Delivery(
                    url, template.content_type,
                    notification_action(subscription, action),
                    render=template,
                    render_args=(url, action, body, row.message_id if row else None),
                    subscription_id=subscription.id, kind=NOTIFICATION,
                    outbox_id=row.id if row else None, created=row.created if row else None,
                    topic=subscription.topic, size=size))
        return self.deliveries.submit(jobs) + spilled


def _share(body: bytes, pairs: list) -> int:
    """The bytes of one event's body each of its notifications holds: they share them."""
    return -(-len(body) // len(pairs)) if pairs else 0

