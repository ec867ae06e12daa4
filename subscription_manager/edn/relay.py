"""Carrying a request to the server that holds (or is to hold) the subscription, and its
answer back (paper III-A; the move protocol in :mod:`.moves`):

* a Subscribe placed on another server (:mod:`.placement`) is sent there unchanged, marked
  ``edn:Placed`` and carrying the network's admin credential; the SubscriptionManager EPR
  the client gets names the server that holds the subscription. A server that cannot be
  reached is marked down and the subscription is made here instead, unless the request
  may have reached it (it timed out reading the answer): then the client is told so;
* Renew / GetStatus / Unsubscribe for a subscription that moved away are sent to the
  subscription manager of the server it moved to, under the same identifier.

A fault the other server answers with is relayed as it is (code, subcodes, detail).

:class:`SubscriptionRelay` is a mixin of
:class:`~subscription_manager.edn.EdnSubscriptionManager`; the host provides ``service``,
``store``, ``peers``, ``peer_transport``, ``mover``, ``mark_down`` and ``count``.
"""
from __future__ import annotations

import logging

from lxml import etree

from wsframework import ns
from wsframework.admin import contracts
from wsframework.client import SoapClient
from wsframework.elements import detached
from wsframework.exceptions import SoapFault
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry
from wsframework.transport import TransportError

from .. import messages as msg
from ..manager import MANAGER_PATH
from ..versions import EventingVersion
from .placement import PLACED

log = logging.getLogger(__name__)

__all__ = ["SubscriptionRelay"]


class SubscriptionRelay:
    """Requests relayed to another server; mixed into the EDN subscription manager."""

    # == Subscribe placed elsewhere ========================================================
    def _credential_headers(self) -> list[etree._Element]:
        placed = etree.Element(PLACED, nsmap={"edn": ns.EDN})
        placed.text = "1"
        token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        token.text = self.service.config.admin_token
        return [placed, token]

    def _forward_subscribe(self, message: IncomingMessage, version: EventingVersion,
                           entry: NamespaceEntry, target: str) -> Reply | None:
        """Relay the Subscribe to ``target``; None when it is unreachable (place here)."""
        address = self.peers.address_of(target)
        if address is None:
            return None
        client = SoapClient(self.peer_transport, soap_version=message.soap_version,
                            wsa_version=version.wsa)
        body = detached(message.body)
        try:
            reply = client.call(f"{address}/topics/{entry.name}", version.action("Subscribe"),
                                body, self._credential_headers())
        except SoapFault as fault:
            self.count("forward_faults")
            raise _as_eventing_fault(fault, version)
        except TransportError as exc:
            if _maybe_delivered(exc):
                raise version.faults.unable_to_process(
                    f"the server chosen for the subscription ({target}) did not answer in "
                    "time; the subscription may exist there") from None
            log.warning("placement on %s failed (%s): keeping the subscription here", target, exc)
            self.mark_down(target)
            self.count("forward_unreachable")
            return None
        if reply.body is None:
            raise version.faults.unable_to_process(
                f"the server chosen for the subscription ({target}) answered without a body")
        self.count("forwarded_subscribes")
        return Reply(version.action("SubscribeResponse"), detached(reply.body))

    # == Renew / GetStatus / Unsubscribe of moved subscriptions ============================
    def handle_renew(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "Renew", subscription_id, target)
        return super().handle_renew(message, version, subscription_id)

    def handle_get_status(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "GetStatus", subscription_id, target)
        return super().handle_get_status(message, version, subscription_id)

    def handle_unsubscribe(self, message, version: EventingVersion, subscription_id: str) -> Reply:
        target = self._moved_to(subscription_id)
        if target is not None:
            return self._forward_manager(message, version, "Unsubscribe", subscription_id, target)
        return super().handle_unsubscribe(message, version, subscription_id)

    def _moved_to(self, subscription_id: str) -> str | None:
        current = self.store.get(subscription_id)
        if current is not None and current.is_active:
            return None
        return self.mover.forwarding.lookup(subscription_id)

    def _forward_manager(self, message, version: EventingVersion, operation: str,
                         subscription_id: str, target: str) -> Reply:
        epr = msg.manager_epr(version, target + MANAGER_PATH, subscription_id)
        client = SoapClient(self.peer_transport, soap_version=message.soap_version,
                            wsa_version=version.wsa)
        try:
            reply = client.call(epr, version.action(operation), detached(message.body))
        except SoapFault as fault:
            raise _as_eventing_fault(fault, version)
        except TransportError as exc:
            raise version.faults.unable_to_process(
                f"the server holding the subscription is unreachable: {exc}") from None
        self.count("forwarded_manager_requests")
        if operation == "Unsubscribe":
            self.mover.forwarding.drop(subscription_id)
        body = detached(reply.body) if reply.body is not None else None
        return Reply(version.action(msg.OPERATIONS[operation]), body)


def _as_eventing_fault(fault: SoapFault, version: EventingVersion) -> SoapFault:
    """A relayed fault keeps its code, subcodes and detail; an eventing fault is sent with
    the version's fault action again."""
    if fault.action is None and any(str(s).startswith("{%s}" % version.namespace)
                                    for s in fault.subcodes):
        fault.action = version.fault_action
    return fault


def _maybe_delivered(exc: TransportError) -> bool:
    """True when the request may have reached the peer (it timed out reading the answer)."""
    try:
        import requests
    except ImportError:  # pragma: no cover
        return False
    cause = exc.__cause__
    return isinstance(cause, requests.exceptions.ReadTimeout)
