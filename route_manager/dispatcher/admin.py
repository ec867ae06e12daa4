"""The dispatcher's administration (all authenticated, :mod:`wsframework.admin`):

=======================================  =======================================================
``CreateTopic`` / ``DeleteTopic``        the whole network: the route here and the topic on
                                         every registered server (a server that is down gets
                                         it when it registers) and, through the topic
                                         catalog, at every peer root (:mod:`.peer_roots`).
                                         Creating a topic that exists with the same
                                         definition succeeds (the same create made at two
                                         roots); with another definition it is TopicExists
``ListTopics``                           the routes, as topics
``RegisterServer`` / ``ListServers``     membership (a new server learns the topics and peers)
``UpdateSummary``                        the route update message
``GetStats``                             the figures of :mod:`.stats`
``Configure``                            the run-time settings (:mod:`.control`)
``GetRecording``                         a page of the recorded events (:mod:`.recording`,
                                         registered by the dispatcher itself)
=======================================  =======================================================

``CreateRoute`` / ``DeleteRoute`` / ``ListRoutes`` (the route table only) are the base route
manager's (:mod:`route_manager.base`).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping

from lxml import etree

from wsframework.admin import AdminClient, contracts, topic_named
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.namespace import EntryExists, InvalidName, validate_name

from .. import protocol
from ..exceptions import server_address
from ..precision import format_precision
from .topic_catalog import TopicRecord, canonical_options

log = logging.getLogger(__name__)


class DispatcherAdmin:
    """Registers the dispatcher's admin operations with the service's admin ``endpoint``.

    It receives what the operations use: the dispatcher's ``tables`` (stored topics), its
    route namespace ``routes`` and the base route manager's ``route_admin`` and
    ``create_route``; ``default_server_matcher`` (a topic created without one); the live
    mappings ``servers`` (node -> address) and ``loads`` (node -> load);
    ``register_server(name, address, kind)``, ``subscription_servers()`` and
    ``update_summary(server, request)``, the dispatcher's membership; ``client_for(address)``,
    an admin client to a node; ``routing`` (the routing mode a registering node is told);
    ``precision()``, ``figures(with_trace)`` and ``configure(settings)``."""

    def __init__(self, endpoint, *, tables, routes, route_admin, create_route: Callable,
                 default_server_matcher: str, servers: Mapping[str, str],
                 loads: Mapping[str, int], register_server: Callable,
                 subscription_servers: Callable[[], Mapping[str, str]],
                 update_summary: Callable, client_for: Callable[[str], AdminClient],
                 routing: str, precision: Callable[[], float],
                 figures: Callable[[bool], Mapping], configure: Callable):
        self.tables = tables
        self.routes = routes
        self.route_admin = route_admin
        self.create_route = create_route
        self.default_server_matcher = default_server_matcher
        self.servers = servers
        self.loads = loads
        self.register_server = register_server
        self.subscription_servers = subscription_servers
        self.update_summary = update_summary
        self.client_for = client_for
        self.routing = routing
        self.precision = precision
        self.figures = figures
        self.configure = configure
        # create, delete and a peer root's records are applied one at a time: each reads the
        # name's version and writes the next
        self.topics_lock = threading.RLock()
        self.on_topics_changed: Callable[[], None] = lambda: None  # peer roots: send now
        endpoint.register(contracts.CreateTopic, self._create_topic, topic_of=topic_named)
        endpoint.register(contracts.DeleteTopic, self._delete_topic, topic_of=topic_named)
        endpoint.register(contracts.ListTopics, self._list_topics)
        endpoint.register(protocol.RegisterServer, self._register_server)
        endpoint.register(protocol.ListServers, self._list_servers)
        endpoint.register(protocol.UpdateSummary, self._update_summary)
        endpoint.register(contracts.GetStats, self._get_stats)
        endpoint.register(contracts.Configure, self._configure)

    # -- topics across the network -------------------------------------------------------------
    def topic_specs(self) -> list[protocol.TopicSpec]:
        specs = []
        for row in self.tables.topics():
            if row["name"] in self.routes:
                options = etree.fromstring(row["options"]) if row["options"] else None
                specs.append(protocol.TopicSpec(Name=row["name"], Matcher=row["server_matcher"],
                                                Options=options))
        return specs

    def _create_topic(self, request, message):
        entry, server_matcher = self.create_topic(request.Name, request.Matcher, request.Options)
        self.on_topics_changed()
        return contracts.CreateTopicResponse(Name=entry.name, Matcher=server_matcher,
                                             Address=self.routes.address_of(entry.name))

    def create_topic(self, name: str, matcher: str | None, options, *,
                     version: int | None = None):
        """The route here, the topic stored, and the topic on every node below (a child
        dispatcher passes it on to its own); (entry, server matcher). ``version``: a peer
        root's (else the name's next). An existing topic of the same definition is
        returned as it is; one of another definition is :class:`EntryExists`."""
        name = validate_name(name)
        server_matcher = matcher or self.default_server_matcher
        with self.topics_lock:
            known = self.tables.topic_records().get(name)
            if known is not None and not known.deleted and name in self.routes:
                if known.defines(server_matcher, canonical_options(options)):
                    return self.routes.get(name), server_matcher
                raise EntryExists(f"topic {name} exists with another definition "
                                  f"(matcher {known.matcher}); delete it first to redefine it")
            entry = self.create_route(name, None, options)
            stored = etree.tostring(options) if options is not None else None
            self.tables.save_topic(entry.name, server_matcher, stored,
                                   version or (known.next_version() if known else 1))
        for server, address in sorted(self.servers.items()):
            self._propagate_topic(server, address, entry.name, server_matcher, options)
        return entry, server_matcher

    def _propagate_topic(self, server, address, name, matcher, options) -> None:
        client = self.client_for(address)
        try:
            client.create_topic(name, matcher, options)
        except SoapFault as fault:
            if fault.subcode != contracts.FAULT_TOPIC_EXISTS:
                log.warning("server %s refused topic %s: %s", server, name, fault.reason)
        except Exception as exc:  # a server that is down gets the topic when it registers
            log.warning("server %s unreachable for topic %s: %s", server, name, exc)

    def _delete_topic(self, request, message):
        name = self.delete_topic(request.Name)
        self.on_topics_changed()
        return contracts.DeleteTopicResponse(Name=name)

    def delete_topic(self, name: str, *, version: int | None = None) -> str:
        """The route and topic here and on every node below; a tombstone at ``version`` (a
        peer root's, else the name's next) tells the peer roots."""
        with self.topics_lock:
            known = self.tables.topic_records().get(validate_name(name))
            name = self.route_admin.delete(name)
            self.tables.delete_topic(name, version or (known.next_version() if known else 1))
        for server, address in sorted(self.servers.items()):
            client = self.client_for(address)
            try:
                client.delete_topic(name)
            except Exception as exc:
                log.warning("server %s: deleting topic %s failed: %s", server, name, exc)
        return name

    def take(self, record: TopicRecord) -> None:
        """A peer root's record, newer than ours: the topic created, redefined or deleted
        here (and below), at the peer's version."""
        with self.topics_lock:
            if record.deleted:
                if record.name in self.routes:
                    self.delete_topic(record.name, version=record.version)
                else:
                    self.tables.delete_topic(record.name, record.version)
                return
            known = self.tables.topic_records().get(record.name)
            if known is not None and known.defines(record.matcher, record.options) \
                    and record.name in self.routes:
                self.tables.save_topic(record.name, record.matcher, record.options,
                                       record.version)
                return
            if record.name in self.routes:  # redefined at the peer: deleted, then created
                self.delete_topic(record.name, version=record.version)
            options = etree.fromstring(record.options) if record.options else None
            self.create_topic(record.name, record.matcher, options, version=record.version)

    def _list_topics(self, request, message):
        return contracts.ListTopicsResponse(Topic=[
            contracts.TopicInfo(Name=e.name, Matcher=e.matcher_uri,
                                Address=self.routes.address_of(e.name), FilterCount=len(e.matcher))
            for e in self.route_admin.entries(request.Prefix)])

    # -- membership and route updates ----------------------------------------------------------
    def _register_server(self, request, message):
        name = server_name(request.Name)
        kind = (request.Kind or protocol.KIND_SERVER).strip()
        if kind not in protocol.KINDS:
            raise sender_fault(f"RegisterServer/Kind must be one of {', '.join(protocol.KINDS)}")
        self.register_server(name, server_address(name, request.Address), kind,
                             incarnation=request.Incarnation)
        return protocol.RegisterServerResponse(Name=name, Topic=self.topic_specs(),
                                               Peer=self._server_infos(exclude=name),
                                               Precision=self._precision(),
                                               Routing=self.routing)

    def _precision(self) -> str:
        """What a node below is routed with now (a child dispatcher cuts its reports to it)."""
        return format_precision(self.precision())

    def _server_infos(self, exclude: str | None = None, prefix: str | None = None):
        """The subscription servers (a server's peers); child dispatchers are no peers."""
        return [protocol.ServerInfo(Name=n, Address=a, Load=self.loads.get(n, 0))
                for n, a in sorted(self.subscription_servers().items())
                if n != exclude and (not prefix or n.startswith(prefix))]

    def _list_servers(self, request, message):
        return protocol.ListServersResponse(Server=self._server_infos(prefix=request.Prefix))

    def _update_summary(self, request, message):
        route, accepted = self.update_summary(server_name(request.Server), request)
        return protocol.UpdateSummaryResponse(Route=route, Accepted=int(accepted),
                                              Precision=self._precision())

    # -- figures and run-time settings ---------------------------------------------------------
    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        with_trace = "selftuning.trace".startswith(prefix) or prefix.startswith("selftuning.trace")
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in self.figures(with_trace).items() if k.startswith(prefix)])

    def _configure(self, request, message):
        in_force = self.configure(
            (setting.Name, setting.Value) for setting in request.Setting or [])
        return contracts.ConfigureResponse(Setting=[
            contracts.Figure(Name=k, Value=v) for k, v in in_force.items()])


def server_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 128 or any(c in name for c in "/<>&\"' \t\n"):
        raise InvalidName(f"invalid server name {name!r}")
    return name
