"""Measuring the dispatcher's throughput-model parameters on the live system (paper V-B).

The dispatcher keeps cumulative counters; :class:`Counters` is one reading of them, and
:func:`between` turns two readings into the model's parameters over that stretch of time.
:class:`SlidingWindow` keeps readings (one per tick) and answers over the last ``span``
seconds. How each figure is measured:

============  ===================================================================================
T_d           routing time per server per event, as the paper defines it: the CPU time of the
              thread that routes, read with ``time.thread_time()`` around the route set's
              ``match`` (reading the event's attributes and the summary lookup), divided by
              the events routed and by N_s. Thread CPU time, not wall time: with the GIL,
              wall time around a call includes other threads' turns. 0 at "no summary".
T_c           per-copy sending cost: the CPU time of the per-server sender threads (building
              each batch envelope, the HTTP POST), read with ``pthread_getcpuclockid``,
              divided by the copies they sent. Waiting on the link cap sleeps: no CPU.
T_f           per-event fixed overhead (receive, parse, copy and serialize the event once,
              queue it, answer): the process CPU time (``time.process_time()``, all
              threads) minus routing and sender CPU, divided by the events routed. It also
              carries whatever else the process does (admin requests, summary updates,
              garbage collection, this measuring): small next to events at load.
R             copies queued / (events routed x N_s).
S_m           bytes sent / copies sent (the batch envelope shared by a batch's copies).
events/s      events routed per second; with the dispatcher's backpressure (queues kept
              short) this is also the rate they leave at.
cpu           process CPU seconds per wall second: the load as a fraction of ONE core
              (the GIL makes one core the ceiling of a Python dispatcher).
busy          utilization: the fraction of the time the dispatcher had a request in hand,
              not counting publishers held back by backpressure (:mod:`wsframework.utilization`).
              ~1.0 when the dispatcher is the bottleneck, whatever CPU it manages to get.
bytes_out/s   bytes the sender threads posted per second (the outgoing link).
============  ===================================================================================

Then TP_D = 1 / (T_f + T_d N_s + T_c R N_s) (eq. 3), and the CPU it predicts is
events/s x (T_f + T_d N_s + T_c R N_s) = cpu: the decomposition is exact by construction, the
prediction is whether the same T_f, T_c and the T_d, R of another precision predict the
throughput there.
"""
from __future__ import annotations

import collections
import threading
import time
from dataclasses import asdict, dataclass

from .throughput import OperatingPoint, SystemParameters

__all__ = ["Counters", "Measurement", "between", "SlidingWindow", "thread_cpu_seconds"]


@dataclass(frozen=True)
class Counters:
    """Cumulative counters of a dispatcher, read at ``time`` (monotonic seconds)."""

    time: float
    cpu: float = 0.0          # process CPU seconds
    route_cpu: float = 0.0    # CPU seconds routing events
    forward_cpu: float = 0.0  # CPU seconds of the sender threads
    events: int = 0           # events routed
    copies: int = 0           # copies queued for servers
    sent: int = 0             # copies the sender threads delivered
    bytes_out: int = 0        # bytes they posted
    servers: int = 0          # N_s at the reading
    busy: float = 0.0         # seconds with a request in hand (wsframework.utilization)
    backlog: int = 0          # copies queued for live servers, not yet sent (now, not cumulative)


@dataclass(frozen=True)
class Measurement:
    """The model's parameters over one stretch of time (see the module docstring)."""

    seconds: float
    events: int
    events_per_s: float
    cpu: float
    t_f: float
    t_d: float
    t_c: float
    hit_ratio: float
    message_size: float
    bytes_out_per_s: float
    copies_per_s: float
    servers: int
    busy: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def tp_d(self) -> float:
        """Eq. (3) from these parameters: what the dispatcher CPU alone would allow."""
        cost = self.t_f + self.servers * (self.t_d + self.t_c * self.hit_ratio)
        return 1.0 / cost if cost > 0 else float("inf")

    def operating_point(self, precision: float | None) -> OperatingPoint:
        return OperatingPoint(precision, self.t_d, min(1.0, max(0.0, self.hit_ratio)))

    def system_parameters(self, bandwidth: float | None = None) -> SystemParameters:
        """T_f, T_c and S_m measured here, with link bandwidth ``bandwidth`` (bytes/s)."""
        size = self.message_size if bandwidth else None
        return SystemParameters(n_servers=max(1, self.servers), t_f=max(0.0, self.t_f),
                                t_c=max(0.0, self.t_c), bandwidth=bandwidth,
                                message_size=size if size else (1.0 if bandwidth else None))


def between(a: Counters, b: Counters) -> Measurement:
    """The parameters over the time from reading ``a`` to reading ``b``."""
    wall = b.time - a.time
    events = b.events - a.events
    sent = b.sent - a.sent
    cpu = b.cpu - a.cpu
    route = b.route_cpu - a.route_cpu
    forward = b.forward_cpu - a.forward_cpu
    servers = b.servers or a.servers
    per_event = 1.0 / events if events > 0 else 0.0
    return Measurement(
        seconds=wall,
        events=events,
        events_per_s=events / wall if wall > 0 else 0.0,
        cpu=cpu / wall if wall > 0 else 0.0,
        t_f=max(0.0, cpu - route - forward) * per_event,
        t_d=route * per_event / servers if servers else 0.0,
        t_c=forward / sent if sent > 0 else 0.0,
        hit_ratio=(b.copies - a.copies) * per_event / servers if servers else 0.0,
        message_size=(b.bytes_out - a.bytes_out) / sent if sent > 0 else 0.0,
        bytes_out_per_s=(b.bytes_out - a.bytes_out) / wall if wall > 0 else 0.0,
        copies_per_s=sent / wall if wall > 0 else 0.0,
        servers=servers,
        busy=min(1.0, max(0.0, (b.busy - a.busy) / wall)) if wall > 0 else 0.0,
    )


class SlidingWindow:
    """Readings over the last ``span`` seconds (thread-safe)."""

    def __init__(self, span: float = 10.0):
        if span <= 0:
            raise ValueError("span must be positive")
        self.span = span
        self._readings: collections.deque[Counters] = collections.deque()
        self._lock = threading.Lock()

    def add(self, reading: Counters) -> None:
        with self._lock:
            self._readings.append(reading)
            # keep one reading at or before the window's start, so the window spans `span`
            while len(self._readings) > 2 and self._readings[1].time <= reading.time - self.span:
                self._readings.popleft()

    def latest(self) -> Counters | None:
        with self._lock:
            return self._readings[-1] if self._readings else None

    def measurement(self, span: float | None = None) -> Measurement | None:
        """Parameters from the reading ``span`` (default the window's) seconds before the
        latest one to the latest (None before two readings)."""
        with self._lock:
            if len(self._readings) < 2:
                return None
            last = self._readings[-1]
            start = last.time - (span or self.span)
            first = self._readings[0]
            for reading in self._readings:
                if reading.time > start:
                    break
                first = reading
            if first is last:
                first = self._readings[-2]
        return between(first, last)


def thread_cpu_seconds(thread: threading.Thread) -> float:
    """CPU seconds ``thread`` has used so far (0.0 when it is gone or the platform cannot
    tell)."""
    ident = thread.ident
    if ident is None or not thread.is_alive():
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError, ValueError):
        return 0.0
