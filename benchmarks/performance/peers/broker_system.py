"""What the peer brokers of ``edn bench peers`` share: their consumers append
(subscription, event id, arrival time) to one list, and a run publishes the workload's events
one message each, paced or in a burst, then judges what arrived."""
from __future__ import annotations

import time

import numpy as np

from .workload import Outcome, System, judge


class BrokerSystem(System):
    """A broker under test. Subclasses set ``work`` and give :meth:`publish`,
    :meth:`confirm` and :meth:`cpu_seconds`; their consumers append to ``received`` (one
    list: ``list.append`` is atomic, so reader threads share it)."""

    def __init__(self):
        self.received: list[tuple[int, int, float]] = []
        self.next_id = 0

    def publish(self, k: int, event_id: int) -> None:
        """Send the workload's event ``k`` under ``event_id``."""
        raise NotImplementedError

    def confirm(self, timeout: float) -> None:
        """Wait until the broker has acknowledged everything published."""

    def cpu_seconds(self) -> float:
        raise NotImplementedError

    def routed(self) -> int | None:
        """Messages the broker has handed the consumers so far, before the consumers' own
        filter; None where the broker's filter is exact (every one is a delivery)."""
        return None

    def _wait_received(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def run(self, mode: str, *, window: int, timeout: float) -> Outcome:
        work = self.work
        offset, self.next_id = self.next_id, self.next_id + work.m
        sent_at = np.zeros(work.m)
        before, routed_before = len(self.received), self.routed()
        cpu_before, started = self.cpu_seconds(), time.time()

        def send(first: int, last: int) -> None:
            for k in range(first, last):
                sent_at[k] = time.time()
                self.publish(k, offset + k)

        if mode == "paced":
            for first in range(0, work.m, window):
                last = min(work.m, first + window)
                send(first, last)
                self.confirm(timeout)
                if not self._wait_received(before + work.expected(0, last), timeout):
                    break
        else:
            send(0, work.m)
            self.confirm(timeout)
            self._wait_received(before + work.expected(), timeout)
        seconds = time.time() - started
        cpu = self.cpu_seconds() - cpu_before
        got = np.array(self.received[before:], dtype=float).reshape(-1, 3)
        outcome = judge(work, got[:, 0].astype(np.int64), got[:, 1].astype(np.int64) - offset,
                        got[:, 2], sent_at, seconds=seconds, cpu_seconds=cpu)
        if routed_before is not None:  # what routing by grid cell costs the consumers
            outcome.own_figures["routed_per_event"] = round((self.routed() - routed_before) / work.m, 1)
        return outcome
