"""Strikes against subscription filters that fail or overrun their time budget.

A filter that raises on an event, or takes longer than ``filter_budget`` on it, earns its
subscription a strike; at ``filter_strikes`` strikes the subscription ends with
SubscriptionEnd/SourceCancelling. The counts live in the service's store
(:mod:`.strike_table`), so every worker adds to one count and a restart keeps it: a bad
filter gets ``filter_strikes`` strikes in all, not that many per worker and again after
each restart.

Matching never reads the store for this: a strike is rare, and only a strike opens a write
transaction, in which the strike is added, the count read back and, at the threshold, the
subscription ended by a conditional UPDATE. Transactions of every worker are serialized, so
when two workers strike the same subscription at once one of them ends it and the other
finds it no longer active (its strike is not even written): one SubscriptionEnd.

Warnings are rate-limited: a hostile filter must not flood the log either.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Collection

from .store import Subscription
from .strike_table import StrikeTable
from .versions import END_CANCELLING

log = logging.getLogger(__name__)

__all__ = ["FilterStrikes"]

_LOG_INTERVAL = 10.0  # seconds between warnings about failing filters


class FilterStrikes:
    """Counts strikes in ``table``; ends a subscription that reaches ``threshold`` and then
    calls ``struck_out(subscription, reason, strikes)`` (this process ended it: it is to
    leave the view and its EndTo to be told). ``active()`` is the collection of the ids in
    this process's view: a failure of a subscription that already left it (ended by an
    earlier event of the same batch, say) opens no transaction."""

    def __init__(self, threshold: int, table: StrikeTable, *,
                 active: Callable[[], Collection[str]],
                 struck_out: Callable[[Subscription, str, int], None],
                 clock: Callable[[], float] = time.time):
        self.threshold = threshold
        self.table = table
        self._active = active
        self._struck_out = struck_out
        self._clock = clock
        self.failures = 0  # filter failures seen by this process, all subscriptions
        self._lock = threading.Lock()
        self._logged = float("-inf")

    def count(self, failed: dict[str, str]) -> None:
        """One strike against each subscription of ``failed`` (id -> reason) on one event."""
        with self._lock:
            self.failures += len(failed)
            now = time.monotonic()
            loud = now - self._logged >= _LOG_INTERVAL
            if loud:
                self._logged = now
        if loud:
            subscription_id, reason = next(iter(failed.items()))
            log.warning("filters of %d subscription(s) failed on an event (e.g. %s: %s); "
                        "%d filter failures so far", len(failed), subscription_id, reason,
                        self.failures)
        in_view = self._active()
        struck = {i: reason for i, reason in failed.items() if i in in_view}
        if not struck:
            return
        subscriptions = self.table.subscriptions
        ended = []
        with self.table.store.transaction() as conn:
            for subscription_id, strikes in StrikeTable.add(conn, struck, self._clock()).items():
                if strikes < self.threshold:
                    continue
                subscription = subscriptions.end_in(conn, subscription_id, END_CANCELLING)
                if subscription is not None:
                    ended.append((subscription, struck[subscription_id], strikes))
        for subscription, reason, strikes in ended:
            self._struck_out(subscription, reason, strikes)
