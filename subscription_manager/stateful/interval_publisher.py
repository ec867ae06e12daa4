"""The publisher side of S-CN notification conditions: the interval set's messages sent through
the EDN as ordinary events of a topic.

A message ``<LOW, HIGH, UPDATE>`` is the event ::

    <edn:IntervalMessage xmlns:edn="urn:wsframework:edn" seq="3" part="1"
                         low="5.0" high="8.0" update="108.0"/>

on a topic whose schema (:func:`topic_schema`) has the number attributes ``low`` and ``high``
(domain [0, δ_limit]) and ``update``.  A subscription with bound δ subscribes with the range
filter :func:`subscription_filter` (``low < δ and high >= δ``: LOW < δ <= HIGH) and is then
notified exactly as section 5.2 says; the network needs no per-subscription state.
``seq`` numbers the values and ``part`` the messages of one value: the network promises no
order, so a subscriber orders by ``seq`` and drops a repeated ``(seq, part)``.

:class:`IntervalPublisher` applies a value to the durable store and sends the outbox, oldest
first, in ``edn:EventBatch`` messages; a row leaves the outbox once a root acknowledged it
(the root's own guarantee then holds: README, Delivery guarantees).  A send that fails leaves
the rows for the next :meth:`~IntervalPublisher.flush`, which a restarted publisher calls first.
One publisher process per stream is the intended deployment; two sending one store's outbox at
once stay correct for subscribers that order by ``seq`` and drop repeats, but may send a
message twice.
"""
from __future__ import annotations

import math
import threading

from lxml import etree

from wsframework import ns
from matchers.vocabulary import EDN
from route_manager.publisher import Publisher

from .feed import send_changes
from .interval_store import IntervalStore, StoredMessage
from .intervals import IntervalMessage, InvalidIntervalState

__all__ = ["MESSAGE_TAG", "topic_schema", "message_event", "read_message_event",
           "subscription_filter", "IntervalPublisher"]

MESSAGE_TAG = ns.qname(EDN, "IntervalMessage")
VALUE_DOMAIN = (-1e12, 1e12)  # the update attribute's domain unless the caller names one


def topic_schema(limit: float, value_min: float = VALUE_DOMAIN[0],
                 value_max: float = VALUE_DOMAIN[1]) -> etree._Element:
    """The ``edn:Schema`` of a topic carrying one stream's interval messages."""
    root = etree.Element(ns.qname(EDN, "Schema"), nsmap={"edn": EDN})
    for name, low, high in (("low", 0.0, limit), ("high", 0.0, limit),
                            ("update", value_min, value_max)):
        etree.SubElement(root, ns.qname(EDN, "Attribute"), name=name, type="number",
                         xpath=f"@{name}", min=repr(float(low)), max=repr(float(high)))
    return root


def message_event(stored: StoredMessage) -> etree._Element:
    event = etree.Element(MESSAGE_TAG, nsmap={"edn": EDN})
    event.set("seq", str(stored.seq))
    event.set("part", str(stored.part))
    m = stored.message
    for name, value in (("low", m.low), ("high", m.high), ("update", m.update)):
        event.set(name, repr(float(value)))  # repr: the same float at the subscriber
    return event


def read_message_event(event: etree._Element) -> StoredMessage:
    """The message an event carries (what a subscriber reads from its notification);
    InvalidIntervalState when it is no well-formed interval message."""
    if event.tag != MESSAGE_TAG:
        raise InvalidIntervalState(f"not an interval message: {event.tag}")
    try:
        seq, part = int(event.get("seq", "")), int(event.get("part", ""))
        numbers = [float(event.get(name, "")) for name in ("low", "high", "update")]
    except ValueError:
        raise InvalidIntervalState("an interval message needs integer seq and part and "
                                   "numbers low, high and update") from None
    if seq < 1 or part < 0 or not all(math.isfinite(x) for x in numbers):
        raise InvalidIntervalState("an interval message's seq, part or numbers are out of range")
    return StoredMessage(seq, part, IntervalMessage(*numbers))


def subscription_filter(bound: float, limit: float) -> str:
    """The range filter of a subscription with this bound (LOW < δ <= HIGH)."""
    bound = float(bound)
    if not (math.isfinite(bound) and 0 < bound <= limit):
        raise InvalidIntervalState(f"a bound must lie in (0, {limit!r}], not {bound!r}")
    return f"low < {bound!r} and high >= {bound!r}"


class IntervalPublisher:
    """Turns values into interval messages on ``topic`` at the roots ``publisher`` knows."""

    def __init__(self, store: IntervalStore, publisher: Publisher, topic: str, *,
                 batch_max: int = 256) -> None:
        self.store = store
        self.publisher = publisher
        self.topic = topic
        self.batch_max = batch_max
        self._sending = threading.Lock()  # one sender at a time keeps the outbox's order

    def publish(self, value: float) -> list[StoredMessage]:
        """Apply ``value`` (durable when this returns or raises a transport error) and send
        every message still in the outbox, this value's last."""
        messages = self.store.apply(value)
        self.flush()
        return messages

    def flush(self) -> int:
        """Send the outbox, oldest first; returns how many messages went."""
        sent = 0
        with self._sending:
            while True:
                pending = self.store.pending(self.batch_max)
                if not pending:
                    return sent
                events = [message_event(m) for m in pending]
                send_changes(self.publisher, self.topic, events)
                self.store.sent(pending)
                sent += len(pending)
