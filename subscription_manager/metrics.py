"""The event source's and the subscription server's Prometheus metrics
(:mod:`wsframework.metrics` serves them), read at scrape time from the manager's counters.

Per worker, summed across workers: events published here, notifications queued, delivered,
failed, dropped, retried, dead-lettered; delivery queue depth. From the store the workers
share (the scraped worker's reading): subscriptions active (in all, and per topic: label
``topic``, bounded because administrators create topics), outbox depth, dead letters. A
server (the ``server`` role) adds its EDN counters: events received from the dispatcher,
refused, forwarded Subscribes, its load. No other label: nothing here grows with
subscriptions or events.
"""
from __future__ import annotations

from wsframework.metrics import Reading, RoleMetrics

from .console import topics

__all__ = ["serve_source_metrics", "source_readings", "serve_table_metrics", "table_readings"]

# counter name in the manager's figures -> (metric, help); per worker, summed
_DELIVERY_COUNTERS = {
    "published": ("edn_events_published_total", "Events published to this source"),
    "queued": ("edn_notifications_queued_total", "Notifications queued for delivery"),
    "delivered": ("edn_notifications_delivered_total", "Notifications delivered"),
    "failed": ("edn_notifications_failed_total", "Notifications whose delivery failed"),
    "dropped": ("edn_notifications_dropped_total", "Notifications dropped (queue full)"),
    "retries": ("edn_notification_retries_total", "Delivery retries"),
    "refused": ("edn_notifications_refused_total", "Notifications a sink refused"),
    "filter_failures": ("edn_filter_failures_total", "Filters that failed on an event"),
    "outbox_spilled": ("edn_notifications_spilled_total",
                       "Notifications left in the outbox past the delivery queue's room "
                       "(paged in as it empties)"),
    "outbox_dead_lettered": ("edn_notifications_dead_lettered_total",
                             "Notifications moved to the dead letters"),
    "outbox_redelivered_dead_letters": ("edn_dead_letters_redelivered_total",
                                        "Dead letters moved back to the outbox"),
}
_EDN_COUNTERS = {
    "events_received": ("edn_server_events_received_total",
                        "Events received from the dispatcher"),
    "events_refused": ("edn_server_events_refused_total", "Event messages refused"),
    "forwarded_subscribes": ("edn_server_subscribes_forwarded_total",
                             "Subscribes forwarded to the server that places them"),
    "forward_faults": ("edn_server_forward_faults_total", "Forwarded requests that failed"),
}


def serve_source_metrics(service, manager, *, access: str | None = None) -> RoleMetrics:
    metrics = RoleMetrics(service, access=access)
    metrics.add_reader(lambda: source_readings(manager))
    return metrics


def source_readings(manager) -> list[Reading]:
    counters = manager.counters
    active, _ = manager.store.active_counts()
    out = [Reading(name, "counter", help, counters.get(key, 0))
           for key, (name, help) in _DELIVERY_COUNTERS.items()]
    out += [
        Reading("edn_delivery_queue_depth", "gauge",
                "Notifications waiting in this worker's delivery queues",
                counters.get("queue_depth", 0)),
        Reading("edn_delivery_pending", "gauge",
                "Notifications accepted and not finished (retries included)",
                counters.get("pending", 0)),
        Reading("edn_subscriptions_active", "shared", "Active subscriptions", active),
        # label topic: topics are created by administrators, so their number is bounded
        *(Reading("edn_topic_subscriptions_active", "shared",
                  "Active subscriptions of a topic", topic["subscriptions"],
                  (("topic", topic["name"]),)) for topic in topics(manager)["topics"]),
        Reading("edn_outbox_depth", "shared", "Notifications in the durable outbox",
                counters.get("outbox_pending", 0)),
        Reading("edn_dead_letters", "shared", "Dead letters kept",
                counters.get("dead_letters", 0)),
    ]
    edn_counters = getattr(manager, "edn_counters", None)
    if edn_counters is not None:  # the server role (subscription_manager.server)
        out += [Reading(name, "counter", help, edn_counters.get(key, 0))
                for key, (name, help) in _EDN_COUNTERS.items()]
        # every worker's view of the same subscriptions: the largest, not their sum
        out.append(Reading("edn_server_load", "max",
                           "Subscriptions the server reports as its load", manager.load()))
    return out


def serve_table_metrics(service, table, *, access: str | None = None) -> RoleMetrics:
    """The ``table`` role's (one worker): tuples held, updates applied (the table's sequence
    number, kept across restarts), changes waiting to reach the feed topic."""
    metrics = RoleMetrics(service, access=access)
    metrics.add_reader(lambda: table_readings(table))
    return metrics


def table_readings(table) -> list[Reading]:
    return [
        Reading("edn_table_tuples", "shared", "Tuples in the range-aggregate table", len(table)),
        Reading("edn_table_updates_total", "shared_counter",
                "Updates applied to the table (its sequence number)", table.seq),
        Reading("edn_table_feed_pending", "shared",
                "Changes waiting to be published to the feed topic", table.pending_count()),
    ]
