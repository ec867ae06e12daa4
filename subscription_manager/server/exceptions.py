"""Precise errors of the EDN subscription server, and the fault each one is answered with.

The server's parts raise these; the messaging edge answers them through
:mod:`wsframework.faults` (translations registered below, once). A fault another server
answered with (a relayed Subscribe, Renew..., an import during a move) is relayed as it is,
and errors that depend on the request being relayed (the chosen server did not answer)
stay with the relay (:mod:`.relay`).

=====================  ==========================================================================
exception              fault
=====================  ==========================================================================
TopicNotHere           Sender adm:UnknownTopic "no topic named 'T' here" (an
                       :class:`~wsframework.namespace.UnknownEntry`: its registration applies)
PlacementRefused       Sender adm:AccessDenied (an ``edn:Placed`` Subscribe without the
                       network's admin credential)
UnusablePeerSummary    Sender adm:InvalidRequest (a PeerUpdate whose summary cannot be read)
UnusableClaim          Sender adm:InvalidRequest (a ClaimPlacement whose key or server name no
                       server makes)
UnusableImport         Sender adm:InvalidRequest (ImportSubscriptions this server cannot hold)
IncompleteImport       Sender, no subcode (the target of a move imported fewer subscriptions)
UnansweredImport       Receiver, no subcode (the target of a move never answered the import)
=====================  ==========================================================================
"""
from __future__ import annotations

from wsframework.admin import contracts
from wsframework.exceptions import (AccessDenied, SoapFault, WsFrameworkError, receiver_fault,
                                    sender_fault)
from wsframework.faults import translate
from wsframework.namespace import UnknownEntry

__all__ = ["EdnServerError", "TopicNotHere", "PlacementRefused", "UnusablePeerSummary",
           "UnusableClaim",
           "UnusableImport", "IncompleteImport", "UnansweredImport"]


class EdnServerError(WsFrameworkError):
    """A request the EDN subscription server refuses, or cannot complete."""


class TopicNotHere(UnknownEntry):
    """This server hosts no topic ``name`` (answered as any unknown namespace entry)."""

    def __init__(self, name: str):
        super().__init__(name, "topic")

    def __str__(self) -> str:
        return f"{super().__str__()} here"


class PlacementRefused(EdnServerError, AccessDenied):
    """A Subscribe marked ``edn:Placed`` without the network's admin credential."""

    def __init__(self):
        super().__init__("edn:Placed needs the network's admin credential")


class UnusablePeerSummary(EdnServerError):
    """A peer's routing summary that cannot be read (``error`` says why)."""

    def __init__(self, server: str, error: Exception):
        super().__init__(f"unusable peer summary from {server}: {error}")
        self.server = server
        self.error = error


class UnusableClaim(EdnServerError):
    """A ClaimPlacement whose key or server name no server makes (``reason`` says which)."""

    def __init__(self, reason: str):
        super().__init__(f"unusable placement claim: {reason}")
        self.reason = reason


class UnusableImport(EdnServerError):
    """Subscriptions offered for import that are malformed or that this server's engine
    refuses; nothing was stored."""

    def __init__(self, topic: str, error: Exception):
        super().__init__(f"cannot import into {topic}: {error}")
        self.topic = topic
        self.error = error


class IncompleteImport(EdnServerError):
    """The target of a move answered the import with fewer subscriptions than were sent."""

    def __init__(self, target: str, imported: int, sent: int):
        super().__init__(f"{target} imported {imported} of {sent} subscriptions")
        self.target = target
        self.imported = imported
        self.sent = sent


class UnansweredImport(EdnServerError):
    """The target of a move did not answer the import, however often it was asked (it may
    hold copies)."""

    def __init__(self, target: str, error: Exception):
        super().__init__(f"{target} did not answer the import: {error}")
        self.target = target
        self.error = error


@translate(PlacementRefused)
def _placement_refused(exc: PlacementRefused) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_ACCESS_DENIED)


@translate(UnusablePeerSummary)
@translate(UnusableClaim)
@translate(UnusableImport)
def _invalid_request(exc: UnusablePeerSummary | UnusableClaim | UnusableImport) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST)


@translate(IncompleteImport)
def _incomplete_import(exc: IncompleteImport) -> SoapFault:
    return sender_fault(str(exc))


@translate(UnansweredImport)
def _unanswered_import(exc: UnansweredImport) -> SoapFault:
    return receiver_fault(str(exc))
