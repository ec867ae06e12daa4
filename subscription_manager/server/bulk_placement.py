"""A bulk subscribe placed across the network (``SubscribeMany`` with ``Place``, see
:mod:`subscription_manager.bulk_subscribe`): an operator migrating a population into a
network of servers gets each subscription where a Subscribe would have gone, in one admin
message per server instead of one Subscribe, claim and relay per subscription.

* Each request is placed by this server's router, in order (:meth:`.subscribe_placement.
  SubscriptionPlacement.choose`): the router records every choice, so the requests of one
  message spread as a burst of Subscribes would. An invalid request stays here, where the
  local answer is its fault.
* Each other server's share goes there as one SubscribeMany without ``Place``, carrying the
  network's admin credential and sent in the SOAP version of the request (the version the
  subscriptions deliver in); the shares are sent at once, and this server's own share is
  made meanwhile. Each server stores its share in one transaction and sends its route update
  before it answers, so once this message is answered every subscription made is durable
  and routed to.
* A server that cannot be reached at all is marked down and its share is made here. One that
  may have received the share but did not answer in time gets each request of it refused
  with the version's EventSourceUnableToProcess fault saying so: SubscribeMany carries no
  wsa:MessageID, so sending it again could make the subscriptions twice. A fault the server
  answers for the whole message refuses each request of its share with that fault.
* A subscription made elsewhere is answered with its manager's address (``Made.manager``),
  the one a SubscribeResponse from that server would name.

Requests carry no wsa:MessageID and are not claimed (:mod:`.placement_claims`): a message
sent twice makes its subscriptions twice, as a bulk subscribe at one server does.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from wsframework.admin import AdminClient, ContractError
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.namespace import NamespaceEntry
from wsframework.soap import SoapVersion
from wsframework.transport import HttpTransport, TransportError

from ..bulk_subscribe import SubscribeMany, parse_results, requests_element
from ..manager import MANAGER_PATH
from ..operations import Made, Refused
from ..versions import EventingVersion
from .peer_health import PeerHealth
from .relay import maybe_delivered
from .subscribe_placement import SubscriptionPlacement

log = logging.getLogger(__name__)

__all__ = ["BulkPlacement", "SHARE_TIMEOUT"]

#: seconds to wait for a server's answer to its share: making thousands of subscriptions
#: in a server holding many takes far longer than a forwarded Subscribe's read timeout
SHARE_TIMEOUT = 300.0

MakeHere = Callable[[NamespaceEntry, EventingVersion, list, str], "list[Made | Refused]"]


class BulkPlacement:
    """Places bulk subscribes for the server ``name``: ``placement`` chooses, ``peers``
    (``address_of(name)``) and ``health`` say where the others are, ``transport()`` (the
    peer transport) reaches them with ``admin_token``; ``count(name, n)``: the server's
    counters."""

    def __init__(self, *, name: str, placement: SubscriptionPlacement, peers,
                 health: PeerHealth, transport: Callable[[], object], admin_token: str,
                 count: Callable[..., None]):
        self.name = name
        self.placement = placement
        self.peers = peers
        self.health = health
        self.admin_token = admin_token
        self.count = count
        self._transport = transport
        self._share_transport = None

    def subscribe_many(self, entry: NamespaceEntry, version: EventingVersion, bodies: list,
                       soap_version: str, make_here: MakeHere) -> list[Made | Refused]:
        """One answer per body, in order: each made on the server the router chooses
        (``make_here(entry, version, bodies, soap_version)`` for this server's share)."""
        shares: dict[str, list[int]] = {self.name: []}
        for index, body in enumerate(bodies):
            target = self.placement.choose(entry, body, version,
                                           pending_here=len(shares[self.name]))
            target = target or self.name
            if target != self.name and self.peers.address_of(target) is None:
                target = self.name  # left the peer list meanwhile
            shares.setdefault(target, []).append(index)
        answers: list[Made | Refused | None] = [None] * len(bodies)
        here = shares.pop(self.name, [])
        with ThreadPoolExecutor(max_workers=max(1, len(shares))) as pool:
            sent = {target: pool.submit(self._send_share, target, entry, version,
                                        [bodies[i] for i in indices], soap_version)
                    for target, indices in shares.items()}
            for target, future in sent.items():
                made_there = future.result()
                if made_there is None:  # unreachable: made here instead
                    here.extend(shares[target])
                    continue
                for index, answer in zip(shares[target], made_there):
                    answers[index] = answer
        if here:
            here.sort()
            for index, answer in zip(here, make_here(entry, version,
                                                     [bodies[i] for i in here], soap_version)):
                answers[index] = answer
        return answers  # type: ignore[return-value]

    def _send_share(self, target: str, entry: NamespaceEntry, version: EventingVersion,
                    bodies: list, soap_version: str) -> list[Made | Refused] | None:
        """``bodies`` made at ``target``: its answers (a subscription made there names its
        manager); None when ``target`` cannot be reached (the share never left)."""
        address = self.peers.address_of(target)
        if address is None:
            return None
        client = AdminClient(address, self.admin_token, soap_client=SoapClient(
            self.share_transport(), soap_version=SoapVersion(soap_version)))
        request = SubscribeMany(Topic=entry.name,
                                Requests=requests_element(version.name, bodies))
        try:
            answers = parse_results(client.call(request).Results)
        except SoapFault as fault:
            self.count("bulk_share_faults")
            return [Refused.of(fault)] * len(bodies)
        except ContractError as exc:
            return _refused_all(version, bodies, f"the server chosen ({target}) answered an "
                                f"unusable SubscribeManyResponse: {exc}")
        except TransportError as exc:
            if not maybe_delivered(exc):
                log.warning("bulk placement on %s failed (%s): making its share here",
                            target, exc)
                self.health.mark_down(target)
                self.count("bulk_share_unreachable")
                return None
            return _refused_all(version, bodies, f"the server chosen for the subscription "
                                f"({target}) did not answer in time; it may exist there")
        if len(answers) != len(bodies):
            return _refused_all(version, bodies, f"the server chosen ({target}) answered "
                                f"{len(answers)} results for {len(bodies)} requests; the "
                                "subscriptions may exist there")
        manager = address.rstrip("/") + MANAGER_PATH
        self.count("bulk_placed_elsewhere", sum(isinstance(a, Made) for a in answers))
        return [Made(a.id, a.expires, manager) if isinstance(a, Made) else a for a in answers]

    def share_transport(self):
        """The peer transport, reading a share's answer for :data:`SHARE_TIMEOUT` seconds
        (an injected transport, in tests, as it is)."""
        transport = self._transport()
        if not isinstance(transport, HttpTransport):
            return transport
        if self._share_transport is None:
            connect, _ = transport.timeout
            self._share_transport = HttpTransport(timeout=(connect, SHARE_TIMEOUT))
        return self._share_transport

    def close(self) -> None:
        if self._share_transport is not None:
            self._share_transport.close()


def _refused_all(version: EventingVersion, bodies: list, reason: str) -> list[Refused]:
    return [Refused.of(version.faults.unable_to_process(reason))] * len(bodies)
