"""The dispatcher's Prometheus metrics (:mod:`wsframework.metrics` serves them).

Read at scrape time from the figures the dispatcher keeps (:mod:`.stats`): events routed,
copies queued, per server (label ``server``: a registered server's name, bounded by
registrations) copies routed, forwarded, dropped, failed batches, bytes and queue depth;
the durable log; the precision in force, hit ratio, CPU and utilization of the measurement
window, self-tuning steps. Two histograms are observed on the event path, once per message
and once per batch POST (~2 us each in multiprocess mode, against hundreds of us to route
and post): the routing CPU of a message and the wall time per copy of a batch POST.
"""
from __future__ import annotations

import time

from wsframework.metrics import Reading, RoleMetrics

__all__ = ["serve_dispatcher_metrics", "ROUTE_BUCKETS", "COPY_BUCKETS"]

ROUTE_BUCKETS = (25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
                 0.05, 0.1, 0.25, 1.0)
COPY_BUCKETS = (10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 0.01,
                0.05, 0.25, 1.0)


def serve_dispatcher_metrics(service, dispatcher, *, access: str | None = None) -> RoleMetrics:
    metrics = RoleMetrics(service, access=access)
    metrics.add_reader(lambda: dispatcher_readings(dispatcher))
    route = metrics.histogram(
        "edn_dispatcher_route_seconds",
        "CPU seconds to route one message (match, serialize, queue its copies)", ROUTE_BUCKETS)
    copy = metrics.histogram(
        "edn_dispatcher_copy_seconds",
        "Wall seconds per copy of one batch POST to a server (observed per batch)",
        COPY_BUCKETS)
    _time_routing(dispatcher, route)
    _time_posts(dispatcher.forwarder, copy)
    return metrics


def _time_routing(dispatcher, histogram) -> None:
    # Around the instance's route_events (the hot path's own module stays as it is): the
    # CPU clock of the calling thread, so a hold-back wait for the link is not counted.
    route_events = dispatcher.route_events

    def timed(*args, **kwargs):
        started = time.thread_time()
        try:
            return route_events(*args, **kwargs)
        finally:
            histogram.observe(time.thread_time() - started)

    dispatcher.route_events = timed


def _time_posts(forwarder, histogram) -> None:
    # Each server's channel posts batches from its sender thread; channels made later (a
    # server registering) are timed as they are made.
    def time_channel(channel):
        if getattr(channel, "_edn_timed", False):
            return channel
        send = channel._send

        def timed(batch):
            started = time.perf_counter()
            try:
                return send(batch)
            finally:
                if batch:
                    histogram.observe((time.perf_counter() - started) / len(batch))

        channel._send = timed
        channel._edn_timed = True
        return channel

    for channel in list(forwarder.channels.values()):
        time_channel(channel)
    ensure = forwarder.ensure
    forwarder.ensure = lambda server_id, address: time_channel(ensure(server_id, address))


def dispatcher_readings(d) -> list[Reading]:
    control = d.control
    with d.counters_lock:
        c = d.counters
        events, copies, route_cpu = c.events_in, c.copies_out, c.route_seconds
        hits = dict(c.per_server_hits)
        backpressure_timeouts = d.backpressure_timeouts
    out = [
        Reading("edn_dispatcher_events_routed_total", "counter",
                "Events received and routed", events),
        Reading("edn_dispatcher_copies_queued_total", "counter",
                "Copies of events queued for servers", copies),
        Reading("edn_dispatcher_route_cpu_seconds_total", "counter",
                "CPU seconds spent matching events", route_cpu),
        Reading("edn_dispatcher_backpressure_timeouts_total", "counter",
                "Publishers released before the queues drained", backpressure_timeouts),
        Reading("edn_dispatcher_servers", "max", "Servers registered", len(d.servers)),
        Reading("edn_dispatcher_precision", "max",
                "Precision of the route summaries in force (0..1)", float(control.precision)),
        Reading("edn_dispatcher_precision_changes_total", "counter",
                "Changes of the precision (operator and self-tuning)", control.changes),
        Reading("edn_dispatcher_selftuning_enabled", "max",
                "1 while the self-tuner sets the precision", int(control.tuner is not None)),
    ]
    if control.tuner is not None:
        out.append(Reading("edn_dispatcher_selftuning_steps_total", "counter",
                           "Self-tuning steps taken", control.tuner.p))
    m = control.window.measurement()
    if m is not None:  # the monitor's sliding window (route_manager.models.measurement)
        out += [
            Reading("edn_dispatcher_hit_ratio", "max",
                    "Copies per event per server over the measurement window", m.hit_ratio),
            Reading("edn_dispatcher_cpu_ratio", "max",
                    "CPU seconds per second over the measurement window", m.cpu),
            Reading("edn_dispatcher_utilization_ratio", "max",
                    "Share of the measurement window with a request in hand", m.busy),
        ]
    for server, channel in d.forwarder.stats().items():
        label = (("server", str(server)),)
        out += [
            Reading("edn_dispatcher_server_copies_routed_total", "counter",
                    "Copies routed to the server", hits.get(server, 0), label),
            Reading("edn_dispatcher_server_copies_forwarded_total", "counter",
                    "Copies the server acknowledged", channel.get("sent", 0), label),
            Reading("edn_dispatcher_server_copies_dropped_total", "counter",
                    "Copies dropped for the server (queue full)", channel.get("dropped", 0),
                    label),
            Reading("edn_dispatcher_server_batches_total", "counter",
                    "Batches posted to the server", channel.get("batches", 0), label),
            Reading("edn_dispatcher_server_failures_total", "counter",
                    "Failed batch posts to the server", channel.get("failures", 0), label),
            Reading("edn_dispatcher_server_sent_bytes_total", "counter",
                    "Bytes posted to the server", channel.get("bytes_out", 0), label),
            Reading("edn_dispatcher_server_queue_depth", "gauge",
                    "Copies waiting to be sent to the server", channel.get("depth", 0), label),
            Reading("edn_dispatcher_server_up", "max",
                    "1 while the server answers", int(bool(channel.get("up", True))), label),
        ]
    if d.event_log is not None:  # each worker's own lane of the log: summed over them
        figures = d.event_log.figures()
        lanes = d.lanes.figures()
        out += [
            Reading("edn_dispatcher_log_events", "gauge",
                    "Undelivered copies in the durable log (this worker's lane)",
                    figures.get("log.events", 0)),
            Reading("edn_dispatcher_log_adopted_events", "gauge",
                    "Undelivered copies in lanes adopted from gone processes",
                    lanes["log.adopted_events"]),
            Reading("edn_dispatcher_log_lane_adoptions_total", "counter",
                    "Lanes of the log adopted from gone processes", lanes["log.lane_adoptions"]),
            Reading("edn_dispatcher_log_bytes", "gauge", "Bytes of the durable log",
                    figures.get("log.bytes", 0)),
            Reading("edn_dispatcher_log_oldest_age_seconds", "max",
                    "Age of the oldest undelivered event", figures.get("log.oldest_age_s", 0.0)),
            Reading("edn_dispatcher_log_appended_total", "counter",
                    "Events appended to the log", figures.get("log.appended", 0)),
            Reading("edn_dispatcher_log_dropped_total", "counter",
                    "Events dropped from a full log", figures.get("log.dropped", 0)),
            Reading("edn_dispatcher_log_expired_total", "counter",
                    "Undelivered copies that expired after log_max_age",
                    figures.get("log.expired", 0)),
            Reading("edn_dispatcher_log_refused_total", "counter",
                    "Messages refused with edn:LogFull", figures.get("log.refused", 0)),
        ]
    return out
