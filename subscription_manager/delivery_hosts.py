"""The delivery queue's targets: one host's queue (:class:`HostQueue`: its waiting jobs, the
workers delivering to it now, how many it may have -- :mod:`.host_concurrency`'s adaptive
limit, one when the host is suspect -- and whether it is parked after a failed connection),
and URL approvals reused for a while (:class:`ReusedApprovals`).

A host is *suspect* after an attempt that got no answer (a timeout, a refused or broken
connection) or a slow one: one worker at a time delivers to it, one job at a time. After an
attempt that got no answer the host is also *parked* until a probe time: no worker takes
its jobs until then, so the jobs wait in the queue instead of each failing and moving to
the retry timer with a growing backoff; at the probe time one job tries again. When the
host answers again, its whole queue flows at once at the host's limit, with no job waiting
out a backoff it did not need.
"""
from __future__ import annotations

import collections
import re
from typing import Callable

from .delivery_job import Delivery, DeliveryPolicy
from .host_concurrency import AdaptiveLimit

__all__ = ["HostQueue", "ReusedApprovals", "host_of", "MAX_CACHED_URLS"]

_AUTHORITY = re.compile(r"[^/?#]*")
MAX_CACHED_URLS = 10_000  # URLs whose host key and approval are remembered


def host_of(url: str) -> str:
    """The queue a job waits in: its URL's authority, lower-cased (no resolution here; the
    URL policy judges the address when the job is delivered)."""
    rest = url.partition("://")[2]
    return _AUTHORITY.match(rest).group().lower()


class HostQueue:
    """One target host's waiting jobs and how many workers deliver to it now."""

    __slots__ = ("key", "jobs", "active", "ready", "suspect", "parked_until", "control")

    def __init__(self, key: str, control: AdaptiveLimit):
        self.key = key
        self.jobs: collections.deque[Delivery] = collections.deque()
        self.active = 0
        self.ready = False  # in the deliverer's ready queue
        self.suspect = False  # the last attempt failed to connect or answered slowly
        self.parked_until = 0.0  # no worker takes a job before (the deliverer's clock)
        self.control = control  # outlives the queue: a host's limit is remembered

    @staticmethod
    def new_limit(policy: DeliveryPolicy) -> AdaptiveLimit:
        """A host's limit as it starts: ``per_host``, adapted up to ``per_host_max``."""
        return AdaptiveLimit(policy.per_host, floor=policy.per_host, ceiling=policy.per_host_max)

    def limit(self) -> int:
        """Workers that may deliver to this host at once."""
        return 1 if self.suspect else self.control.limit

    def can_take(self, now: float) -> bool:
        """Whether another worker may take jobs of this host now."""
        return self.active < self.limit() and self.parked_until <= now


class ReusedApprovals:
    """``approve(url)`` asks ``approve_target(url)`` and reuses its answer for ``ttl``
    seconds (0: never reused). Refusals are never reused: they give the job up, and the next
    job asks again."""

    def __init__(self, approve_target: Callable[[str], str] | None, ttl: float, clock):
        self._approve_target = approve_target
        self._ttl = ttl
        self._clock = clock
        self._approvals: dict[str, tuple[float, str]] = {}  # url -> (until, approved)

    def approve(self, url: str) -> str:
        if self._ttl <= 0:
            return self._approve_target(url)
        now = self._clock()
        cached = self._approvals.get(url)
        if cached is not None and cached[0] > now:
            return cached[1]
        approved = self._approve_target(url)
        if len(self._approvals) >= MAX_CACHED_URLS:
            self._approvals.clear()
        self._approvals[url] = (now + self._ttl, approved)
        return approved
