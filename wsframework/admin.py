"""Administration messages at ``{base}/admin``: authenticated, typed, extensible.

Every admin message carries the credential as the ``adm:AdminToken`` header block. The token
is checked (in constant time) before the body is even parsed; a missing or wrong token is an
``adm:AccessDenied`` Sender fault and nothing changes. Bodies are typed contracts from
:mod:`wsframework.admin_contracts` (spyne); components register one operation per request
element, so the route manager can add route administration and applications can add their own
messages without touching this module.
"""
from __future__ import annotations

import hmac
import logging
from typing import Callable

from lxml import etree

from matchers import UnknownMatcher

from . import admin_contracts as contracts
from .exceptions import SoapFault, sender_fault
from .messaging import IncomingMessage, MessageFilter, MessagingLayer, Reply
from .namespace import EntryExists, InvalidName, Namespace, UnknownEntry, validate_name

log = logging.getLogger(__name__)

ADMIN_PATH = "/admin"

Operation = Callable[[object, IncomingMessage], object]


class AdminEndpoint:
    def __init__(self, messaging: MessagingLayer, token: str):
        if not token:
            raise ValueError("an admin token is required")
        self._token = token.encode()
        self._operations: dict[str, Operation] = {}
        messaging.route("admin", MessageFilter(path=ADMIN_PATH), self._handle, priority=100)

    def register(self, request_class, operation: Operation) -> None:
        """Serve requests whose body element is ``request_class``'s element."""
        tag = contracts.element_qname(request_class)
        if tag in self._operations:
            raise ValueError(f"an admin operation for {tag} is already registered")
        self._operations[tag] = operation

    def _handle(self, message: IncomingMessage) -> Reply:
        self._authenticate(message)
        body = message.body
        if body is None:
            raise sender_fault("empty admin message", contracts.FAULT_INVALID_REQUEST)
        operation = self._operations.get(body.tag)
        if operation is None:
            raise sender_fault(f"unknown admin message {body.tag}", contracts.FAULT_INVALID_REQUEST)
        try:
            request = contracts.parse_request(body)
        except contracts.ContractError as exc:
            raise sender_fault(f"invalid {etree.QName(body).localname}: {exc.reason}",
                               contracts.FAULT_INVALID_REQUEST) from None
        response = operation(request, message)
        element = contracts.render(response)
        return Reply(contracts.action_for(etree.QName(element).localname), element)

    def _authenticate(self, message: IncomingMessage) -> None:
        header = message.header(contracts.ADMIN_TOKEN_QNAME)
        offered = (header.text or "").strip().encode() if header is not None else b""
        if not offered or not hmac.compare_digest(offered, self._token):
            log.warning("admin access denied from %s (%s token)", message.remote_addr,
                        "wrong" if offered else "no")
            raise sender_fault("a valid admin credential is required", contracts.FAULT_ACCESS_DENIED)


class NamespaceAdmin:
    """Create / delete / list entries of a :class:`Namespace` through admin messages."""

    def __init__(self, endpoint: AdminEndpoint, namespace: Namespace):
        self.namespace = namespace
        endpoint.register(contracts.CreateTopic, self.create)
        endpoint.register(contracts.DeleteTopic, self.delete)
        endpoint.register(contracts.ListTopics, self.list)

    def create(self, request, message: IncomingMessage):
        try:
            entry = self.namespace.create(request.Name, request.Matcher or None, request.Options)
        except InvalidName as exc:
            raise sender_fault(str(exc), contracts.FAULT_INVALID_NAME) from None
        except EntryExists as exc:
            raise sender_fault(str(exc), contracts.FAULT_TOPIC_EXISTS) from None
        except UnknownMatcher as exc:
            raise unknown_matcher_fault(exc) from None
        log.info("created topic %s bound to %s", entry.name, entry.matcher_uri)
        return contracts.CreateTopicResponse(Name=entry.name, Matcher=entry.matcher_uri,
                                             Address=self.namespace.address_of(entry.name))

    def delete(self, request, message: IncomingMessage):
        try:
            self.namespace.delete(request.Name)
        except InvalidName as exc:
            raise sender_fault(str(exc), contracts.FAULT_INVALID_NAME) from None
        except UnknownEntry:
            raise sender_fault(f"no topic named {request.Name!r}", contracts.FAULT_UNKNOWN_TOPIC) from None
        name = validate_name(request.Name)
        log.info("deleted topic %s", name)
        return contracts.DeleteTopicResponse(Name=name)

    def list(self, request, message: IncomingMessage):
        topics = [contracts.TopicInfo(Name=e.name, Matcher=e.matcher_uri,
                                      Address=self.namespace.address_of(e.name),
                                      FilterCount=len(e.matcher))
                  for e in self.namespace.entries(request.Prefix)]
        return contracts.ListTopicsResponse(Topic=topics)


def unknown_matcher_fault(exc: UnknownMatcher) -> SoapFault:
    detail = []
    for uri in exc.known:
        element = etree.Element(contracts.KNOWN_MATCHER_QNAME, nsmap={"adm": contracts.ADMIN_NS})
        element.text = uri
        detail.append(element)
    return sender_fault(str(exc), contracts.FAULT_UNKNOWN_MATCHER, detail)
