"""How the publisher-side services (:mod:`.table_service`, :mod:`.interval_publisher`) hand
their changes to the EDN: one change as an ordinary publication, several as one
``edn:EventBatch``. Either way they reach the subscription servers through the dispatcher
and are published there by the servers' one publication path
(:meth:`~subscription_manager.manager.SubscriptionManager.publish_many`)."""
from __future__ import annotations

from lxml import etree

__all__ = ["send_changes"]


def send_changes(publisher, topic: str, events: list[etree._Element]):
    """Send ``events`` (at least one) to ``topic`` in one message through ``publisher`` (a
    root dispatchers' publisher with failover: ``publish`` and ``send_batch``); returns its
    acknowledgement."""
    if len(events) == 1:
        return publisher.publish(topic, events[0])
    return publisher.send_batch(topic, events)
