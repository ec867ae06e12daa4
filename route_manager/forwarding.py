"""Forwarding events from the dispatcher to subscription servers without serializing on the
slowest one.

Each server has a :class:`ServerChannel`: a bounded queue and one sender thread that drains
it in batches (one HTTP POST carries up to ``batch_max`` events as an ``edn:EventBatch``, so
the per-message HTTP cost is shared). A server that is down or slow only fills its own queue;
its sender retries with exponential backoff and delivers the backlog in order when the server
returns. When a queue is full the **overflow policy** decides, explicitly and counted:

``drop-newest`` (default)  the new event is not queued for that server; ``dropped`` counts it
``drop-oldest``            the oldest queued event is discarded to make room; ``dropped`` counts it

Either way the publisher is never blocked by one server. The queue lives in memory: a
dispatcher crash loses what was queued (publication is acknowledged once the event is queued;
routes and summaries are durable, see the dispatcher).

An optional :class:`TokenBucket` caps outgoing bytes per second across all channels (the
"outgoing link" of the throughput model; loopback would never be the bottleneck otherwise).
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from lxml import etree

from wsframework import ns
from wsframework.addressing import WsaVersion, request_headers
from wsframework.soap import SoapVersion, build_envelope

log = logging.getLogger(__name__)

EDN_NS = ns.EDN
EVENT_BATCH = ns.qname(EDN_NS, "EventBatch")
EVENT_BATCH_ACTION = EDN_NS + "/EventBatch"
POLICIES = ("drop-newest", "drop-oldest")


class TokenBucket:
    """Bytes-per-second limiter shared by all senders (thread-safe)."""

    def __init__(self, bytes_per_second: float, burst_bytes: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep=time.sleep):
        if bytes_per_second <= 0:
            raise ValueError("rate must be positive")
        self.rate = float(bytes_per_second)
        self.capacity = float(burst_bytes or max(bytes_per_second / 20, 64 * 1024))
        self._tokens = self.capacity
        self._stamp = clock()
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()

    @classmethod
    def megabits(cls, mbps: float) -> "TokenBucket":
        return cls(mbps * 1_000_000 / 8)

    def take(self, amount: int) -> float:
        """Block until ``amount`` bytes may be sent; returns the time waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= amount  # may go negative: the debt is paid by waiting
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


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


@dataclass
class _Item:
    topic: str
    event: bytes  # the serialized event element


class ServerChannel:
    def __init__(self, server_id: str, address: str, transport, *, capacity: int = 10_000,
                 batch_max: int = 64, policy: str = "drop-newest",
                 backoff: tuple[float, float] = (0.05, 2.0), link: TokenBucket | None = None,
                 soap_version: SoapVersion = SoapVersion.SOAP12):
        if policy not in POLICIES:
            raise ValueError(f"overflow policy must be one of {POLICIES}")
        self.server_id = server_id
        self.address = address.rstrip("/")
        self.transport = transport
        self.capacity = capacity
        self.batch_max = batch_max
        self.policy = policy
        self.backoff = backoff
        self.link = link
        self.soap_version = soap_version
        self.stats = ChannelStats()
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._closing = False
        self._inflight = False  # a batch is being sent (drain waits for it too)
        self._thread = threading.Thread(target=self._run, name=f"forward-{server_id}", daemon=True)
        self._thread.start()

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
            self._queue.append(_Item(topic, event))
            self.stats.queued += 1
            self.stats.depth = len(self._queue)
            self._cond.notify()
            return accepted

    @property
    def sender_thread(self) -> threading.Thread:
        """The thread that sends this channel's batches (its CPU time is the per-copy cost)."""
        return self._thread

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
            return self._cond.wait_for(lambda: not self._queue and not self._inflight, timeout)

    def _take_batch(self) -> list[_Item]:
        batch = [self._queue.popleft()]
        # One batch carries one topic (it is posted to that topic's address).
        while self._queue and len(batch) < self.batch_max and self._queue[0].topic == batch[0].topic:
            batch.append(self._queue.popleft())
        return batch

    def _run(self) -> None:
        delay = self.backoff[0]
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    return
                batch = self._take_batch()
                self._inflight = True
                self.stats.depth = len(self._queue)
                self._cond.notify_all()  # offer() may be waiting for room, tests for in-flight
            ok = self._send(batch)
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
                    overflow = len(self._queue) - self.capacity
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
                    self._cond.wait(delay)
                    delay = min(delay * 2, self.backoff[1])

    def _send(self, batch: list[_Item]) -> bool:
        payload = self.envelope(batch[0].topic, [item.event for item in batch])
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

    def envelope(self, topic: str, events: Iterable[bytes]) -> bytes:
        parts = b"".join(events)
        body = etree.fromstring(b'<edn:EventBatch xmlns:edn="%s" Topic="%s">%s</edn:EventBatch>'
                                % (EDN_NS.encode(), _attr(topic), parts))
        url = f"{self.address}/topics/{topic}"
        return build_envelope(self.soap_version, body,
                              request_headers(WsaVersion.WSA10, url, EVENT_BATCH_ACTION))

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)


def _attr(value: str) -> bytes:
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")).encode()


class Forwarder:
    """The channels of every server, keyed by server id."""

    def __init__(self, transport, **channel_options):
        self.transport = transport
        self.channel_options = channel_options
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

    def remove(self, server_id: str) -> None:
        with self._lock:
            channel = self.channels.pop(server_id, None)
        if channel is not None:
            channel.close(timeout=0)

    def forward(self, topic: str, event: bytes, server_ids: Iterable[str]) -> int:
        """Queue the event for each server; returns how many copies were queued."""
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

    def close(self) -> None:
        for channel in list(self.channels.values()):
            channel.close()
