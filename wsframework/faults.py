"""Which SOAP fault answers which exception: one registry, consulted once, at the edge.

Code below the edge raises precise exceptions (``UnknownMatcher``, ``InvalidExpiry``,
``UnknownSubscription``...) and does not catch them to re-raise faults. The package that
defines an exception registers how a peer is told about it::

    from wsframework.faults import translate

    @translate(InvalidExpiry)
    def _invalid_expiry(exc):
        return sender_fault(str(exc), ns.qname(ns.WSE2011, "InvalidExpirationTime"))

The messaging layer (:meth:`MessagingLayer.handle`) and the WSGI edge turn any exception into
a reply through :func:`fault_for`: a :class:`SoapFault` is itself; a registered exception
type (or a subclass of one; the most specific registration wins, by MRO) is translated; and
anything else is a bug, logged with its traceback once and answered with a Receiver fault
that says nothing about the service's insides.

A translation may depend on the message being handled (the same ``InvalidFilter`` is
``wse:CannotProcessFilter`` to a subscriber and ``adm:InvalidRequest`` to an administrator):
then the handler raises a precise exception of its own, or a :class:`SoapFault` directly,
instead of registering a global translation.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

from .exceptions import SoapFault, receiver_fault

__all__ = ["translate", "register_translation", "unregister_translation", "fault_for",
           "forget_tracebacks", "UNEXPECTED_REASON"]

log = logging.getLogger(__name__)

UNEXPECTED_REASON = "the service could not process the message"

E = TypeVar("E", bound=BaseException)
Translation = Callable[[BaseException], SoapFault]

_lock = threading.Lock()
_translations: dict[type, Translation] = {}


def register_translation(exc_type: type[E], translation: Callable[[E], SoapFault]) -> None:
    """Answer ``exc_type`` (and its subclasses without a registration of their own) with
    ``translation(exc)``. Registering a type twice with a different function is a bug."""
    if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
        raise TypeError(f"{exc_type!r} is not an exception type")
    if issubclass(exc_type, SoapFault):
        raise TypeError(f"{exc_type.__qualname__} is a SoapFault already; it needs no translation")
    with _lock:
        existing = _translations.get(exc_type)
        if existing is not None and existing is not translation:
            raise ValueError(f"{exc_type.__qualname__} already translated by {existing!r}")
        _translations[exc_type] = translation


def unregister_translation(exc_type: type) -> None:
    with _lock:
        _translations.pop(exc_type, None)


def translate(exc_type: type[E]):
    """Decorator form of :func:`register_translation`."""
    def decorate(translation: Callable[[E], SoapFault]) -> Callable[[E], SoapFault]:
        register_translation(exc_type, translation)
        return translation
    return decorate


def translation_for(exc: BaseException) -> Translation | None:
    for cls in type(exc).__mro__:
        translation = _translations.get(cls)
        if translation is not None:
            return translation
    return None


def fault_for(exc: BaseException, *, where: str = "") -> SoapFault:
    """The fault that answers ``exc``; an unexpected exception is logged once, here."""
    if isinstance(exc, SoapFault):
        return exc
    translation = translation_for(exc)
    if translation is not None:
        try:
            return translation(exc)
        except Exception:  # a broken translation is a bug like any other
            log.exception("translating %s failed", type(exc).__qualname__)
    else:
        log.error("unexpected error handling a message%s", f" to {where}" if where else "",
                  exc_info=(type(exc), exc, exc.__traceback__))
    return receiver_fault(UNEXPECTED_REASON)


def forget_tracebacks(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of the exceptions it chains, once it is answered.

    A traceback holds the frames it passed through, and they hold the request they were
    handling: its body and its parsed tree, several times the body's size. At an edge that
    answers ``exc`` with itself (a :class:`SoapFault`), the catching frame holds the fault,
    the fault its traceback, and the traceback that frame: a reference cycle, freed only
    when the cycle collector next runs. Meanwhile a faulted megabyte of small elements
    kept 7 MB."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
