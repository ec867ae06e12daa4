"""Precise errors of the event source, and the fault each one is answered with.

Handlers raise these; the messaging edge answers them through :mod:`wsframework.faults`
(translations registered below, once). Each carries the WS-Eventing version of the request,
whose vocabulary names the fault (:class:`~subscription_manager.versions.Faults`). Expiry
errors live with the grant policy (:mod:`.expiry`), which registers theirs.

=======================  ==================================================================
exception                fault (2004/08 / 2011, see :mod:`.versions`)
=======================  ==================================================================
UnknownSubscription      Renew: Receiver wse:UnableToRenew, others Sender wse:InvalidMessage /
                         Sender wse:UnknownSubscription
RefusedEndpoint          Sender wse:InvalidMessage / Sender wse:UnusableEPR
RefusedEvent             Sender fault (a publication over the event limits; no WS-Eventing
                         vocabulary: publishers are not subscribers)
RefusedFilter            wse:FilteringRequestedUnavailable (+ SupportedDialect), empty:
                         wse:InvalidMessage / wse:EmptyFilter, otherwise wse:InvalidMessage /
                         wse:CannotProcessFilter
TooManySubscriptions     Receiver wse:EventSourceUnableToProcess / Receiver (no subcode)
=======================  ==================================================================

TooManySubscriptions: the 2004/08 submission names EventSourceUnableToProcess (Receiver) for
an event source that cannot take a Subscribe for reasons of its own, not the request's; the
2011 Recommendation dropped that fault (W3C bug 7554) and leaves a generic Receiver fault.
"""
from __future__ import annotations

from wsframework.exceptions import SoapFault, WsFrameworkError, sender_fault
from wsframework.faults import translate
from wsframework.matching import InvalidFilter, UnsupportedDialect

from .versions import EventingVersion

__all__ = ["EventingError", "UnknownSubscription", "RefusedEndpoint", "RefusedFilter",
           "RefusedEvent", "TooManySubscriptions"]


class EventingError(WsFrameworkError):
    """A WS-Eventing request the event source refuses, in ``version``'s vocabulary."""

    def __init__(self, version: EventingVersion, message: str):
        super().__init__(message)
        self.version = version


class UnknownSubscription(EventingError):
    """No active subscription of this version by that id (unknown, expired or ended);
    ``subscription_id`` is None when the request did not name one usably."""

    def __init__(self, version: EventingVersion, subscription_id: str | None, operation: str):
        super().__init__(version, f"{operation}: no active subscription {subscription_id!r}")
        self.subscription_id = subscription_id
        self.operation = operation


class RefusedEndpoint(EventingError):
    """A NotifyTo / EndTo address the target policy refuses (:mod:`.targets`)."""

    def __init__(self, version: EventingVersion, address: str, reason: str):
        # The fault echoes at most the start of the address: a refused URL may be megabytes.
        shown = address if len(address) <= 200 else address[:200] + "..."
        super().__init__(version, f"refused endpoint {shown}: {reason}")
        self.address = address
        self.reason = reason


class RefusedFilter(EventingError):
    """A subscription's filter its topic's matcher does not take."""

    def __init__(self, version: EventingVersion, error: InvalidFilter | UnsupportedDialect):
        super().__init__(version, str(error))
        self.error = error


class TooManySubscriptions(EventingError):
    """A Subscribe over one of the source's subscription limits (the whole service, the
    topic, the NotifyTo host: ``scope``)."""

    def __init__(self, version: EventingVersion, scope: str, limit: int):
        super().__init__(version, f"the event source cannot process the subscription: {scope} "
                                  f"already has the most active subscriptions allowed ({limit})")
        self.scope = scope
        self.limit = limit


class RefusedEvent(WsFrameworkError):
    """A published event over the source's element-count or depth limits, refused before
    any filter sees it."""


@translate(RefusedEvent)
def _refused_event(exc: RefusedEvent) -> SoapFault:
    return sender_fault(str(exc))


@translate(UnknownSubscription)
def _unknown_subscription(exc: UnknownSubscription) -> SoapFault:
    return exc.version.faults.unknown_subscription(exc.operation)


@translate(RefusedEndpoint)
def _refused_endpoint(exc: RefusedEndpoint) -> SoapFault:
    return exc.version.faults.unusable_epr(str(exc))


@translate(RefusedFilter)
def _refused_filter(exc: RefusedFilter) -> SoapFault:
    faults, error = exc.version.faults, exc.error
    if isinstance(error, UnsupportedDialect):
        return faults.filtering_requested_unavailable(error.dialect, error.supported)
    if error.reason == "empty filter":
        return faults.empty_filter()
    return faults.cannot_process_filter(error.reason)


@translate(TooManySubscriptions)
def _too_many_subscriptions(exc: TooManySubscriptions) -> SoapFault:
    return exc.version.faults.unable_to_process(str(exc))
