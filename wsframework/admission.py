"""Admission: while events flow, the control path gets a share of the worker.

A worker handles events (a dispatcher's EventBatch at a server, a publisher's events at a
source or a dispatcher) and control messages (Subscribe, Renew, GetStatus, Unsubscribe,
administration) on one thread under gevent, or on threads sharing one interpreter lock. A
renewal storm saturates that thread, and an event then waits behind the renewals in hand at
each of its own waits: at 100,000 subscriptions held, 10,000 renewals from 32 clients took a
server's publication round trip (p99) from 3-9 ms quiet to 51-70 ms.

:class:`ControlGate` bounds the control path twice:

- **concurrency**: at most ``concurrency`` control requests are worked on at once; the others
  wait for a slot without taking the CPU. A request whose action a role marked as its event
  path (:meth:`ControlGate.let_through`) never waits for one.
- **share**: while events flow (one came in the last :data:`EVENT_WINDOW` seconds), a slot
  that was worked on for ``t`` seconds rests ``t * (concurrency / share - 1)`` seconds before
  the next control request takes it, so the control path keeps at most ``share`` of the
  worker and the events the rest. The request is answered at once; only its slot rests. When
  no event flows, slots do not rest: control requests go at the worker's full speed.

A slot counts as worked on only while its request is: around a call to another service
(:func:`waiting_on_peer`, which the framework's transports and the name lookups take) it is
let go, and taken again after if it is free (else the request finishes without one). Held
across such a call, a slot could wait on a service whose own slots wait on this one (servers
placing subscriptions at each other). A handler that waits for work other threads do with
peers (a pool sending shares) must take :func:`waiting_on_peer` around that wait itself:
otherwise both services wait out ``max_wait``.

The gate bounds greenlets only (gunicorn's gevent worker, the default of sources and
servers). In a worker of threads (the dispatcher's gthread) a request waiting for a slot
would hold one of the few threads that events need, and the operating system shares the CPU
among the threads that run: there the gate lets everything through.

A control request that finds no slot within ``max_wait`` seconds is answered
``wsa:EndpointUnavailable`` (WS-Addressing 1.0 SOAP binding 6.4.1: "the endpoint is unable
to process the message at this time"), with a ``wsa:RetryAfter`` in milliseconds, before
anything of it was done: a client may send it again.

The action is read from the HTTP request (SOAPAction, or SOAP 1.2's ``action`` parameter),
before the body is parsed. A request let through on an event-path action must carry that
action as its wsa:Action too (else wsa:ActionMismatch), so it reaches only that action's
handler, which authenticates its sender; and events count as flowing only once a handler has
(:meth:`ControlGate.event_seen`). A client claiming an event-path action skips a queue, not
a check.
"""
from __future__ import annotations

import contextlib
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Iterator

from lxml import etree

from . import ns
from .exceptions import receiver_fault
from .settings import Settings, setting

__all__ = ["AdmissionSettings", "ControlGate", "DEFAULT_CONTROL_CONCURRENCY",
           "DEFAULT_CONTROL_SHARE", "DEFAULT_CONTROL_WAIT", "waiting_on_peer"]

#: control requests a worker works on at once: one, since each runs until it waits and an
#: event that comes meanwhile waits for all of those in hand (a renewal storm at 100,000
#: held, 30% share: publication p99 7.3 ms with one slot, 8.6 ms with two)
DEFAULT_CONTROL_CONCURRENCY = 1
#: the part of a worker the control path may take while events flow (the same storm: p99
#: 7.3 ms at 0.3, 9.8 ms at 0.5, against 3.2-5.8 ms quiet and 51-70 ms with no gate)
DEFAULT_CONTROL_SHARE = 0.3
#: seconds a control request may wait for a slot before it is told to come back later
DEFAULT_CONTROL_WAIT = 30.0
#: seconds after an event during which events count as flowing
EVENT_WINDOW = 1.0
#: what a refused control request is told to wait before it tries again (milliseconds)
RETRY_AFTER_MS = 1000

ENDPOINT_UNAVAILABLE = ns.qname(ns.WSA10, "EndpointUnavailable")
RETRY_AFTER = ns.qname(ns.WSA10, "RetryAfter")
BUSY_REASON = "the service is busy with other requests: retry later"

_gates: "weakref.WeakSet[ControlGate]" = weakref.WeakSet()  # every gate of this process


class ControlGate:
    """At most ``concurrency`` control requests worked on at once (0: no bound, and no
    share), keeping to ``share`` of the worker while events flow; the actions marked as the
    event path pass without a slot. Thread-safe, and cooperative under gevent: its locks,
    semaphore, timers and thread-local are made in the worker, after the patch."""

    def __init__(self, concurrency: int = DEFAULT_CONTROL_CONCURRENCY,
                 share: float = DEFAULT_CONTROL_SHARE, max_wait: float = DEFAULT_CONTROL_WAIT,
                 clock=time.monotonic, enabled: bool = True):
        """``enabled=False``: no bound whatever the configuration (a worker of threads)."""
        self.enabled = enabled
        self._event_actions: set[str] = set()
        self._lock = threading.Lock()
        self._clock = clock
        self._held = threading.local()  # this thread's (greenlet's) slot, and its time
        self._last_event = float("-inf")
        self.waiting = 0   # control requests waiting for a slot now
        self.refused = 0   # control requests told to come back later, in all
        self.rested = 0.0  # seconds slots rested so that events kept their share, in all
        self.configure(concurrency, share, max_wait)
        _gates.add(self)

    def configure(self, concurrency: int, share: float, max_wait: float) -> None:
        """Set the bounds (before the service serves: requests in hand keep the old slots)."""
        if concurrency < 0:
            raise ValueError(f"control concurrency must be 0 or more, not {concurrency}")
        if not 0 < share <= 1:
            raise ValueError(f"the control share must be more than 0 and at most 1, not {share}")
        if max_wait <= 0:
            raise ValueError(f"the wait for a control slot must be positive, not {max_wait}")
        self.concurrency = concurrency
        self.share = share
        self.max_wait = max_wait
        self._slots = (threading.BoundedSemaphore(concurrency) if concurrency and self.enabled
                       else None)

    def let_through(self, action: str) -> None:
        """Requests with ``action`` never wait for a control slot: events, and the messages
        a network's roles send each other (whose handlers authenticate them)."""
        self._event_actions.add(action)

    def on_event_path(self, action: str | None) -> bool:
        return action is not None and action in self._event_actions

    def passes(self, action: str | None) -> bool:
        """Whether a request announcing ``action`` skips the slots (its message must then
        carry that action: :meth:`~wsframework.messaging.MessagingLayer.handle`)."""
        return self._slots is not None and self.on_event_path(action)

    def event_seen(self) -> None:
        """An event came, from a sender its handler authenticated: events are flowing."""
        self._last_event = self._clock()

    def events_flowing(self) -> bool:
        return self._clock() - self._last_event < EVENT_WINDOW

    @contextlib.contextmanager
    def admitted(self, action: str | None) -> Iterator[None]:
        """Hold a control slot while the request with ``action`` is handled (none for the
        event path); :class:`~wsframework.exceptions.SoapFault` EndpointUnavailable when no
        slot came within ``max_wait``."""
        slots = self._slots
        if slots is None:
            yield
            return
        if self.on_event_path(action):
            yield
            return
        self._acquire(slots)
        self._held.slots, self._held.since, self._held.worked = slots, self._clock(), 0.0
        try:
            yield
        finally:
            # not held if taking it again after a call was interrupted (the greenlet killed)
            if getattr(self._held, "slots", None) is not None:
                worked = self._held.worked + self._clock() - self._held.since
                self._held.slots = None
                self._release(slots, worked)

    def _acquire(self, slots) -> None:
        if slots.acquire(blocking=False):
            return
        with self._lock:
            self.waiting += 1
        try:
            admitted = slots.acquire(timeout=self.max_wait)
        finally:
            with self._lock:
                self.waiting -= 1
        if not admitted:
            with self._lock:
                self.refused += 1
            raise busy_fault()

    def _release(self, slots, worked: float) -> None:
        """Give the slot back, after its rest when events flow."""
        rest = worked * (self.concurrency / self.share - 1) if self.events_flowing() else 0.0
        if rest <= 0:
            slots.release()
            return
        with self._lock:
            self.rested += rest
        timer = threading.Timer(rest, slots.release)
        timer.daemon = True
        timer.start()

    def _let_go(self):
        """The slot this thread holds, let go (None if it holds none)."""
        slots = getattr(self._held, "slots", None)
        if slots is not None:
            self._held.worked += self._clock() - self._held.since
            self._held.slots = None
            slots.release()
        return slots

    def _take_again(self, slots) -> None:
        """The slot again if it is free; else the request goes on without one. Waiting for it
        could wait for ever: the holder may be waiting on a lock this request holds (a table
        role's Put holds its sending lock across the call to the dispatcher)."""
        if slots.acquire(blocking=False):
            self._held.slots, self._held.since = slots, self._clock()


@contextlib.contextmanager
def waiting_on_peer() -> Iterator[None]:
    """Around a call to another service: any control slot this thread holds is let go, and
    taken again once the call returns if it is free (:meth:`ControlGate._take_again`)."""
    released = [(gate, slots) for gate in list(_gates)
                if (slots := gate._let_go()) is not None]
    try:
        yield
    finally:
        for gate, slots in released:
            gate._take_again(slots)


@dataclass(frozen=True)
class AdmissionSettings(Settings):
    """The gate's settings, read by every role that serves events (``edn serve --set``)."""
    control_concurrency: int = setting(
        DEFAULT_CONTROL_CONCURRENCY, "control requests (Subscribe, Renew, GetStatus, "
        "Unsubscribe, administration) a worker works on at once; events never wait for them "
        "(0: no bound, and no share)")
    control_share: float = setting(DEFAULT_CONTROL_SHARE, "the part of a worker the control "
                                   "path may take while events flow (1: all of it)")
    control_wait: float = setting(DEFAULT_CONTROL_WAIT, "seconds a control request waits for "
                                  "its turn before it is answered wsa:EndpointUnavailable")

    def validate(self) -> None:
        if self.control_concurrency < 0:
            raise ValueError("control_concurrency must not be negative (0: no bound)")
        if not 0 < self.control_share <= 1:
            raise ValueError("control_share must be more than 0 and at most 1")
        if self.control_wait <= 0:
            raise ValueError("control_wait must be positive")

    def apply_to(self, gate: ControlGate) -> None:
        gate.configure(self.control_concurrency, self.control_share, self.control_wait)


def busy_fault():
    """``wsa:EndpointUnavailable`` with ``wsa:RetryAfter`` (milliseconds) in its detail."""
    retry = etree.Element(RETRY_AFTER, nsmap={"wsa": ns.WSA10})
    retry.text = str(RETRY_AFTER_MS)
    return receiver_fault(BUSY_REASON, ENDPOINT_UNAVAILABLE, detail=(retry,))
