"""Publishing event documents to a topic: at one service (:func:`publish`), or at one of
several services with failover (:class:`FailoverPublisher`).

::

    with FailoverPublisher(["http://root-a:8080", "http://root-b:8080"]) as publisher:
        ack = publisher.publish("stocks", event)   # one event
        ack.address                                # the service that holds it

An application that publishes in messages of its own (several events in one body) or names
faults of its own that mean "try another service" builds on :class:`FailoverPublisher`: it
sends any body with :meth:`~FailoverPublisher.send` and passes its ``failover_subcodes``
(the EDN's publisher: :mod:`route_manager.publisher`).

**Failover.** A publisher sends to its *current* service. When that service does not take the
message, it sends the same message (same ``wsa:MessageID``, same body) to the next one, and
so on once round the list; the service that acknowledges becomes the current one (publishing
stays there; it does not move back by itself). "Does not take" means:

* no answer: the connection is refused or reset, the connect timeout (default 3 s: longer
  than TCP's first SYN retransmission, 1 s, so one lost SYN on a lossy link is not taken for
  a dead service) or the read timeout passes (:class:`~.transport.TransportError`);
* an HTTP 5xx answer that carries no SOAP fault (a proxy's or a crashed worker's page);
* a **Receiver** fault (SOAP 1.1 ``Server``): by SOAP 1.2's definition the message could not
  be processed for reasons of the receiver, not of the message, and "could succeed if resent
  at a later point in time"; another service may take it now. So is any fault whose subcode
  is in the publisher's ``failover_subcodes`` (by default :data:`FAILOVER_SUBCODES`,
  WS-Addressing's ``EndpointUnavailable``) whatever its code: SOAP 1.1 carries only the
  subcode, which a client reads as a Sender fault.

**Retries.** With ``attempts`` > 1 (default 1), a message no service took goes round the
list again, up to ``attempts`` times in all, after a pause that starts at ``backoff`` seconds
and doubles each round up to ``max_backoff``: with one service, that is the same service
again. Every attempt carries the same ``wsa:MessageID`` and body. Sending again to a service
that never received the message is always safe; to one whose answer was lost (in doubt), it
is safe when the service recognizes the MessageID (an EDN root dispatcher answers a Publish
whose MessageID it accepted on that topic within the last minutes without publishing it again,
:mod:`route_manager.dispatcher.recent_publications`; after a restart of that root, it may
publish it twice: at least once).

Everything else is the caller's problem and is raised at once, without trying another
service, because every one would answer the same: a **Sender** fault (an unknown topic, a
malformed event, a missing credential), ``MustUnderstand``, ``VersionMismatch``, and an HTTP
3xx/4xx answer without a fault (:class:`PublishRefused`). When no service took the message,
:class:`NoRootAnswered` names what each one said.

**What is guaranteed.** An event is acknowledged (:class:`Acknowledgement`) by exactly one
service: the one that answered 2xx, and that service's guarantee holds from then on (an EDN
root has committed the event to its durable log). A service that refused or could not be
reached holds nothing. A service whose answer was lost (a reset or a timeout after the
request went out, or a 5xx without a fault) *may* have taken it too: the event is then
published twice, once by each, at least once in all. Those services are listed in
:attr:`Acknowledgement.in_doubt`; a connection that was never made never puts a service in
doubt (:attr:`TransportError.unsent <wsframework.transport.TransportError>`).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from lxml import etree

from .admission import waiting_on_peer
from . import ns
from .addressing import new_message_id
from .client import SoapClient
from .exceptions import RECEIVER, SoapFault, WsFrameworkError
from .soap import SoapVersion
from .transport import HttpTransport, TransportError

log = logging.getLogger(__name__)

__all__ = ["PUBLISH_ACTION", "FAILOVER_SUBCODES", "MAX_ATTEMPTS", "MAX_BACKOFF", "topic_address",
           "publish", "FailoverPublisher", "Acknowledgement", "PublishRefused", "NoRootAnswered"]

PUBLISH_ACTION = ns.FRAMEWORK + ":eventing/Publish"
MAX_ATTEMPTS = 20  # rounds over the addresses one message may make
MAX_BACKOFF = 300.0  # seconds: the longest pause between two rounds
# Fault subcodes that mean "this service cannot take it now, another may", whatever the code.
FAILOVER_SUBCODES = frozenset({
    ns.qname(ns.WSA10, "EndpointUnavailable"),         # WS-Addressing: try later
    ns.qname(ns.WSA2004, "EndpointUnavailable"),
})


def topic_address(base_url: str, topic: str) -> str:
    return f"{base_url.rstrip('/')}/topics/{topic.strip('/')}"


def publish(base_url: str, topic: str, event: etree._Element, *, soap11: bool = False,
            client: SoapClient | None = None) -> int:
    client = client or SoapClient(soap_version=SoapVersion.SOAP11 if soap11 else SoapVersion.SOAP12)
    return client.send(topic_address(base_url, topic), PUBLISH_ACTION, event)


@dataclass(frozen=True)
class Acknowledgement:
    """A message one root took: ``address`` answered ``status`` (2xx) to it, after ``tried``
    sends in all (every root of every round counts); ``in_doubt``: roots tried before whose
    answer was lost (they may hold the message too)."""

    address: str
    status: int
    message_id: str
    tried: int = 1
    in_doubt: tuple[str, ...] = ()


class PublishRefused(WsFrameworkError):
    """A root answered HTTP ``status`` (3xx/4xx) without a SOAP fault: the caller's problem
    (a wrong address, a message over the size limit), the same at every root."""

    def __init__(self, address: str, status: int):
        super().__init__(f"{address} answered HTTP {status}")
        self.address = address
        self.status = status


class NoRootAnswered(TransportError):
    """No root took the message; ``failures``: (root, what it said) in the order tried.
    ``unsent`` when no root can hold it (none is in doubt): sending it again is safe."""

    def __init__(self, failures: Sequence[tuple[str, str]], in_doubt: Sequence[str]):
        text = "; ".join(f"{root}: {reason}" for root, reason in failures)
        super().__init__(f"no root took the message ({text})", unsent=not in_doubt)
        self.failures = tuple(failures)
        self.in_doubt = tuple(in_doubt)


class FailoverPublisher:
    """Publishes at the current one of ``addresses`` (the base URLs of services publishing
    the same topics), failing over as the module docstring says: on a Receiver fault, and on
    any fault whose subcode is in ``failover_subcodes``. Thread-safe: threads share the
    current service, and the first to see it fail moves it."""

    def __init__(self, addresses: str | Sequence[str], *, transport=None,
                 soap_version: SoapVersion = SoapVersion.SOAP12,
                 connect_timeout: float = 3.0, read_timeout: float = 10.0,
                 failover_subcodes: Iterable[str] = FAILOVER_SUBCODES,
                 attempts: int = 1, backoff: float = 0.5, max_backoff: float = 8.0,
                 sleep=None):
        """``attempts``: rounds over the addresses (1..:data:`MAX_ATTEMPTS`); ``backoff``,
        ``max_backoff``: the pause before the second round, doubled each round up to the
        latter (seconds); ``sleep``: how to pause (tests pass their own; by default
        ``time.sleep``, looked up when pausing, so gevent's patched one)."""
        roots = (addresses,) if isinstance(addresses, str) else tuple(addresses)
        self.addresses = tuple(dict.fromkeys(root.rstrip("/") for root in roots))
        if not self.addresses:
            raise ValueError("a publisher needs at least one address")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not (
                1 <= attempts <= MAX_ATTEMPTS):
            raise ValueError(f"attempts must be an integer from 1 to {MAX_ATTEMPTS}")
        for name, value in (("backoff", backoff), ("max_backoff", max_backoff)):
            if not (isinstance(value, (int, float)) and math.isfinite(value)
                    and 0 <= value <= MAX_BACKOFF):
                raise ValueError(f"{name} must be a number of seconds from 0 to {MAX_BACKOFF}")
        self.attempts = attempts
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._sleep = sleep
        self._own_transport = transport is None
        self.client = SoapClient(transport or HttpTransport(timeout=(connect_timeout,
                                                                     read_timeout)),
                                 soap_version=soap_version)
        self.failover_subcodes = frozenset(failover_subcodes)
        self._current = 0
        self._lock = threading.Lock()
        self.failovers = 0  # times the current root moved

    @property
    def current(self) -> str:
        return self.addresses[self._current]

    def publish(self, topic: str, event: etree._Element) -> Acknowledgement:
        """Publish one event document."""
        return self.send(topic, event)

    def send(self, topic: str, body: etree._Element) -> Acknowledgement:
        """Post ``body`` to ``topic`` with the Publish action at the current service, failing
        over to the others; one service takes it, or :class:`NoRootAnswered`."""
        message_id = new_message_id()  # the same at every root and attempt: one message
        start = self._current
        failures: list[tuple[str, str]] = []
        in_doubt: list[str] = []
        count = len(self.addresses)
        for tried in range(1, count * self.attempts + 1):
            index = (start + tried - 1) % count
            root = self.addresses[index]
            if tried > 1 and index == start:  # a new round: wait before trying again
                with waiting_on_peer():  # no control slot held while pausing
                    (self._sleep or time.sleep)(self.pause_before((tried - 1) // count))
            try:
                status = self.client.send(topic_address(root, topic), PUBLISH_ACTION, body,
                                          message_id=message_id)
            except TransportError as exc:
                reason, doubt = str(exc), not exc.unsent
            except SoapFault as fault:
                if fault.code != RECEIVER and fault.subcode not in self.failover_subcodes:
                    raise  # the message's problem: every root would say the same
                reason, doubt = f"Receiver fault {fault.subcode or ''} {fault.reason}", False
            else:
                if 200 <= status < 300:
                    self._move(start, index)
                    return Acknowledgement(root, status, message_id, tried, tuple(in_doubt))
                if status < 500:
                    raise PublishRefused(root, status)
                reason, doubt = f"HTTP {status}", True
            failures.append((root, reason))
            if doubt and root not in in_doubt:
                in_doubt.append(root)
            log.warning("publishing at %s failed (%s)%s", root, reason,
                        "" if tried == count * self.attempts else
                        "; trying the next root" if tried % count else "; trying again")
        raise NoRootAnswered(failures, in_doubt)

    def pause_before(self, round_: int) -> float:
        """Seconds to wait before round ``round_`` (1 = the second round, the first retry)."""
        return min(self.max_backoff, self.backoff * 2 ** (round_ - 1))

    def _move(self, start: int, index: int) -> None:
        if index == start:
            return
        with self._lock:
            # only from the root this message found failing: a concurrent sender may have
            # moved on already, and must not be sent back
            if self._current == start:
                self._current = index
                self.failovers += 1
                log.warning("publishing now at %s", self.addresses[index])

    def close(self) -> None:
        if self._own_transport:
            self.client.transport.close()

    def __enter__(self) -> "FailoverPublisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
