"""How much of the time a service had work in hand: its *busy* time.

A request is "in hand" from the moment the service starts handling it (parsing, dispatch,
routing, answering) until it has its reply, except where the handler deliberately waits on
something outside the service (the dispatcher holding a publisher back until the outgoing
queues drain: :meth:`BusyMeter.idle`). The meter integrates the time during which at least
one request is in hand; busy seconds / wall seconds is the service's *utilization*.

Why not CPU time: a Python service's threads share one interpreter lock, so a saturated
service shows less than one core of CPU (every hand-off between threads leaves the core idle
for a moment) and how much less depends on what else the machine runs. A saturated service,
however, always has a request waiting for it, so its utilization reads ~1.0 whatever the
machine does; a service waiting for its outgoing link, or for publishers, reads less. The
self-tuning dispatcher (:mod:`route_manager.selftuning`) uses both.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

__all__ = ["BusyMeter"]


class BusyMeter:
    """Cumulative seconds with at least one request in hand (thread-safe, O(1) per call)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._active = 0
        self._since = 0.0   # when _active last went from 0 to 1
        self._total = 0.0   # busy seconds of the periods already ended

    def _enter(self) -> None:
        with self._lock:
            if self._active == 0:
                self._since = self._clock()
            self._active += 1

    def _leave(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self._total += self._clock() - self._since

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around the handling of one request."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    @contextlib.contextmanager
    def idle(self) -> Iterator[None]:
        """Inside :meth:`busy`: a wait on something outside the service, not counted."""
        self._leave()
        try:
            yield
        finally:
            self._enter()

    @property
    def active(self) -> int:
        return self._active

    def seconds(self) -> float:
        """Busy seconds so far, the period in progress included."""
        with self._lock:
            if self._active:
                return self._total + self._clock() - self._since
            return self._total
