"""The discrete-event kernel and the broker network it runs.

:class:`Kernel`: virtual time in seconds and one heapq of (time, sequence, action); the
sequence number makes events at the same instant run in the order they were scheduled.

:class:`BrokerNetwork`: each broker has an incoming FIFO queue and one CPU. Serving a message
costs ``per_message_s + steps * step_s`` (steps: the router's matching steps for that event at
that broker) plus the routing time a router measured instead of counting, then the event leaves
on each chosen link after the link's one-way delay and reaches each matching local client 1 ms
later. Publishers are Poisson processes at their brokers (1 ms from them). Overload is the
Gryphon paper's criterion: some broker's queue reaches ``overload_queue`` (80) messages; the run stops
there.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .routing import Router

__all__ = ["Kernel", "BrokerNetwork", "SimResult", "OVERLOAD_QUEUE"]

OVERLOAD_QUEUE = 80


class Kernel:
    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list = []
        self._sequence = 0
        self.stopped = False

    def schedule(self, delay: float, action, *args) -> None:
        if delay < 0:
            raise ValueError("an event cannot be scheduled in the past")
        self._sequence += 1
        heapq.heappush(self._queue, (self.now + delay, self._sequence, action, args))

    def run(self, until: float) -> None:
        """Run every action due up to ``until`` seconds (or until :meth:`stop`)."""
        while self._queue and not self.stopped:
            when, _, action, args = self._queue[0]
            if when > until:
                break
            heapq.heappop(self._queue)
            self.now = when
            action(*args)

    def stop(self) -> None:
        self.stopped = True


@dataclass
class SimResult:
    published: int = 0
    overloaded: bool = False
    overloaded_at: str | None = None
    max_queue: int = 0
    link_messages: int = 0
    link_bytes: int = 0
    steps: int = 0
    route_seconds: float = 0.0
    busy_seconds: float = 0.0                           # CPU of every broker, modelled
    deliveries: dict = field(default_factory=dict)      # published id -> set of clients
    origin: dict = field(default_factory=dict)          # published id -> (publisher, event)
    carried: list = field(default_factory=list)         # (publisher, event, broker, child)
    latencies_ms: list = field(default_factory=list)


class BrokerNetwork:
    def __init__(self, router: Router, *, per_message_s: float = 1e-3,
                 step_s: float = 10e-6, event_bytes: int = 200,
                 overload_queue: int = OVERLOAD_QUEUE, record: bool = True) -> None:
        self.router = router
        self.topology, self.trees = router.topology, router.trees
        self.per_message_s, self.step_s = per_message_s, step_s
        self.event_bytes, self.overload_queue, self.record = event_bytes, overload_queue, record
        self.kernel = Kernel()
        self.result = SimResult()
        self.queues = {b: deque() for b in self.topology.brokers}
        self.busy = {b: False for b in self.topology.brokers}
        self.client_s = self.topology.client_delay_ms / 1e3

    # -- publishing ------------------------------------------------------------------------
    def publish(self, publisher: str, event: int) -> int:
        """One event from a client of ``publisher`` now; returns its id."""
        uid = self.result.published
        self.result.published += 1
        if self.record:
            self.result.deliveries[uid] = set()
            self.result.origin[uid] = (publisher, event)
        self.kernel.schedule(self.client_s, self._arrive, publisher, (uid, publisher, event,
                                                                      self.kernel.now))
        return uid

    def run_poisson(self, rate: float, duration_s: float, seed: int = 0) -> SimResult:
        """Every publisher broker publishes ``rate`` events/s (Poisson) for ``duration_s``,
        events drawn from its pool; then the network drains (unless it overloaded)."""
        rng = np.random.default_rng(seed)
        for publisher, pool in self.router.workload.events.items():
            t = rng.exponential(1.0 / rate)
            while t < duration_s:
                self.kernel.schedule(t, self.publish, publisher, int(rng.integers(len(pool))))
                t += rng.exponential(1.0 / rate)
        self.kernel.run(until=float("inf"))
        return self.result

    # -- brokers ---------------------------------------------------------------------------
    def _arrive(self, broker: str, message) -> None:
        queue = self.queues[broker]
        queue.append(message)
        if len(queue) > self.result.max_queue:
            self.result.max_queue = len(queue)
        if len(queue) >= self.overload_queue:
            self.result.overloaded, self.result.overloaded_at = True, broker
            self.kernel.stop()
        if not self.busy[broker]:
            self._serve(broker)

    def _serve(self, broker: str) -> None:
        queue = self.queues[broker]
        if not queue:
            self.busy[broker] = False
            return
        self.busy[broker] = True
        uid, publisher, event, born = message = queue[0]
        decision = self.router.decide(broker, publisher, event)
        self.result.steps += decision.steps
        self.result.route_seconds += decision.seconds
        service = self.per_message_s + decision.steps * self.step_s + decision.seconds
        self.result.busy_seconds += service
        self.kernel.schedule(service, self._done, broker, message, decision)

    def _done(self, broker: str, message, decision) -> None:
        self.queues[broker].popleft()
        uid, publisher, event, born = message
        for child in decision.forward:
            self.result.link_messages += 1
            self.result.link_bytes += self.event_bytes
            if self.record:
                self.result.carried.append((publisher, event, broker, child))
            self.kernel.schedule(self.topology.delays[broker][child] / 1e3, self._arrive, child,
                                 message)
        if len(decision.local):
            if self.record:
                self.result.deliveries[uid].update(decision.local)
            self.result.latencies_ms.append((self.kernel.now + self.client_s - born) * 1e3)
        self._serve(broker)

    # -- exactness ---------------------------------------------------------------------------
    def exactness(self) -> dict:
        """Against the oracle: ``missed`` (a client with a matching subscription that did
        not get the event), ``extra`` (a client that got it without one), ``useless_links``
        (a link that carried an event with no matching subscription behind it on the
        publisher's tree; zero is required of the exact modes only). Needs ``record=True``."""
        workload = self.router.workload
        missed = extra = 0
        for uid, got in self.result.deliveries.items():
            publisher, event = self.result.origin[uid]
            matching = workload.matching(workload.events[publisher][event])
            wanted = set(workload.subscriber[matching].tolist())
            missed += len(wanted - got)
            extra += len(got - wanted)
        useless = 0
        for publisher, event, _, child in set(self.result.carried):
            behind = self.trees[publisher].subtree(child)
            subs = np.concatenate([self.router.subs_at[b] for b in behind])
            if not len(workload.matching(workload.events[publisher][event], subs)):
                useless += 1
        return {"missed": missed, "extra": extra, "useless_links": useless,
                "exact": missed == 0 and extra == 0
                and (useless == 0 or not self.router.exact_links)}
