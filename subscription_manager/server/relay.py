"""Carrying a request to the server that holds (or is to hold) the subscription, and its
answer back (paper III-A; the move protocol in :mod:`.moves`):

* a Subscribe placed on another server (:mod:`.subscribe_placement`) is sent there unchanged, marked
  ``edn:Placed`` and carrying the network's admin credential, under the client's
  wsa:MessageID (or one minted here when it sent none, or one too long to be remembered);
  the SubscriptionManager EPR the client gets names the server that holds the
  subscription. The owner makes one subscription per request (see
  :func:`subscription_manager.operations.request_key`), so a forward that timed out reading
  its answer is sent again, the same message under the same MessageID, until
  ``forward_timeout`` has passed (each attempt reads for a third of it at most): the retry
  gets the subscription the first copy made. A server that cannot be reached at all is
  marked down and the subscription is made here instead, unless an earlier attempt may
  have reached it: then the client is told so;
* Renew / GetStatus / Unsubscribe for a subscription that moved away are sent to the
  subscription manager of the server it moved to, under the same identifier.

A fault the other server answers with is relayed as it is (code, subcodes, detail).

:class:`SubscriptionRelay` is a part of
:class:`~subscription_manager.server.EdnSubscriptionManager`, whose request handlers call it.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from lxml import etree

from route_manager.peers import PeerTable
from route_manager.protocol import PLACED
from wsframework import ns
from matchers.vocabulary import EDN
from wsframework.addressing import new_message_id, request_headers
from wsframework.access import on_behalf_header
from wsframework.admin import contracts
from wsframework.client import SoapClient
from wsframework.elements import detached
from wsframework.exceptions import SoapFault
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry
from wsframework.soap import build_envelope
from wsframework.transport import HttpTransport, TransportError

from .. import messages as msg
from ..manager import MANAGER_PATH
from ..operations import MAX_MESSAGE_ID
from ..store import Subscription
from ..versions import EventingVersion
from .moves import ForwardingTable
from .peer_health import PeerHealth

log = logging.getLogger(__name__)

__all__ = ["SubscriptionRelay", "MessageIdClient", "forward_message_id", "maybe_delivered"]


class SubscriptionRelay:
    """Requests relayed to another server: over ``peer_transport``, to the servers of
    ``peers`` (``health`` learns which do not answer), a Subscribe with the network's
    ``admin_token`` within ``forward_timeout`` seconds; ``forwarding`` tells where a
    subscription that moved away lives; ``count(name)``: the server's counters."""

    def __init__(self, *, peers: PeerTable, peer_transport, admin_token: str,
                 forward_timeout: float, forwarding: ForwardingTable, health: PeerHealth,
                 count: Callable[..., None]):
        self.peers = peers
        self.peer_transport = peer_transport
        self.admin_token = admin_token
        self.forward_timeout = forward_timeout
        self.forwarding = forwarding
        self.health = health
        self.count = count
        self._subscribe_transport = None

    # == Subscribe placed elsewhere ========================================================
    def _credential_headers(self) -> list[etree._Element]:
        placed = etree.Element(PLACED, nsmap={"edn": EDN})
        placed.text = "1"
        token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        token.text = self.admin_token
        return [placed, token]

    def forward_subscribe(self, message: IncomingMessage, version: EventingVersion,
                           entry: NamespaceEntry, target: str) -> Reply | None:
        """Relay the Subscribe to ``target``; None when it is unreachable (place here)."""
        address = self.peers.address_of(target)
        if address is None:
            return None
        message_id = forward_message_id(message)
        client = MessageIdClient(self.forward_transport(), message_id,
                                soap_version=message.soap_version, wsa_version=version.wsa)
        body = detached(message.body)
        deadline = time.monotonic() + self.forward_timeout
        may_have_arrived = False
        attempt = 0
        while True:
            attempt += 1
            try:
                reply = client.call(f"{address}/topics/{entry.name}",
                                    version.action("Subscribe"), body,
                                    [*self._credential_headers(),
                                     on_behalf_header(message.principal)])
                break
            except SoapFault as fault:
                self.count("forward_faults")
                raise _as_eventing_fault(fault, version)
            except TransportError as exc:
                delivered = maybe_delivered(exc)
                may_have_arrived = may_have_arrived or delivered
                if delivered and time.monotonic() < deadline:
                    # the same request again: the owner answers with what the first made
                    self.count("forward_retries")
                    log.info("placement on %s timed out (attempt %d): sending it again under "
                             "%s", target, attempt, message_id)
                    continue
                if may_have_arrived:
                    raise version.faults.unable_to_process(
                        f"the server chosen for the subscription ({target}) did not answer in "
                        f"time ({attempt} attempts); the subscription may exist there") from None
                log.warning("placement on %s failed (%s): keeping the subscription here",
                            target, exc)
                self.health.mark_down(target)
                self.count("forward_unreachable")
                return None
        if reply.body is None:
            raise version.faults.unable_to_process(
                f"the server chosen for the subscription ({target}) answered without a body")
        self.count("forwarded_subscribes")
        return Reply(version.action("SubscribeResponse"), detached(reply.body))

    def forward_transport(self):
        """The peer transport, reading each answer for a third of ``forward_timeout`` at most:
        the transport of a forwarded Subscribe and of a placement claim, each retried within
        ``forward_timeout``."""
        if not isinstance(self.peer_transport, HttpTransport):
            return self.peer_transport  # injected (tests): as it is
        transport = self._subscribe_transport
        if transport is None:
            connect, read = self.peer_transport.timeout
            attempt = max(0.5, min(read, self.forward_timeout / 3))
            transport = self._subscribe_transport = HttpTransport(timeout=(connect, attempt))
        return transport

    # == Renew / GetStatus / Unsubscribe of moved subscriptions ============================
    def moved_to(self, subscription_id: str, current: Subscription | None) -> str | None:
        """Where a subscription that is not active here moved to, if it did (``current``:
        its row here, as the request read it)."""
        if current is not None and current.is_active:
            return None
        return self.forwarding.lookup(subscription_id)

    def forward_manager(self, message, version: EventingVersion, operation: str,
                         subscription_id: str, target: str) -> Reply:
        epr = msg.manager_epr(version, target + MANAGER_PATH, subscription_id)
        client = SoapClient(self.peer_transport, soap_version=message.soap_version,
                            wsa_version=version.wsa)
        # the network's credential, naming the requester: the holder checks its ownership
        token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        token.text = self.admin_token
        try:
            reply = client.call(epr, version.action(operation), detached(message.body),
                                [token, on_behalf_header(message.principal)])
        except SoapFault as fault:
            raise _as_eventing_fault(fault, version)
        except TransportError as exc:
            raise version.faults.unable_to_process(
                f"the server holding the subscription is unreachable: {exc}") from None
        self.count("forwarded_manager_requests")
        if operation == "Unsubscribe":
            self.forwarding.drop(subscription_id)
        body = detached(reply.body) if reply.body is not None else None
        return Reply(version.action(msg.OPERATIONS[operation]), body)


def forward_message_id(message: IncomingMessage) -> str:
    """The wsa:MessageID a forwarded Subscribe carries: the client's, or a new one when it
    sent none or one longer than the owner remembers (:data:`MAX_MESSAGE_ID`)."""
    message_id = message.addressing.message_id if message.addressing is not None else None
    if message_id and len(message_id) <= MAX_MESSAGE_ID:
        return message_id
    return new_message_id()


class MessageIdClient(SoapClient):
    """A SOAP client whose requests carry one given wsa:MessageID (a forward and each of its
    retries; a client repeating a request)."""

    def __init__(self, transport, message_id: str, **kwargs):
        super().__init__(transport, **kwargs)
        self.message_id = message_id

    def envelope(self, to, action, body, headers=(), reply_to=None) -> bytes:
        blocks = request_headers(self.wsa_version, to, action, message_id=self.message_id,
                                 reply_to=reply_to) + list(headers)
        return build_envelope(self.soap_version, body, blocks)


def _as_eventing_fault(fault: SoapFault, version: EventingVersion) -> SoapFault:
    """A relayed fault keeps its code, subcodes and detail; an eventing fault is sent with
    the version's fault action again."""
    if fault.action is None and any(str(s).startswith("{%s}" % version.namespace)
                                    for s in fault.subcodes):
        fault.action = version.fault_action
    return fault


def maybe_delivered(exc: TransportError) -> bool:
    """True when the request may have reached the peer (it timed out reading the answer)."""
    try:
        import requests
    except ImportError:  # pragma: no cover
        return False
    cause = exc.__cause__
    return isinstance(cause, requests.exceptions.ReadTimeout)
