"""The messaging layer: turns request bytes into a reply, dispatching on a filter over the
message with the same matcher machinery that filters events.

Handlers register with a filter over the message. A filter is an XPath 1.0 expression
evaluated (by the default XPath matcher, found by URI through :mod:`wsframework.matching`) against the SOAP
envelope, with these variables bound:

``$action``  the wsa:Action (or the SOAPAction fallback), '' when absent
``$path``    the service-relative path of the target address, e.g. ``/topics/stocks``
``$to``      the wsa:To, '' when absent

:class:`MessageFilter` writes the common filters for you. When several handlers match, the
highest ``priority`` wins (ties: the first registered), so a catch-all such as event
publication on ``/topics/`` can sit below specific actions on the same addresses.

Protocol logic stays free of I/O: :meth:`MessagingLayer.handle` takes bytes and transport
facts and returns an :class:`Outcome` (status, content type, bytes). Replies to a
non-anonymous ReplyTo/FaultTo are handed to the injected transport, at the address the
``reply_policy`` (:class:`~wsframework.urlpolicy.UrlPolicy`) approved; a destination the
policy refuses gets its reply on the HTTP response instead. A message refused for want of a
credential (:class:`~wsframework.exceptions.AccessDenied`) gets its fault on the HTTP
response only: an unauthenticated peer never makes the service send anywhere.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping
from urllib.parse import urlsplit

from lxml import etree


from . import addressing as wsa
from . import ns
from .addressing import AddressingHeaders, WsaVersion
from .exceptions import AccessDenied, SoapFault
from .faults import fault_for, forget_tracebacks
from .matching import FilterSpec, create_matcher
from .soap import Envelope, SoapVersion, build_envelope, parse_envelope
from .urlpolicy import UrlPolicy, UrlRefused
from .xmlparse import DEFAULT_LIMITS, ParserLimits

log = logging.getLogger(__name__)

_XPATH_DIALECT = ns.XPATH10_DIALECT_2011


@dataclass
class IncomingMessage:
    """A parsed request and the transport facts that came with it."""

    envelope: Envelope
    addressing: AddressingHeaders | None
    action: str | None
    path: str
    base_url: str
    remote_addr: str | None = None
    # the principal a verified TLS client certificate names (wsframework.tls.peer_principal)
    peer_principal: str | None = None
    authorization: str | None = None  # the HTTP Authorization header (wsframework.access)
    principal: str | None = None  # who it is for, once access control identified it

    @property
    def body(self) -> etree._Element | None:
        return self.envelope.body

    @property
    def soap_version(self) -> SoapVersion:
        return self.envelope.version

    @property
    def wsa_version(self) -> WsaVersion | None:
        return self.addressing.version if self.addressing else None

    @property
    def address(self) -> str:
        return self.base_url.rstrip("/") + self.path

    def header(self, tag: str) -> etree._Element | None:
        return self.envelope.header(tag)

    def reference_parameter(self, tag: str) -> str | None:
        if self.addressing is not None:
            return self.addressing.reference_parameter(tag)
        element = self.envelope.header(tag)
        return (element.text or "").strip() if element is not None else None


@dataclass
class Reply:
    """What a handler answers: the reply's action, body payload and extra header blocks."""

    action: str
    body: etree._Element | None
    headers: list[etree._Element] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    status: int
    content_type: str | None
    body: bytes

    @classmethod
    def accepted(cls) -> "Outcome":
        return cls(202, None, b"")


@dataclass(frozen=True)
class MessageFilter:
    """Common message filters: exact action, exact path or path prefix (all optional)."""

    action: str | None = None
    path: str | None = None
    path_prefix: str | None = None

    def xpath(self) -> str:
        terms = []
        if self.action is not None:
            terms.append(f"$action = {_xpath_literal(self.action)}")
        if self.path is not None:
            terms.append(f"$path = {_xpath_literal(self.path)}")
        if self.path_prefix is not None:
            terms.append(f"starts-with($path, {_xpath_literal(self.path_prefix)})")
        return " and ".join(terms) if terms else "true()"


def _xpath_literal(value: str) -> str:
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    parts = value.split("'")
    return "concat(" + ", \"'\", ".join(f"'{p}'" for p in parts) + ")"


Handler = Callable[[IncomingMessage], "Reply | None"]


class MessagingLayer:
    def __init__(self, *, limits: ParserLimits = DEFAULT_LIMITS, transport=None,
                 reply_workers: int = 4, reply_policy: UrlPolicy | None = None):
        """``reply_policy`` judges ReplyTo/FaultTo addresses (default: a
        :class:`~wsframework.urlpolicy.UrlPolicy` with its defaults); a role that takes
        subscriptions replaces it with its own, so one policy covers every peer-chosen URL."""
        self.limits = limits
        self.transport = transport
        self.reply_policy = reply_policy if reply_policy is not None else UrlPolicy()
        self._matcher = create_matcher(ns.MATCHER_XPATH)
        self._handlers: dict[str, tuple[int, int, Handler]] = {}
        self._lock = threading.Lock()
        self._reply_pool: ThreadPoolExecutor | None = None
        self._reply_workers = reply_workers

    # -- registration ----------------------------------------------------------------------
    def route(self, name: str, message_filter: MessageFilter | str, handler: Handler, *,
              priority: int = 0, namespaces: Mapping[str, str] | None = None) -> None:
        """Register ``handler`` under a unique ``name`` for messages matching the filter."""
        expression = message_filter.xpath() if isinstance(message_filter, MessageFilter) else message_filter
        spec = FilterSpec(_XPATH_DIALECT, expression, tuple(sorted((namespaces or {}).items())))
        with self._lock:
            if name in self._handlers:
                raise ValueError(f"a handler named {name!r} is already registered")
            self._matcher.add_filter(name, spec)
            self._handlers[name] = (priority, len(self._handlers), handler)

    def unroute(self, name: str) -> None:
        with self._lock:
            self._matcher.remove_filter(name)
            del self._handlers[name]

    # -- dispatch --------------------------------------------------------------------------
    def handle(self, data: bytes, *, path: str = "/", base_url: str = "",
               content_type: str | None = None, soap_action: str | None = None,
               remote_addr: str | None = None, peer_principal: str | None = None,
               authorization: str | None = None, required_action: str | None = None) -> Outcome:
        """``required_action``: the action the HTTP request announced, on which it was let
        through (:mod:`.admission`); the message must carry it (wsa:ActionMismatch otherwise)."""
        announced = SoapVersion.from_content_type(content_type)
        version = announced or SoapVersion.SOAP11
        request_addressing = None
        try:
            envelope = parse_envelope(data, self.limits, expected=announced)
            version = envelope.version
            request_addressing = AddressingHeaders.parse(envelope.headers)
            message = self._incoming(envelope, request_addressing, path, base_url,
                                     content_type, soap_action, remote_addr)
            message.peer_principal = peer_principal
            message.authorization = authorization
            if required_action is not None and message.action != required_action:
                raise wsa.action_mismatch(message.wsa_version, message.action, required_action)
            handler = self._select(message)
            reply = handler(message)
        except Exception as exc:  # the edge: every error becomes the fault the spec names
            fault = fault_for(exc, where=path)
            log.info("fault to %s at %s: %s %s", remote_addr, path, fault.subcode or fault.code,
                     fault.reason)
            forget_tracebacks(exc)
            if isinstance(exc, AccessDenied):
                request_addressing = _on_back_channel(request_addressing)
            return self._fault_outcome(version, request_addressing, fault)
        if reply is None:
            return Outcome.accepted()
        return self._reply_outcome(version, request_addressing, reply, fault=False)

    def _incoming(self, envelope, addressing, path, base_url, content_type, soap_action,
                  remote_addr) -> IncomingMessage:
        action = addressing.action if addressing else None
        if not action:
            action = request_action(soap_action, content_type)
        if addressing is not None and addressing.to:
            try:
                split = urlsplit(addressing.to)
            except ValueError as exc:  # "[" without a valid IPv6 host, for one
                raise wsa.invalid_address(addressing.version, "To",
                                          f"wsa:To is not a URI: {exc}") from None
            if split.scheme in ("http", "https") and split.path:
                base_path = urlsplit(base_url).path.rstrip("/")
                target = split.path
                if base_path and (target == base_path or target.startswith(base_path + "/")):
                    target = target[len(base_path):] or "/"
                path = target
        return IncomingMessage(envelope, addressing, action, path or "/", base_url, remote_addr)

    def _select(self, message: IncomingMessage) -> Handler:
        variables = {"action": message.action or "", "path": message.path,
                     "to": (message.addressing.to if message.addressing else None) or ""}
        names = self._matcher.match(message.envelope.root, variables=variables)
        if not names:
            raise wsa.action_not_supported(message.wsa_version, message.action)
        best = max(names, key=lambda n: (self._handlers[n][0], -self._handlers[n][1]))
        return self._handlers[best][2]

    # -- replies ---------------------------------------------------------------------------
    def _fault_outcome(self, version, request_addressing, fault: SoapFault) -> Outcome:
        if fault.code == "VersionMismatch":
            version = SoapVersion.SOAP12
        action = fault.action or (request_addressing.version.fault_action if request_addressing
                                  else WsaVersion.WSA10.fault_action)
        body = fault.to_element(version.namespace)
        return self._reply_outcome(version, request_addressing, Reply(action, body), fault=True,
                                   status=version.fault_status(fault))

    def _reply_outcome(self, version, request_addressing, reply: Reply, *, fault: bool,
                       status: int = 200) -> Outcome:
        destination = wsa.reply_destination(request_addressing, fault)
        approved = None
        if destination is not None and not wsa.is_none_address(destination):
            try:
                approved = self.reply_policy.approve(destination.address)
            except UrlRefused as refused:
                log.warning("%s to %.200s refused (%s): answering on the HTTP response",
                            "fault" if fault else "reply", destination.address, refused.reason)
                request_addressing = _on_back_channel(request_addressing)
                destination = None
        headers = wsa.reply_headers(request_addressing, reply.action, fault=fault) + list(reply.headers)
        payload = build_envelope(version, reply.body, headers)
        if destination is None:
            return Outcome(status, f"{version.content_type}; charset=utf-8", payload)
        if approved is None:  # the none address: the requester wants no reply
            return Outcome.accepted()
        self._send_later(approved, payload, version, reply.action)
        return Outcome.accepted()

    def _send_later(self, url: str, payload: bytes, version: SoapVersion, action: str) -> None:
        if self.transport is None:
            log.warning("dropping reply to %s: no client transport configured", url)
            return
        with self._lock:
            if self._reply_pool is None:
                self._reply_pool = ThreadPoolExecutor(self._reply_workers, thread_name_prefix="reply")
        self._reply_pool.submit(self._send_quietly, url, payload, version, action)

    def _send_quietly(self, url, payload, version, action):
        try:
            self.transport.post(url, payload, version.content_type, action)
        except Exception as exc:  # the requester is gone; nothing else to tell
            log.warning("reply to %s failed: %s", url, exc)

    def close(self) -> None:
        if self._reply_pool is not None:
            self._reply_pool.shutdown(wait=True)


def _on_back_channel(request: AddressingHeaders | None) -> AddressingHeaders | None:
    """``request`` as if it had asked for its replies and faults on the HTTP response."""
    if request is None:
        return None
    return dataclasses.replace(request, reply_to=None, fault_to=None)


def request_action(header: str | None, content_type: str | None) -> str | None:
    """The action an HTTP request names: SOAPAction (SOAP 1.1), else the content type's
    ``action`` parameter (SOAP 1.2); None when neither names one."""
    if header:
        value = header.strip().strip('"')
        if value:
            return value
    if content_type:
        for param in content_type.split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "action":
                return value.strip().strip('"') or None
    return None
