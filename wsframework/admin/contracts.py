"""The base administrative contracts: topic administration, plus the statistics and run-time
settings any role may answer. Body elements in ``ns.ADMIN`` (``urn:wsframework:admin``)::

    CreateTopic {Name, Matcher?, Options?}   -> CreateTopicResponse {Name, Matcher, Address}
    DeleteTopic {Name}                       -> DeleteTopicResponse {Name}
    ListTopics  {Prefix?}                    -> ListTopicsResponse  {Topic* {Name, Matcher,
                                                                      Address, FilterCount}}
    GetStats    {Prefix?}                    -> GetStatsResponse    {Figure* {Name, Value}}
    Configure   {Setting* {Name, Value}}     -> ConfigureResponse   {Setting* {Name, Value}}

``Options`` (engine configuration) is any XML: one element, or none. The credential travels
as the ``adm:AdminToken`` header block. Fault subcodes are QNames in ``ns.ADMIN``; the edge
renders the faults (:mod:`wsframework.exceptions`).

Other messages (the event distribution network's, an application's) are declared where they
belong and registered with :func:`wsframework.admin.registry.register_contract`.
"""
from __future__ import annotations

from wsframework import ns

from .model import AnyUri, AnyXml, Contract, Integer32, Unicode, optional, repeated, required

__all__ = [
    "ADMIN_TOKEN_QNAME", "KNOWN_MATCHER_QNAME",
    "FAULT_ACCESS_DENIED", "FAULT_TOPIC_EXISTS", "FAULT_UNKNOWN_TOPIC",
    "FAULT_UNKNOWN_MATCHER", "FAULT_INVALID_NAME", "FAULT_INVALID_REQUEST",
    "AdminToken", "EntryName", "OPERATIONS",
    "CreateTopic", "CreateTopicResponse", "DeleteTopic", "DeleteTopicResponse",
    "ListTopics", "ListTopicsResponse", "TopicInfo",
    "Figure", "GetStats", "GetStatsResponse", "Configure", "ConfigureResponse",
]



def _qname(local: str) -> str:
    return ns.qname(ns.ADMIN, local)


ADMIN_TOKEN_QNAME = _qname("AdminToken")

# Fault subcodes; raised elsewhere (the edge owns fault rendering).
FAULT_ACCESS_DENIED = _qname("AccessDenied")
FAULT_TOPIC_EXISTS = _qname("TopicExists")
FAULT_UNKNOWN_TOPIC = _qname("UnknownTopic")
FAULT_UNKNOWN_MATCHER = _qname("UnknownMatcher")  # detail: one KnownMatcher per URI
FAULT_INVALID_NAME = _qname("InvalidName")
FAULT_INVALID_REQUEST = _qname("InvalidRequest")
KNOWN_MATCHER_QNAME = _qname("KnownMatcher")


_TopicName = Unicode.customize(type_name="TopicName", __namespace__=ns.ADMIN,
                               min_len=1, min_occurs=1, nillable=False)

# The name of a namespace entry other than a topic, a server, a figure or a setting.
EntryName = Unicode.customize(type_name="EntryName", __namespace__=ns.ADMIN,
                              min_len=1, min_occurs=1, nillable=False)

# The credential header; declared here so that the WSDL can describe it.
AdminToken = Unicode.customize(type_name="AdminToken", __namespace__=ns.ADMIN,
                               min_len=1, nillable=False)


# --- topic administration ----------------------------------------------------------

class CreateTopic(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", optional(AnyUri)),
        ("Options", optional(AnyXml)),
    ]


class CreateTopicResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", required(AnyUri)),
        ("Address", required(AnyUri)),
    ]


class DeleteTopic(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", _TopicName)]


class DeleteTopicResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", _TopicName)]


class ListTopics(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Prefix", optional(Unicode))]


class TopicInfo(Contract):
    """One ``<adm:Topic>`` of a ListTopicsResponse."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", required(AnyUri)),
        ("Address", required(AnyUri)),
        ("FilterCount", Integer32(min_occurs=1, nillable=False, ge=0)),
    ]


class ListTopicsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Topic", repeated(TopicInfo))]


# --- statistics and run-time settings ----------------------------------------------------
#
# Base contracts although only the EDN's dispatcher and servers answer them today: every role
# has counters and run-time settings (wsframework.settings is the framework's settings
# mechanism, Configure its wire form), and a Figure is an open-ended name/value pair that names
# nothing of the EDN, so a plain event source or an application role can answer them without
# depending on the EDN (and `edn stats` / `edn precision` talk to any role the same way).

class Figure(Contract):
    """A named measurement (statistics are open-ended: new figures need no new contract)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName), ("Value", required(Unicode))]


class GetStats(Contract):
    """Figures whose names start with ``Prefix`` (all when absent)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Prefix", optional(Unicode))]


class GetStatsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Figure", repeated(Figure))]


class Configure(Contract):
    """Change run-time settings (e.g. ``precision``); answers with the settings in force."""

    __namespace__ = ns.ADMIN
    _type_info = [("Setting", repeated(Figure))]


class ConfigureResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Setting", repeated(Figure))]


# (operation, request contract, response contract); the order of the WSDL.
OPERATIONS = (
    ("CreateTopic", CreateTopic, CreateTopicResponse),
    ("DeleteTopic", DeleteTopic, DeleteTopicResponse),
    ("ListTopics", ListTopics, ListTopicsResponse),
    ("GetStats", GetStats, GetStatsResponse),
    ("Configure", Configure, ConfigureResponse),
)
