"""Precise errors of the route manager, and the fault each one is answered with.

The dispatcher and the repartitioner raise these; the messaging edge answers them through
:mod:`wsframework.faults` (translations registered below, once). Fault subcodes are the admin
ones (:mod:`wsframework.admin.contracts`) and the EDN's own (:mod:`.protocol`).

=======================  ==================================================================
exception                fault
=======================  ==================================================================
UnknownServer            Sender adm:UnknownServer (an UpdateSummary from a server that did not
                         register; the server registers again when it sees it)
UnusableSummary          Sender adm:InvalidRequest
UnusableServerAddress    Sender adm:InvalidRequest (a RegisterServer or PeerUpdate address the
                         URL grammar refuses, :func:`server_address`)
InvalidConfiguration     Sender adm:InvalidRequest (a Configure refused; nothing changed)
UnknownAlgorithm         Sender adm:InvalidRequest (Repartition)
InvalidRepartition       Sender adm:InvalidRequest (Repartition parameters unusable, e.g.
                         kyra's maxDistance; nothing done)
RepartitionFailed        Receiver (Repartition; nothing moved)
=======================  ==================================================================

The framework's own errors are translated where they are defined (:mod:`wsframework.admin`):
the dispatcher raises :class:`~wsframework.namespace.InvalidName` for a bad server name
(adm:InvalidName) and :class:`~wsframework.namespace.UnknownEntry` for an unknown route or
topic (adm:UnknownTopic).
"""
from __future__ import annotations

from typing import Iterable

from wsframework.admin import contracts
from wsframework.exceptions import SoapFault, WsFrameworkError, receiver_fault, sender_fault
from wsframework.faults import translate
from wsframework.urlpolicy import UrlRefused, parse_url

from .protocol import FAULT_UNKNOWN_SERVER

__all__ = ["RouteManagerError", "UnknownServer", "UnusableSummary", "UnusableServerAddress",
           "InvalidConfiguration", "UnknownAlgorithm", "InvalidRepartition", "RepartitionFailed", "server_address"]


class RouteManagerError(WsFrameworkError):
    """Root of the route manager's own errors."""


class UnknownServer(RouteManagerError):
    def __init__(self, server: str):
        super().__init__(f"server {server!r} is not registered")
        self.server = server


class UnusableSummary(RouteManagerError):
    """A summary the route's matcher refused (``error``: its :class:`MatcherError`)."""

    def __init__(self, server: str, error: Exception):
        super().__init__(f"unusable summary from {server}: {error}")
        self.server = server
        self.error = error


class UnusableServerAddress(RouteManagerError):
    """A server address, sent by a peer, that the URL grammar refuses (``reason``)."""

    def __init__(self, server: str, address: str, reason: str):
        super().__init__(f"unusable address for server {server!r}: {reason}")
        self.server = server
        self.address = address
        self.reason = reason


def server_address(server: str, address: str) -> str:
    """``address`` without a trailing slash, once :func:`wsframework.urlpolicy.parse_url`
    has read it: a peer's address is contacted by every member of the network, so it gets
    the one reading (no userinfo, backslashes, control characters, ambiguous hosts, overlong
    URLs). Its IP ranges are not judged: registered servers normally live in private ranges,
    and the request carries the network's admin credential."""
    try:
        parsed = parse_url(address)
    except UrlRefused as refused:
        raise UnusableServerAddress(server, address, refused.reason) from None
    if parsed.ip is not None and parsed.ip.is_unspecified:  # a wildcard bind's, not an address
        raise UnusableServerAddress(server, address, f"{parsed.ip} is no address a peer can "
                                    "reach (a server bound to a wildcard gives --base-url)")
    return address.rstrip("/")


class InvalidConfiguration(RouteManagerError):
    """A ``Configure`` request with an unknown setting or a value that does not make sense."""


class UnknownAlgorithm(RouteManagerError):
    def __init__(self, algorithm: str, known: Iterable[str]):
        self.algorithm = algorithm
        self.known = tuple(known)
        super().__init__(f"unknown algorithm {algorithm!r}; use one of {', '.join(self.known)}")


class InvalidRepartition(RouteManagerError):
    """A Repartition request whose Algorithm parameters are unusable (nothing was done)."""


class RepartitionFailed(RouteManagerError):
    """The servers could not be read consistently; nothing was moved."""


@translate(UnknownServer)
def _unknown_server(exc: UnknownServer) -> SoapFault:
    return sender_fault(str(exc), FAULT_UNKNOWN_SERVER)


@translate(UnusableSummary)
@translate(UnusableServerAddress)
@translate(InvalidConfiguration)
@translate(UnknownAlgorithm)
@translate(InvalidRepartition)
def _invalid_request(exc: RouteManagerError) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST)


@translate(RepartitionFailed)
def _repartition_failed(exc: RepartitionFailed) -> SoapFault:
    return receiver_fault(str(exc))
