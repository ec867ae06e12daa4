"""A bulk subscribe placed across the network (``SubscribeMany`` with ``Place``, see
:mod:`subscription_manager.bulk_subscribe`): an operator migrating a population into a
network of servers gets each subscription where a Subscribe would have gone, in one admin
message per server instead of one Subscribe, claim and relay per subscription.

* Each request is placed by this server's router, in order (:meth:`.subscribe_placement.
  SubscriptionPlacement.choose`): the router records every choice, so the requests of one
  message spread as a burst of Subscribes would. An invalid request stays here, where the
  local answer is its fault.
* Each other server's share goes there as one SubscribeMany without ``Place`` (copies of
  the requests), carrying the network's admin credential and sent in the SOAP version of the
  request (the version the subscriptions deliver in); the shares are sent at once, and this
  server's own share is made meanwhile. Each server stores its share in one transaction and
  sends its route update before it answers, so once this message is answered every
  subscription made is durable (and routed to, unless a route update failed: the server's
  background loop then sends it).
* A server the share certainly never reached (no connection could be made) is marked down
  and its share is made here. For any other failure (no answer in time, a connection lost
  after sending, an answer that cannot be read or counts the wrong number of results, a
  Receiver fault) each request of the share is refused with the version's
  EventSourceUnableToProcess fault (2004/08; a Receiver fault in 2011) saying that the
  subscriptions may exist there: SubscribeMany carries no wsa:MessageID, so sending them
  again could make them twice. A Sender fault for the whole message (the server refuses
  it) refuses each request of its share with that fault.
* A subscription made elsewhere is answered with its manager's address (``Made.manager``),
  the one a SubscribeResponse from that server would name.

Requests carry no wsa:MessageID and are not claimed (:mod:`.placement_claims`): a message
sent twice makes its subscriptions twice, as a bulk subscribe at one server does.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from wsframework.admin import AdminClient, ContractError
from wsframework.admission import waiting_on_peer
from wsframework.client import SoapClient
from wsframework.elements import detached
from wsframework.exceptions import RECEIVER, SoapFault
from wsframework.namespace import NamespaceEntry
from wsframework.soap import SoapVersion
from wsframework.transport import HttpTransport, TransportError

from ..bulk_subscribe import SubscribeMany, parse_results, requests_element
from ..manager import MANAGER_PATH
from ..operations import Made, Refused
from ..versions import EventingVersion
from .peer_health import PeerHealth
from .subscribe_placement import SubscriptionPlacement

log = logging.getLogger(__name__)

__all__ = ["BulkPlacement", "SHARE_TIMEOUT"]

#: seconds to wait for a server's answer to its share: making thousands of subscriptions
#: in a server holding many takes far longer than a forwarded Subscribe's read timeout
SHARE_TIMEOUT = 300.0

_MAY_EXIST = "the subscriptions may exist there: check before sending them again"

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
        self._lock = threading.Lock()

    def subscribe_many(self, entry: NamespaceEntry, version: EventingVersion, bodies: list,
                       soap_version: str, make_here: MakeHere) -> list[Made | Refused]:
        """One answer per body, in order: each made on the server the router chooses
        (``make_here(entry, version, bodies, soap_version)`` for this server's share)."""
        shares: dict[str, list[int]] = {self.name: []}
        placed_here = 0  # valid requests placed here, not made yet: counted in the load
        for index, body in enumerate(bodies):
            target = self.placement.choose(entry, body, version, pending_here=placed_here)
            if target is None:  # invalid: the local answer is its fault
                target = self.name
            elif target == self.name:
                placed_here += 1
            elif self.peers.address_of(target) is None:  # left the peer list meanwhile
                target = self.name
            shares.setdefault(target, []).append(index)
        answers: list[Made | Refused | None] = [None] * len(bodies)
        here = shares.pop(self.name)
        # each share a copy, made here before it leaves: a body moved into another tree
        # would lose the namespace declarations its filter's prefixes rely on
        messages = {target: [detached(bodies[i]) for i in indices]
                    for target, indices in shares.items()}
        with ThreadPoolExecutor(max_workers=max(1, len(shares))) as pool:
            sent = {target: pool.submit(self._send_share, target, entry, version, share,
                                        soap_version)
                    for target, share in messages.items()}
            self._make_here(entry, version, bodies, here, answers, soap_version, make_here)
            # no control slot held while the shares' servers answer: each may be placing a
            # bulk of its own, waiting on this server's slot (wsframework.admission)
            with waiting_on_peer():
                made = {target: future.result() for target, future in sent.items()}
            unreachable = []
            for target, made_there in made.items():
                if made_there is None:  # the share never left: made here instead
                    unreachable.extend(shares[target])
                    continue
                for index, answer in zip(shares[target], made_there):
                    answers[index] = answer
        self._make_here(entry, version, bodies, sorted(unreachable), answers, soap_version,
                        make_here)
        return answers  # type: ignore[return-value]

    @staticmethod
    def _make_here(entry, version: EventingVersion, bodies: list, indices: list[int],
                   answers: list, soap_version: str, make_here: MakeHere) -> None:
        if not indices:
            return
        try:
            made = make_here(entry, version, [bodies[i] for i in indices], soap_version)
        except Exception as exc:  # the other shares' answers still count
            log.exception("a placed bulk subscribe's share here failed")
            made = _refused_all(version, indices, f"this server could not store its share: "
                                f"{type(exc).__name__}")
        for index, answer in zip(indices, made):
            answers[index] = answer

    def _send_share(self, target: str, entry: NamespaceEntry, version: EventingVersion,
                    bodies: list, soap_version: str) -> list[Made | Refused] | None:
        """``bodies`` made at ``target``: its answers (a subscription made there names its
        manager); None when the share certainly never reached ``target``."""
        try:
            return self._share_answers(target, entry, version, bodies, soap_version)
        except Exception as exc:  # whatever it was, the share may have been made there
            log.exception("a placed bulk subscribe's share for %s failed", target)
            return _refused_all(version, bodies, f"sending the share to the server chosen "
                                f"({target}) failed ({type(exc).__name__}); {_MAY_EXIST}")

    def _share_answers(self, target: str, entry: NamespaceEntry, version: EventingVersion,
                       bodies: list, soap_version: str) -> list[Made | Refused] | None:
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
            if fault.code == RECEIVER:  # the server, or what stood in for it, failed
                fault = version.faults.unable_to_process(
                    f"the server chosen ({target}) answered: {fault.reason}; {_MAY_EXIST}")
            return [Refused.of(fault)] * len(bodies)
        except ContractError as exc:
            return _refused_all(version, bodies, f"the server chosen ({target}) answered an "
                                f"unusable SubscribeManyResponse ({exc}); {_MAY_EXIST}")
        except TransportError as exc:
            if exc.unsent:
                log.warning("bulk placement on %s failed (%s): making its share here",
                            target, exc)
                self.health.mark_down(target)
                self.count("bulk_share_unreachable")
                return None
            return _refused_all(version, bodies, f"the server chosen ({target}) did not "
                                f"answer ({exc}); {_MAY_EXIST}")
        if len(answers) != len(bodies):
            return _refused_all(version, bodies, f"the server chosen ({target}) answered "
                                f"{len(answers)} results for {len(bodies)} requests; "
                                f"{_MAY_EXIST}")
        manager = address.rstrip("/") + MANAGER_PATH
        self.count("bulk_placed_elsewhere", sum(isinstance(a, Made) for a in answers))
        return [Made(a.id, a.expires, manager) if isinstance(a, Made) else a for a in answers]

    def share_transport(self):
        """The peer transport, reading a share's answer for :data:`SHARE_TIMEOUT` seconds
        (an injected transport, in tests, as it is)."""
        transport = self._transport()
        if not isinstance(transport, HttpTransport):
            return transport
        with self._lock:
            if self._share_transport is None:
                connect, _ = transport.timeout
                self._share_transport = HttpTransport(timeout=(connect, SHARE_TIMEOUT))
            return self._share_transport

    def close(self) -> None:
        if self._share_transport is not None:
            self._share_transport.close()


def _refused_all(version: EventingVersion, requests: list, reason: str) -> list[Refused]:
    return [Refused.of(version.faults.unable_to_process(reason))] * len(requests)
