"""Publishing into an event distribution network: at one of several root dispatchers, with
failover, one event or an ``edn:EventBatch`` of many.

::

    with Publisher(["http://root-a:8080", "http://root-b:8080"]) as publisher:
        ack = publisher.publish("stocks", event)             # one event
        ack = publisher.send_batch("stocks", [e1, e2, e3])   # one edn:EventBatch message
        ack.address                                          # the root that holds it

The failover itself is the framework's (:class:`wsframework.publisher.FailoverPublisher`:
what makes a publisher try the next root, what an acknowledgement guarantees). The EDN adds
its batch message and one fault of its own that means "try another root": ``edn:LogFull``
(:data:`~route_manager.protocol.FAULT_LOG_FULL`), a root whose durable log is full, while
another root has a log of its own. It is a Receiver fault, which fails over anyway; naming it
makes a SOAP 1.1 answer, which carries only the subcode, fail over as well.
"""
from __future__ import annotations

from typing import Iterable

from lxml import etree

from matchers.vocabulary import EDN
from wsframework.publisher import FAILOVER_SUBCODES as FRAMEWORK_FAILOVER_SUBCODES
from wsframework.publisher import Acknowledgement, FailoverPublisher

from .protocol import EVENT_BATCH, FAULT_LOG_FULL

__all__ = ["FAILOVER_SUBCODES", "Publisher", "event_batch"]

FAILOVER_SUBCODES = FRAMEWORK_FAILOVER_SUBCODES | {FAULT_LOG_FULL}


def event_batch(topic: str, events: Iterable[etree._Element]) -> etree._Element:
    """An ``edn:EventBatch`` of ``events`` (they move into it): one message, many events."""
    body = etree.Element(EVENT_BATCH, nsmap={"edn": EDN})
    body.set("Topic", topic)
    body.extend(events)
    return body


class Publisher(FailoverPublisher):
    """Publishes at the current one of ``addresses`` (root dispatchers' base URLs, or any
    services publishing the same topics), failing over on the framework's conditions and on
    ``edn:LogFull``. Thread-safe, as :class:`~wsframework.publisher.FailoverPublisher`."""

    def __init__(self, addresses, **options):
        options.setdefault("failover_subcodes", FAILOVER_SUBCODES)
        super().__init__(addresses, **options)

    def send_batch(self, topic: str, events: Iterable[etree._Element]) -> Acknowledgement:
        """Publish ``events`` in one ``edn:EventBatch`` message: one root takes them all, or
        none does. A batch holds at most :data:`~route_manager.protocol.EVENT_BATCH_MOST`
        events (a root refuses a larger one whole, with a Sender fault)."""
        return self.send(topic, event_batch(topic, events))
