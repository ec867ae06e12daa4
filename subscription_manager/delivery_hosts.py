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

A request into a cut link hangs: its packets are dropped, and TCP sends them again only
after a backoff that grows with the cut (0.2 s, 0.6 s, 1.4 s, 3 s, 6.2 s ... for an open
connection; 1 s, 3 s ... for a SYN), so workers whose requests went out during a cut learn
of the heal seconds late, and the host's jobs wait behind them. When a host with jobs
waiting has settled no attempt for a probe interval although workers are at it, those
workers are *stalled*: they stop counting against the host's limit (up to
:data:`MAX_STALLED` of them), so another worker tries it on a connection of its own, and so
each interval. A fresh attempt thus starts at most a probe interval after a link heals, and
the host's whole limit of fresh workers follows the first answer. A stalled attempt that is
answered late says nothing about the host's speed (it does not make the host suspect).
A host that answers slowly is suspect, one worker at a time; its worker may be stalled too,
but only :data:`MAX_STALLED_SLOW` of them and only after twice the host's fastest answer:
on a lossy link a request may wait seconds for TCP to send it again, and when the loss
ends a fresh connection gets through at once, while a sink that is merely slow gets at
most that many more requests.

An attempt that gets no answer after one started later has settled is *old news*: what it
says is known already (the later one failed too), or no longer true (the later one was
answered: the attempt is *overtaken*; a request sent into a cut times out seconds after the
heal). It neither makes the host suspect nor parks it again nor counts against its limit,
and an overtaken attempt's job is tried again at once rather than after a backoff, so a
backlog drains at the host's full limit from the first answer after a heal.
"""
from __future__ import annotations

import collections
import re
from typing import Callable

from .delivery_job import Delivery, DeliveryPolicy
from .host_concurrency import AdaptiveLimit

__all__ = ["HostQueue", "StallCheck", "ReusedApprovals", "host_of", "MAX_CACHED_URLS", "MAX_STALLED",
           "MAX_STALLED_SLOW"]

_AUTHORITY = re.compile(r"[^/?#]*")
MAX_CACHED_URLS = 10_000  # URLs whose host key and approval are remembered
# stalled workers a host may have beyond its limit, each held by a hanging attempt: its
# limit's worth of requests sent into a cut (read timeout 10 s) and a probe each interval
# that hangs on its connect (3 s): 8 + 6 at the defaults
MAX_STALLED = 16
MAX_STALLED_SLOW = 2  # ... of a host that answers, slowly


def host_of(url: str) -> str:
    """The queue a job waits in: its URL's authority, lower-cased (no resolution here; the
    URL policy judges the address when the job is delivered)."""
    rest = url.partition("://")[2]
    return _AUTHORITY.match(rest).group().lower()


class HostQueue:
    """One target host's waiting jobs and how many workers deliver to it now."""

    __slots__ = ("key", "jobs", "active", "ready", "suspect", "unanswered", "takes",
                 "in_flight", "stalled", "check_due", "answers", "answered_start", "settled_start",
                 "retrying", "parked_until", "control", "silent_at", "_newest_last")

    def __init__(self, key: str, control: AdaptiveLimit):
        self.key = key
        self.jobs: collections.deque[Delivery] = collections.deque()
        self.active = 0
        self.ready = False  # in the deliverer's ready queue
        self.suspect = False  # the last attempt failed to connect or answered slowly
        self.unanswered = False  # the last attempt got no answer at all
        self.takes = 0  # workers that took jobs of it so far (a take's number)
        self.in_flight: set[int] = set()  # the takes of the workers at it now
        self.stalled: set[int] = set()  # those found stalled (not counted against the limit)
        self.check_due = False  # a StallCheck for this host is in the timer
        self.answers = 0  # attempts answered: a stall check looks for news
        self.answered_start = float("-inf")  # when the latest-started answered attempt began
        self.settled_start = float("-inf")  # ... and the latest-started attempt of news
        self.retrying: set[Delivery] = set()  # its jobs waiting out a retry backoff
        self.parked_until = 0.0  # no worker takes a job before (the deliverer's clock)
        self.control = control  # outlives the queue: a host's limit is remembered
        self.silent_at = float("-inf")  # when it was last found silent (its workers stalled)
        self._newest_last = False  # the last take of a backlog was of the newest jobs

    @staticmethod
    def new_limit(policy: DeliveryPolicy) -> AdaptiveLimit:
        """A host's limit as it starts: ``per_host``, adapted up to ``per_host_max``."""
        return AdaptiveLimit(policy.per_host, floor=policy.per_host, ceiling=policy.per_host_max)

    def limit(self) -> int:
        """Workers that may deliver to this host at once."""
        return (1 if self.suspect else self.control.limit) + len(self.stalled)

    def take(self) -> int:
        """A worker takes jobs: its take's number."""
        self.active += 1
        self.takes += 1
        self.in_flight.add(self.takes)
        return self.takes

    def release(self, take: int) -> None:
        self.active -= 1
        self.in_flight.discard(take)
        self.stalled.discard(take)

    @property
    def slow(self) -> bool:
        """Suspect for answering slowly (not for giving no answer)."""
        return self.suspect and not self.unanswered

    def stall_cap(self) -> int:
        """Most stalled workers it may have now."""
        return MAX_STALLED_SLOW if self.slow else MAX_STALLED

    def stall(self, now: float) -> None:
        """The host answered nothing for a stall interval up to ``now``: the workers at it
        now are stalled (the oldest first, up to the most allowed)."""
        self.silent_at = now
        cap = self.stall_cap()
        for take in sorted(self.in_flight - self.stalled):
            if len(self.stalled) >= cap:
                break
            self.stalled.add(take)

    def settled(self, answered: bool, slow: bool, started: float) -> bool:
        """An attempt begun at ``started`` ended: suspect unless answered in time (a slow
        answer while workers are stalled is a stalled one's, late because of the network).
        False, with nothing changed, when it got no answer and is old news (see the module
        docstring)."""
        if answered:
            self.answered_start = max(self.answered_start, started)
        elif started < self.settled_start:
            return False
        self.settled_start = max(self.settled_start, started)
        self.suspect = not answered or (slow and not self.stalled)
        self.unanswered = not answered
        self.answers += answered
        return True

    def spanned_silence(self, seconds: float, now: float) -> bool:
        """Whether an attempt that took ``seconds`` and ended by ``now`` began before the
        host was last found silent: its answer, however late, tells of an outage (a cut
        shorter than the timeout, a paused process), not of a host with too many requests,
        and is read by the limit as no answer (:class:`~.host_concurrency.AdaptiveLimit`)."""
        return now - seconds < self.silent_at

    def newest_next(self, limit: int) -> bool:
        """Whether the next take is of the newest jobs: while more jobs wait than ``limit``
        workers take at once (a backlog), every other take; else none (in order)."""
        if len(self.jobs) <= limit:
            self._newest_last = False
            return False
        self._newest_last = not self._newest_last
        return self._newest_last

    def overtaken(self, started: float) -> bool:
        """Whether the host answered an attempt begun after ``started``."""
        return started < self.answered_start

    def can_take(self, now: float) -> bool:
        """Whether another worker may take jobs of this host now."""
        return self.active < self.limit() and self.parked_until <= now


class StallCheck:
    """A timer item: if ``host`` has answered no attempt since ``answers`` was read while
    workers not yet stalled were at it and jobs wait (and it is not merely slow), its active
    workers are stalled."""

    __slots__ = ("host", "answers")

    def __init__(self, host: HostQueue):
        self.host = host
        self.answers = host.answers

    def due(self) -> bool:
        host = self.host
        return (host.active > len(host.stalled) and bool(host.jobs)
                and host.answers == self.answers and len(host.stalled) < host.stall_cap())


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
