"""Administration messages at ``{base}/admin``: authenticated, typed, extensible.

Every admin message carries the credential as the ``adm:AdminToken`` header block; its body
is a typed contract. A service answers topic administration out of the box
(:class:`NamespaceAdmin`); components register one operation per request element with the
service's :class:`AdminEndpoint`; :class:`AdminClient` sends any contract and parses the
answer::

    from wsframework.admin import AdminClient, CreateTopic
    AdminClient("http://127.0.0.1:8080", token).call(CreateTopic(Name="stocks/quotes"))

Modules: ``contracts`` (the base contracts, their fault subcodes and QNames), ``model`` (how
a contract is written: :class:`Contract`, the field types), ``registry`` (which class parses
each element: :func:`register_contract`), ``codec`` (parse and render, with validation),
``wsdl_app`` (spyne's WSDL of the contracts), ``endpoint`` and ``client``. This package is the
only one that imports spyne (spyne 2.14 runs on Python 3.11 but not 3.12+): write contracts
with the types it re-exports.

Adding custom XML elements to a base administrative message (the paper's extension)
    Subclass a contract, put the new fields in your own namespace, and register it. From
    then on requests with that element name parse into your subclass; base fields keep
    working, and servers without the registration simply ignore your elements::

        from wsframework.admin import CreateTopic, Unicode, register_contract, required

        @register_contract
        class OwnedCreateTopic(CreateTopic):
            __namespace__ = "urn:example:owners"   # namespace of the added elements
            _type_info = [("Owner", required(Unicode))]

        # <adm:CreateTopic><adm:Name>a/b</adm:Name><o:Owner>ann</o:Owner></adm:CreateTopic>
        # now parses to OwnedCreateTopic(Name="a/b", Owner="ann"); render() writes the
        # element back as {urn:wsframework:admin}CreateTopic with {urn:example:owners}Owner.

    The element name on the wire is always the base contract's (``CreateTopic``), whatever
    the subclass is called. Register response subclasses with ``request=False`` so that
    :func:`parse_response` (the client side) returns them. One extension per element name:
    a second, unrelated subclass is refused (register a subclass of the registered one, or
    unregister first).

Adding a message of your own
    Declare its request and response contracts with their elements, then serve it::

        from wsframework.admin import Contract, Integer32, optional, register_contract

        class Ping(Contract):
            __namespace__ = "urn:example:ping"
            _type_info = [("Count", optional(Integer32))]

        class PingResponse(Contract):
            __namespace__ = "urn:example:ping"
            _type_info = [("Count", optional(Integer32))]

        register_contract(Ping, element="{urn:example:ping}Ping")
        register_contract(PingResponse, request=False, element="{urn:example:ping}PingResponse")
        service.admin.register(Ping, lambda request, message: PingResponse(Count=request.Count))

    Its action is ``urn:example:ping/Ping`` (the element's namespace, ``/``, its name). The
    event distribution network declares every one of its messages this way
    (``route_manager.protocol``). ``wsdl.admin.admin_wsdl`` describes the base contracts,
    plus the operations a role passes it.
"""
from .client import AdminClient
from .codec import ContractError, parse_request, parse_response, render
from .contracts import (ADMIN_TOKEN_QNAME, FAULT_ACCESS_DENIED, FAULT_INVALID_NAME,
                        FAULT_INVALID_REQUEST, FAULT_TOPIC_EXISTS, FAULT_UNKNOWN_MATCHER,
                        FAULT_UNKNOWN_TOPIC, KNOWN_MATCHER_QNAME, OPERATIONS, AdminToken,
                        Configure, ConfigureResponse, CreateTopic, CreateTopicResponse,
                        DeleteTopic, DeleteTopicResponse, EntryName, Figure, GetStats,
                        GetStatsResponse, ListTopics, ListTopicsResponse, TopicInfo)
from .endpoint import (ADMIN_PATH, AdminEndpoint, NamespaceAdmin, TopicAdministrators,
                       carries_credential, topic_named, unknown_matcher_fault)
from .model import (AnyUri, AnyXml, Boolean, Contract, Integer32, Unicode, optional, repeated,
                    required)
from .registry import (REQUEST_ACTIONS, RESPONSE_ACTIONS, action_for, element_qname,
                       register_contract, register_operation, reset_contracts,
                       unregister_contract)
from .wsdl_app import spyne_wsdl

__all__ = [
    "ADMIN_TOKEN_QNAME", "KNOWN_MATCHER_QNAME",
    "FAULT_ACCESS_DENIED", "FAULT_TOPIC_EXISTS", "FAULT_UNKNOWN_TOPIC",
    "FAULT_UNKNOWN_MATCHER", "FAULT_INVALID_NAME", "FAULT_INVALID_REQUEST",
    "OPERATIONS", "REQUEST_ACTIONS", "RESPONSE_ACTIONS", "action_for", "element_qname",
    "ContractError", "AdminToken", "EntryName",
    "CreateTopic", "CreateTopicResponse", "DeleteTopic", "DeleteTopicResponse",
    "ListTopics", "ListTopicsResponse", "TopicInfo",
    "Figure", "GetStats", "GetStatsResponse", "Configure", "ConfigureResponse",
    "Contract", "AnyUri", "AnyXml", "Boolean", "Integer32", "Unicode", "required", "optional", "repeated",
    "register_contract", "register_operation", "unregister_contract", "reset_contracts",
    "parse_request", "parse_response", "render", "spyne_wsdl",
    "ADMIN_PATH", "AdminEndpoint", "NamespaceAdmin", "TopicAdministrators", "carries_credential",
    "topic_named", "unknown_matcher_fault",
    "AdminClient",
]
