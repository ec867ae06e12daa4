"""Typed administration messages: the one module of the project that imports spyne.

Administration messages are SOAP body elements in ``ADMIN_NS``
(``urn:wsframework:admin``)::

    CreateTopic {Name, Matcher?, Options?}   -> CreateTopicResponse {Name, Matcher, Address}
    DeleteTopic {Name}                       -> DeleteTopicResponse {Name}
    ListTopics  {Prefix?}                    -> ListTopicsResponse  {Topic* {Name, Matcher,
                                                                      Address, FilterCount}}

The messaging layer hands :func:`parse_request` the body's first child (an lxml element)
and gets a contract instance back; a handler returns a response instance and
:func:`render` turns it into an lxml element. Anything that does not validate raises
:class:`ContractError` (the edge answers it with the ``FAULT_INVALID_REQUEST`` fault); no
spyne exception leaves this module. spyne 2.14 runs on Python 3.11 but not 3.12+, so keep
every spyne import here.

Parsing rules
    * A child is matched by its full QName: base fields live in ``ADMIN_NS``, fields added
      by an extension live in the extension's namespace. Children nobody declared are
      ignored, so a base server accepts requests carrying extensions it does not know
      (spyne itself matches by local name only; we filter the message's children first so
      that, say, ``{urn:vendor}Name`` can never overwrite the topic name; inside a nested
      ``Topic`` of a ListTopicsResponse spyne's local-name matching still applies).
    * Occurrence counts are enforced (a CreateTopic without ``Name`` or with two is
      rejected), and so are the simple types (``FilterCount`` must be an int).
    * ``Options`` (engine configuration) is any XML: it comes back as the single element
      child of ``<adm:Options>`` (an lxml element) or ``None``; several element children or
      bare text are rejected.

Extending a contract (the paper's "custom XML elements in base administrative messages")
    Subclass a contract, put the new fields in your own namespace, and register it. From
    then on requests with that element name parse into your subclass; base fields keep
    working, and servers without the registration simply ignore your elements::

        from spyne import Unicode
        from wsframework.admin_contracts import CreateTopic, register_contract

        class OwnedCreateTopic(CreateTopic):
            __namespace__ = "urn:example:owners"   # namespace of the added elements
            _type_info = [("Owner", Unicode(min_occurs=1, nillable=False))]

        register_contract(OwnedCreateTopic)
        # <adm:CreateTopic><adm:Name>a/b</adm:Name><o:Owner>ann</o:Owner></adm:CreateTopic>
        # now parses to OwnedCreateTopic(Name="a/b", Owner="ann"); render() writes the
        # element back as {urn:wsframework:admin}CreateTopic with {urn:example:owners}Owner.

    The element name on the wire is always the base contract's (``CreateTopic``), whatever
    the subclass is called. Register response subclasses with ``request=False`` so that
    :func:`parse_response` (the client side) returns them. One extension per element name:
    a second, unrelated subclass is refused (register a subclass of the registered one, or
    unregister first). The generated WSDL describes the base contracts only.
"""

from __future__ import annotations

import copy
import functools
import threading
import warnings
from types import MappingProxyType
from typing import Mapping

from lxml import etree
from spyne import AnyUri, AnyXml, Application, ComplexModel, Integer32, ServiceBase, Unicode, srpc
from spyne.error import Fault
from spyne.interface.wsdl import Wsdl11
from spyne.protocol.xml import XmlDocument
from spyne.util.appreg import unregister_application

from . import ns

with warnings.catch_warnings():
    # spyne's SOAP protocol imports ``cgi`` (deprecated, gone in 3.13); we are pinned below
    # 3.12 for spyne anyway, so the warning tells nobody anything.
    warnings.filterwarnings("ignore", "'cgi' is deprecated", DeprecationWarning)
    from spyne.protocol.soap import Soap11, Soap12

__all__ = [
    "ADMIN_NS", "ADMIN_TOKEN_QNAME", "KNOWN_MATCHER_QNAME",
    "FAULT_ACCESS_DENIED", "FAULT_TOPIC_EXISTS", "FAULT_UNKNOWN_TOPIC",
    "FAULT_UNKNOWN_MATCHER", "FAULT_INVALID_NAME", "FAULT_INVALID_REQUEST",
    "OPERATIONS", "REQUEST_ACTIONS", "RESPONSE_ACTIONS", "action_for", "element_qname",
    "ContractError", "AdminToken",
    "CreateTopic", "CreateTopicResponse", "DeleteTopic", "DeleteTopicResponse",
    "ListTopics", "ListTopicsResponse", "TopicInfo",
    "CreateRoute", "CreateRouteResponse", "DeleteRoute", "DeleteRouteResponse", "ListRoutes",
    "ListRoutesResponse", "RouteInfo", "TopicSpec", "ServerInfo", "RegisterServer",
    "RegisterServerResponse", "ListServers", "ListServersResponse", "UpdateSummary",
    "UpdateSummaryResponse", "Figure", "GetStats", "GetStatsResponse", "Configure",
    "ConfigureResponse", "PeerUpdate", "PeerUpdateResponse", "ExportSubscriptions",
    "ExportSubscriptionsResponse", "MoveSubscriptions", "MoveSubscriptionsResponse",
    "ImportSubscriptions", "ImportSubscriptionsResponse", "Repartition", "RepartitionResponse",
    "register_contract", "unregister_contract", "reset_contracts",
    "parse_request", "parse_response", "render", "spyne_wsdl",
]

ADMIN_NS = ns.ADMIN


def _qname(local: str) -> str:
    return ns.qname(ADMIN_NS, local)


ADMIN_TOKEN_QNAME = _qname("AdminToken")

# Fault subcodes; raised elsewhere (the edge owns fault rendering).
FAULT_ACCESS_DENIED = _qname("AccessDenied")
FAULT_TOPIC_EXISTS = _qname("TopicExists")
FAULT_UNKNOWN_TOPIC = _qname("UnknownTopic")
FAULT_UNKNOWN_MATCHER = _qname("UnknownMatcher")  # detail: one KnownMatcher per URI
FAULT_INVALID_NAME = _qname("InvalidName")
FAULT_INVALID_REQUEST = _qname("InvalidRequest")
KNOWN_MATCHER_QNAME = _qname("KnownMatcher")


def action_for(name: str) -> str:
    """The WS-Addressing action of an admin message: ``ADMIN_NS + "/" + name``."""
    if not name or "/" in name or "}" in name:
        raise ValueError("action_for() wants a message name such as 'CreateTopic', got %r"
                         % (name,))
    return "%s/%s" % (ADMIN_NS, name)


class ContractError(ValueError):
    """An admin message that does not validate; ``reason`` says why, for the fault."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Comparable:
    """Messages compare equal field by field (XML fields by canonical form)."""

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        return _comparable_fields(self) == _comparable_fields(other)

    __hash__ = None


def _comparable_fields(obj):
    fields = {}
    for key in type(obj).get_flat_type_info(type(obj)):
        value = getattr(obj, key, None)
        if isinstance(value, etree._Element):
            value = etree.tostring(value, method="c14n", exclusive=True)
        fields[key] = value
    return fields


# --- the contracts ---------------------------------------------------------------

def _required(t):
    return t(min_occurs=1, nillable=False)


def _optional(t):
    return t(nillable=False)


_TopicName = Unicode.customize(type_name="TopicName", __namespace__=ADMIN_NS,
                               min_len=1, min_occurs=1, nillable=False)

# The credential header; declared here so that the WSDL can describe it.
AdminToken = Unicode.customize(type_name="AdminToken", __namespace__=ADMIN_NS,
                               min_len=1, nillable=False)


class CreateTopic(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", _optional(AnyUri)),
        ("Options", _optional(AnyXml)),
    ]


class CreateTopicResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", _required(AnyUri)),
        ("Address", _required(AnyUri)),
    ]


class DeleteTopic(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _TopicName)]


class DeleteTopicResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _TopicName)]


class ListTopics(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Prefix", _optional(Unicode))]


class TopicInfo(_Comparable, ComplexModel):
    """One ``<adm:Topic>`` of a ListTopicsResponse."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _TopicName),
        ("Matcher", _required(AnyUri)),
        ("Address", _required(AnyUri)),
        ("FilterCount", Integer32(min_occurs=1, nillable=False, ge=0)),
    ]


class ListTopicsResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Topic", TopicInfo.customize(max_occurs="unbounded", nillable=False))]


# --- the event distribution network (route manager, dispatcher, servers) ----------------
#
# Route administration on a dispatcher mirrors topic administration; servers register with
# the dispatcher, ship their routing summaries in UpdateSummary (the paper's route update
# message), exchange subscription-routing summaries and load with their peers, and move
# subscriptions for offline partitioning. Summaries and subscriptions travel as XML
# (AnyXml) whose format belongs to the matcher / subscription manager that makes them.

_Name = Unicode.customize(type_name="EntryName", __namespace__=ADMIN_NS,
                          min_len=1, min_occurs=1, nillable=False)


class CreateRoute(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name), ("Matcher", _optional(AnyUri)), ("Options", _optional(AnyXml))]


class CreateRouteResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name), ("Matcher", _required(AnyUri)), ("Address", _required(AnyUri))]


class DeleteRoute(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name)]


class DeleteRouteResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name)]


class ListRoutes(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Prefix", _optional(Unicode))]


class RouteInfo(_Comparable, ComplexModel):
    """One ``<adm:Route>``: a route entry and how many servers hold a summary in it."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _Name),
        ("Matcher", _required(AnyUri)),
        ("Address", _required(AnyUri)),
        ("Servers", Integer32(min_occurs=1, nillable=False, ge=0)),
    ]


class ListRoutesResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Route", RouteInfo.customize(max_occurs="unbounded", nillable=False))]


class TopicSpec(_Comparable, ComplexModel):
    """A topic a subscription server must host (name, matcher, matcher options)."""

    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name), ("Matcher", _optional(AnyUri)), ("Options", _optional(AnyXml))]


class ServerInfo(_Comparable, ComplexModel):
    """One subscription server as the dispatcher knows it."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _Name),
        ("Address", _required(AnyUri)),
        ("Load", Integer32(nillable=False, ge=0)),
    ]


class RegisterServer(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name), ("Address", _required(AnyUri))]


class RegisterServerResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [
        ("Name", _Name),
        ("Topic", TopicSpec.customize(max_occurs="unbounded", nillable=False)),
        ("Peer", ServerInfo.customize(max_occurs="unbounded", nillable=False)),
    ]


class ListServers(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Prefix", _optional(Unicode))]


class ListServersResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Server", ServerInfo.customize(max_occurs="unbounded", nillable=False))]


class UpdateSummary(_Comparable, ComplexModel):
    """The route update message: a server's routing summary for one route (topic).

    ``Generation`` increases with every summary a server sends for a route, so a late,
    reordered update never replaces a newer one."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Server", _Name),
        ("Route", _Name),
        ("Generation", Integer32(min_occurs=1, nillable=False, ge=0)),
        ("Load", Integer32(nillable=False, ge=0)),
        ("Summary", _required(AnyXml)),
    ]


class UpdateSummaryResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Route", _Name), ("Accepted", Integer32(min_occurs=1, nillable=False))]


class Figure(_Comparable, ComplexModel):
    """A named measurement (statistics are open-ended: new figures need no new contract)."""

    __namespace__ = ADMIN_NS
    _type_info = [("Name", _Name), ("Value", _required(Unicode))]


class GetStats(_Comparable, ComplexModel):
    """Figures whose names start with ``Prefix`` (all when absent)."""

    __namespace__ = ADMIN_NS
    _type_info = [("Prefix", _optional(Unicode))]


class GetStatsResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Figure", Figure.customize(max_occurs="unbounded", nillable=False))]


class Configure(_Comparable, ComplexModel):
    """Change run-time settings (e.g. ``precision``); answers with the settings in force."""

    __namespace__ = ADMIN_NS
    _type_info = [("Setting", Figure.customize(max_occurs="unbounded", nillable=False))]


class ConfigureResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Setting", Figure.customize(max_occurs="unbounded", nillable=False))]


class PeerUpdate(_Comparable, ComplexModel):
    """Subscription-routing summary and load of one server, sent to its peers."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Server", _Name),
        ("Address", _required(AnyUri)),
        ("Route", _Name),
        ("Load", Integer32(min_occurs=1, nillable=False, ge=0)),
        ("Summary", _optional(AnyXml)),
    ]


class PeerUpdateResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Server", _Name)]


class ExportSubscriptions(_Comparable, ComplexModel):
    """Ask a server for its subscriptions on a topic (offline partitioning)."""

    __namespace__ = ADMIN_NS
    _type_info = [("Topic", _Name)]


class ExportSubscriptionsResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Subscriptions", _required(AnyXml))]


class MoveSubscriptions(_Comparable, ComplexModel):
    """Move the listed subscriptions of a topic to another server, keeping their
    identifiers; the old server forwards requests for them from then on."""

    __namespace__ = ADMIN_NS
    _type_info = [
        ("Topic", _Name),
        ("Target", _required(AnyUri)),
        ("Id", Unicode.customize(max_occurs="unbounded", nillable=False, min_len=1)),
    ]


class MoveSubscriptionsResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Moved", Integer32(min_occurs=1, nillable=False, ge=0))]


class ImportSubscriptions(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Topic", _Name), ("Subscriptions", _required(AnyXml))]


class ImportSubscriptionsResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Imported", Integer32(min_occurs=1, nillable=False, ge=0))]


class Repartition(_Comparable, ComplexModel):
    """Ask a dispatcher to re-partition a topic's subscriptions offline across its servers."""

    __namespace__ = ADMIN_NS
    _type_info = [("Topic", _Name), ("Algorithm", _required(Unicode))]


class RepartitionResponse(_Comparable, ComplexModel):
    __namespace__ = ADMIN_NS
    _type_info = [("Moved", Integer32(min_occurs=1, nillable=False, ge=0)),
                  ("Figure", Figure.customize(max_occurs="unbounded", nillable=False))]


# (operation, request contract, response contract); the order of the WSDL.
OPERATIONS = (
    ("CreateTopic", CreateTopic, CreateTopicResponse),
    ("DeleteTopic", DeleteTopic, DeleteTopicResponse),
    ("ListTopics", ListTopics, ListTopicsResponse),
    ("CreateRoute", CreateRoute, CreateRouteResponse),
    ("DeleteRoute", DeleteRoute, DeleteRouteResponse),
    ("ListRoutes", ListRoutes, ListRoutesResponse),
    ("RegisterServer", RegisterServer, RegisterServerResponse),
    ("ListServers", ListServers, ListServersResponse),
    ("UpdateSummary", UpdateSummary, UpdateSummaryResponse),
    ("GetStats", GetStats, GetStatsResponse),
    ("Configure", Configure, ConfigureResponse),
    ("PeerUpdate", PeerUpdate, PeerUpdateResponse),
    ("ExportSubscriptions", ExportSubscriptions, ExportSubscriptionsResponse),
    ("MoveSubscriptions", MoveSubscriptions, MoveSubscriptionsResponse),
    ("ImportSubscriptions", ImportSubscriptions, ImportSubscriptionsResponse),
    ("Repartition", Repartition, RepartitionResponse),
)

_BASE_REQUESTS = {_qname(op): req for op, req, _ in OPERATIONS}
_BASE_RESPONSES = {_qname(resp.get_type_name()): resp for _, _, resp in OPERATIONS}
_ELEMENT_OF_BASE = {cls: qname for qname, cls in {**_BASE_REQUESTS, **_BASE_RESPONSES}.items()}

REQUEST_ACTIONS: Mapping[str, str] = MappingProxyType(
    {qname: action_for(cls.get_type_name()) for qname, cls in _BASE_REQUESTS.items()})
RESPONSE_ACTIONS: Mapping[str, str] = MappingProxyType(
    {qname: action_for(cls.get_type_name()) for qname, cls in _BASE_RESPONSES.items()})


def element_qname(contract) -> str:
    """The wire element QName of a contract class or instance (its base contract's)."""
    cls = contract if isinstance(contract, type) else type(contract)
    for base in cls.__mro__:
        qname = _ELEMENT_OF_BASE.get(base)
        if qname is not None:
            return qname
    raise TypeError("%r is not an admin message contract" % (cls,))


# --- registry --------------------------------------------------------------------

_lock = threading.Lock()
_requests: dict[str, type] = dict(_BASE_REQUESTS)
_responses: dict[str, type] = dict(_BASE_RESPONSES)


def register_contract(cls: type, *, request: bool = True) -> type:
    """Parse the element of ``cls``'s base contract into ``cls`` from now on.

    ``request=False`` registers a response contract (used by :func:`parse_response`).
    Registering a class already registered, or a subclass of the registered class, is
    allowed; an unrelated second extension raises ``ValueError``. Returns ``cls`` so it
    can be used as a class decorator.
    """
    table, bases = (_requests, _BASE_REQUESTS) if request else (_responses, _BASE_RESPONSES)
    qname = element_qname(cls)
    if qname not in bases:
        raise TypeError("%r is not a %s contract" % (cls, "request" if request else "response"))
    _schema(cls)  # fail now, not on the first message, if spyne cannot describe it
    with _lock:
        current = table[qname]
        if not issubclass(cls, current):
            raise ValueError("%s is already extended by %r; unregister it first"
                             % (qname, current))
        table[qname] = cls
    return cls


def unregister_contract(cls: type) -> None:
    """Undo :func:`register_contract`: the base contract parses the element again."""
    qname = element_qname(cls)
    with _lock:
        for table, bases in ((_requests, _BASE_REQUESTS), (_responses, _BASE_RESPONSES)):
            if table.get(qname) is cls and qname in bases:
                table[qname] = bases[qname]


def reset_contracts() -> None:
    """Forget every extension (for tests)."""
    with _lock:
        _requests.clear()
        _requests.update(_BASE_REQUESTS)
        _responses.clear()
        _responses.update(_BASE_RESPONSES)


# --- parsing ---------------------------------------------------------------------

# Soft validation makes spyne check occurrences and simple types; xsi:type must not let a
# peer pick the class (and would need an Application to look it up).
_PROTOCOL = XmlDocument(validator="soft", parse_xsi_type=False)
_SPYNE_ERRORS = (Fault, ValueError, TypeError, AttributeError, LookupError)


class _Schema:
    """What a contract class accepts, computed once per class."""

    def __init__(self, cls):
        self.fields = {}  # child QName -> field name
        self.bounds = {}  # field name -> (min_occurs, max_occurs)
        self.any_xml = set()
        klass = cls
        while klass is not None:  # a field lives in the namespace of the class declaring it
            ns = klass.get_namespace()
            for key, member in klass._type_info.items():
                self.fields.setdefault("{%s}%s" % (ns, key), key)
            klass = klass.__extends__
        for key, member in cls.get_flat_type_info(cls).items():
            attrs = member.Attributes
            self.bounds[key] = (attrs.min_occurs, attrs.max_occurs)
            if issubclass(member, AnyXml):
                self.any_xml.add(key)


@functools.lru_cache(maxsize=None)
def _schema(cls) -> _Schema:
    return _Schema(cls)


def parse_request(element) -> ComplexModel:
    """The contract instance for an admin request element (the SOAP body's child)."""
    return _parse(element, _requests, "request")


def parse_response(element) -> ComplexModel:
    """The contract instance for an admin response element (client side)."""
    return _parse(element, _responses, "response")


def _parse(element, table, kind):
    tag = getattr(element, "tag", None)
    cls = table.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ContractError("%r is not an admin %s" % (tag, kind))
    name = tag.split("}", 1)[1]
    schema = _schema(cls)

    counts = dict.fromkeys(schema.bounds, 0)
    undeclared = False
    for child in element:
        key = schema.fields.get(child.tag) if isinstance(child.tag, str) else None
        if key is None:
            undeclared = True
            continue
        counts[key] += 1
        if key in schema.any_xml:
            _check_any_xml(name, key, child)
    for key, (low, high) in schema.bounds.items():
        if not low <= counts[key] <= high:
            if counts[key] == 0:
                raise ContractError("%s: %s is required" % (name, key))
            raise ContractError("%s: %s occurs %d times, at most %s allowed"
                                % (name, key, counts[key], high))

    if undeclared:
        element = _declared_only(element, schema)
    try:
        obj = _PROTOCOL.from_element(None, cls, element)
    except _SPYNE_ERRORS as exc:
        raise ContractError("%s: %s" % (name, getattr(exc, "faultstring", None) or exc)) from None
    for key, (_, high) in schema.bounds.items():
        if high > 1 and getattr(obj, key, None) is None:
            setattr(obj, key, [])
    return obj


def _check_any_xml(name, key, child):
    elements = [c for c in child if isinstance(c.tag, str)]
    if len(elements) > 1:
        raise ContractError("%s: %s holds %d elements, at most one allowed"
                            % (name, key, len(elements)))
    if not elements and child.text and child.text.strip():
        raise ContractError("%s: %s must hold an element, not text" % (name, key))


def _declared_only(element, schema):
    """A copy of ``element`` without the children no field declares (extensions)."""
    trimmed = etree.Element(element.tag, nsmap=element.nsmap)
    for child in element:
        if isinstance(child.tag, str) and child.tag in schema.fields:
            trimmed.append(copy.deepcopy(child))
    return trimmed


# --- rendering -------------------------------------------------------------------

def render(obj) -> etree._Element:
    """The lxml element of a contract instance (``{ADMIN_NS}<base element name>``)."""
    cls = type(obj)
    try:
        qname = element_qname(cls)
    except TypeError as exc:
        raise ContractError(str(exc)) from None
    name = qname.split("}", 1)[1]
    _check_complete(name, obj)
    obj = _with_copied_xml(obj)
    parent = etree.Element("parent", nsmap={"adm": ADMIN_NS})
    try:
        _PROTOCOL.to_parent(None, cls, obj, parent, ADMIN_NS, name)
    except _SPYNE_ERRORS as exc:
        raise ContractError("%s: %s" % (name, getattr(exc, "faultstring", None) or exc)) from None
    element = parent[0]
    parent.remove(element)
    return element


def _check_complete(name, obj):
    """Required fields present, nested contracts of the declared type, XML fields elements."""
    cls = type(obj)
    members = cls.get_flat_type_info(cls)
    for key, (low, high) in _schema(cls).bounds.items():
        value = getattr(obj, key, None)
        values = (value or []) if high > 1 else ([] if value is None else [value])
        if len(values) < low:
            raise ContractError("%s: %s is required" % (name, key))
        member = members[key]
        for item in values:
            if issubclass(member, AnyXml) and not isinstance(item, etree._Element):
                raise ContractError("%s: %s must be an lxml element" % (name, key))
            if issubclass(member, ComplexModel):
                if not isinstance(item, member.__orig__ or member):
                    raise ContractError("%s: %s must be a %s"
                                        % (name, key, member.get_type_name()))
                _check_complete("%s/%s" % (name, key), item)


def _with_copied_xml(obj):
    """spyne moves XML values into the output tree: hand it copies (top level only;
    no contract nests an XML field)."""
    xml_keys = [k for k in _schema(type(obj)).any_xml if getattr(obj, k, None) is not None]
    if not xml_keys:
        return obj
    clone = copy.copy(obj)
    for key in xml_keys:
        setattr(clone, key, copy.deepcopy(getattr(obj, key)))
    return clone


# --- WSDL ------------------------------------------------------------------------

SOAP_HTTP_TRANSPORT = "http://schemas.xmlsoap.org/soap/http"


@functools.lru_cache(maxsize=None)
def _application(soap_version):
    def operation(name, request, response):
        def handler(_request):  # never called: the application only describes itself
            raise NotImplementedError(name)
        handler.__name__ = handler.__qualname__ = name  # spyne keys methods by name
        return srpc(request, _returns=response, _body_style="bare",
                    _in_header=(AdminToken,), _operation_name=name)(handler)

    service = type("AdminService", (ServiceBase,),
                   {name: operation(name, req, resp) for name, req, resp in OPERATIONS})
    protocol = {"1.1": Soap11, "1.2": Soap12}[soap_version]
    app = Application([service], tns=ADMIN_NS, name="AdminService",
                      in_protocol=protocol(), out_protocol=protocol())
    app.transport = SOAP_HTTP_TRANSPORT
    # spyne's global registry keys applications by (tns, name); ours only describe
    # themselves, and two SOAP versions would otherwise overwrite each other noisily.
    unregister_application(app)
    return app


def spyne_wsdl(address: str, soap_version: str = "1.1") -> bytes:
    """spyne's own WSDL for the base contracts (one SOAP binding, operation names as
    soapAction); ``wsdl.admin.admin_wsdl`` is the finished document to serve."""
    wsdl = Wsdl11(_application(soap_version).interface)
    wsdl.build_interface_document(address)
    return wsdl.get_interface_document()
