"""The event distribution network's admin messages, its fault subcodes and the names it
uses on the wire; each message is declared with the base registry at import
(:func:`wsframework.admin.register_contract`), exactly as an application declares its own.

Route administration on a dispatcher mirrors topic administration; servers register with
the dispatcher, ship their routing summaries in UpdateSummary (the paper's route update
message), exchange subscription-routing summaries and load with their peers, and move
subscriptions for offline partitioning. Summaries and subscriptions travel as XML (any XML)
whose format belongs to the matcher / subscription manager that makes them::

    CreateRoute {Name, Matcher?, Options?}       -> CreateRouteResponse {Name, Matcher, Address}
    DeleteRoute {Name}                           -> DeleteRouteResponse {Name}
    ListRoutes {Prefix?}                         -> ListRoutesResponse {Route* {Name, Matcher,
                                                                         Address, Servers}}
    RegisterServer {Name, Address, Kind?}        -> RegisterServerResponse {Name, Topic*, Peer*,
                                                                              Precision?,
                                                                              Routing?}
    ListServers {Prefix?}                        -> ListServersResponse {Server* {Name, Address,
                                                                           Load?}}
    UpdateSummary {Server, Route, Generation,    -> UpdateSummaryResponse {Route, Accepted,
                   Load?, Summary}                                         Precision?}
    PeerUpdate {Server, Address, Route, Load,    -> PeerUpdateResponse {Server}
                Summary?}
    ExportSubscriptions {Topic}                  -> ExportSubscriptionsResponse {Subscriptions}
    MoveSubscriptions {Topic, Target, Id*}       -> MoveSubscriptionsResponse {Moved}
    ImportSubscriptions {Topic, Subscriptions}   -> ImportSubscriptionsResponse {Imported}
    Repartition {Topic, Algorithm}               -> RepartitionResponse {Moved, Figure*}
    MeasureLatency {Target*, Probes?}            -> MeasureLatencyResponse {Latency* {Target,
                                                                             Ms?, Error?}}
    SyncTopics {Topic* {Name, Version, Deleted?, -> SyncTopicsResponse {Topic*}
                Matcher?, Options?}}
    ClaimPlacement {Key, Target}                 -> ClaimPlacementResponse {Target}
    ExportBoxes {Topic, After?, Max?}            -> ExportBoxesResponse {Boxes}
    GetRecording {After?, Max?}                  -> GetRecordingResponse {Recording}

``ExportBoxes`` asks a subscription server for a page of the rectangles of its active
subscriptions on a topic, with the topic's schema, for profiles read from the live network
(``edn profile --from-network``); ``After`` is the cursor the previous page answered.
``GetRecording`` reads a page of the events a dispatcher recorded (``edn record``,
:mod:`route_manager.dispatcher.recording`).

``SyncTopics`` is the exchange between peer root dispatchers (``--peer-root``,
:mod:`route_manager.dispatcher.peer_roots`): the sender's topic catalog (live topics and
tombstones of deleted ones, each with its version) in, the receiver's catalog after merging
out. At most :data:`MAX_SYNC_TOPICS` records, each ``Options`` at most
:data:`MAX_SYNC_OPTIONS_BYTES` serialized.

``MeasureLatency`` asks a subscription server to time TCP connections to its peers, named as
the dispatcher lists them (:mod:`subscription_manager.server.latency_probe`); ``edn latency
measure`` assembles the answers into the latency file (:mod:`route_manager.latency_matrix`).

``ClaimPlacement`` asks the server that owns a Subscribe's placement key (a SHA-256 digest in
lowercase hexadecimal) to keep ``Target`` as the request's server unless a claim for the key
came first; the answer names the server that stands
(:mod:`subscription_manager.server.placement_claims`).

Dispatch trees: a child dispatcher registers with its parent as servers do, with ``Kind``
``dispatcher`` (absent: ``server``); a dispatcher never lists a child dispatcher among the
peers of its servers, nor moves subscriptions to one. ``Precision`` in the answers is the
precision the answering dispatcher routes the sender with (``precise``, ``none``, ``0.5``):
a child cuts its sub-tree summary to it (:mod:`route_manager.uplink`). ``Routing`` is the
network's routing mode (:data:`ROUTING_MODES`): a server adopts it, a child dispatcher refuses
a parent whose mode is not its own (in ``linkmatching`` the ``Summary`` of UpdateSummary is an
``edn:Predicates`` report, :mod:`matchers.pst.links_route_set`).

The messages keep the admin namespace (``ns.ADMIN``) they have always had on the wire.
Statistics and run-time settings (GetStats, Configure, Figure) are base contracts
(:mod:`wsframework.admin.contracts`): any role may answer them.
"""
from __future__ import annotations

from matchers.vocabulary import EDN
from wsframework import ns
from wsframework.admin import (OPERATIONS as BASE_OPERATIONS, AnyUri, AnyXml, Contract,
                               EntryName, Figure, Integer32, Unicode, action_for, optional,
                               register_operation, repeated, required)
from wsframework.exceptions import sender_fault
from wsframework.service import ServiceNames

__all__ = [
    "SERVICE_NAMES", "EVENT_BATCH", "EVENT_BATCH_ACTION", "NETWORK_ACTIONS", "PLACED",
    "SUBSCRIPTIONS",
    "SUBSCRIPTION", "FILTER", "EXPRESSION", "NAMESPACE", "NOTIFY_TO", "END_TO", "BOX", "PEER_SUMMARY", "CENTROID", "SUMMARY",
    "BATCH_DISPATCHER", "BATCH_FIRST_SEQ", "EVENT_BATCH_MOST", "batch_events", "batch_position",
    "KIND_SERVER", "KIND_DISPATCHER",
    "KINDS", "ROUTING_SUMMARIES", "ROUTING_LINKMATCHING", "ROUTING_FLOODING", "ROUTING_MODES",
    "routing_of", "FAULT_UNKNOWN_SERVER", "FAULT_LOG_FULL", "OPERATIONS", "ADMIN_OPERATIONS",
    "CreateRoute", "CreateRouteResponse", "DeleteRoute", "DeleteRouteResponse", "ListRoutes",
    "ListRoutesResponse", "RouteInfo", "TopicSpec", "ServerInfo", "RegisterServer",
    "RegisterServerResponse", "ListServers", "ListServersResponse", "UpdateSummary",
    "UpdateSummaryResponse", "PeerUpdate", "PeerUpdateResponse", "ExportSubscriptions",
    "ExportSubscriptionsResponse", "MoveSubscriptions", "MoveSubscriptionsResponse",
    "ImportSubscriptions", "ImportSubscriptionsResponse", "Repartition", "RepartitionResponse",
    "MeasureLatency", "MeasureLatencyResponse", "LatencyInfo", "MAX_LATENCY_TARGETS",
    "MAX_LATENCY_PROBES", "TopicVersion", "SyncTopics", "SyncTopicsResponse", "MAX_SYNC_TOPICS",
    "MAX_SYNC_OPTIONS_BYTES",
    "MAX_LATENCY_PROBES", "ClaimPlacement", "ClaimPlacementResponse", "PLACEMENT_KEY_LENGTH",
    "MAX_SERVER_NAME", "ExportBoxes", "ExportBoxesResponse", "GetRecording",
    "GetRecordingResponse", "MAX_PAGE", "CURSOR_LENGTH", "BOXES", "RECORDING", "RECORDED",
]

# What operators and scrapers see of every EDN role (source, dispatcher, server, table): the
# store's file in its data directory, its metrics' prefix and who may read them, its
# console's cookie and the environment variable that may hold the network's admin credential.
SERVICE_NAMES = ServiceNames(store_file="edn.db", metric_prefix="edn_",
                             metrics_access_env="EDN_METRICS_ACCESS",
                             console_cookie="edn_console", admin_token_env="EDN_ADMIN_TOKEN")

# Elements of the EDN's own XML (in its namespace, EDN), carried in SOAP bodies and inside
# the contracts' AnyXml fields; each is built and read by one module, named beside it.
EVENT_BATCH = ns.qname(EDN, "EventBatch")      # events publisher -> dispatcher -> server
EVENT_BATCH_ACTION = EDN + "/EventBatch"       # the action a dispatcher posts a batch with
PLACED = ns.qname(EDN, "Placed")               # header of a placed Subscribe (edn.placement)
SUBSCRIPTIONS = ns.qname(EDN, "Subscriptions")  # moved subscriptions (subscription_manager.server.moved_subscriptions)
SUBSCRIPTION = ns.qname(EDN, "Subscription")
FILTER = ns.qname(EDN, "Filter")
EXPRESSION = ns.qname(EDN, "Expression")
NAMESPACE = ns.qname(EDN, "Namespace")
NOTIFY_TO = ns.qname(EDN, "NotifyTo")
END_TO = ns.qname(EDN, "EndTo")
BOX = ns.qname(EDN, "Box")
PEER_SUMMARY = ns.qname(EDN, "PeerSummary")    # server <-> server (route_manager.peers)
CENTROID = ns.qname(EDN, "Centroid")
SUMMARY = ns.qname(EDN, "Summary")
BOXES = ns.qname(EDN, "Boxes")                 # a page of rectangles (ExportBoxes)
RECORDING = ns.qname(EDN, "Recording")         # a page of recorded events (GetRecording)
RECORDED = ns.qname(EDN, "Recorded")

# Attributes of edn:EventBatch (unqualified, as its Topic attribute) that let a server skip the
# events of a batch the dispatcher replays after a restart (route_manager.forwarding.log):
#   Dispatcher -- the stable id of the dispatcher that sent the batch, created once and kept in
#                 its data dir (a dispatcher re-created on an empty data dir has another id, and
#                 its sequence numbers start again);
#   FirstSeq   -- the per-server sequence number (>= 1) of the batch's first event; the events of
#                 one batch are consecutive for that server (FirstSeq, FirstSeq+1, ...), so a
#                 server that has seen seq N from that Dispatcher skips the events up to N.
BATCH_DISPATCHER = "Dispatcher"
BATCH_FIRST_SEQ = "FirstSeq"
_MAX_SEQ = 2 ** 62  # larger FirstSeq values are refused (SQLite integers are 64-bit)
_MAX_DISPATCHER_ID = 200  # characters

# Fault subcodes of the EDN (the topic faults of wsframework.admin apply to routes as well).
FAULT_UNKNOWN_SERVER = ns.qname(ns.ADMIN, "UnknownServer")
# The dispatcher's durable log is full (log_max_events / log_max_bytes / log_max_age) and its
# log_full policy is "refuse": the event was not accepted (a Receiver fault; retry later).
FAULT_LOG_FULL = ns.qname(EDN, "LogFull")


#: the most events one ``edn:EventBatch`` may carry. Every receiver refuses a larger batch whole,
#: with a Sender fault, before matching any of it: a megabyte body holds 20,000 small elements,
#: and a subscription server took 0.8 s of CPU to match that many as events. The network's
#: own senders (a dispatcher's forwarding, a tree's parent, a table's feed) are configured
#: below it; a publisher with more events sends more batches.
EVENT_BATCH_MOST = 4096


def require_event_batch(body) -> None:
    """A Sender fault unless the message body ``body`` is an ``edn:EventBatch``."""
    if body is None or body.tag != EVENT_BATCH:
        raise sender_fault("an EventBatch message needs an edn:EventBatch body")


def batch_events(batch) -> list:
    """The events of the ``edn:EventBatch`` element ``batch``; a Sender fault when it holds
    more than :data:`EVENT_BATCH_MOST`."""
    events = [event for event in batch if isinstance(event.tag, str)]
    if len(events) > EVENT_BATCH_MOST:
        raise sender_fault(f"an EventBatch holds at most {EVENT_BATCH_MOST} events; this one "
                           f"holds {len(events)}")
    return events


def batch_position(batch) -> tuple[str | None, int | None]:
    """An ``edn:EventBatch``'s (Dispatcher, FirstSeq) attributes, or (None, None) for a batch
    without them (applied as before: no replay detection). A Sender fault for malformed ones
    (both a subscription server and a child dispatcher read them)."""
    dispatcher = batch.get(BATCH_DISPATCHER)
    first = batch.get(BATCH_FIRST_SEQ)
    if dispatcher is None and first is None:
        return None, None
    if dispatcher is None or first is None:
        raise sender_fault(f"an EventBatch needs both {BATCH_DISPATCHER} and {BATCH_FIRST_SEQ}, "
                           f"or neither")
    if not dispatcher or len(dispatcher) > _MAX_DISPATCHER_ID:
        raise sender_fault(f"EventBatch/@{BATCH_DISPATCHER} must have 1 to "
                           f"{_MAX_DISPATCHER_ID} characters")
    text = first.strip()
    seq = int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else -1
    if not 1 <= seq <= _MAX_SEQ:
        raise sender_fault(f"EventBatch/@{BATCH_FIRST_SEQ} must be an integer from 1 to "
                           f"{_MAX_SEQ}")
    return dispatcher, seq


# --- route administration (a dispatcher's routes, as topics are a source's) -----------

class CreateRoute(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName), ("Matcher", optional(AnyUri)),
                  ("Options", optional(AnyXml))]


class CreateRouteResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName), ("Matcher", required(AnyUri)),
                  ("Address", required(AnyUri))]


class DeleteRoute(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName)]


class DeleteRouteResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName)]


class ListRoutes(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Prefix", optional(Unicode))]


class RouteInfo(Contract):
    """One ``<adm:Route>``: a route entry and how many servers hold a summary in it."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", EntryName),
        ("Matcher", required(AnyUri)),
        ("Address", required(AnyUri)),
        ("Servers", Integer32(min_occurs=1, nillable=False, ge=0)),
    ]


class ListRoutesResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Route", repeated(RouteInfo))]


# --- membership and route updates (servers and the dispatcher) -------------------------

class TopicSpec(Contract):
    """A topic a subscription server must host (name, matcher, matcher options)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName), ("Matcher", optional(AnyUri)),
                  ("Options", optional(AnyXml))]


class ServerInfo(Contract):
    """One subscription server as the dispatcher knows it."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", EntryName),
        ("Address", required(AnyUri)),
        ("Load", Integer32(nillable=False, ge=0)),
    ]


KIND_SERVER = "server"          # RegisterServer/Kind: a subscription server (the default)
KIND_DISPATCHER = "dispatcher"  # a child dispatcher of a dispatch tree
KINDS = (KIND_SERVER, KIND_DISPATCHER)

# RegisterServerResponse/Routing: how the network routes (edn serve dispatcher --routing); every
# node of one network uses the same mode. Absent: summaries (dispatchers from before the modes).
ROUTING_SUMMARIES = "summaries"        # each node reports a summary; route sets of summaries
ROUTING_LINKMATCHING = "linkmatching"  # each node reports its equality predicates (Gryphon)
ROUTING_FLOODING = "flooding"          # every event to every child; summaries never read
ROUTING_MODES = (ROUTING_SUMMARIES, ROUTING_LINKMATCHING, ROUTING_FLOODING)


def routing_of(response) -> str:
    """The routing mode a RegisterServerResponse announces (absent: summaries); a Sender
    fault for an unknown one."""
    mode = (response.Routing or ROUTING_SUMMARIES).strip()
    if mode not in ROUTING_MODES:
        raise sender_fault(f"RegisterServerResponse/Routing must be one of "
                           f"{', '.join(ROUTING_MODES)}")
    return mode


class RegisterServer(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", EntryName), ("Address", required(AnyUri)),
                  ("Kind", optional(Unicode)),
                  # the node's generation offset: a new one is a node whose data was wiped
                  ("Incarnation", Integer32(nillable=False, ge=0))]


class RegisterServerResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", EntryName),
        ("Topic", repeated(TopicSpec)),
        ("Peer", repeated(ServerInfo)),
        ("Precision", optional(Unicode)),
        ("Routing", optional(Unicode)),
    ]


class ListServers(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Prefix", optional(Unicode))]


class ListServersResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Server", repeated(ServerInfo))]


class UpdateSummary(Contract):
    """The route update message: a server's routing summary for one route (topic).

    ``Generation`` increases with every summary a server sends for a route, so a late,
    reordered update never replaces a newer one."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Server", EntryName),
        ("Route", EntryName),
        ("Generation", Integer32(min_occurs=1, nillable=False, ge=0)),
        ("Load", Integer32(nillable=False, ge=0)),
        ("Summary", required(AnyXml)),
    ]


class UpdateSummaryResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Route", EntryName), ("Accepted", Integer32(min_occurs=1, nillable=False)),
                  ("Precision", optional(Unicode))]


class PeerUpdate(Contract):
    """Subscription-routing summary and load of one server, sent to its peers."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Server", EntryName),
        ("Address", required(AnyUri)),
        ("Route", EntryName),
        ("Load", Integer32(min_occurs=1, nillable=False, ge=0)),
        ("Summary", optional(AnyXml)),
    ]


class PeerUpdateResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Server", EntryName)]


# --- moving subscriptions (offline partitioning) --------------------------------------

class ExportSubscriptions(Contract):
    """Ask a server for its subscriptions on a topic (offline partitioning)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Topic", EntryName)]


class ExportSubscriptionsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Subscriptions", required(AnyXml))]


class MoveSubscriptions(Contract):
    """Move the listed subscriptions of a topic to another server, keeping their
    identifiers; the old server forwards requests for them from then on."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Topic", EntryName),
        ("Target", required(AnyUri)),
        ("Id", repeated(Unicode, min_len=1)),
    ]


class MoveSubscriptionsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Moved", Integer32(min_occurs=1, nillable=False, ge=0))]


class ImportSubscriptions(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Topic", EntryName), ("Subscriptions", required(AnyXml))]


class ImportSubscriptionsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Imported", Integer32(min_occurs=1, nillable=False, ge=0))]


class Repartition(Contract):
    """Ask a dispatcher to re-partition a topic's subscriptions offline across its servers."""

    __namespace__ = ns.ADMIN
    _type_info = [("Topic", EntryName), ("Algorithm", required(Unicode))]


class RepartitionResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Moved", Integer32(min_occurs=1, nillable=False, ge=0)),
                  ("Figure", repeated(Figure))]


# --- measuring the network (edn latency measure) ---------------------------------------

MAX_LATENCY_TARGETS = 64  # peers one MeasureLatency names at most
MAX_LATENCY_PROBES = 10   # connections timed per peer at most


class MeasureLatency(Contract):
    """Ask a server to time ``Probes`` TCP connections (1..MAX_LATENCY_PROBES, default 5)
    to each of its peers named in ``Target`` (1..MAX_LATENCY_TARGETS names)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Target", repeated(Unicode, min_len=1)),
                  ("Probes", Integer32(nillable=False, ge=1, le=MAX_LATENCY_PROBES))]


class LatencyInfo(Contract):
    """One peer's round trip from the answering server: ``Ms`` (the median connect time, ms)
    or ``Error`` (why it could not be measured)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Target", EntryName), ("Ms", optional(Unicode)), ("Error", optional(Unicode))]


class MeasureLatencyResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Latency", repeated(LatencyInfo))]


# --- topics among peer root dispatchers -------------------------------------------------

MAX_SYNC_TOPICS = 10_000          # topic records (live and deleted) one SyncTopics carries
MAX_SYNC_OPTIONS_BYTES = 1 << 16  # serialized matcher Options of one record at most


class TopicVersion(Contract):
    """One topic as a root dispatcher knows it: ``Version`` grows with every create or
    delete of the name; ``Deleted`` 1 is a tombstone (no Matcher, no Options), so that a
    delete reaches a root that was down when it happened."""

    __namespace__ = ns.ADMIN
    _type_info = [
        ("Name", EntryName),
        ("Version", Integer32(min_occurs=1, nillable=False, ge=1)),
        ("Deleted", Integer32(nillable=False, ge=0, le=1)),
        ("Matcher", optional(AnyUri)),
        ("Options", optional(AnyXml)),
    ]


class SyncTopics(Contract):
    """A root's topic catalog, sent to a peer root; answered with the peer's, merged."""

    __namespace__ = ns.ADMIN
    _type_info = [("Topic", repeated(TopicVersion))]


class SyncTopicsResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Topic", repeated(TopicVersion))]
# --- settling where a Subscribe goes --------------------------------------------------

PLACEMENT_KEY_LENGTH = 64   # a placement key: a SHA-256 digest in lowercase hexadecimal
MAX_SERVER_NAME = 128       # characters of a server name a claim may carry


class ClaimPlacement(Contract):
    """Keep ``Target`` (a server name) for the placement key ``Key``, unless a claim for
    the key came first."""

    __namespace__ = ns.ADMIN
    _type_info = [("Key", EntryName), ("Target", EntryName)]


class ClaimPlacementResponse(Contract):
    """The server that stands for the key (the first claim's)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Target", EntryName)]


# --- the live network's own data, for profiles -----------------------------------------

MAX_PAGE = 10_000  # rectangles (ExportBoxes) or events (GetRecording) in one answer
CURSOR_LENGTH = 200


class ExportBoxes(Contract):
    """A page of ``Topic``'s subscription rectangles on this server (at most ``Max``, from
    after the cursor ``After``)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Topic", EntryName),
                  ("After", Unicode(nillable=False, max_len=CURSOR_LENGTH)),
                  ("Max", Integer32(nillable=False, ge=1, le=MAX_PAGE))]


class ExportBoxesResponse(Contract):
    """``edn:Boxes`` (:mod:`subscription_manager.server.box_export`)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Boxes", required(AnyXml))]


class GetRecording(Contract):
    """A page of the recorded events (at most ``Max``, from after the cursor ``After``)."""

    __namespace__ = ns.ADMIN
    _type_info = [("After", Unicode(nillable=False, max_len=CURSOR_LENGTH)),
                  ("Max", Integer32(nillable=False, ge=1, le=MAX_PAGE))]


class GetRecordingResponse(Contract):
    """``edn:Recording`` (:mod:`route_manager.dispatcher.recording`)."""

    __namespace__ = ns.ADMIN
    _type_info = [("Recording", required(AnyXml))]


# (operation, request contract, response contract); the order of the WSDL.
OPERATIONS = (
    register_operation(CreateRoute, CreateRouteResponse),
    register_operation(DeleteRoute, DeleteRouteResponse),
    register_operation(ListRoutes, ListRoutesResponse),
    register_operation(RegisterServer, RegisterServerResponse),
    register_operation(ListServers, ListServersResponse),
    register_operation(UpdateSummary, UpdateSummaryResponse),
    register_operation(PeerUpdate, PeerUpdateResponse),
    register_operation(ExportSubscriptions, ExportSubscriptionsResponse),
    register_operation(MoveSubscriptions, MoveSubscriptionsResponse),
    register_operation(ImportSubscriptions, ImportSubscriptionsResponse),
    register_operation(Repartition, RepartitionResponse),
    register_operation(MeasureLatency, MeasureLatencyResponse),
    register_operation(SyncTopics, SyncTopicsResponse),
    register_operation(ClaimPlacement, ClaimPlacementResponse),
    register_operation(ExportBoxes, ExportBoxesResponse),
    register_operation(GetRecording, GetRecordingResponse),
)

#: the actions of the network's own messages between its roles, each authenticated by the
#: network's credential: they never queue behind clients' control requests
#: (:mod:`wsframework.admission`), whose storm would otherwise make a peer look down
NETWORK_ACTIONS = frozenset(
    action_for(request.get_type_name()) for request in (
        RegisterServer, UpdateSummary, PeerUpdate, ImportSubscriptions, ClaimPlacement,
        SyncTopics))

# What the admin WSDL of an EDN role (dispatcher, server) describes.
ADMIN_OPERATIONS = BASE_OPERATIONS + OPERATIONS
