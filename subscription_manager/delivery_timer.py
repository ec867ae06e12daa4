"""The delivery queue's timer (:class:`DueTimer`): things to do later -- a job to queue again
after its retry backoff, a parked host to probe -- kept in one heap and handed, when due, to
a callback on the timer's own thread. Waiting retries sit here, not in a worker, so one dead
sink does not stall delivery to the others."""
from __future__ import annotations

import heapq
import itertools
import threading
from typing import Any, Callable

__all__ = ["DueTimer"]


class DueTimer:
    """``schedule(item, delay)``; ``run()`` (the timer thread's body) calls ``on_due(item)``
    for each item whose time came, until :meth:`stop`."""

    def __init__(self, on_due: Callable[[Any], None], clock):
        self._on_due = on_due
        self._clock = clock
        self._heap: list[tuple[float, int, Any]] = []
        self._wakeup = threading.Condition(threading.Lock())
        self._sequence = itertools.count()
        self._stopped = False

    def schedule(self, item, delay: float) -> None:
        with self._wakeup:
            heapq.heappush(self._heap, (self._clock() + delay, next(self._sequence), item))
            self._wakeup.notify()

    def run(self) -> None:
        while True:
            with self._wakeup:
                while True:
                    if self._stopped and not self._heap:
                        return
                    now = self._clock()
                    if self._heap and self._heap[0][0] <= now:
                        _, _, item = heapq.heappop(self._heap)
                        break
                    timeout = (self._heap[0][0] - now) if self._heap else None
                    if self._stopped:
                        timeout = min(timeout or 0.05, 0.05)
                    self._wakeup.wait(timeout)
            self._on_due(item)

    def stop(self) -> list:
        """Stop the timer; returns the items that were still waiting (dropped)."""
        with self._wakeup:
            self._stopped = True
            left = [item for *_, item in self._heap]
            self._heap.clear()
            self._wakeup.notify_all()
        return left
