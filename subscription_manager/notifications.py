"""Notification messages, rendered as bytes from a per-subscription template.

A notification is an ordinary one-way SOAP message to NotifyTo: the subscription's SOAP
version, its paired WS-Addressing version, ``wsa:To`` = NotifyTo's address, the
notification's ``wsa:Action``, a fresh ``wsa:MessageID``, and every reference parameter
(and 2004/08 reference property) of NotifyTo copied as a header block (WSA 1.0 marks them
``wsa:IsReferenceParameter="true"``). The body is the event itself (Unwrap, and always for
2004/08) or, for the 2011 Wrap format, ``wse:Notify/@actionURI`` around the event with the
action ``http://www.w3.org/2011/03/ws-evt/WrappedSinkPortType/NotifyEvent``.

Everything that does not change per message is serialized once: a template is shared by
every subscription of the same SOAP and WS-Addressing versions and format
(:func:`shared_template`), and only a subscription whose NotifyTo carries reference
parameters has one of its own. Per message the address, the action, the message id and the
event bytes (serialized once per event) are spliced in, so fanning an event out to a
thousand subscriptions costs string joins, not tree building, and a million subscriptions
hold no template each.
"""
from __future__ import annotations

import functools
import uuid
from xml.sax.saxutils import escape, quoteattr

from lxml import etree

from wsframework import ns
from wsframework.soap import SoapVersion

from .messages import WRAP
from .store import Subscription

__all__ = ["NotificationTemplate", "notification_action", "shared_template", "template_for"]


_WRAP_OPEN = f"<wse:Notify xmlns:wse={quoteattr(ns.WSE2011)} actionURI=".encode()
_TAIL = b"</s:Body></s:Envelope>"
_SHARED: dict[bytes, bytes] = {}
_SHARED_MOST = 64  # distinct parts kept (a few per SOAP and WS-Addressing version)


def _shared(part: bytes) -> bytes:
    """One object for a template part many subscriptions repeat (a few hundred bytes each
    otherwise)."""
    held = _SHARED.get(part)
    if held is not None:
        return held
    if len(_SHARED) < _SHARED_MOST:
        _SHARED[part] = part
    return part


def notification_action(subscription: Subscription, event_action: str) -> str:
    return ns.WSE2011_NOTIFY_ACTION if subscription.format == WRAP else event_action


@functools.lru_cache(maxsize=16)
def _parts(soap_version: str, wsa) -> tuple[str, bytes, bytes, bytes, bytes]:
    """The parts every template of one SOAP and WS-Addressing version shares: the content
    type, and the bytes before wsa:To's text, after it, after the action and after the
    message id (without reference parameters); built once."""
    soap = SoapVersion(soap_version)
    wsa_ns = quoteattr(wsa.namespace)
    return (soap.content_type,
            _shared(f"<?xml version='1.0' encoding='utf-8'?>\n"
                    f"<s:Envelope xmlns:s={quoteattr(soap.namespace)}><s:Header>"
                    f"<wsa:To xmlns:wsa={wsa_ns}>".encode()),
            _shared(f"</wsa:To><wsa:Action xmlns:wsa={wsa_ns}>".encode()),
            _shared(f"</wsa:Action><wsa:MessageID xmlns:wsa={wsa_ns}>".encode()),
            _shared(b"</wsa:MessageID></s:Header><s:Body>"))


class NotificationTemplate:
    """The parts of a notification envelope around its address, action, message id and
    event, for one SOAP version, WS-Addressing version, format and set of reference
    parameters. The parts are objects shared by every template of the same versions."""

    __slots__ = ("content_type", "_open", "_after_to", "_after_action", "_after_id",
                 "wrapped")

    def __init__(self, soap_version: str, wsa, wrapped: bool, params: bytes = b""):
        (self.content_type, self._open, self._after_to, self._after_action,
         after_id) = _parts(soap_version, wsa)
        # reference parameters make the part after the message id a subscription's own
        self._after_id = (b"</wsa:MessageID>" + params + b"</s:Header><s:Body>" if params
                          else after_id)
        self.wrapped = wrapped

    def render(self, url: str, event_action: str, event: bytes,
               message_id: str | None = None) -> bytes:
        """The notification envelope to ``url`` for ``event`` (serialized element bytes)."""
        message_id = message_id or f"urn:uuid:{uuid.uuid4()}"
        if self.wrapped:
            header_action = ns.WSE2011_NOTIFY_ACTION
            body = (_WRAP_OPEN + quoteattr(event_action).encode() + b">" + event
                    + b"</wse:Notify>")
        else:
            header_action = event_action
            body = event
        return b"".join((self._open, escape(url).encode(), self._after_to,
                         escape(header_action).encode(), self._after_action,
                         message_id.encode(), self._after_id, body, _TAIL))


@functools.lru_cache(maxsize=16)
def shared_template(soap_version: str, wsa, wrapped: bool) -> NotificationTemplate:
    """The template of every subscription of these versions and format whose NotifyTo has no
    reference parameters."""
    return NotificationTemplate(soap_version, wsa, wrapped)


def reference_parameters(subscription: Subscription) -> bytes:
    """NotifyTo's reference parameters as the header blocks a notification carries (b""
    for none)."""
    wsa = subscription.version.wsa
    return b"".join(etree.tostring(block) for block in subscription.notify_to.header_blocks(wsa))


def template_for(subscription: Subscription, params: bytes | None = None) -> NotificationTemplate:
    """``subscription``'s template: the shared one, or one of its own when its NotifyTo
    carries reference parameters (``params``, computed when not given)."""
    if params is None:
        params = reference_parameters(subscription)
    wrapped = subscription.format == WRAP
    if params:
        return NotificationTemplate(subscription.soap_version, subscription.version.wsa,
                                    wrapped, params)
    return shared_template(subscription.soap_version, subscription.version.wsa, wrapped)
