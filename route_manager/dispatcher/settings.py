"""The dispatcher's settings (``edn serve dispatcher --set KEY=VALUE``, flags where noted);
the self-tuner's are :class:`route_manager.selftuning.SelfTuningSettings` (``selftuning_*``).
Both are read by :func:`wsframework.settings.read_settings` when the dispatcher is built: an
unknown key or a value that makes no sense is refused before it starts.

``self_tuning`` and the ``selftuning_*`` settings may be changed at run time with
``Configure`` (:mod:`.control`), under the same names; ``precision`` there is the precision
in force (``initial_precision`` is where it starts).
"""
from __future__ import annotations

from dataclasses import dataclass

from wsframework.settings import Settings, parse_ip_ranges, parse_urls, setting

from ..protocol import EVENT_BATCH_MOST, ROUTING_MODES, ROUTING_SUMMARIES
from ..forwarding import LOG_FULL_POLICIES, POLICIES
from ..latency_matrix import load_latency
from ..precision import PRECISE, parse_precision

__all__ = ["DispatcherSettings"]


@dataclass(frozen=True)
class DispatcherSettings(Settings):
    link_mbps: float | None = setting(None, "cap on the outgoing link to the servers, megabits/s "
                                      "(--link-mbps; none or 0: uncapped)")
    forward_timeout: float = setting(10.0, "seconds a server has to answer an event batch")
    queue_capacity: int = setting(10_000, "events queued per server before the overflow policy "
                                  "(with durable_log: events of a server held in memory; the "
                                  "rest wait in the log)")
    batch_max: int = setting(256, "events per edn:EventBatch at most")
    batch_max_bytes: int = setting(1 << 20, "bytes of events per edn:EventBatch at most (a "
                                   "single larger event still goes, alone)")
    batch_linger: float = setting(0.005, "seconds a short batch waits for more events before "
                                  "it leaves (0: at once)")
    overflow_policy: str = setting("drop-newest", "a full server queue drops the newest or the "
                                   "oldest event (drop-newest | drop-oldest)")
    durable_log: bool = setting(True, "commit every routed copy to the durable log in the data "
                                "dir before answering the publisher; replayed after a restart "
                                "(false: memory queues only, lost by a crash)")
    log_group_commit: bool = setting(True, "concurrent publications share one log transaction "
                                     "(false: one transaction per publication)")
    log_max_events: int = setting(1_000_000, "undelivered copies the durable log holds at most")
    log_max_bytes: int = setting(1 << 30, "bytes of undelivered events the durable log holds "
                                 "at most")
    log_max_age: float = setting(86_400.0, "seconds an undelivered copy waits in the log for "
                                 "its server; then it expires, counted and logged")
    lane_sweep_interval: float = setting(2.0, "seconds between looks for lanes of the "
                                         "durable log that a gone process left with "
                                         "undelivered copies (adopted and delivered)")
    log_full: str = setting("refuse", "a full durable log refuses new events with the Receiver "
                            "fault edn:LogFull (refuse) or deletes the oldest undelivered "
                            "copies, counted and logged (drop-oldest)")
    publish_dedup_window: float = setting(300.0, "seconds a root remembers the MessageID of "
                                          "an accepted Publish, so that a publisher's retry "
                                          "of it is acknowledged, not routed again (0: off)")
    initial_precision: float = setting(PRECISE, "precision at start: precise | none | 0..1 | N% "
                                       "(--precision-profile)", parse=parse_precision)
    self_tuning: bool = setting(True, "move the precision to the bottleneck (--no-self-tuning)")
    backpressure: int = setting(1000, "events queued for a live server above which publishers "
                                "wait (0: off)")
    backpressure_timeout: float = setting(5.0, "longest wait of a publisher held back (seconds)")
    monitor_interval: float = setting(0.25, "seconds between readings of the counters")
    measure_window: float = setting(10.0, "seconds of readings behind the measure.* figures")
    stats_log_interval: float = setting(10.0, "seconds between INFO lines while events flow "
                                        "(0: off)")
    # edn serve passes --allow-private to every role. The dispatcher has no notification
    # targets; the ranges apply to the ReplyTo/FaultTo of requests it answers.
    allow_private: tuple[str, ...] = setting((), "CIDRs a ReplyTo/FaultTo may be in (the "
                                             "dispatcher has no notification targets)",
                                             parse=parse_ip_ranges)

    # Routing modes (route_manager.dispatcher.routing): the same for every node of a network.
    routing: str = setting(ROUTING_SUMMARIES, "how events are routed to the nodes below: "
                           "summaries (route sets of summaries, self-tuned precision) | "
                           "linkmatching (equality predicates per link, Gryphon) | flooding "
                           "(every event to every node below, nothing read) (--routing)")

    # Dispatch trees (route_manager.dispatcher.tree): a dispatcher with parents is a child.
    parent: tuple[str, ...] = setting((), "base URLs of the parent dispatchers (--parent, "
                                      "repeatable): this dispatcher is a child of a dispatch "
                                      "tree and reports its sub-tree summaries to each",
                                      parse=parse_urls)
    name: str | None = setting(None, "this dispatcher's name at its parents (default: "
                               "host:port of its base URL)")
    tree_interval: float = setting(0.2, "seconds between sub-tree summary reports to the "
                                   "parents (changes in between are coalesced)")
    precision_poll: float = setting(1.0, "seconds between readings of the precision each "
                                    "parent routes this dispatcher with")
    tree_report_max_bytes: int = setting(2 << 20, "largest sub-tree summary sent to a parent, "
                                         "bytes of boxes (a larger union is cut to fit, still "
                                         "covering it; keep it under the parents' --max-body)")

    # Several roots (route_manager.dispatcher.peer_roots): topics kept the same at each.
    peer_roots: tuple[str, ...] = setting((), "base URLs of the other root dispatchers of the "
                                          "network (--peer-root, repeatable): topics created "
                                          "or deleted at one root reach the others",
                                          parse=parse_urls)
    topic_sync_interval: float = setting(2.0, "seconds between topic catalog exchanges with "
                                         "the peer roots (a change here is sent at once)")

    # Distance-aware placement: the server-to-server latencies (--latency FILE;
    # Kyra's cliques at Repartition). Parsed at start so a bad file stops the dispatcher.
    latency_file: str | None = setting(None, "server latency matrix file, ms (--latency; "
                                       "route_manager.latency_matrix)")

    def validate(self) -> None:
        if self.latency_file:
            load_latency(self.latency_file)  # LatencyFileError (a ValueError): refused
        if self.routing not in ROUTING_MODES:
            raise ValueError(f"routing must be one of {', '.join(ROUTING_MODES)}")
        if self.peer_roots and self.parent:
            raise ValueError("a child dispatcher (parent) takes its topics from its parents: "
                             "peer_roots is for root dispatchers")
        if not 0 < self.topic_sync_interval <= 3600:
            raise ValueError("topic_sync_interval must be more than 0 and at most 3600 seconds")
        if self.tree_interval <= 0 or self.precision_poll <= 0:
            raise ValueError("tree_interval and precision_poll must be > 0")
        if self.tree_report_max_bytes < 1024:
            raise ValueError("tree_report_max_bytes must be at least 1024")
        if not 0 <= self.publish_dedup_window <= 86_400:
            raise ValueError("publish_dedup_window must be from 0 to 86400 seconds")
        if self.link_mbps is not None and self.link_mbps < 0:
            raise ValueError("link_mbps must not be negative")
        if self.queue_capacity < 1 or self.batch_max < 1 or self.batch_max_bytes < 1:
            raise ValueError("queue_capacity, batch_max and batch_max_bytes must be >= 1")
        if self.batch_max > EVENT_BATCH_MOST:
            raise ValueError(f"batch_max must be at most {EVENT_BATCH_MOST} (what a server "
                             f"takes in one edn:EventBatch)")
        if not 0 <= self.batch_linger <= 1:
            raise ValueError("batch_linger must be between 0 and 1 second")
        if self.log_full not in LOG_FULL_POLICIES:
            raise ValueError(f"log_full must be one of {', '.join(LOG_FULL_POLICIES)}")
        if self.log_max_events < 1 or self.log_max_bytes < 1 or self.log_max_age <= 0:
            raise ValueError("log_max_events and log_max_bytes must be >= 1, log_max_age > 0")
        if self.lane_sweep_interval <= 0:
            raise ValueError("lane_sweep_interval must be > 0")
        if self.overflow_policy not in POLICIES:
            raise ValueError(f"overflow_policy must be one of {', '.join(POLICIES)}")
        if min(self.forward_timeout, self.monitor_interval, self.measure_window) <= 0:
            raise ValueError("forward_timeout, monitor_interval and measure_window must be > 0")
        if min(self.backpressure, self.backpressure_timeout, self.stats_log_interval) < 0:
            raise ValueError("backpressure, backpressure_timeout and stats_log_interval must "
                             "not be negative")
