"""The EDN dispatcher (paper sections II, III-B, V-A): summary-based event routing.

The dispatcher's route table is its ``topics`` namespace: one route entry per topic, bound
to an ``RTreeRouteSet`` that holds one routing summary per subscription server. A published
event (a SOAP message to ``{dispatcher}/topics/T``, or an ``edn:EventBatch`` of events) is
matched against the summaries and forwarded once to every server whose summary contains it,
through per-server channels (:mod:`route_manager.forwarding`) so that no server stalls the
others.

Durable state (SQLite, the service store): the registered servers, every server's latest
summary per route (with its generation, so a reordered update never wins over a newer one),
and the topics with the matcher and options the servers host them with. A restarted
dispatcher reloads all of it: it loses no route.

Administration (all authenticated): ``CreateTopic``/``DeleteTopic``/``ListTopics`` act on
the whole network (a topic is created on every registered server too), ``CreateRoute``/
``DeleteRoute``/``ListRoutes`` on the route table only, ``RegisterServer``/``ListServers`` for
membership, ``UpdateSummary`` (the route update message), ``GetStats`` for the counters.
"""
from __future__ import annotations

import copy
import logging
import threading
import time
from dataclasses import dataclass, field

from lxml import etree

from matchers import FilterSpec, MatcherError
from wsframework import admin_contracts as contracts
from wsframework import ns
from wsframework.admin_client import AdminClient
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry, validate_name
from wsframework.transport import HttpTransport

from .base import BaseRouteManager
from .forwarding import EVENT_BATCH, Forwarder, TokenBucket

log = logging.getLogger(__name__)

SUMMARY_DIALECT = ns.SUMMARY_DIALECT
FAULT_UNKNOWN_SERVER = ns.qname(ns.ADMIN, "UnknownServer")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_servers (
    name TEXT PRIMARY KEY, address TEXT NOT NULL, registered REAL NOT NULL);
CREATE TABLE IF NOT EXISTS edn_summaries (
    route TEXT NOT NULL, server TEXT NOT NULL, generation INTEGER NOT NULL,
    load INTEGER NOT NULL DEFAULT 0, summary BLOB NOT NULL, PRIMARY KEY (route, server));
CREATE TABLE IF NOT EXISTS edn_topics (
    name TEXT PRIMARY KEY, server_matcher TEXT, options BLOB);
"""


@dataclass
class DispatcherCounters:
    events_in: int = 0
    copies_out: int = 0
    route_seconds: float = 0.0
    per_server_hits: dict = field(default_factory=dict)


class Dispatcher(BaseRouteManager):
    default_route_matcher = ns.MATCHER_RTREE_ROUTE_SET
    default_server_matcher = ns.MATCHER_RTREE_ENGINE

    def __init__(self, service, *, settings: dict | None = None, transport=None):
        settings = dict(service.config.settings, **(settings or {}))
        super().__init__(service)
        self.store = service.store
        self.store.executescript(_SCHEMA)
        link = settings.get("link_mbps")
        self.forwarder = Forwarder(
            transport or HttpTransport(timeout=(2.0, float(settings.get("forward_timeout", 10.0)))),
            capacity=int(settings.get("queue_capacity", 10_000)),
            batch_max=int(settings.get("batch_max", 64)),
            policy=settings.get("overflow_policy", "drop-newest"),
            link=TokenBucket.megabits(float(link)) if link else None)
        self._transport = transport  # admin propagation to servers (None: HTTP)
        self._summary_lock = threading.Lock()  # generation check, install and store are one step
        self.counters = DispatcherCounters()
        self._lock = threading.Lock()        # counters
        self._match_lock = threading.Lock()  # libspatialindex is not thread-safe
        self.servers: dict[str, str] = {}
        self._loads: dict[str, int] = {}
        self._register_admin(service.admin)
        from .repartition import Repartitioner  # offline partitioning: Repartition (moves)
        self.repartitioner = Repartitioner(self, transport=transport)
        self.routes.on_change(self._on_route_change)
        self._load()
        service.add_component(self)

    # -- durable state -------------------------------------------------------------------------
    def _load(self) -> None:
        for row in self.store.query("SELECT name, address FROM edn_servers"):
            self._add_server(row["name"], row["address"])
        for entry in list(self.routes.entries()):
            self._fill(entry)

    def _on_route_change(self, event: str, entry: NamespaceEntry) -> None:
        if event == "added":
            self._fill(entry)

    def _fill(self, entry: NamespaceEntry) -> None:
        """Install the stored summaries of a (re)loaded route entry into its matcher."""
        rows = self.store.query("SELECT server, summary, load FROM edn_summaries WHERE route = ?",
                                (entry.name,))
        for row in rows:
            try:
                self._install(entry, row["server"], etree.fromstring(row["summary"]))
                self._loads[row["server"]] = row["load"]
            except (MatcherError, etree.XMLSyntaxError) as exc:
                log.error("stored summary of %s for %s unusable: %s", row["server"], entry.name, exc)

    def _install(self, entry: NamespaceEntry, server: str, summary: etree._Element) -> None:
        with self._match_lock:
            entry.matcher.add_filter(server, FilterSpec(SUMMARY_DIALECT, "", (), summary))

    def _add_server(self, name: str, address: str) -> None:
        self.servers[name] = address.rstrip("/")
        self.forwarder.ensure(name, address)

    # -- routing -------------------------------------------------------------------------------
    def dispatch(self, entry: NamespaceEntry, message: IncomingMessage) -> Reply | None:
        body = message.body
        events = [e for e in body if isinstance(e.tag, str)] if body.tag == EVENT_BATCH else [body]
        self.route_events(entry, events)
        return None

    def route_events(self, entry: NamespaceEntry, events) -> int:
        copies = 0
        route_seconds = 0.0
        hits: dict[str, int] = {}
        for event in events:
            # Match the event as its own document: schema XPaths are absolute (/q:quote/...)
            # and would see the SOAP envelope above an event left in place.
            event = copy.deepcopy(event)
            started = time.perf_counter()
            with self._match_lock:
                targets = entry.matcher.match(event)
            route_seconds += time.perf_counter() - started
            if targets:
                copies += self.forwarder.forward(entry.name, etree.tostring(event), targets)
                for server in targets:
                    hits[server] = hits.get(server, 0) + 1
        with self._lock:
            c = self.counters
            c.events_in += len(events)
            c.copies_out += copies
            c.route_seconds += route_seconds
            for server, n in hits.items():
                c.per_server_hits[server] = c.per_server_hits.get(server, 0) + n
        return copies

    # -- administration ------------------------------------------------------------------------
    def _register_admin(self, admin) -> None:
        admin.register(contracts.CreateTopic, self._create_topic)
        admin.register(contracts.DeleteTopic, self._delete_topic)
        admin.register(contracts.ListTopics, self._list_topics)
        admin.register(contracts.RegisterServer, self._register_server)
        admin.register(contracts.ListServers, self._list_servers)
        admin.register(contracts.UpdateSummary, self._update_summary)
        admin.register(contracts.GetStats, self._get_stats)

    def topic_specs(self) -> list[contracts.TopicSpec]:
        specs = []
        for row in self.store.query("SELECT name, server_matcher, options FROM edn_topics ORDER BY name"):
            if row["name"] in self.routes:
                options = etree.fromstring(row["options"]) if row["options"] else None
                specs.append(contracts.TopicSpec(Name=row["name"], Matcher=row["server_matcher"],
                                                 Options=options))
        return specs

    def _create_topic(self, request, message):
        server_matcher = request.Matcher or self.default_server_matcher
        entry = self.create_route(request.Name, None, request.Options)
        options = etree.tostring(request.Options) if request.Options is not None else None
        with self.store.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO edn_topics(name, server_matcher, options) VALUES (?, ?, ?)",
                         (entry.name, server_matcher, options))
        for server, address in sorted(self.servers.items()):
            self._propagate_topic(server, address, entry.name, server_matcher, request.Options)
        return contracts.CreateTopicResponse(Name=entry.name, Matcher=server_matcher,
                                             Address=self.routes.address_of(entry.name))

    def _propagate_topic(self, server, address, name, matcher, options) -> None:
        client = AdminClient(address, self.service.config.admin_token, transport=self._transport)
        try:
            client.create_topic(name, matcher, options)
        except SoapFault as fault:
            if fault.subcode != contracts.FAULT_TOPIC_EXISTS:
                log.warning("server %s refused topic %s: %s", server, name, fault.reason)
        except Exception as exc:  # a server that is down gets the topic when it registers
            log.warning("server %s unreachable for topic %s: %s", server, name, exc)

    def _delete_topic(self, request, message):
        name = self.route_admin.delete(request.Name)
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM edn_topics WHERE name = ?", (name,))
            conn.execute("DELETE FROM edn_summaries WHERE route = ?", (name,))
        for server, address in sorted(self.servers.items()):
            client = AdminClient(address, self.service.config.admin_token, transport=self._transport)
            try:
                client.delete_topic(name)
            except Exception as exc:
                log.warning("server %s: deleting topic %s failed: %s", server, name, exc)
        return contracts.DeleteTopicResponse(Name=name)

    def _list_topics(self, request, message):
        return contracts.ListTopicsResponse(Topic=[
            contracts.TopicInfo(Name=e.name, Matcher=e.matcher_uri,
                                Address=self.routes.address_of(e.name), FilterCount=len(e.matcher))
            for e in self.route_admin.entries(request.Prefix)])

    def _register_server(self, request, message):
        name = _server_name(request.Name)
        address = request.Address.rstrip("/")
        with self.store.transaction() as conn:
            conn.execute("INSERT INTO edn_servers(name, address, registered) VALUES (?, ?, ?) "
                         "ON CONFLICT(name) DO UPDATE SET address = excluded.address, "
                         "registered = excluded.registered", (name, address, time.time()))
        self._add_server(name, address)
        log.info("server %s registered at %s", name, address)
        return contracts.RegisterServerResponse(Name=name, Topic=self.topic_specs(),
                                                Peer=self._server_infos(exclude=name))

    def _server_infos(self, exclude: str | None = None, prefix: str | None = None):
        return [contracts.ServerInfo(Name=n, Address=a, Load=self._loads.get(n, 0))
                for n, a in sorted(self.servers.items())
                if n != exclude and (not prefix or n.startswith(prefix))]

    def _list_servers(self, request, message):
        return contracts.ListServersResponse(Server=self._server_infos(prefix=request.Prefix))

    def _update_summary(self, request, message):
        server = _server_name(request.Server)
        if server not in self.servers:
            raise sender_fault(f"server {server!r} is not registered", FAULT_UNKNOWN_SERVER)
        route = validate_name(request.Route)
        if route not in self.routes:
            raise sender_fault(f"no route named {route!r}", contracts.FAULT_UNKNOWN_TOPIC)
        entry = self.routes.get(route)
        with self._summary_lock:
            accepted = self._apply_summary(entry, server, request)
        if accepted:
            log.info("summary of %s for %s: generation %s", server, route, request.Generation)
        return contracts.UpdateSummaryResponse(Route=route, Accepted=int(accepted))

    def _apply_summary(self, entry: NamespaceEntry, server: str, request) -> bool:
        route = entry.name
        row = self.store.query("SELECT generation FROM edn_summaries WHERE route = ? AND server = ?",
                               (route, server))
        if row and row[0]["generation"] >= request.Generation:
            return False
        try:
            self._install(entry, server, request.Summary)  # validates before anything is stored
        except MatcherError as exc:
            raise sender_fault(f"unusable summary from {server}: {exc}",
                               contracts.FAULT_INVALID_REQUEST) from None
        with self.store.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO edn_summaries(route, server, generation, load, summary) "
                         "VALUES (?, ?, ?, ?, ?)", (route, server, request.Generation,
                                                    request.Load or 0, etree.tostring(request.Summary)))
        self._loads[server] = request.Load or 0
        return True

    # -- statistics ----------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        with self._lock:
            c = self.counters
            figures = {
                "events_in": c.events_in,
                "copies_out": c.copies_out,
                "servers": len(self.servers),
                "hit_ratio": (c.copies_out / (c.events_in * len(self.servers))
                              if c.events_in and self.servers else 0.0),
                "route_us_per_event": (c.route_seconds / c.events_in * 1e6) if c.events_in else 0.0,
            }
            hits = dict(c.per_server_hits)
        for server, channel in self.forwarder.stats().items():
            for key, value in channel.items():
                figures[f"server.{server}.{key}"] = value
            figures[f"server.{server}.hits"] = hits.get(server, 0)
            figures[f"server.{server}.load"] = self._loads.get(server, 0)
        return figures

    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in self.stats().items() if k.startswith(prefix)])

    def close(self) -> None:
        self.forwarder.close()


def _server_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 128 or any(c in name for c in "/<>&\"' \t\n"):
        raise sender_fault(f"invalid server name {name!r}", contracts.FAULT_INVALID_NAME)
    return name


def build_dispatcher(config, *, transport=None, **kwargs):
    """The ``dispatcher`` role: a service whose topics are routes to subscription servers."""
    from wsframework.service import Service
    service = Service(config, topic_admin=False, **kwargs)
    try:
        service.dispatcher = Dispatcher(service, transport=transport)
    except BaseException:
        service.close()
        raise
    return service
