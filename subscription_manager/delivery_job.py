"""One delivery job (:class:`Delivery`: a message to one endpoint, rendered lazily) and the
policy the delivery queue (:mod:`.delivery`) sends it under (:class:`DeliveryPolicy`:
workers, per-host limits, queue size, retries with backoff, age, probes of silent hosts)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["DeliveryPolicy", "Delivery", "NOTIFICATION", "SUBSCRIPTION_END", "MAX_PIPELINE",
           "JOB_BYTES"]

MAX_PIPELINE = 64  # most POSTs written on a connection before the first answer is read
#: what one queued job costs in memory besides its payload: the job, its message id, its
#: render arguments and the outbox's note of it (about 410 bytes measured with tracemalloc)
JOB_BYTES = 512
NOTIFICATION = "notification"
SUBSCRIPTION_END = "subscription-end"


@dataclass(frozen=True)
class DeliveryPolicy:
    workers: int = 32
    per_host: int = 8  # workers delivering to one host at once (at first, and at least)
    queue_size: int = 50_000
    # bytes the jobs accepted and not finished may hold (JOB_BYTES each and their share of
    # the payloads): a backlog of large events stays on disk, not in memory
    queue_bytes: int = 64 << 20
    retries: int = 3
    backoff: float = 0.5
    backoff_max: float = 30.0
    max_age: float | None = None  # seconds after acceptance a job may still be retried
    slow_after: float = 1.0  # an attempt longer than this makes its host suspect
    # most workers delivering to one host once its answers showed it takes more (an
    # adaptive limit, :mod:`.host_concurrency`); None: per_host (no adaptation)
    per_host_max: int | None = None
    probe_interval: float = 0.25  # seconds a host that gave no answer is left before a probe
    pipeline: int = 1  # POSTs written on a connection before the first answer (1: none)

    def __post_init__(self):
        if self.per_host_max is None:
            object.__setattr__(self, "per_host_max", self.per_host)
        if self.workers < 1 or self.queue_size < 1 or self.per_host < 1:
            raise ValueError("delivery needs at least one worker (per host too) and one "
                             "queue slot")
        if self.queue_bytes < JOB_BYTES:
            raise ValueError(f"queue_bytes must be at least one job's {JOB_BYTES} bytes")
        if self.per_host_max < self.per_host:
            raise ValueError("per_host_max must be at least per_host")
        if self.probe_interval <= 0:
            raise ValueError("probe_interval must be positive")
        if not 1 <= self.pipeline <= MAX_PIPELINE:
            raise ValueError(f"pipeline must be 1 (off) to {MAX_PIPELINE}")
        if self.retries < 0 or self.backoff < 0 or self.backoff_max < 0:
            raise ValueError("retries and backoff must not be negative")
        if self.slow_after <= 0:
            raise ValueError("slow_after must be positive")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(self.backoff_max, self.backoff * (2 ** (attempt - 1)))


@dataclass(eq=False, slots=True)
class Delivery:
    """One message to one endpoint. ``render`` builds the payload lazily in a worker: a
    callable (called once; retries reuse its bytes), or an object with a ``render`` method
    called with ``render_args`` (a notification template and its arguments, the message id
    last: no bound method or partial is made per notification, which the garbage collector
    would have to track). A template job with its message id renders the same bytes every
    time, so it keeps none between attempts: a job waiting out a backoff holds only its
    share of the event's bytes, as :attr:`charge` counts it."""

    url: str
    content_type: str
    action: str
    render: Callable[[], bytes] | Any | None = None
    payload: bytes | None = None
    subscription_id: str | None = None
    kind: str = NOTIFICATION
    attempt: int = 0
    last_error: str | None = field(default=None, repr=False)
    # durable jobs (the outbox): the row, when the event was accepted (wall clock) and when
    # the first attempt failed; ``topic`` for the dead letter
    outbox_id: int | None = None
    created: float | None = None
    first_attempt: float | None = None
    topic: str = ""
    render_args: tuple | None = None
    retry_due: bool = False  # waiting in the retry timer (False once taken out early)
    # the bytes of payload this job holds alone (its share where jobs share one event's
    # bytes), charged against the queue's byte budget with JOB_BYTES
    size: int = 0

    @property
    def charge(self) -> int:
        """What this job counts against :attr:`DeliveryPolicy.queue_bytes`."""
        return JOB_BYTES + self.size

    def body(self) -> bytes:
        if self.payload is not None:
            return self.payload
        if self.render_args is not None:
            payload = self.render.render(*self.render_args)
            if self.render_args[-1] is not None:  # the same bytes again at the next attempt
                return payload
            self.payload = payload  # a fresh message id each time: keep this one
        else:
            self.payload = self.render()
        self.render = self.render_args = None
        return self.payload
