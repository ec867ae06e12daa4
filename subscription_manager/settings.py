"""Event source settings, read from ``ServiceConfig.settings`` (``edn serve --set KEY=VALUE``).

==================================  ==========  ================================================
key                                 default     meaning
==================================  ==========  ================================================
allow_private                       (none)      CIDRs of private ranges notification targets may
                                                be in (``--allow-private``)
allow_loopback                      true        loopback targets allowed
max_url_length                      2048        longest NotifyTo/EndTo/ReplyTo/FaultTo URL
min_expires / max_expires           1.0 / --    bounds on granted lifetimes (xs:duration or
                                                seconds; no max = subscriptions may be infinite)
default_expires                     --          2011 Subscribe without Expires (default: max)
accept_datetime                     true        accept xs:dateTime expirations
sweep_interval                      1.0         seconds between expiry sweeps (0: no sweeper)
purge_after                         604800      seconds terminal rows are kept before purging
delivery_workers                    128         delivery workers per process (threads;
                                                greenlets under the gevent worker)
delivery_per_host                   8           workers delivering to one target host at
                                                once at first (and at least)
delivery_per_host_max               96          most workers delivering to one host: its
                                                limit grows from delivery_per_host while
                                                its answers stay fast, shrinks when they
                                                slow (capped by delivery_workers)
delivery_probe_interval             0.25        seconds a host that gave no answer is left
                                                alone before one job probes it (its other
                                                jobs wait, their attempts unspent)
delivery_pipeline                   1           POSTs written on one connection before the
                                                first answer is read (HTTP/1.1 pipelining;
                                                1: off; opt-in, at most 64: RFC 9112 advises
                                                against pipelining POSTs)
delivery_client                     lean        HTTP client of deliveries when the service
                                                uses real HTTP: ``lean`` (LeanHttpTransport)
                                                or ``requests`` (the service's HttpTransport)
delivery_connect_timeout / _read    3 / 10      seconds to connect; to get a whole answer
delivery_slow_after                 1.0         an answer slower than this (or a transport
                                                error) limits its host to one worker until
                                                it answers in time again
delivery_queue_size                 50000       jobs in memory; the rest of a backlog waits
                                                in the outbox and is paged in
delivery_queue_bytes                67108864    bytes the jobs in memory may hold (512 each
                                                and their share of the events' bytes); the
                                                rest waits in the outbox likewise
delivery_retries                    9           retries after the first attempt (10
                                                deliveries, as Service Bus's MaxDeliveryCount;
                                                ActiveMQ redelivers 6 times)
delivery_backoff / _backoff_max     0.5 / 30    first retry delay, cap (seconds, doubling)
delivery_max_age                    86400       seconds after acceptance a notification is
                                                still retried (none: no limit)
end_subscription_on_dead_letter     true        a dead-lettered notification ends its
                                                subscription (SubscriptionEnd/DeliveryFailure)
durable_outbox                      true        accepted events and their notifications are
                                                committed before the answer (false only to
                                                measure what it costs)
outbox_lease                        30          seconds without a heartbeat before another
                                                worker takes a process's outbox rows
delivery_timeout                    5.0         seconds to finish pending deliveries at close
target_cache_ttl                    10.0        seconds a target check answer is reused
filter_max_length / _depth / _steps 4096/32/256 bounds on a filter's text (refused with
                                                CannotProcessFilter / InvalidMessage)
filter_allow_regex                  false       accept regular-expression functions in filters
filter_budget                       0.05        seconds per filter per event before a strike
filter_strikes                      5           strikes (raised or over budget) before the
                                                subscription ends (SourceCancelling)
event_max_elements / _depth         10000 / 64  bounds on a published event (Sender fault)
max_subscriptions                   50000       active subscriptions the service holds (all
                                                topics, every worker; 0: no limit)
max_subscriptions_per_topic         20000       active subscriptions of one topic (0: no limit)
max_subscriptions_per_host          5000        active subscriptions whose NotifyTo names one
                                                host (0: no limit)
control_concurrency                 1           control requests (Subscribe, Renew, ...,
                                                administration) a worker works on at once;
                                                events never wait for them (0: no bound)
control_share                       0.3         the part of a worker the control path may
                                                take while events flow (1: all of it)
control_wait                        30          seconds a control request waits for its turn
                                                before it is answered EndpointUnavailable
                                                (these three: wsframework.admission, read by
                                                the dispatcher too)
keep_subscriptions_on_shutdown      false       close() leaves subscriptions active (rolling
                                                restarts) instead of ending them with
                                                SubscriptionEnd/SourceShuttingDown (the
                                                server role defaults it to true)
==================================  ==========  ================================================

A key no settings group of the role knows is refused (:func:`wsframework.settings.read_settings`).

The subscription limits are counted in the store, in the transaction that inserts the
subscription (:meth:`~subscription_manager.store.SubscriptionStore.insert`), so every
worker of a service sees one count; only active, unexpired subscriptions count. Triggers keep
the number of active rows per scope in the same transactions, so a Subscribe well below a
limit costs one indexed read per scope; only a scope whose kept count has reached its limit
(which may include expired rows the sweeper has not ended yet) is counted row by row. A Subscribe
over a limit is refused with Receiver ``wse:EventSourceUnableToProcess`` (2004/08) or a
Receiver fault (2011, which dropped that subcode); see :mod:`.exceptions`. Why these
defaults: a subscription costs a worker about 10 KB (its compiled filter, notification
template and row; measured with 1,000s of XPath subscriptions), so 50,000 bound each worker's
subscriptions to about half a gigabyte; 20,000 is the EDN servers' load threshold, and a
topic's XPath filters are all evaluated for each of its events (20,000 filters take a
fraction of a second); 5,000 per host bounds how many copies of one event an attacker can
have the service send to a victim host (the amplification of a subscription flood), while a
real notification sink (the benchmarks run 2,000 subscriptions to one sink) stays under it.
Subscriptions imported or moved between EDN servers are counted but never refused.

Redelivery and dead letters (:mod:`.outbox`): a failed notification is retried
``delivery_retries`` times, ``delivery_backoff * 2**(n-1)`` seconds apart (capped by
``delivery_backoff_max``), while it is younger than ``delivery_max_age``; each failure is
persisted, so a restart neither resets the count nor retries early. Then the notification (its
bytes, target, reason, attempts) moves to the dead letters (``edn dead-letters``). The
defaults sit between ActiveMQ's 6 redeliveries and Service Bus's 10 deliveries; with these
backoffs 10 attempts span about 2 minutes. ``end_subscription_on_dead_letter`` stays true by
default: WS-Eventing's DeliveryFailure is how a subscriber learns its sink is unreachable,
and a sink that refused 10 times across minutes would otherwise keep receiving (and the
source keep dead-lettering) every event of a subscription nobody reads; set it false for
sinks that come back (the dead letters can be redelivered).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wsframework.matching.limits import FilterLimits
from wsframework.settings import Settings, parse_ip_ranges, setting
from wsframework.urlpolicy import DEFAULT_MAX_URL_LENGTH

from .delivery_job import JOB_BYTES, MAX_PIPELINE, DeliveryPolicy
from .expiry import ExpiryPolicy, InvalidExpiry, parse_duration
from .store import SubscriptionLimits

__all__ = ["EventingSettings", "parse_seconds"]

_UNBOUNDED = ("", "none", "unbounded", "inf", "infinite")


def parse_seconds(value: Any) -> float | None:
    """A number of seconds or an xs:duration (months count 30 days); ``none``/``unbounded``
    (or nothing) is None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a number of seconds or an xs:duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.lower() in _UNBOUNDED:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        duration = parse_duration(text)
    except InvalidExpiry:
        raise ValueError(f"not a number of seconds or an xs:duration: {value!r}") from None
    if duration.negative:
        raise ValueError(f"negative duration {value!r}")
    return float(duration.seconds) + duration.months * 30 * 86400


@dataclass(frozen=True)
class EventingSettings(Settings):
    allow_private: tuple[str, ...] = setting(
        (), "CIDRs of private ranges notification targets may be in (--allow-private)",
        parse=parse_ip_ranges)
    allow_loopback: bool = setting(True, "loopback notification targets allowed")
    max_url_length: int = setting(DEFAULT_MAX_URL_LENGTH, "longest URL (characters) a peer "
                                  "may name as NotifyTo, EndTo, ReplyTo or FaultTo")
    min_expires: float | None = setting(1.0, "shortest granted lifetime (seconds or "
                                        "xs:duration)", parse=parse_seconds)
    max_expires: float | None = setting(None, "longest granted lifetime (none: subscriptions "
                                        "may be infinite)", parse=parse_seconds)
    default_expires: float | None = setting(None, "lifetime of a 2011 Subscribe without "
                                            "Expires (none: the max)", parse=parse_seconds)
    accept_datetime: bool = setting(True, "accept xs:dateTime expirations")
    sweep_interval: float = setting(1.0, "seconds between expiry sweeps (0: no sweeper)")
    purge_after: float = setting(7 * 86400.0, "seconds terminal rows are kept before purging")
    delivery_workers: int = setting(128, "delivery workers per process (threads; greenlets "
                                    "under the gevent worker)")
    delivery_per_host: int = setting(8, "workers delivering to one target host at once at "
                                     "first (and at least)")
    delivery_per_host_max: int = setting(96, "most workers delivering to one target host: "
                                         "its limit grows while its answers stay fast and "
                                         "shrinks when they slow (capped by delivery_workers)")
    delivery_probe_interval: float = setting(0.25, "seconds a host that gave no answer is left "
                                             "alone before one job probes it")
    delivery_pipeline: int = setting(1, "POSTs written on one connection before the first "
                                     "answer is read (HTTP/1.1 pipelining, opt-in; 1: off)")
    delivery_client: str = setting("lean", "HTTP client of deliveries: lean (a lean "
                                   "keep-alive client) or requests")
    delivery_connect_timeout: float = setting(3.0, "seconds to connect to a notification "
                                              "target")
    delivery_read_timeout: float = setting(10.0, "seconds a notification target has to answer "
                                           "(the whole answer)")
    delivery_slow_after: float = setting(1.0, "seconds after which an answer counts as slow: "
                                         "a slow or unreachable host gets one delivery worker "
                                         "until it answers in time again")
    delivery_queue_size: int = setting(50_000, "jobs held in memory; the rest of a backlog "
                                       "waits in the outbox and is paged in")
    delivery_queue_bytes: int = setting(64 << 20, "bytes the jobs held in memory may hold "
                                        "(512 each and their share of the events' bytes); the "
                                        "rest of a backlog waits in the outbox likewise")
    delivery_retries: int = setting(9, "retries after the first delivery attempt (9: 10 "
                                    "deliveries, as Service Bus's MaxDeliveryCount)")
    delivery_backoff: float = setting(0.5, "first retry delay (seconds, doubling)")
    delivery_backoff_max: float = setting(30.0, "longest retry delay (seconds)")
    delivery_max_age: float | None = setting(
        86400.0, "seconds after acceptance a notification is still retried, then it is "
        "dead-lettered (none: no limit)", parse=parse_seconds)
    end_subscription_on_dead_letter: bool = setting(
        True, "a dead-lettered notification ends its subscription with "
        "SubscriptionEnd/DeliveryFailure (false: the subscription goes on)")
    durable_outbox: bool = setting(True, "commit accepted events and their notifications to "
                                   "the store before answering (false: memory only, to "
                                   "measure the cost)")
    outbox_lease: float = setting(30.0, "seconds without a heartbeat before another worker "
                                  "takes a process's outbox rows")
    delivery_timeout: float = setting(5.0, "seconds to finish pending deliveries at close")
    target_cache_ttl: float = setting(10.0, "seconds a notification target check is reused")
    filter_max_length: int = setting(4096, "longest filter expression (characters)")
    filter_max_depth: int = setting(32, "deepest bracket nesting of a filter")
    filter_max_steps: int = setting(256, "most steps, predicates and terms in a filter")
    filter_allow_regex: bool = setting(False, "accept regular-expression functions in filters "
                                       "(they backtrack unboundedly; see "
                                       "wsframework.matching.limits)")
    filter_budget: float = setting(0.05, "seconds one filter may take on one event before it "
                                   "counts a strike")
    filter_strikes: int = setting(5, "failed or over-budget evaluations before a subscription "
                                  "is ended (SubscriptionEnd/SourceCancelling)")
    event_max_elements: int = setting(10_000, "most elements in a published event")
    event_max_depth: int = setting(64, "deepest element nesting in a published event")
    max_subscriptions: int = setting(50_000, "most active subscriptions the service holds, "
                                     "all topics and workers together (0: no limit)")
    max_subscriptions_per_topic: int = setting(20_000, "most active subscriptions of one topic "
                                               "(0: no limit)")
    max_subscriptions_per_host: int = setting(5_000, "most active subscriptions whose NotifyTo "
                                              "names one host (0: no limit)")
    keep_subscriptions_on_shutdown: bool = setting(
        False, "close() leaves subscriptions active instead of ending them "
        "(SourceShuttingDown); the server role defaults it to true")

    def validate(self) -> None:
        if self.min_expires is not None and self.min_expires < 0:
            raise ValueError("min_expires must not be negative")
        if self.max_expires is not None and self.max_expires < (self.min_expires or 0.0):
            raise ValueError("max_expires must not be below min_expires")
        if self.max_url_length < 1:
            raise ValueError("max_url_length must be >= 1")
        if min(self.filter_max_length, self.filter_max_depth, self.filter_max_steps,
               self.filter_strikes, self.event_max_elements, self.event_max_depth) < 1:
            raise ValueError("filter_max_*, filter_strikes and event_max_* must be >= 1")
        if self.filter_budget <= 0:
            raise ValueError("filter_budget must be positive")
        if min(self.max_subscriptions, self.max_subscriptions_per_topic,
               self.max_subscriptions_per_host) < 0:
            raise ValueError("max_subscriptions(_per_topic, _per_host) must not be negative "
                             "(0: no limit)")
        if not 1 <= self.delivery_pipeline <= MAX_PIPELINE:
            raise ValueError(f"delivery_pipeline must be 1 (off) to {MAX_PIPELINE}")
        if not 0 < self.delivery_probe_interval <= 60:
            raise ValueError("delivery_probe_interval must be more than 0 and at most 60 "
                             "seconds")
        if min(self.delivery_workers, self.delivery_queue_size, self.delivery_per_host,
               self.delivery_per_host_max) < 1:
            raise ValueError("delivery_workers, delivery_per_host(_max) and "
                             "delivery_queue_size must be >= 1")
        if self.delivery_queue_bytes < JOB_BYTES:
            raise ValueError(f"delivery_queue_bytes must be at least {JOB_BYTES} (one job)")
        if self.delivery_client not in ("lean", "requests"):
            raise ValueError("delivery_client must be lean or requests")
        if min(self.delivery_connect_timeout, self.delivery_read_timeout,
               self.delivery_slow_after) <= 0:
            raise ValueError("delivery_connect_timeout, delivery_read_timeout and "
                             "delivery_slow_after must be positive")
        if min(self.delivery_retries, self.delivery_backoff, self.delivery_backoff_max) < 0:
            raise ValueError("delivery_retries and delivery_backoff(_max) must not be negative")
        if self.delivery_max_age is not None and self.delivery_max_age <= 0:
            raise ValueError("delivery_max_age must be positive (none: no limit)")
        if self.outbox_lease <= 0:
            raise ValueError("outbox_lease must be positive")
        if min(self.sweep_interval, self.purge_after, self.delivery_timeout,
               self.target_cache_ttl) < 0:
            raise ValueError("sweep_interval, purge_after, delivery_timeout and "
                             "target_cache_ttl must not be negative")

    def subscription_limits(self) -> SubscriptionLimits:
        return SubscriptionLimits(total=self.max_subscriptions,
                                  per_topic=self.max_subscriptions_per_topic,
                                  per_host=self.max_subscriptions_per_host)

    def filter_limits(self) -> FilterLimits:
        return FilterLimits(max_length=self.filter_max_length, max_depth=self.filter_max_depth,
                            max_steps=self.filter_max_steps, allow_regex=self.filter_allow_regex)

    def expiry_policy(self) -> ExpiryPolicy:
        return ExpiryPolicy(min_seconds=self.min_expires or 0.0, max_seconds=self.max_expires,
                            default_seconds=self.default_expires,
                            accept_datetime=self.accept_datetime)

    def delivery_policy(self) -> DeliveryPolicy:
        per_host_max = max(self.delivery_per_host,
                           min(self.delivery_per_host_max, self.delivery_workers))
        return DeliveryPolicy(workers=self.delivery_workers, per_host=self.delivery_per_host,
                              per_host_max=per_host_max,
                              probe_interval=self.delivery_probe_interval,
                              pipeline=self.delivery_pipeline,
                              queue_size=self.delivery_queue_size,
                              queue_bytes=self.delivery_queue_bytes,
                              retries=self.delivery_retries, backoff=self.delivery_backoff,
                              backoff_max=self.delivery_backoff_max,
                              max_age=self.delivery_max_age,
                              slow_after=self.delivery_slow_after)
