"""Which server settles where a Subscribe goes: the owner of the request's placement key, the
same server whichever server the client sent the request to.

A Subscribe with a wsa:MessageID has a placement key
(:func:`~subscription_manager.operations.request_key` over the topic's name, the MessageID
and the body): the same on every server. Its owner is the first server of the key's
rendezvous ranking (highest random weight: each name scored by a digest of the key and the
name) over this server and the peers that answer, as the dispatcher lists them. Servers
that know the same members rank them the same way, so a client that gets no answer from one
server and sends the same request to another reaches the same owner.

The server that receives the Subscribe chooses a server as it always does (the router, from
here: distance and load as this server sees them), then asks the owner to settle it
(``ClaimPlacement {Key, Target}``, :mod:`route_manager.protocol`): the owner keeps the first
claim for a key (:meth:`~.subscribe_placement.SubscriptionPlacement.claim`) and answers it
to every later one, so every copy of the request is made on one server, whose store answers
a repeat with the subscription the first copy made. That is one round trip more than before,
and none when this server owns the key. A claim is idempotent, so one that timed out reading
its answer is sent again within ``forward_timeout``.

When an owner cannot be reached at all it is marked down and the next server of the ranking
settles (this server when it comes next, by keeping its own choice); an owner that answers
with a fault (a server that does not know the message yet) leaves the choice to this
server's own memory, as before claims existed. Either way a retry elsewhere may then make a
second subscription: the guarantee holds while the owner answers (docs/guarantees.md).

Membership: a server added takes over only the keys it now ranks first (about 1/n of them),
and their owner has no claim yet; a retry of such a request within the placement memory
may make a second subscription. A server removed hands its keys to each key's next server
in the ranking, which likewise holds no claim for them.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Callable, Iterable

from route_manager import protocol
from route_manager.peers import PeerTable
from wsframework.admin import AdminClient, ContractError
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.transport import TransportError
from wsframework.xmlparse import ParserLimits

from ..versions import EventingVersion
from .peer_health import PeerHealth
from .relay import maybe_delivered

log = logging.getLogger(__name__)

__all__ = ["PlacementClaims", "rank_owners", "valid_key", "valid_server_name"]

#: what a claim's answer may hold: one short element (a larger answer is refused unread)
CLAIM_REPLY_LIMITS = ParserLimits(max_bytes=16 * 1024, max_depth=16, max_elements=64)


def rank_owners(key: str, names: Iterable[str]) -> list[str]:
    """``names`` (without repeats) in the rendezvous order of ``key``: its owner first."""
    def weight(name: str) -> tuple[int, str]:
        digest = hashlib.sha256()
        for part in (key.encode(), name.encode("utf-8", "replace")):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
        return -int.from_bytes(digest.digest()[:8], "big"), name
    return sorted(set(names), key=weight)


def valid_key(key: str) -> bool:
    """A placement key as :func:`~subscription_manager.operations.request_key` makes them:
    a SHA-256 digest in lowercase hexadecimal."""
    return (len(key) == protocol.PLACEMENT_KEY_LENGTH
            and all(c in "0123456789abcdef" for c in key))


def valid_server_name(name: str) -> bool:
    """A server name a claim may carry: 1 to :data:`~route_manager.protocol.MAX_SERVER_NAME`
    printable characters, no white space."""
    return (1 <= len(name) <= protocol.MAX_SERVER_NAME and name.isprintable()
            and not any(c.isspace() for c in name))


class PlacementClaims:
    """The owners of placement keys among ``name`` (this server) and the peers of ``peers``
    that ``health`` does not mark down, and the claims sent to them: over ``transport()``
    (one attempt's transport) with the network's ``admin_token``, retried within
    ``timeout`` seconds; ``count(name)``: the server's counters."""

    def __init__(self, *, name: str, peers: PeerTable, health: PeerHealth,
                 transport: Callable[[], object], admin_token: str, timeout: float,
                 count: Callable[..., None], clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.peers = peers
        self.health = health
        self.transport = transport
        self.admin_token = admin_token
        self.timeout = timeout
        self.count = count
        self.clock = clock

    def owners(self, key: str) -> list[str]:
        """The servers that answer, in the order that settles ``key``: its owner first."""
        members = [self.name, *(n for n in self.peers.servers() if not self.health.is_down(n))]
        return rank_owners(key, members)

    def settle(self, key: str, proposal: str, version: EventingVersion) -> str | None:
        """The server that stands for ``key`` once ``proposal`` is claimed at its owner; None
        when this server settles it (it owns the key, or the owner refused the claim): the
        caller then keeps its own choice. A fault of ``version`` when the owner may have
        seen the claim but did not answer in time, or named a server unknown here."""
        deadline = self.clock() + self.timeout
        for owner in self.owners(key):
            if owner == self.name:
                return None
            address = self.peers.address_of(owner)
            if address is None:  # left the peer list meanwhile
                continue
            try:
                standing = self._claim(owner, address, key, proposal, deadline, version)
            except _Unreachable:
                continue
            if standing is None:
                return None
            if standing != self.name and self.peers.address_of(standing) is None:
                raise version.faults.unable_to_process(
                    f"the subscription belongs on {standing!r}, a server unknown here yet")
            self.count("placement_claims")
            return standing
        return None

    def _claim(self, owner: str, address: str, key: str, proposal: str, deadline: float,
               version: EventingVersion) -> str | None:
        client = AdminClient(address, self.admin_token,
                             soap_client=SoapClient(self.transport(), limits=CLAIM_REPLY_LIMITS))
        request = protocol.ClaimPlacement(Key=key, Target=proposal)
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = client.call(request)
            except SoapFault as fault:
                log.warning("placement owner %s refused the claim (%s): settling it here",
                            owner, fault.reason)
                self.count("placement_claim_faults")
                return None
            except ContractError as exc:
                raise version.faults.unable_to_process(
                    f"the placement owner {owner} answered an unusable claim: {exc}") from None
            except TransportError as exc:
                if not maybe_delivered(exc):
                    log.warning("placement owner %s is unreachable (%s): asking the next",
                                owner, exc)
                    self.health.mark_down(owner)
                    self.count("placement_owner_unreachable")
                    raise _Unreachable() from None
                if self.clock() < deadline:
                    self.count("placement_claim_retries")
                    continue
                raise version.faults.unable_to_process(
                    f"the placement owner {owner} did not answer in time ({attempt} attempts)"
                ) from None
            standing = getattr(answer, "Target", None)
            if (not isinstance(answer, protocol.ClaimPlacementResponse)
                    or not isinstance(standing, str) or not valid_server_name(standing)):
                raise version.faults.unable_to_process(
                    f"the placement owner {owner} answered an unusable server name")
            return standing


class _Unreachable(Exception):
    """The owner was not reached (the claim never left): the next owner settles."""
