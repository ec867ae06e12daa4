"""The outgoing link: one byte-rate cap shared by every server's sender (``--link-mbps``)."""
from __future__ import annotations

import threading
import time
from typing import Callable


class TokenBucket:
    """Bytes-per-second limiter shared by all senders (thread-safe).

    ``sleep`` defaults to whatever ``time.sleep`` is when the bucket is *built*, not when
    this module is imported: ``edn serve`` imports the roles in gunicorn's arbiter, and the
    gevent worker monkey-patches ``time`` only after the fork. Built in the worker, the
    bucket's waits for the link yield to the other greenlets (requests, the other servers'
    senders) instead of blocking the whole worker."""

    def __init__(self, bytes_per_second: float, burst_bytes: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] | None = None):
        if bytes_per_second <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(bytes_per_second)
        self.capacity = float(burst_bytes or max(bytes_per_second / 20, 64 * 1024))
        self._tokens = self.capacity
        self._stamp = clock()
        self._clock = clock
        self._sleep = sleep if sleep is not None else time.sleep
        self._lock = threading.Lock()

    @classmethod
    def megabits(cls, mbps: float) -> "TokenBucket":
        return cls(mbps * 1_000_000 / 8)

    def take(self, amount: int) -> float:
        """Block until ``amount`` bytes may be sent; returns the time waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= amount  # may go negative: the debt is paid by waiting
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait
