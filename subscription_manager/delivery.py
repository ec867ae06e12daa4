"""Push delivery that never blocks publication, with bounded concurrency per target host.

Publication hands each (subscription, event) pair to :meth:`Deliverer.submit`, which only
puts a small job on its target host's queue; a fixed pool of workers (threads, or greenlets
under gunicorn's gevent worker; started once) takes jobs host by host, has each target
approved (:class:`~wsframework.urlpolicy.UrlPolicy`), and POSTs it to the approved address
through the injected transport (:class:`~wsframework.transport.LeanHttpTransport`'s pooled
keep-alive connections in production, an in-process transport in tests).

Hosts
-----
Jobs wait in one queue per target host (the URL's authority; :mod:`.delivery_hosts`). At
most the host's limit of workers deliver to it at once: ``per_host`` at first, adapted up
to ``per_host_max`` by its answers (:mod:`.host_concurrency`), so a far host gets enough
requests in flight to fill its round trip and a slow sink holds a bounded number of
workers. A host whose last attempt got no answer (a timeout, a refused or broken
connection) or a slower one than ``slow_after`` is *suspect*: one worker, one job at a
time, until it answers in time again; after no answer it is also parked: its jobs wait (no
attempt spent) until a probe ``probe_interval`` (at most ``backoff``) later. An idle host's
queue is forgotten; an idle suspect host is remembered (up to 10,000) and starts suspect.

A target is approved once per URL per worker batch, and an approval is reused for
``approval_ttl`` seconds (the manager passes at most 1 s, and 0 when the URL policy's
``target_cache_ttl`` is 0): the pinned address may then be up to that much older than the
policy's own cache would keep it.

Policies
--------
* **Full queue: drop the newest.** ``submit`` never waits. When ``queue_size`` jobs wait
  (all hosts together), or the jobs accepted and not finished would hold more than
  ``queue_bytes`` (each charged ``JOB_BYTES`` and its share of the payload bytes), the job
  being submitted is dropped, counted (``dropped``) and logged (at most every few
  seconds). The manager's durable jobs stay in the outbox and are taken again by its
  sweep: a backlog of large events waits on disk, not in memory.
* **Retries with exponential backoff.** A failed POST (transport error or non-2xx status) is
  retried ``retries`` times after ``backoff * 2**(n-1)`` seconds (capped by
  ``backoff_max``). Waiting retries sit in a timer heap, not in a worker, so one dead sink
  does not stall delivery to the others. The retried message is byte-identical (same
  ``wsa:MessageID``), so a sink can discard duplicates.
* **Giving up.** After the last retry -- or at once when the target is refused by the
  address policy -- ``on_give_up(job)`` is called (the manager dead-letters it and ends the
  subscription with SubscriptionEnd/DeliveryFailure); jobs for a subscription that is no
  longer wanted when they reach a worker are discarded without a POST.
* **A backlog does not hold back what is new** (adaptive LIFO). While a host's queue is
  longer than its limit (after an outage, a pause, a restart), every other take is of its
  newest jobs instead of its oldest: a notification published after a host came back goes
  at once rather than behind the whole backlog, and the backlog drains from both ends at
  the host's full rate. A queue within its limit is taken in order.
* Ordering between notifications of one subscription is not guaranteed (WS-Eventing
  promises none); several workers may deliver to the same sink at once.

Counters (``stats()``): queued, delivered, failed, dropped, retries, discarded, refused,
slow (answers slower than ``slow_after``); pending, queue_depth, hosts (with jobs waiting or
in flight, and idle suspect ones), host_limit_max (the largest host limit now).
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

from wsframework.store import release_connections
from wsframework.urlpolicy import UrlRefused

from .delivery_hosts import MAX_CACHED_URLS, HostQueue, ReusedApprovals, StallCheck, host_of
from .delivery_job import JOB_BYTES, NOTIFICATION, SUBSCRIPTION_END, Delivery, DeliveryPolicy
from .delivery_timer import DueTimer
from .host_concurrency import AdaptiveLimit

log = logging.getLogger(__name__)

__all__ = ["DeliveryPolicy", "Delivery", "Deliverer", "NOTIFICATION", "SUBSCRIPTION_END"]

_DROP_LOG_INTERVAL = 5.0
_BATCH = 16  # most jobs a worker takes from one host at a time
# A worker sends its jobs one after another, so a batch to a host 80 ms away would hold them
# (and the readings that adapt the host's limit) for 16 round trips: a take is sized to
# about this many seconds of the host's latest answer time.
_BATCH_SECONDS = 0.02
_MAX_SUSPECTS_KEPT = 10_000  # idle suspect hosts remembered (beyond: forgotten when idle)


def _batch_for(host: HostQueue) -> int:
    """Jobs one worker takes from ``host`` at a time (see :data:`_BATCH_SECONDS`)."""
    answer = host.control.last_answer
    if answer is None:
        return 1  # nothing known yet: one, and the first answer tells
    return max(1, min(_BATCH, int(_BATCH_SECONDS / max(answer, 1e-4))))


class Deliverer:
    def __init__(self, transport, policy: DeliveryPolicy = DeliveryPolicy(), *,
                 approve_target: Callable[[str], str] | None = None,
                 is_wanted: Callable[[str], bool] | None = None,
                 on_give_up: Callable[[Delivery], None] | None = None,
                 on_finish: Callable[[Delivery, str], None] | None = None,
                 on_retry: Callable[[Delivery, float], None] | None = None,
                 approval_ttl: float = 0.0,
                 clock=time.monotonic, wall_clock=time.time):
        """``approval_ttl``: seconds an approval of a URL (by ``approve_target``) is reused
        for later jobs to the same URL (0: each batch of jobs has its URLs approved anew)."""
        self.transport = transport
        self._approvals = ReusedApprovals(approve_target, approval_ttl, clock)
        self._host_keys: dict[str, str] = {}  # url -> its host queue
        self.policy = policy
        self._approve_target = approve_target
        self._is_wanted = is_wanted
        self._on_give_up = on_give_up
        # Durable jobs: on_finish(job, outcome) when a job leaves memory (delivered,
        # discarded, failed, dropped); on_retry(job, delay) before a retry is scheduled.
        self._on_finish = on_finish
        self._on_retry = on_retry
        self._clock = clock
        self._wall_clock = wall_clock
        # One lock guards the host queues, the counters and the pending count, so a whole
        # event's fan-out is queued in one acquisition (per-job puts convoy with the
        # waking workers).
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here for a ready host
        self._idle = threading.Condition(lock)  # drain() waits here for pending == 0
        self._hosts: dict[str, HostQueue] = {}
        self._limits: dict[str, AdaptiveLimit] = {}  # host -> its limit, kept while idle
        self._ready: collections.deque[HostQueue] = collections.deque()
        self._queued = 0  # jobs waiting in host queues
        self._counts = dict.fromkeys(
            ("queued", "delivered", "failed", "dropped", "retries", "discarded", "refused",
             "slow"), 0)
        self._pending = 0  # accepted (incl. waiting retries) and not finished
        self._held_bytes = 0  # the pending jobs' charges (policy.queue_bytes bounds them)
        self._timer = DueTimer(self._due, clock)  # retries waiting, parked hosts' probes
        self._threads: list[threading.Thread] = []
        self._started = False
        self._closed = False
        self._last_drop_log = 0.0

    # -- submission ------------------------------------------------------------------------
    def submit(self, job: Delivery) -> bool:
        """Queue ``job`` without waiting; False (counted dropped) if full or closed."""
        return self.submit_many((job,)) == 1

    def submit_many(self, jobs) -> int:
        """Queue several jobs in one step; returns how many were accepted (the first ones
        that fit the queue's room in jobs and in bytes; the rest were dropped: the queue
        keeps what it already holds)."""
        if not self._started:
            self._start()
        jobs = list(jobs)
        keys = [self._host_key(job.url) for job in jobs]
        with self._cond:
            space = 0 if self._closed else max(0, self.policy.queue_size - self._queued)
            accepted, charged = self._fitting(jobs, space)
            dropped = len(jobs) - accepted
            if accepted:
                woken = 0
                for job, key in zip(jobs[:accepted], keys):
                    woken += self._enqueue(key, job)
                self._pending += accepted
                self._held_bytes += charged
                self._counts["queued"] += accepted
                # one worker per host made ready: a worker taking a host with jobs left
                # wakes the next (_take), so waking more would only have them find nothing
                if woken:
                    self._cond.notify(woken)
            if dropped:
                self._counts["dropped"] += dropped
        if dropped:
            self._log_drop(jobs[accepted], dropped)
        return accepted

    def _host_key(self, url: str) -> str:
        key = self._host_keys.get(url)
        if key is None:
            if len(self._host_keys) >= MAX_CACHED_URLS:
                self._host_keys.clear()
            key = self._host_keys[url] = host_of(url)
        return key

    def _enqueue(self, key: str, job: Delivery, *, front: bool = False) -> int:
        """Put ``job`` in its host's queue (under the lock); 1 if the host became ready."""
        host = self._hosts.get(key)
        if host is None:
            control = self._limits.get(key)
            if control is None:
                if len(self._limits) >= MAX_CACHED_URLS:
                    self._limits.clear()
                control = self._limits[key] = HostQueue.new_limit(self.policy)
            host = self._hosts[key] = HostQueue(key, control)
        if front:
            host.jobs.appendleft(job)
        else:
            host.jobs.append(job)
        self._queued += 1
        if not host.ready and host.active < host.limit() and not host.parked_until:
            host.ready = True
            self._ready.append(host)
            return 1
        return 0

    def _fitting(self, jobs: list[Delivery], space: int) -> tuple[int, int]:
        """(Under the lock.) How many of ``jobs``, from the first, fit ``space`` jobs and
        the byte budget, and what they charge. One job is taken whatever its size when
        nothing is held, so that a payload over the budget is still delivered."""
        budget = self.policy.queue_bytes - self._held_bytes
        count = charged = 0
        for job in jobs[:space]:
            charge = job.charge
            if charged + charge > budget and (count or self._held_bytes):
                break
            count += 1
            charged += charge
        return count, charged

    def room(self) -> int:
        """Jobs the queue would take now (``queue_size`` less those waiting)."""
        return max(0, self.policy.queue_size - self._queued)

    def room_for(self, events) -> int:
        """How many jobs of ``events`` (pairs of a job count and each job's ``size``), in
        order, the queue would take now: the room in jobs and in bytes, as
        :meth:`submit_many` would count it."""
        with self._cond:
            space = max(0, self.policy.queue_size - self._queued)
            budget = self.policy.queue_bytes - self._held_bytes
            held = self._held_bytes
        count = 0
        for copies, size in events:
            charge = JOB_BYTES + size
            fit = min(copies, space - count, max(0, budget // charge))
            if fit == 0 and count == 0 and held == 0 and copies and space:
                fit = 1  # as _fitting: one job whatever its size when nothing is held
            count += fit
            budget -= fit * charge
            if fit < copies:
                break
        return count

    def held_bytes(self) -> int:
        """What the jobs accepted and not finished are charged (see ``queue_bytes``)."""
        return self._held_bytes

    def submit_later(self, job: Delivery, delay: float) -> bool:
        """Accept ``job`` for a first try after ``delay`` seconds (a persisted retry loaded
        from the outbox); False if the deliverer is closed."""
        if not self._started:
            self._start()
        with self._cond:
            if self._closed:
                return False
            self._pending += 1
            self._held_bytes += job.charge
            self._counts["queued"] += 1
            job.retry_due = True
        self._schedule(job, max(0.0, delay))
        return True

    def _log_drop(self, job: Delivery, dropped: int) -> None:
        with self._cond:
            total, now = self._counts["dropped"], self._clock()
            if now - self._last_drop_log < _DROP_LOG_INTERVAL:
                return
            self._last_drop_log = now
        log.warning("delivery queue full (%d slots, %d bytes): %d message(s) not taken, e.g. "
                    "a %s to %s (%d so far; durable ones wait in the outbox)",
                    self.policy.queue_size, self.policy.queue_bytes, dropped, job.kind,
                    job.url, total)

    # -- workers ---------------------------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._started or self._closed:
                return
            self._started = True
            for index in range(self.policy.workers):
                thread = threading.Thread(target=self._work, name=f"delivery-{index}", daemon=True)
                thread.start()
                self._threads.append(thread)
            timer = threading.Thread(target=self._timer.run, name="delivery-retry", daemon=True)
            timer.start()
            self._threads.append(timer)

    def _take(self) -> tuple[HostQueue, list[Delivery], int, int] | None:
        """The next ready host, a fair share of its jobs, how many workers deliver to it
        with this one, and this take's number (under the lock)."""
        with self._cond:
            while True:
                while not self._ready:
                    if self._closed:
                        return None
                    self._cond.wait()
                host = self._ready.popleft()
                host.ready = False
                limit = host.limit()
                if host.active < limit and not host.parked_until:
                    break
                # it turned suspect or was parked while it waited: _release or the probe
                # timer makes it ready again
            jobs = host.jobs
            # A fair share of the host's jobs among the workers it may have: low lock
            # traffic without leaving those workers idle; one at a time to a suspect host.
            # A pipelined take goes in one round trip: up to ``pipeline`` whatever the
            # host's distance.
            size = max(_batch_for(host), self.policy.pipeline)
            take = 1 if host.suspect else min(size, max(1, len(jobs) // limit), len(jobs))
            if host.newest_next(limit):  # a backlog: every other take is of the newest
                batch = [jobs.pop() for _ in range(take)]
            else:
                batch = [jobs.popleft() for _ in range(take)]
            self._queued -= take
            number = host.take()
            if not host.check_due:  # stalled if no attempt settles for a probe interval
                host.check_due = True
                self._schedule(StallCheck(host), self._stall_interval(host))
            if jobs and host.active < limit:
                host.ready = True
                self._ready.append(host)
                self._cond.notify()
            return host, batch, host.active, number

    def _release(self, host: HostQueue, unsent: list[Delivery],
                 readings: list[tuple[float, bool]], in_flight: int, number: int) -> None:
        """A worker is done with ``host``: ``unsent`` jobs back to the head of its queue,
        ``readings`` (seconds, answered) to its limit; parked if the last got no answer."""
        with self._cond:
            host.release(number)
            now = self._clock()
            for seconds, answered in readings:
                # an answer that waited out a silence says nothing of congestion
                answered = answered and not host.spanned_silence(seconds, now)
                host.control.observe(seconds, answered=answered, in_flight=in_flight)
            if readings and not readings[-1][1] and not host.parked_until and not self._closed:
                park = self._probe_interval()
                host.parked_until = self._clock() + park
                self._schedule(host, park)
            if self._closed:
                return  # close() abandoned what was queued; ``unsent`` with it
            for job in reversed(unsent):  # back at the head of the host's queue
                host.jobs.appendleft(job)
                self._queued += 1
            if host.jobs:
                if (not host.ready and host.active < host.limit() and not host.parked_until
                        and not self._closed):
                    host.ready = True
                    self._ready.append(host)
                    self._cond.notify()
            elif (host.active == 0 and self._hosts.get(host.key) is host
                  and (not host.suspect or len(self._hosts) > _MAX_SUSPECTS_KEPT)):
                # a suspect host is remembered (idle) so its next jobs start with one worker
                del self._hosts[host.key]

    def _work(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            host, batch, in_flight, number = taken
            readings: list[tuple[float, bool]] = []
            finished, unsent = self._deliver_batch(host, batch, readings)
            self._finish_many(finished)
            # the store connections the batch's outcomes were written through go back to
            # their stores: of the many workers, only the busy ones need one at a time
            release_connections()
            self._release(host, unsent, readings, in_flight, number)

    def _deliver_batch(self, host: HostQueue, batch: list[Delivery], readings: list
                       ) -> tuple[list[tuple[str, Delivery]], list[Delivery]]:
        """A worker's batch to one host, one POST after another (a subclass may send it
        otherwise: :mod:`.delivery_pipelined`). Returns the jobs finished (with their
        counter) and those left unsent (the host turned suspect: others may have the
        workers meanwhile)."""
        approved: dict[str, str] = {}  # one approval per URL per batch
        finished: list[tuple[str, Delivery]] = []
        for index, job in enumerate(batch):
            try:
                outcome = self._deliver(job, approved, host, readings)
            except Exception:  # a bug here must not kill the worker
                log.exception("delivery of a %s to %s failed unexpectedly", job.kind, job.url)
                outcome = "failed"
            if outcome is not None:
                finished.append((outcome, job))
            if host.suspect and index + 1 < len(batch):
                return finished, batch[index + 1:]
        return finished, []

    def _deliver(self, job: Delivery, approved: dict[str, str],
                 host: HostQueue | None = None, readings: list | None = None) -> str | None:
        """Deliver once: the counter to bump when the job is finished, or None when it was
        handed on (to a retry, or to the give-up handler that finishes it)."""
        url, outcome = self._target(job, approved)
        if url is None:
            return outcome
        started = self._clock()
        try:
            answer = self.transport.post(url, job.body(), job.content_type, job.action)
        except Exception as exc:  # TransportError, or anything a custom transport raises
            answer = exc
        return self._settle(job, answer, self._clock() - started, host, readings)

    def _target(self, job: Delivery, approved: dict[str, str]) -> tuple[str | None, str | None]:
        """(the approved URL, None) to send ``job`` to, or (None, outcome) when it is not to
        be sent: discarded (its subscription is gone), or refused (given up: None)."""
        if (job.kind == NOTIFICATION and job.subscription_id is not None
                and self._is_wanted is not None and not self._is_wanted(job.subscription_id)):
            return None, "discarded"
        url = approved.get(job.url)
        if url is None:
            url = job.url
            try:
                if self._approve_target is not None:
                    # The approved URL carries the checked address: the transport connects
                    # there and does not resolve the name again (no DNS-rebinding window).
                    url = approved[job.url] = self._approvals.approve(job.url)
            except UrlRefused as refused:
                job.last_error = refused.reason
                log.warning("refusing to deliver a %s to %s: %s", job.kind, job.url,
                            refused.reason)
                with self._cond:
                    self._counts["refused"] += 1
                self._give_up(job)
                return None, None
        return url, None

    def _settle(self, job: Delivery, answer, seconds: float, host: HostQueue | None,
                readings: list | None) -> str | None:
        """An attempt's ``answer`` (a TransportResponse, or the exception raised): marks
        ``host`` suspect or not by whether it answered (before any hand-off), notes
        (seconds, answered) in ``readings``, and finishes the job or hands it on."""
        reached = not isinstance(answer, BaseException)
        ok = reached and 200 <= answer.status < 300
        if not reached:
            job.last_error = str(answer)
        elif not ok:
            job.last_error = f"HTTP {answer.status}"
        slow = reached and seconds > self.policy.slow_after
        if slow:
            with self._cond:
                self._counts["slow"] += 1
        current, overtaken = True, False  # old news, overtaken: see delivery_hosts
        if host is not None:
            started = self._clock() - seconds
            with self._cond:
                came_back = reached and host.unanswered
                current = host.settled(reached, slow, started)
                overtaken = not reached and host.overtaken(started)
                if came_back:
                    self._retry_now(host)
        if readings is not None and current:
            readings.append((seconds, reached))
        if ok:
            return "delivered"
        if job.first_attempt is None:
            job.first_attempt = self._wall_clock()
        too_old = (self.policy.max_age is not None and job.created is not None
                   and self._wall_clock() - job.created >= self.policy.max_age)
        if job.attempt < self.policy.retries and not too_old:
            job.attempt += 1
            with self._cond:
                self._counts["retries"] += 1
            delay = 0.0 if overtaken else self.policy.delay(job.attempt)
            if self._on_retry is not None:
                try:
                    self._on_retry(job, delay)
                except Exception:
                    log.exception("could not persist the retry of a %s to %s", job.kind, job.url)
            with self._cond:
                job.retry_due = True
                if host is not None:
                    host.retrying.add(job)
            self._schedule(job, delay)
            return None
        if too_old:
            job.last_error = f"older than {self.policy.max_age:g} s (last: {job.last_error})"
        self._give_up(job)
        return None

    def _give_up(self, job: Delivery) -> None:
        log.info("gave up on a %s to %s after %d attempt(s): %s", job.kind, job.url,
                 job.attempt + 1, job.last_error)
        try:
            if self._on_give_up is not None:
                self._on_give_up(job)
        except Exception:
            log.exception("give-up handler failed for %s", job.url)
        finally:
            self._finish("failed", job)

    # -- retries and probes ----------------------------------------------------------------
    def _retry_now(self, host: HostQueue) -> None:
        """(Under the lock.) ``host`` answers again: its jobs waiting out a backoff join its
        queue now (the timer skips them when their time comes)."""
        for job in host.retrying:
            if job.retry_due and self._queued < self.policy.queue_size and not self._closed:
                job.retry_due = False
                self._enqueue(host.key, job)
        host.retrying.clear()
        if host.jobs and not host.ready and host.can_take(self._clock()):
            host.ready = True
            self._ready.append(host)
            self._cond.notify()

    def _check_stall(self, check: StallCheck) -> None:
        """(Under the lock.) Stall ``check.host``'s hanging workers if it answered nothing
        for an interval; checked again each interval while workers are at it."""
        host = check.host
        host.check_due = False
        if self._closed or self._hosts.get(host.key) is not host or not host.active:
            return
        if check.due() and not host.parked_until:
            host.stall(self._clock())
            if not host.ready and host.active < host.limit():
                host.ready = True
                self._ready.append(host)
                self._cond.notify()
        host.check_due = True
        self._schedule(StallCheck(host), self._stall_interval(host))

    def _stall_interval(self, host: HostQueue) -> float:
        """How long a host may answer nothing before its workers count as stalled: a probe
        interval, or twice its latest answer time on a link slower than that (a healthy
        host 300 ms away is not stalled by one round trip); for a host answering slowly,
        twice its fastest answer (the slow ones are what is being waited out)."""
        control = host.control
        answer = (control.baseline if host.slow and control.baseline is not None
                  else control.last_answer) or 0.0
        return max(self._probe_interval(), 2 * answer)

    def _probe_interval(self) -> float:
        # a probe is a retry: never later than a first retry would be
        return max(0.001, min(self.policy.probe_interval, self.policy.backoff))

    def _schedule(self, item: Delivery | HostQueue, delay: float) -> None:
        """A job to queue again, or a parked host to unpark, after ``delay`` seconds."""
        self._timer.schedule(item, delay)

    def _due(self, item: Delivery | HostQueue | StallCheck) -> None:
        """A retry's time came (it needs a slot in the queue: it already counts as pending),
        a parked host's probe time (one worker may try it again), or a stall check's (a
        host's hanging workers stop counting against its limit)."""
        if isinstance(item, StallCheck):
            with self._cond:
                self._check_stall(item)
            return
        key = item.key if isinstance(item, HostQueue) else self._host_key(item.url)
        with self._cond:
            if isinstance(item, HostQueue):
                item.parked_until = 0.0
                if (item.jobs and not item.ready and item.active < item.limit()
                        and not self._closed and self._hosts.get(key) is item):
                    item.ready = True
                    self._ready.append(item)
                    self._cond.notify()
                return
            if not item.retry_due:
                return  # taken out early: its host answered again
            item.retry_due = False
            host = self._hosts.get(key)
            if host is not None:
                host.retrying.discard(item)
            if self._queued < self.policy.queue_size and not self._closed:
                if self._enqueue(key, item):
                    self._cond.notify()
                return
        self._finish("dropped", item)
        self._log_drop(item, 1)

    # -- bookkeeping -----------------------------------------------------------------------
    def _finish(self, counter: str, job: Delivery | None = None) -> None:
        if job is not None and self._on_finish is not None:
            try:
                self._on_finish(job, counter)
            except Exception:
                log.exception("finishing a %s to %s failed", job.kind, job.url)
        with self._cond:
            self._counts[counter] += 1
            self._pending -= 1
            if job is not None:
                self._held_bytes -= job.charge
            if self._pending <= 0:
                self._idle.notify_all()

    def _finish_many(self, finished: list[tuple[str, Delivery]]) -> None:
        """:meth:`_finish` for a worker's batch, counted under one lock acquisition."""
        if not finished:
            return
        if self._on_finish is not None:
            for counter, job in finished:
                try:
                    self._on_finish(job, counter)
                except Exception:
                    log.exception("finishing a %s to %s failed", job.kind, job.url)
        with self._cond:
            for counter, job in finished:
                self._counts[counter] += 1
                self._held_bytes -= job.charge
            self._pending -= len(finished)
            if self._pending <= 0:
                self._idle.notify_all()

    def stats(self) -> dict[str, int]:
        with self._cond:
            counts = dict(self._counts)
            counts["pending"] = self._pending
            counts["queue_depth"] = self._queued
            counts["held_bytes"] = self._held_bytes
            counts["hosts"] = len(self._hosts)
            counts["host_limit_max"] = max((c.limit for c in self._limits.values()), default=0)
        return counts

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued, in flight or waiting for a retry; True if so."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while self._pending > 0:
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(0.1 if remaining is None else min(remaining, 0.1))
            return True

    def close(self, timeout: float = 5.0) -> bool:
        """Deliver what is pending for up to ``timeout`` seconds, then stop the workers.
        Returns whether everything pending was finished."""
        finished = self.drain(timeout) if self._started else True
        with self._cond:
            self._closed = True
            abandoned_queue = self._queued
            for host in self._hosts.values():
                host.jobs.clear()
            self._hosts.clear()
            self._ready.clear()
            self._queued = 0
            self._cond.notify_all()
        abandoned = abandoned_queue + sum(
            1 for item in self._timer.stop() if isinstance(item, Delivery) and item.retry_due)
        if abandoned:
            log.warning("abandoned %d undelivered messages at shutdown", abandoned)
        for thread in self._threads:
            thread.join(timeout=1.0)
        return finished
