"""From the durable outbox to the push delivery queue and back.

Accepted notifications are rows of the outbox (:mod:`.outbox`); each becomes one small job of
the delivery queue (:mod:`.delivery`), rendered from the subscription's template when it is
sent. This part follows the jobs' outcomes into the outbox: a delivered row is noted for
deletion, a retry is persisted with its next attempt, a job that ran out of attempts (or
whose target was refused) becomes a dead letter. Rows no job holds in memory (of processes
that died, retries persisted before a restart, rows spilled past the queue's room) are queued
again by :meth:`OutboxDeliveries.recover`, a page at a time: at most the room the queue has
in jobs and in bytes (and half its size), so memory holds a bounded part of any backlog and
the queue is topped up at every sweep while the backlog lasts.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

from .delivery import Deliverer
from .delivery_pipelined import PipeliningDeliverer
from .delivery_job import NOTIFICATION, Delivery, DeliveryPolicy
from .notifications import notification_action
from .outbox import Outbox, OutboxRow
from .view import SubscriptionView

log = logging.getLogger(__name__)

__all__ = ["OutboxDeliveries"]

_PAGE_PART = 5_000  # rows read from the outbox at once


class OutboxDeliveries:
    """Owns the :class:`~.delivery.Deliverer` (``deliverer``) and the ids of the outbox rows
    it holds. ``on_delivery_failure(job)`` is called for a notification given up on whose
    subscription is to end (``end_on_dead_letter``)."""

    def __init__(self, outbox: Outbox, view: SubscriptionView, transport,
                 policy: DeliveryPolicy, *, clock, approve_target, approval_ttl: float,
                 end_on_dead_letter: bool, on_delivery_failure: Callable[[Delivery], None]):
        self.outbox = outbox
        self.view = view
        self.clock = clock
        self.end_on_dead_letter = end_on_dead_letter
        self._on_delivery_failure = on_delivery_failure
        self._in_memory: set[int] = set()  # outbox rows the deliverer holds
        self._in_memory_lock = threading.Lock()
        # pipelining only when asked for (see delivery_pipelined's docstring for why)
        deliverer_class = PipeliningDeliverer if policy.pipeline > 1 else Deliverer
        self.deliverer = deliverer_class(transport, policy, approve_target=approve_target,
                                   is_wanted=self.is_wanted, on_give_up=self._gave_up,
                                   on_finish=self._finished, on_retry=self._retry,
                                   wall_clock=clock, approval_ttl=approval_ttl)

    def is_wanted(self, subscription_id: str) -> bool:
        """Whether a job of ``subscription_id`` is still to be sent (active, unexpired)."""
        subscription = self.view.subscriptions.get(subscription_id)
        return subscription is not None and not subscription.expired_at(self.clock())

    def room(self) -> int:
        """Jobs the delivery queue would take now."""
        return self.deliverer.room()

    def room_for(self, events) -> int:
        """Jobs of ``events`` ((job count, each job's size) pairs, in order) the delivery
        queue would take now, in jobs and in bytes."""
        return self.deliverer.room_for(events)

    def submit(self, jobs: list[Delivery]) -> int:
        """Queue ``jobs``; returns how many the queue took (the others' rows are marked due
        in the outbox: a later page takes them)."""
        if not jobs:
            return 0
        durable = [job.outbox_id for job in jobs if job.outbox_id is not None]
        if durable:
            with self._in_memory_lock:
                self._in_memory.update(durable)
        queued = self.deliverer.submit_many(jobs)
        dropped = [job.outbox_id for job in jobs[queued:] if job.outbox_id is not None]
        if dropped:
            with self._in_memory_lock:
                self._in_memory.difference_update(dropped)
            try:
                self.outbox.spill(dropped)
            except Exception:  # they are due again after the outbox's recheck anyway
                log.exception("marking %d notifications for a later page failed", len(dropped))
        return queued

    def recover(self) -> int:
        """Claim the rows of processes that are gone, delete the delivered rows noted so far,
        and queue a page of this process's rows that are due and not in memory (as many as
        the queue has room for, at most half its size). Returns how many were queued."""
        self.outbox.flush()
        self.outbox.heartbeat()
        self.outbox.claim()
        page = min(self.deliverer.room(), max(1, self.deliverer.policy.queue_size // 2))
        if self.deliverer.room_for([(1, 0)]) == 0:
            page = 0  # the byte budget is spent: the rows stay on disk until it is not
        queued = 0
        while page > 0:
            # in parts, yielding between them: a large page read at once would hold up the
            # deliveries (greenlets under gevent) for as long as it takes
            part = min(page, _PAGE_PART)
            with self._in_memory_lock:
                held = set(self._in_memory)
            held |= self.outbox.unflushed()
            jobs = []
            rows = self.outbox.due(held, limit=part)
            # a page reads each event's body once: its rows share the bytes
            sharing = collections.Counter(id(row.body) for row in rows if row.body is not None)
            for row in rows:
                job = self._job_from_row(row, sharing[id(row.body)])
                if job is None:  # the subscription is gone: nothing to deliver
                    self.outbox.delivered(row.id)
                else:
                    jobs.append(job)
            taken = self.submit(jobs)
            queued += taken
            if len(rows) < part or taken < len(jobs):
                break  # the rows are read, or the queue is full (in jobs or bytes)
            page -= part
            time.sleep(0)
        return queued

    def _job_from_row(self, row: OutboxRow, sharing: int = 1) -> Delivery | None:
        """The job of ``row``, whose event body ``sharing`` jobs of the page share."""
        if row.payload is not None:  # a redelivered dead letter, sent as it was
            job = Delivery(row.url or "", row.content_type or "", row.action or "",
                           payload=row.payload, subscription_id=row.subscription_id,
                           size=len(row.payload))
        else:
            subscription = self.view.subscriptions.get(row.subscription_id)
            template = self.view.template_of(row.subscription_id)
            if subscription is None or template is None or row.body is None:
                return None
            url = subscription.notify_to.address
            job = Delivery(url, template.content_type,
                           notification_action(subscription, row.event_action or ""),
                           render=template,
                           render_args=(url, row.event_action or "", row.body, row.message_id),
                           subscription_id=row.subscription_id,
                           size=len(row.body) // max(1, sharing))
        job.outbox_id = row.id
        job.attempt = row.attempts
        job.created = row.created
        job.first_attempt = row.first_attempt
        job.topic = row.event_topic or self._topic_of(row.subscription_id)
        return job

    def _topic_of(self, subscription_id: str) -> str:
        subscription = self.view.subscriptions.get(subscription_id)
        return subscription.topic if subscription is not None else ""

    def _finished(self, job: Delivery, outcome: str) -> None:
        if job.outbox_id is None:
            return
        with self._in_memory_lock:
            self._in_memory.discard(job.outbox_id)
        if outcome in ("delivered", "discarded"):
            self.outbox.delivered(job.outbox_id)
        # "failed": dead-lettered by _gave_up; "dropped": stays, due again later

    def _retry(self, job: Delivery, delay: float) -> None:
        if job.outbox_id is None:
            return
        now = self.clock()
        self.outbox.failed(job.outbox_id, job.attempt, now + delay, job.last_error,
                           job.first_attempt, now)

    def _gave_up(self, job: Delivery) -> None:
        """Attempts or age ran out, or the target was refused: a durable notification goes
        to the dead letters; the subscription ends unless ``end_on_dead_letter`` is false."""
        if job.kind != NOTIFICATION or job.subscription_id is None:
            return
        if job.outbox_id is not None:
            try:
                payload = job.body()
            except Exception:
                log.exception("could not render a dead letter for %s", job.url)
                payload = b""
            self.outbox.dead_letter(job.outbox_id, topic=job.topic, url=job.url,
                                    content_type=job.content_type, action=job.action,
                                    payload=payload, reason=job.last_error or "unknown",
                                    attempts=job.attempt + 1, first_attempt=job.first_attempt,
                                    last_attempt=self.clock())
            if not self.end_on_dead_letter:
                return
        self._on_delivery_failure(job)
