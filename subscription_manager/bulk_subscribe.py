"""The operator's bulk path: one admin message makes many subscriptions on one event source
(a standalone source or one EDN subscription server), as many WS-Eventing Subscribes would,
committed together::

    SubscribeMany {Topic, Requests, Place?}  -> SubscribeManyResponse {Results}

    <edn:Requests version="2011">            (a key of subscription_manager.versions.VERSIONS)
      <wse:Subscribe>...</wse:Subscribe>     (1 to MAX_BULK_SUBSCRIBES, that version's)
    </edn:Requests>

    <edn:Results>                            (one per request, in order)
      <edn:Made id="..." expires="PT1H"/>    (expires as a SubscribeResponse renders it;
                                             manager="URL": made on another server)
      <edn:Refused code="{ns}InvalidExpirationTime" reason="..."/>
    </edn:Results>

Each request is checked as a Subscribe is (its syntax, NotifyTo and EndTo against the URL
policy, the expiry policy, the filter's dialect and limits, the subscription limits counted
against the requests before it) and refused alone, with the fault a Subscribe would get; the
subscriptions made are stored in one transaction and on disk before the answer. They belong
to no principal: their identifiers manage them, as a Subscribe's do. Requests carry no
wsa:MessageID, so a message sent twice makes its subscriptions twice: an operator who
retries checks what the first attempt made (``GetStatus``) or unsubscribes it.

On an EDN server the subscriptions stay on the server addressed, unless ``Place`` is true:
then each valid request is placed as a Subscribe is (the server's placement router, in the
order of the requests, each choice seen by the next), and each other server's share goes
there as one SubscribeMany (:mod:`subscription_manager.server.bulk_placement`); a Made answer
of a subscription made elsewhere names the subscription manager that holds it
(``manager``, the address a SubscribeResponse's SubscriptionManager EPR would carry). A
standalone source makes every request here whatever ``Place`` says. Either way the
dispatcher routes to the subscriptions from the route updates sent before the answer, and
``edn partition`` can spread them afterwards. The admin message needs the admin credential,
as every admin message does. ``edn subscribe --from-file`` sends them (``--place``).
"""
from __future__ import annotations

from typing import Callable

from lxml import etree

from matchers.vocabulary import EDN
from wsframework import ns
from wsframework.admin import (AdminEndpoint, AnyXml, Boolean, Contract, optional,
                               register_operation, required)
from wsframework.admin.contracts import EntryName
from wsframework.exceptions import sender_fault
from wsframework.messaging import IncomingMessage
from wsframework.namespace import Namespace

from .operations import Made, Refused
from .versions import VERSIONS

__all__ = ["SubscribeMany", "SubscribeManyResponse", "OPERATIONS", "MAX_BULK_SUBSCRIBES",
           "register_bulk_subscribe", "requests_element", "parse_results", "REQUESTS",
           "RESULTS", "MADE", "REFUSED"]

#: the most requests one SubscribeMany carries (the message size limit bounds its bytes)
MAX_BULK_SUBSCRIBES = 10_000
REQUESTS = ns.qname(EDN, "Requests")
RESULTS = ns.qname(EDN, "Results")
MADE = ns.qname(EDN, "Made")
REFUSED = ns.qname(EDN, "Refused")


class SubscribeMany(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Topic", EntryName), ("Requests", required(AnyXml)),
                  ("Place", optional(Boolean))]


class SubscribeManyResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Results", required(AnyXml))]


OPERATIONS = (register_operation(SubscribeMany, SubscribeManyResponse),)


def requests_element(version: str, bodies) -> etree._Element:
    """The ``edn:Requests`` of ``bodies`` (``wse:Subscribe`` elements of ``version``)."""
    element = etree.Element(REQUESTS, version=version, nsmap={"edn": EDN})
    element.extend(bodies)
    return element


def parse_results(element: etree._Element) -> list[Made | Refused]:
    """The answers of an ``edn:Results`` element, in order."""
    answers: list[Made | Refused] = []
    for child in element:
        if child.tag == MADE:
            answers.append(Made(child.get("id", ""), child.get("expires"),
                                child.get("manager")))
        elif child.tag == REFUSED:
            answers.append(Refused(child.get("code", ""), child.get("reason", "")))
    return answers


def _results_element(answers) -> etree._Element:
    element = etree.Element(RESULTS, nsmap={"edn": EDN})
    for answer in answers:
        if isinstance(answer, Made):
            child = etree.SubElement(element, MADE, id=answer.id)
            if answer.expires is not None:
                child.set("expires", answer.expires)
            if answer.manager is not None:
                child.set("manager", answer.manager)
        else:
            etree.SubElement(element, REFUSED, code=answer.code, reason=answer.reason)
    return element


#: ``subscribe_many(entry, version, bodies, soap_version=..., place=...)``: the answers
BulkSubscriber = Callable[..., "list[Made | Refused]"]


def register_bulk_subscribe(admin: AdminEndpoint, subscribe_many: BulkSubscriber, *,
                            topics: Namespace, before: Callable[[], None]) -> None:
    """Answer ``SubscribeMany`` at ``admin`` with ``subscribe_many(entry, version, bodies,
    soap_version=..., place=...)`` (the manager's, which stores them, sends its route
    update when it has one, and places them when asked and able); ``before()`` runs first
    (the manager takes in what other workers committed)."""

    def handle(request, message: IncomingMessage):
        element = request.Requests
        version = VERSIONS.get(element.get("version", "") if element.tag == REQUESTS else "")
        if version is None:
            raise sender_fault("SubscribeMany needs an edn:Requests element whose version is "
                               f"one of {', '.join(sorted(VERSIONS))}")
        bodies = [child for child in element if isinstance(child.tag, str)]
        if not 1 <= len(bodies) <= MAX_BULK_SUBSCRIBES:
            raise sender_fault(f"SubscribeMany carries 1 to {MAX_BULK_SUBSCRIBES} requests, "
                               f"not {len(bodies)}")
        before()
        entry = topics.get(request.Topic)  # the admin endpoint answers an unknown one
        answers = subscribe_many(entry, version, bodies, soap_version=message.soap_version.value,
                                 place=bool(request.Place))
        return SubscribeManyResponse(Results=_results_element(answers))

    admin.register(SubscribeMany, handle)
