"""Strikes against subscription filters that fail or overrun their time budget.

A filter that raises on an event, or takes longer than ``filter_budget`` on it, earns its
subscription a strike; at ``filter_strikes`` strikes the subscription ends. Counted per
process (each worker judges the filters it runs). Warnings are rate-limited: a hostile
filter must not flood the log either.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Collection

log = logging.getLogger(__name__)

__all__ = ["FilterStrikes"]

_LOG_INTERVAL = 10.0  # seconds between warnings about failing filters


class FilterStrikes:
    """Counts strikes; ``struck_out(subscription_id, reason, count)`` ends a subscription
    that reached ``threshold``. ``active()`` is the collection of the ids still in the
    view (strikes of subscriptions that left are forgotten)."""

    def __init__(self, threshold: int, *, active: Callable[[], Collection[str]],
                 struck_out: Callable[[str, str, int], None]):
        self.threshold = threshold
        self._active = active
        self._struck_out = struck_out
        self.counts: dict[str, int] = {}
        self.failures = 0  # filter failures so far, all subscriptions
        self._lock = threading.Lock()
        self._logged = float("-inf")

    def count(self, failed: dict[str, str]) -> None:
        """One strike against each subscription of ``failed`` (id -> reason) on one event."""
        ending = []
        with self._lock:
            for subscription_id, reason in failed.items():
                self.failures += 1
                strikes = self.counts.get(subscription_id, 0) + 1
                self.counts[subscription_id] = strikes
                if strikes >= self.threshold:
                    del self.counts[subscription_id]
                    ending.append((subscription_id, reason, strikes))
            active = self._active()
            if len(self.counts) > 2 * len(active) + 100:
                # strikes of subscriptions that left meanwhile (unsubscribed, expired, moved)
                self.counts = {i: n for i, n in self.counts.items() if i in active}
            now = time.monotonic()
            loud = now - self._logged >= _LOG_INTERVAL
            if loud:
                self._logged = now
        if loud:
            subscription_id, reason = next(iter(failed.items()))
            log.warning("filters of %d subscription(s) failed on an event (e.g. %s: %s); "
                        "%d filter failures so far", len(failed), subscription_id, reason,
                        self.failures)
        for subscription_id, reason, strikes in ending:
            self._struck_out(subscription_id, reason, strikes)
