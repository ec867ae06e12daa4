"""Forwarding events from the dispatcher to subscription servers without serializing on the
slowest one::

    forwarder = Forwarder(HttpTransport(), capacity=10_000, batch_max=64,
                          policy="drop-newest", link=TokenBucket.megabits(80))
    forwarder.ensure("s1", "http://h:8081")               # one channel per server
    copies = forwarder.forward("stocks", event_bytes, ["s1", "s2"])
    forwarder.drain(5.0); forwarder.close()

Each server has a :class:`ServerChannel` (:mod:`.channels`): a bounded queue and one sender
thread that drains it in batches (one HTTP POST carries up to ``batch_max`` events as an
``edn:EventBatch``, :mod:`.batch`, so the per-message HTTP cost is shared). A server that is
down or slow only fills its own queue; its sender retries with exponential backoff and
delivers the backlog in order when the server returns. When a queue is full the **overflow
policy** decides, explicitly and counted:

``drop-newest`` (default)  the new event is not queued for that server; ``dropped`` counts it
``drop-oldest``            the oldest queued event is discarded to make room; ``dropped`` counts it

Either way the publisher is never blocked by one server. Without a log the queue lives in
memory and a dispatcher crash loses what was queued. With an :class:`EventLog` (:mod:`.log`,
the dispatcher's ``durable_log``, on by default) every copy is committed before the publisher
is answered, the queue is a window over the log (never dropped; the log's bounds apply), a
server's copies are deleted when it answers 2xx to their batch, and a restarted dispatcher
resends the unacknowledged ones with the same seqs (``Dispatcher``/``FirstSeq`` on the batch).

An optional :class:`TokenBucket` (:mod:`.link`) caps outgoing bytes per second across all
channels (the "outgoing link" of the throughput model; loopback would never be the
bottleneck otherwise).
"""
from .batch import batch_envelope
from .channels import POLICIES, ChannelStats, Forwarder, ServerChannel
from .link import TokenBucket
from .log import LOG_FULL_POLICIES, EventLog, LaneLost, LogFull
from .log_lanes import MAX_LANES, LogLanes, NoFreeLane

__all__ = ["LOG_FULL_POLICIES", "EventLog", "LaneLost", "LogFull", "LogLanes", "MAX_LANES", "NoFreeLane", "POLICIES", "ChannelStats", "Forwarder", "ServerChannel", "TokenBucket",
           "batch_envelope"]
