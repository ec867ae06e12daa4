"""Administration messages at ``{base}/admin``: authenticated, typed, extensible.

Every admin message carries the credential as the ``adm:AdminToken`` header block. The token
is checked (in constant time) before the body is even parsed; a missing or wrong token is an
``adm:AccessDenied`` Sender fault and nothing changes. Operations about one topic
(``CreateTopic``, ``DeleteTopic``) may also be run by a principal the access layer says
administers that topic (:meth:`AdminEndpoint.delegate_topics`): its credential is checked
before the body is parsed, its grant on the topic after. Bodies are typed contracts
(:mod:`.contracts`, parsed and rendered by :mod:`.codec`); components register one operation
per request element, so the route manager can add route administration and applications can
add their own messages without touching this module.
"""
from __future__ import annotations

import hmac
import logging
from typing import Callable, Protocol

from lxml import etree
from .. import ns

from ..exceptions import AccessDenied, SoapFault, sender_fault
from ..faults import translate
from ..matching import InvalidMatcherOptions, UnknownMatcher
from ..messaging import IncomingMessage, MessageFilter, MessagingLayer, Reply
from ..namespace import (EntryExists, InvalidName, Namespace, NamespaceEntry, UnknownEntry,
                         validate_name)
from ..tls import member_certificates_required
from . import contracts
from .codec import ContractError, parse_request, render
from .registry import action_for, element_qname

log = logging.getLogger(__name__)

ADMIN_PATH = "/admin"

Operation = Callable[[object, IncomingMessage], object]


class TopicAdministrators(Protocol):
    """Who may run a topic's administration without the network credential (the access
    layer registers one: principals with an ``admin`` grant on the topic)."""

    def principal(self, message: IncomingMessage) -> str | None: ...

    def administers(self, principal: str, topic: str) -> bool: ...


class AdminEndpoint:
    def __init__(self, messaging: MessagingLayer, token: str):
        if not token:
            raise ValueError("an admin token is required")
        self._token = token.encode()
        self._operations: dict[str, Operation] = {}
        self._topic_of: dict[str, Callable[[object], str]] = {}
        self._administrators: TopicAdministrators | None = None
        self._before: list[Callable[[], object]] = []
        messaging.route("admin", MessageFilter(path=ADMIN_PATH), self._handle, priority=100)

    def register(self, request_class, operation: Operation, *,
                 topic_of: Callable[[object], str] | None = None) -> None:
        """Serve requests whose body element is ``request_class``'s element. ``topic_of``:
        the topic a request concerns, for an operation that the topic's administrators
        (:meth:`delegate_topics`) may run as well as the network."""
        tag = element_qname(request_class)
        if tag in self._operations:
            raise ValueError(f"an admin operation for {tag} is already registered")
        self._operations[tag] = operation
        if topic_of is not None:
            self._topic_of[tag] = topic_of

    def before_each(self, step: Callable[[], object]) -> None:
        """Run ``step()`` before every authenticated operation (a role whose processes share
        state brings its own view up to date with what the others committed)."""
        self._before.append(step)

    def delegate_topics(self, administrators: TopicAdministrators) -> None:
        """Let ``administrators`` run the operations registered with ``topic_of``."""
        self._administrators = administrators

    def _handle(self, message: IncomingMessage) -> Reply:
        body = message.body
        topic_of = self._topic_of.get(body.tag) if body is not None else None
        delegate = None
        if topic_of is not None and self._administrators is not None \
                and not carries_credential(message, self._token):
            # a principal first (a wrong credential is refused here), the body after
            delegate = self._administrators.principal(message)
        if delegate is None:
            self._authenticate(message)
        if body is None:
            raise sender_fault("empty admin message", contracts.FAULT_INVALID_REQUEST)
        operation = self._operations.get(body.tag)
        if operation is None:
            raise sender_fault(f"unknown admin message {body.tag}", contracts.FAULT_INVALID_REQUEST)
        try:
            request = parse_request(body)
        except ContractError as exc:  # the peer's request (a render error is our own bug)
            raise sender_fault(f"invalid {etree.QName(body).localname}: {exc.reason}",
                               contracts.FAULT_INVALID_REQUEST) from None
        if delegate is not None:
            topic = topic_of(request)
            if not self._administrators.administers(delegate, topic):
                log.warning("admin access denied to %s on topic %r", delegate, str(topic)[:80])
                raise AccessDenied(f"{delegate} may not administer topic {str(topic)[:80]!r} "
                                   f"(needs an admin grant on it, or the network credential)")
            log.info("%s by %s (admin of the topic)", etree.QName(body).localname, delegate)
        for step in self._before:
            step()
        response = operation(request, message)
        element = render(response)
        name = etree.QName(element)
        return Reply(action_for(name.localname, name.namespace), element)

    def _authenticate(self, message: IncomingMessage) -> None:
        if not carries_credential(message, self._token):
            if message.header(contracts.ADMIN_TOKEN_QNAME) is None:
                why = "no token"
            elif member_certificates_required() and not message.peer_principal:
                why = "no member certificate"
            else:
                why = "wrong token"
            log.warning("admin access denied from %s (%s)", message.remote_addr, why)
            raise AccessDenied("a valid admin credential is required"
                               + (" from a member certificate of the network"
                                  if why == "no member certificate" else ""))


def carries_credential(message: IncomingMessage, token: bytes | str) -> bool:
    """Whether ``message`` carries the admin credential ``token`` in its ``adm:AdminToken``
    header. The one credential check of every role.

    The header's text must equal the token exactly, compared in constant time: no stripping or
    other normalisation (a token wrapped in spaces, tabs, newlines or Unicode spaces is a
    different token), and a header with child elements carries no credential. Where the
    role serves mutual TLS (:func:`~wsframework.tls.member_certificates_required`), the
    token counts only from a peer whose certificate the network's CA verified."""
    expected = token.encode() if isinstance(token, str) else token
    header = message.header(contracts.ADMIN_TOKEN_QNAME)
    if header is None or len(header) or not header.text or not expected:
        return False
    if member_certificates_required() and not message.peer_principal:
        return False
    return hmac.compare_digest(header.text.encode(), expected)


def topic_named(request) -> str:
    """The topic a CreateTopic or DeleteTopic request names."""
    return request.Name


class NamespaceAdmin:
    """Create / delete / list entries of a :class:`Namespace` (its errors become the admin
    faults registered at the end of this module).

    Registered for the topic messages by default; a route manager reuses the same operations
    for its route messages (:meth:`create`, :meth:`delete`, :meth:`entries`)."""

    def __init__(self, endpoint: AdminEndpoint | None, namespace: Namespace, *,
                 default_matcher: str | None = None):
        self.namespace = namespace
        self.default_matcher = default_matcher
        if endpoint is not None:
            endpoint.register(contracts.CreateTopic, self._create_topic, topic_of=topic_named)
            endpoint.register(contracts.DeleteTopic, self._delete_topic, topic_of=topic_named)
            endpoint.register(contracts.ListTopics, self._list_topics)

    # -- operations ------------------------------------------------------------------------
    def create(self, name: str, matcher: str | None, options) -> NamespaceEntry:
        entry = self.namespace.create(name, matcher or self.default_matcher, options)
        log.info("created %s %s bound to %s", self.namespace.kind[:-1], entry.name, entry.matcher_uri)
        return entry

    def delete(self, name: str) -> str:
        self.namespace.delete(name)
        name = validate_name(name)
        log.info("deleted %s %s", self.namespace.kind[:-1], name)
        return name

    def entries(self, prefix: str | None) -> list[NamespaceEntry]:
        return list(self.namespace.entries(prefix))

    # -- topic messages ----------------------------------------------------------------------
    def _create_topic(self, request, message: IncomingMessage):
        entry = self.create(request.Name, request.Matcher, request.Options)
        return contracts.CreateTopicResponse(Name=entry.name, Matcher=entry.matcher_uri,
                                             Address=self.namespace.address_of(entry.name))

    def _delete_topic(self, request, message: IncomingMessage):
        return contracts.DeleteTopicResponse(Name=self.delete(request.Name))

    def _list_topics(self, request, message: IncomingMessage):
        topics = [contracts.TopicInfo(Name=e.name, Matcher=e.matcher_uri,
                                      Address=self.namespace.address_of(e.name),
                                      FilterCount=len(e.matcher))
                  for e in self.entries(request.Prefix)]
        return contracts.ListTopicsResponse(Topic=topics)


# -- the admin faults of the framework's own errors (consulted at the messaging edge) ----------

@translate(AccessDenied)
def _access_denied(exc: AccessDenied) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_ACCESS_DENIED)


@translate(InvalidName)
def _invalid_name(exc: InvalidName) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_INVALID_NAME)


@translate(EntryExists)
def _entry_exists(exc: EntryExists) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_TOPIC_EXISTS)


@translate(UnknownEntry)
def _unknown_entry(exc: UnknownEntry) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_UNKNOWN_TOPIC)


@translate(InvalidMatcherOptions)
def _invalid_matcher_options(exc: InvalidMatcherOptions) -> SoapFault:
    return sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST)


@translate(UnknownMatcher)
def unknown_matcher_fault(exc: UnknownMatcher) -> SoapFault:
    detail = []
    for uri in exc.known:
        element = etree.Element(contracts.KNOWN_MATCHER_QNAME, nsmap={"adm": ns.ADMIN})
        element.text = uri
        detail.append(element)
    return sender_fault(str(exc), contracts.FAULT_UNKNOWN_MATCHER, detail)
