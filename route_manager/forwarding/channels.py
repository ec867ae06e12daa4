"""Per-server channels: a bounded queue and one sender thread per server, so no server stalls
the others; :class:`Forwarder` holds the channels of every server (see the package docstring
for the overflow policies and why the queues live in memory)."""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.greenlets import threads_are_greenlets
from wsframework.soap import SoapVersion

from ..models.measurement import thread_cpu_seconds
from .batch import BatchTemplate
from .link import TokenBucket
from .log_rows import LogCopy, copy_of

log = logging.getLogger(__name__)

POLICIES = ("drop-newest", "drop-oldest")
_MAX_TEMPLATES = 1024  # batch envelopes prepared per channel (one per topic in use)


@dataclass
class ChannelStats:
    queued: int = 0
    sent: int = 0
    dropped: int = 0
    batches: int = 0
    failures: int = 0
    bytes_out: int = 0
    depth: int = 0
    up: bool = True

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class _GreenletClock:
    """CPU seconds of the greenlets registered with it, counted at every greenlet switch.

    Under gevent a sender "thread" is a greenlet: the OS thread's CPU clock
    (``pthread_getcpuclockid``) covers every greenlet of the worker, and a greenlet has none
    of its own. A switch tracer (``greenlet.settrace``, per OS thread) charges the thread CPU
    time between two switches to the greenlet that was running. Cost: one clock read per
    switch."""

    _instance: "_GreenletClock | None" = None

    @classmethod
    def installed(cls) -> "_GreenletClock":
        """The clock of this process (installed in the calling OS thread on first use; the
        gevent worker runs every greenlet in its main thread)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        import greenlet
        self._getcurrent = greenlet.getcurrent
        self._seconds: dict = {}
        self._since = time.thread_time()
        self._previous = greenlet.settrace(self._trace)

    def _trace(self, event, args) -> None:
        if event in ("switch", "throw"):
            now = time.thread_time()
            origin = args[0]
            if origin in self._seconds:
                self._seconds[origin] += now - self._since
            self._since = now
        if self._previous is not None:
            self._previous(event, args)

    def register(self, glet) -> None:
        self._seconds.setdefault(glet, 0.0)

    def forget(self, glet) -> None:
        self._seconds.pop(glet, None)

    def seconds(self, glet) -> float:
        total = self._seconds.get(glet, 0.0)
        if self._getcurrent() is glet:
            total += time.thread_time() - self._since
        return total


class ServerChannel:
    def __init__(self, server_id: str, address: str, transport, *, capacity: int = 10_000,
                 batch_max: int = 64, batch_max_bytes: int = 1 << 20, linger: float = 0.0,
                 policy: str = "drop-newest",
                 backoff: tuple[float, float] = (0.05, 2.0), link: TokenBucket | None = None,
                 soap_version: SoapVersion = SoapVersion.SOAP12, credential: str | None = None,
                 event_log=None):
        """With ``event_log`` (an :class:`~.log.EventLog`) the channel is a window of at most
        ``capacity`` copies over the durable log: it starts with the server's unacknowledged
        copies (same seqs), never drops a copy (the log's bounds apply), reads copies that did
        not fit back from the log as the window empties, acknowledges each batch answered 2xx
        to the log, and marks its batches with the log's Dispatcher id and FirstSeq."""
        if policy not in POLICIES:
            raise ValueError(f"overflow policy must be one of {POLICIES}")
        self.server_id = server_id
        self.address = address.rstrip("/")
        self.transport = transport
        self.capacity = capacity
        self.batch_max = batch_max
        self.batch_max_bytes = batch_max_bytes
        # Seconds a batch short of batch_max waits for more copies before it leaves: at
        # high precision a server gets few copies per message, and one POST per one or
        # two events costs a millisecond each (Kafka's linger.ms, for the same reason).
        self.linger = linger
        self.policy = policy
        self.backoff = backoff
        self.link = link
        self.soap_version = soap_version
        self.credential = credential  # sent with each batch: servers check it
        self.stats = ChannelStats()
        self._templates: dict[tuple[str, bool], BatchTemplate] = {}  # (topic, logged)
        # LogCopy tuples: the log's own copies, or unlogged ones (seq and event_id None)
        self._queue: collections.deque[LogCopy] = collections.deque()
        self._cond = threading.Condition()
        self._closing = False
        self._inflight = False  # a batch is being sent (drain waits for it too)
        self._retry_now = False  # the server said it is up: the backoff is cut short
        self._clock = _GreenletClock.installed() if threads_are_greenlets() else None
        self._greenlet = None  # the sender's greenlet, under gevent
        self.event_log = event_log
        self._spilled = event_log is not None  # copies are in the log that the window lacks
        self._last_seq = 0  # the highest seq the window has held
        self._replaying = True
        if event_log is not None:
            self._refill()
        self._thread = threading.Thread(target=self._run, name=f"forward-{server_id}", daemon=True)
        self._thread.start()

    def _refill(self) -> None:
        """Read the copies after the window's last one from the log (under its lock)."""
        self.event_log.read_after(self.server_id, self._last_seq,
                                  max(1, self.capacity - len(self._queue)), self._refilled)

    def _refilled(self, copies, limit: int) -> None:
        with self._cond:
            self._queue.extend(copies)
            if copies:
                self._last_seq = copies[-1].seq
            self._spilled = len(copies) >= limit
            if self._replaying:
                self.stats.queued += len(copies)
            self.stats.depth = len(self._queue)
            self._cond.notify_all()
        if copies and self._replaying:
            log.info("server %s: replaying logged events from seq %d", self.server_id,
                     copies[0].seq)
        self._replaying = False

    def offer_logged(self, copies: list[LogCopy]) -> None:
        """Queue copies already in the durable log, in seq order (never dropped: the log is
        bounded); what does not fit in the window stays in the log, read back as the window
        empties."""
        with self._cond:
            self.stats.queued += len(copies)
            queue = self._queue
            before = len(queue)
            room = 0 if self._spilled else max(0, self.capacity - before)
            if room < len(copies):
                self._spilled = True
                copies = copies[:room]
            if copies:
                queue.extend(copies)
                self._last_seq = copies[-1].seq
                self._wake_sender(before)
            self.stats.depth = len(queue)

    def discard_through(self, seq: int) -> int:
        """Remove queued copies up to ``seq`` (the log dropped them to make room)."""
        with self._cond:
            n = 0
            while self._queue and self._queue[0].seq is not None and self._queue[0].seq <= seq:
                self._queue.popleft()
                n += 1
            self.stats.dropped += n
            self.stats.depth = len(self._queue)
            self._cond.notify_all()
            return n

    def offer(self, topic: str, event: bytes) -> bool:
        """Queue one event; False when the overflow policy dropped it (or an older one)."""
        with self._cond:
            accepted = True
            if len(self._queue) >= self.capacity:
                self.stats.dropped += 1
                if self.policy == "drop-newest":
                    return False
                self._queue.popleft()
                accepted = False
            before = len(self._queue)
            self._queue.append(copy_of(self.server_id, None, topic, event, 0.0, None))
            self.stats.queued += 1
            self.stats.depth = len(self._queue)
            self._wake_sender(before)
            return accepted

    def _wake_sender(self, before: int) -> None:
        """After copies were queued on ``before`` others (under the condition): wake the
        sender only when it may be waiting for them -- the queue was empty, or they
        complete a batch it lingers for -- not at every copy (a wake-up costs a thread
        switch)."""
        if before == 0 or before < self.batch_max <= len(self._queue):
            self._cond.notify_all()

    def retry_now(self) -> None:
        """The server is up again (it registered): a send waiting out its backoff goes now,
        and the backoff starts again from its first step."""
        with self._cond:
            self._retry_now = True
            self._cond.notify_all()

    @property
    def sender_thread(self) -> threading.Thread:
        """The thread that sends this channel's batches (its CPU time is the per-copy cost)."""
        return self._thread

    def sender_cpu_seconds(self) -> float:
        """CPU seconds the sender has used so far: its thread's CPU clock, or under gevent
        the CPU charged to its greenlet (:class:`_GreenletClock`)."""
        if self._clock is None:
            return thread_cpu_seconds(self._thread)
        return self._clock.seconds(self._greenlet) if self._greenlet is not None else 0.0

    def wait_for_room(self, limit: int, timeout: float) -> bool:
        """Backpressure: wait until at most ``limit`` events are queued, the server is marked
        down (a dead server must not hold publishers up) or ``timeout`` passes; True unless
        the timeout passed."""
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self._queue) <= limit or not self.stats.up or self._closing, timeout)

    def drain(self, timeout: float) -> bool:
        """Wait until everything queued has been sent (or the timeout passes)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._queue and not self._inflight and not self._spilled, timeout)

    def _take_batch(self) -> list[LogCopy]:
        batch = [self._queue.popleft()]
        size = len(batch[0].event)
        # One batch carries one topic (it is posted to that topic's address).
        # Logged copies: consecutive seqs only (a batch says FirstSeq, the rest follow).
        while (self._queue and len(batch) < self.batch_max
               and self._queue[0].topic == batch[0].topic
               and (batch[-1].seq is None or self._queue[0].seq == batch[-1].seq + 1)
               and size + len(self._queue[0].event) <= self.batch_max_bytes):
            item = self._queue.popleft()
            size += len(item.event)
            batch.append(item)
        return batch

    def _linger(self) -> None:
        """Under the condition, with copies queued: give a short batch up to ``linger``
        seconds to fill (not when closing, or when the log holds more to read)."""
        if (self.linger > 0 and len(self._queue) < self.batch_max and not self._closing
                and not self._spilled):
            self._cond.wait_for(lambda: len(self._queue) >= self.batch_max or self._closing,
                                self.linger)

    def _run(self) -> None:
        if self._clock is not None:
            self._greenlet = self._clock._getcurrent()
            self._clock.register(self._greenlet)
        try:
            self._send_until_closed()
        finally:
            if self._clock is not None:
                self._clock.forget(self._greenlet)

    def _send_until_closed(self) -> None:
        delay = self.backoff[0]
        while True:
            if self._spilled and len(self._queue) < self.batch_max and not self._closing:
                self._refill()
            if self.event_log is not None and not self._queue:
                self.event_log.flush_acks()  # idle: write the acknowledgements still pending
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._spilled or self._closing)
                if not self._queue:
                    if self._closing:
                        return
                    continue  # spilled: refill from the log
                self._linger()
                batch = self._take_batch()
                self._inflight = True
                self.stats.depth = len(self._queue)
                self._cond.notify_all()  # offer() may be waiting for room, tests for in-flight
            ok = self._send(batch)
            if ok and self.event_log is not None and batch[0].seq is not None:
                try:
                    self.event_log.acknowledge(self.server_id, batch[-1].seq, len(batch),
                                         event_ids=[item.event_id for item in batch])
                except Exception:  # the copies stay logged: resent after a restart
                    log.exception("server %s: acknowledging seq %d in the log failed",
                                  self.server_id, batch[-1].seq)
            with self._cond:
                self._inflight = False
                if ok:
                    self.stats.sent += len(batch)
                    self.stats.batches += 1
                    self.stats.up = True
                    delay = self.backoff[0]
                else:
                    # Put the batch back in front, in order, and wait before retrying.
                    self._queue.extendleft(reversed(batch))
                    overflow = len(self._queue) - self.capacity if self.event_log is None else 0
                    for _ in range(max(0, overflow)):
                        self._queue.pop()
                        self.stats.dropped += 1
                    self.stats.depth = len(self._queue)
                    self.stats.failures += 1
                    self.stats.up = False
                self._cond.notify_all()
                if not ok:
                    if self._closing:
                        return
                    self._cond.wait_for(lambda: self._retry_now or self._closing, delay)
                    if self._retry_now:
                        delay = self.backoff[0]
                    else:
                        delay = min(delay * 2, self.backoff[1])
                self._retry_now = False

    def _send(self, batch: list[LogCopy]) -> bool:
        payload = self.envelope(batch[0].topic, [item.event for item in batch], batch[0].seq)
        if self.link is not None:
            self.link.take(len(payload))
        url = f"{self.address}/topics/{batch[0].topic}"
        try:
            response = self.transport.post(url, payload, self.soap_version.content_type,
                                           EVENT_BATCH_ACTION)
        except Exception as exc:
            if self.stats.up:
                log.warning("server %s unreachable (%s); queueing its events", self.server_id, exc)
            return False
        if response.status >= 300:
            if self.stats.up:
                log.warning("server %s answered HTTP %s; retrying", self.server_id, response.status)
            return False
        self.stats.bytes_out += len(payload)
        return True

    def envelope(self, topic: str, events: Iterable[bytes], first_seq: int | None = None) -> bytes:
        """The batch's envelope, spliced from this channel's template for ``topic``."""
        logged = self.event_log is not None and first_seq is not None
        key = (topic, logged)
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) >= _MAX_TEMPLATES:
                self._templates.clear()
            template = self._templates[key] = BatchTemplate(
                self.soap_version, self.address, topic, self.credential,
                dispatcher=self.event_log.dispatcher_id if logged else None)
        return template.render(events, first_seq if logged else None)

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)


class Forwarder:
    """The channels of every server, keyed by server id."""

    def __init__(self, transport, *, event_log=None, **channel_options):
        self.transport = transport
        self.event_log = event_log
        if event_log is not None:
            event_log.on_drop = self._dropped_from_log
        self.channel_options = dict(channel_options, event_log=event_log)
        self.channels: dict[str, ServerChannel] = {}
        self._lock = threading.Lock()

    def ensure(self, server_id: str, address: str) -> ServerChannel:
        with self._lock:
            channel = self.channels.get(server_id)
            if channel is None or channel.address != address.rstrip("/"):
                if channel is not None:
                    channel.close(timeout=0)
                channel = ServerChannel(server_id, address, self.transport, **self.channel_options)
                self.channels[server_id] = channel
            return channel

    def retry_now(self, server_id: str) -> None:
        """``server_id`` registered again: its channel stops waiting out a backoff."""
        with self._lock:
            channel = self.channels.get(server_id)
        if channel is not None:
            channel.retry_now()

    def remove(self, server_id: str) -> None:
        with self._lock:
            channel = self.channels.pop(server_id, None)
        if channel is not None:
            channel.close(timeout=0)

    def _dropped_from_log(self, rows) -> None:
        last: dict[str, int] = {}
        for _, server, seq, _ in rows:
            last[server] = max(last.get(server, 0), seq)
        for server, seq in last.items():
            channel = self.channels.get(server)
            if channel is not None:
                channel.discard_through(seq)

    def forward_logged(self, copies: list[tuple[str, bytes, Iterable[str]]], *,
                       upstream: tuple[str, int] | None = None) -> int:
        """Log every copy of ``copies`` ((topic, event, servers)) in one transaction, then
        queue them; the copies are durable when this returns (or it raises
        :class:`~.log.LogFull`, nothing logged). Returns the number of copies. ``upstream``:
        the parent's position to record with them (:meth:`.log.EventLog.append`)."""
        channels = self.channels
        rows = [(topic, event, [server for server in servers if server in channels])
                for topic, event, servers in copies]

        def offer(per_server):
            for server, logged in per_server.items():
                channel = channels.get(server)
                if channel is not None:  # removed meanwhile: the copies stay logged
                    channel.offer_logged(logged)
        return len(self.event_log.append(rows, offer, upstream=upstream))

    def forward(self, topic: str, event: bytes, server_ids: Iterable[str]) -> int:
        """Queue the event for each server; returns how many copies were queued."""
        if self.event_log is not None:
            return self.forward_logged([(topic, event, server_ids)])
        copies = 0
        for server_id in server_ids:
            channel = self.channels.get(server_id)
            if channel is not None and channel.offer(topic, event):
                copies += 1
        return copies

    def drain(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        return all(c.drain(max(0.0, deadline - time.monotonic())) for c in list(self.channels.values()))

    def stats(self) -> dict[str, dict]:
        return {sid: c.stats.as_dict() for sid, c in self.channels.items()}

    def close(self, timeout: float = 5.0) -> None:
        for channel in list(self.channels.values()):
            channel.close(timeout)
