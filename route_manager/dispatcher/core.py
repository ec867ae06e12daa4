"""The dispatcher itself: its route table and servers, and the hot path (publish -> route ->
forward, with backpressure). Administration (:mod:`.admin`), precision and self-tuning
(:mod:`.control`), statistics (:mod:`.stats`), the tables (:mod:`.tables`), the child side of
a dispatch tree (:mod:`.tree`) and the Repartition operation (:mod:`route_manager.repartition`)
are its parts; each receives in its constructor what it uses (the store or tables, the route
namespace, settings, an admin-client factory, live mappings and callbacks), not the
dispatcher."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from lxml import etree

from matchers import FilterSpec, MatcherError
from matchers.route_set.routing import calibration_cpu
from matchers.schema import Schema
from matchers.schema.extraction import standalone
from matchers.vocabulary import MATCHER_RTREE_ENGINE, MATCHER_RTREE_ROUTE_SET, SUMMARY_DIALECT
from wsframework.admin import AdminClient
from wsframework.admission import AdmissionSettings
from wsframework.utilization import BusyMeter
from wsframework.exceptions import receiver_fault, sender_fault
from wsframework.messaging import IncomingMessage, Reply
from wsframework.publisher import PUBLISH_ACTION
from wsframework.namespace import NamespaceEntry, UnknownEntry, validate_name
from wsframework.settings import read_settings
from wsframework.transport import LeanHttpTransport
from wsframework.urlpolicy import UrlPolicy

from .. import protocol
from ..base import BaseRouteManager
from ..exceptions import InvalidConfiguration, UnknownServer, UnusableSummary
from ..precision_profile import InvalidPrecisionProfile, PrecisionProfile
from ..protocol import (EVENT_BATCH, KIND_DISPATCHER, KIND_SERVER, ROUTING_FLOODING,
                        batch_events)
from ..forwarding import EventLog, Forwarder, LaneLost, LogLanes, TokenBucket
from ..selftuning import SelfTuningSettings, Ticker
from .admin import DispatcherAdmin
from .console import install_console
from .peer_roots import PeerRoots
from .control import CounterReader, PrecisionControl, configure_key
from .recent_publications import DUPLICATE, RecentPublications, StillInProgress
from .recording import Recorder, RecordingSpec
from .routing import route_matcher_for, settings_for_mode
from .settings import DispatcherSettings
from .shared_state import SharedState
from .stats import dispatcher_figures
from .tables import DispatcherTables
from .tree import TreeLink

log = logging.getLogger(__name__)

DEFAULT_RECORDING_PAGE = 1_000  # GetRecording without Max

__all__ = ["Dispatcher", "DispatcherCounters", "build_dispatcher"]


@dataclass
class DispatcherCounters:
    events_in: int = 0
    copies_out: int = 0
    route_seconds: float = 0.0  # CPU seconds of the routing threads inside match()
    # route tables calibrating after a change: not in route_seconds (not event-path cost)
    calibration_seconds: float = 0.0
    per_server_hits: dict = field(default_factory=dict)


class Dispatcher(BaseRouteManager):
    default_route_matcher = MATCHER_RTREE_ROUTE_SET
    default_server_matcher = MATCHER_RTREE_ENGINE

    def __init__(self, service, *, settings: Mapping | None = None, transport=None):
        """``settings`` (text or typed values) add to the service's; both are read into
        :class:`DispatcherSettings` and :class:`SelfTuningSettings` first, and an unknown or
        unusable one is a :class:`~wsframework.settings.SettingsError`."""
        self.settings, tuning, admission = read_settings(
            dict(service.config.settings, **(settings or {})), DispatcherSettings,
            SelfTuningSettings, AdmissionSettings)
        self.settings = settings_for_mode(self.settings)
        admission.apply_to(service.gate)
        # a publisher's events, and a parent dispatcher's batches (a child in a tree)
        service.gate.let_through(PUBLISH_ACTION)
        service.gate.let_through(protocol.EVENT_BATCH_ACTION)
        for action in protocol.NETWORK_ACTIONS:  # the servers' and peer roots' own messages
            service.gate.let_through(action)
        self.routing = self.settings.routing
        self.default_route_matcher = route_matcher_for(self.routing)  # before the route admin
        super().__init__(service)
        # A request's ReplyTo/FaultTo is chosen by its sender: the one URL policy judges it,
        # with the private ranges of --allow-private (wsframework.urlpolicy).
        service.messaging.reply_policy = UrlPolicy(allow_private=self.settings.allow_private)
        self.tables = DispatcherTables(service.store)
        # a sample of the events routed, for offline profiles (Configure record=..., .recording)
        self.recorder = Recorder(self.tables)
        service.admin.register(protocol.GetRecording, self._get_recording)
        self.link_mbps = self.settings.link_mbps or None
        # Batches go through the lean keep-alive client: requests cost ~300 us of CPU per
        # POST (wsframework.transport.socket_http), as much as routing the batch's events.
        self._forward_transport = transport or LeanHttpTransport(
            timeout=(2.0, self.settings.forward_timeout))
        # the link cap is the process's: adopted lanes share it with the own one
        self._link = TokenBucket.megabits(self.link_mbps) if self.link_mbps else None
        # the durable log: this process's own lane of it, and the lanes it adopts (.log_lanes)
        self.lanes = log_lanes(service, self.settings, self._forwarder_for) \
            if self.settings.durable_log else None
        self.event_log = self.lanes.claim() if self.lanes is not None else None
        self._lane_lock = threading.Lock()  # claiming another lane after LaneLost
        self.forwarder = self._forwarder_for(self.event_log)
        # Admin propagation to servers reuses one pooled transport (the service's own
        # unless a test injects one), not a new connection pool per message.
        self.admin_transport = transport or service.transport
        self._summary_lock = threading.Lock()  # generation check, install and store are one step
        # a publisher's retry of a message accepted already is acknowledged, not routed again
        self.recent = RecentPublications(window=self.settings.publish_dedup_window)
        self.counters = DispatcherCounters()
        self.counters_lock = threading.Lock()  # counters, backpressure_timeouts
        self.servers: dict[str, str] = {}
        self.kinds: dict[str, str] = {}  # server | dispatcher (a child in a dispatch tree)
        self.loads: dict[str, int] = {}
        # route -> a number that changes with every summary installed or removed for it: what
        # a child dispatcher's sub-tree summary of the route is cut from (.tree)
        self.summary_versions: dict[str, int] = {}
        # utilization: the service counts requests in hand; the hold-back wait is taken out
        self.busy: BusyMeter = getattr(service, "busy", None) or BusyMeter()
        self.backpressure = self.settings.backpressure
        self.backpressure_timeout = self.settings.backpressure_timeout
        self.backpressure_timeouts = 0
        self.readings = CounterReader(traffic=self._traffic,
                                      channels=lambda: list(self.forwarder.channels.values()),
                                      servers=lambda: len(self.servers),
                                      busy_seconds=lambda: self.busy.seconds())
        self.control = PrecisionControl(self.settings, tuning, routes=self.routes,
                                        read_counters=self.readings.read)
        self.admin = DispatcherAdmin(
            service.admin, tables=self.tables, routes=self.routes, route_admin=self.route_admin,
            create_route=self.create_route, default_server_matcher=self.default_server_matcher,
            servers=self.servers, loads=self.loads, register_server=self.register_server,
            subscription_servers=self.subscription_servers, update_summary=self.update_summary,
            client_for=self.admin_client, routing=self.settings.routing,
            precision=lambda: self.precision, figures=self.stats,
            configure=self._configure)
        from ..repartition import Repartitioner  # offline partitioning: Repartition (moves)
        self.repartitioner = Repartitioner(
            service.admin, routes=self.routes, subscription_servers=self.subscription_servers,
            credential=service.config.admin_token, latency_file=lambda: self.settings.latency_file,
            transport=transport)
        service.add_component(self.repartitioner)
        self.shared = SharedState(self.tables, self.routes, servers=self.servers,
                                  kinds=self.kinds, add_server=self.add_server,
                                  install=self._install_stored,
                                  configure=self._apply_settings, lock=self._summary_lock)
        self.shared.apply_configured()  # what operators set before this process started
        self.routes.on_change(self._on_route_change)
        self._load()
        service.admin.before_each(self.shared.sync)
        self._lane_sweeper = Ticker(self._sweep_lanes, self.settings.lane_sweep_interval,
                                    name="log-lanes").start() if self.lanes is not None else None
        # a child in a dispatch tree (--parent): reports its sub-tree summaries upwards and
        # takes its parents' event batches (.tree)
        self.tree = TreeLink(
            self.settings, base_url=service.base_url, store=service.store,
            messaging=service.messaging, credential=service.config.admin_token,
            client_for=self.admin_client, routes=self.routes,
            host_topic=self.admin.create_topic, loads=self.loads,
            summary_version=self.summary_version, entry_for=self.entry_for,
            route_events=self.route_events, event_log=self.event_log,
        ) if self.settings.parent else None
        # a root with peer roots (--peer-root): topics created or deleted at any root reach
        # every other (.peer_roots)
        own = service.base_url.rstrip("/")
        peers = [url for url in self.settings.peer_roots if url != own]
        self.peer_roots = PeerRoots(
            service.admin, peers=peers, interval=self.settings.topic_sync_interval,
            catalog=self.tables.topic_records, take=self.admin.take,
            lock=self.admin.topics_lock, client_for=self.admin_client) if peers else None
        service.add_component(self)
        self.control.start()
        if self.tree is not None:
            self.tree.start()
        if self.peer_roots is not None:
            self.admin.on_topics_changed = self.peer_roots.wake
            self.peer_roots.start()

    def _configure(self, settings) -> dict[str, str]:
        """Configure: validated and applied here, then stored for every process of this
        dispatcher and for its restarts; answers the settings in force."""
        pairs = [(key, _stamped(key, value, self.routes))
                 for key, value in ((configure_key(name), value) for name, value in settings)]
        in_force = self._apply_settings(pairs)
        if pairs:
            self.shared.configure(dict(pairs))
        return in_force

    def _apply_settings(self, settings) -> dict[str, str]:
        """Run-time settings applied in this process: ``record`` here (.recording), the rest
        by the precision control; all validated before any is applied."""
        pairs = [(configure_key(name), value) for name, value in settings]
        records = [value for key, value in pairs if key == "record"]
        try:
            spec = RecordingSpec.parse(records[-1]) if records else None
        except ValueError as exc:
            raise InvalidConfiguration(str(exc)) from None
        in_force = self.control.configure([(k, v) for k, v in pairs if k != "record"])
        if records:
            self.recorder.arm(spec)
        in_force["record"] = self.recorder.setting()
        return in_force

    def _get_recording(self, request, message):
        spec = self.recorder.spec
        first = spec is not None and not request.After  # the schema goes with the first page
        try:
            page = self.recorder.page(request.After, request.Max or DEFAULT_RECORDING_PAGE,
                                      self._schema_element(spec.topic) if first else None)
        except ValueError as exc:
            raise sender_fault(str(exc)) from None
        return protocol.GetRecordingResponse(Recording=page)

    def _schema_element(self, topic: str):
        """The ``edn:Schema`` of ``topic``'s events as its servers host it (None: none)."""
        for row in self.tables.topics():
            if row["name"] == topic and row["options"]:
                schema = Schema.from_config(etree.fromstring(row["options"]))
                return schema.to_element() if schema.d else None
        return None

    def _forwarder_for(self, event_log: EventLog | None) -> Forwarder:
        """A forwarder over ``event_log`` (this process's lane, or one it adopted; None
        without the durable log), with the dispatcher's channel settings."""
        s = self.settings
        return Forwarder(self._forward_transport, event_log=event_log,
                         capacity=s.queue_capacity, batch_max=s.batch_max,
                         batch_max_bytes=s.batch_max_bytes, linger=s.batch_linger,
                         policy=s.overflow_policy, link=self._link,
                         credential=self.service.config.admin_token)

    def _claim_again(self, lost: Forwarder) -> None:
        """This process's lane was taken over (its hold had lapsed, and another process
        opened it): stop sending from it, and log from now on in the lowest free lane."""
        with self._lane_lock:
            if self.forwarder is not lost:  # another thread did it already
                return
            lost.close(timeout=0)
            self.lanes.release_own(self.event_log)
            self.event_log = self.lanes.claim()
            self.forwarder = self._forwarder_for(self.event_log)
            for name, address in list(self.servers.items()):
                self.forwarder.ensure(name, address)
        log.warning("durable log: this process's lane was taken over; it logs in lane %d now",
                    self.lanes.own_index)

    def _sweep_lanes(self, _now: float) -> None:
        if self.event_log.lost:  # taken over while idle: the next publication need not fail
            self._claim_again(self.forwarder)
        self.shared.sync()  # deliver an adopted lane's copies to every node registered
        self.lanes.sweep(dict(self.servers))

    def admin_client(self, address: str) -> AdminClient:
        """An admin client to the node at ``address``, with the network's credential, over
        the pooled admin transport."""
        return AdminClient(address, self.service.config.admin_token, transport=self.admin_transport)

    @property
    def precision(self) -> float:
        """The summary precision every route is routed with now (0.0 none .. 1.0 precise)."""
        return self.control.precision

    def _traffic(self) -> tuple[int, int, float]:
        """(events in, copies out, routing CPU seconds) so far, read together."""
        with self.counters_lock:
            c = self.counters
            return c.events_in, c.copies_out, c.route_seconds

    # -- durable state -------------------------------------------------------------------------
    def _load(self) -> None:
        for name, address, kind in self.tables.servers():
            self.add_server(name, address, kind)
        for entry in list(self.routes.entries()):
            self._fill(entry)

    def _on_route_change(self, event: str, entry: NamespaceEntry) -> None:
        if event == "added":
            self._fill(entry)
        elif event == "removed":
            self.shared.forget_route(entry.name)

    def _fill(self, entry: NamespaceEntry) -> None:
        """Install the stored summaries of a (re)loaded route entry into its matcher."""
        if hasattr(entry.matcher, "set_precision"):
            entry.matcher.set_precision(self.precision)
        for row in self.tables.summaries(entry.name):
            try:
                self._install_stored(entry, row["server"], etree.fromstring(row["summary"]),
                                     row["load"])
            except (MatcherError, etree.XMLSyntaxError) as exc:
                log.error("stored summary of %s for %s unusable: %s", row["server"], entry.name, exc)
            self.shared.installed_now(entry.name, row["server"], row["generation"])

    def _install_stored(self, entry: NamespaceEntry, server: str, summary: etree._Element,
                        load: int) -> None:
        """Install a summary read from the store (at start, or another process's)."""
        self._install(entry, server, summary, load)
        self.loads[server] = load
        self.summary_versions[entry.name] = self.summary_versions.get(entry.name, 0) + 1

    def _install(self, entry: NamespaceEntry, server: str, summary: etree._Element,
                 load: int | None = None) -> None:
        if summary.get("rectangles") is None and load:
            # A server that does not say how many rectangles its summary covers: its load
            # (subscriptions on all its topics) is the best denominator for precision.
            summary.set("rectangles", str(load))
        entry.matcher.add_filter(server, FilterSpec(SUMMARY_DIALECT, "", (), summary))

    def add_server(self, name: str, address: str, kind: str = KIND_SERVER) -> None:
        with self._lane_lock:  # not between a lost lane's forwarder and the next one's
            self.servers[name] = address.rstrip("/")
            self.kinds[name] = kind
            self.forwarder.ensure(name, address)

    def register_server(self, name: str, address: str, kind: str = KIND_SERVER,
                        incarnation: int | None = None) -> None:
        """``incarnation``: the node's generation offset. A node that registers with another
        than before had its data wiped and counts its generations anew: its stored ones
        no longer hold back its updates (its stored summaries route until it reports)."""
        address = address.rstrip("/")
        previous = self.tables.save_server(name, address, kind, incarnation)
        if incarnation is not None and previous is not None and previous != incarnation:
            with self._summary_lock:
                self.tables.forget_generations(name)
            log.info("%s %s registered as a new incarnation: its generations start anew",
                     kind, name)
        self.add_server(name, address, kind)
        # a node registers when it starts: one that was down is up, so what waits for it
        # goes now rather than after its channel's backoff (up to 2 s)
        self.forwarder.retry_now(name)
        log.info("%s %s registered at %s", kind, name, address)

    def subscription_servers(self) -> dict[str, str]:
        """name -> address of the registered subscription servers (child dispatchers hold
        no subscriptions: they are nobody's peer and take no moved subscriptions)."""
        return {n: a for n, a in self.servers.items() if self.kinds.get(n) != KIND_DISPATCHER}

    def summary_version(self, route: str) -> int:
        return self.summary_versions.get(route, 0)

    def update_summary(self, server: str, request: protocol.UpdateSummary) -> tuple[str, bool]:
        """Apply ``server``'s route update message; (route, whether it was newer than the
        stored one)."""
        if server not in self.servers:
            raise UnknownServer(server)
        route = validate_name(request.Route)
        if route not in self.routes:
            raise UnknownEntry(route, "route")
        entry = self.routes.get(route)
        with self._summary_lock:
            accepted = self._apply_summary(entry, server, request)
        if accepted:
            log.info("summary of %s for %s: generation %s", server, route, request.Generation)
        return route, accepted

    def _apply_summary(self, entry: NamespaceEntry, server: str, request) -> bool:
        route = entry.name
        stored = self.tables.generation(route, server)
        if stored is not None and stored >= request.Generation:
            return False
        try:
            self._install(entry, server, request.Summary, request.Load)  # validates first
        except MatcherError as exc:  # the route stays as it was; the sender is named
            raise UnusableSummary(server, exc) from exc
        stored = self.tables.save_summary(route, server, request.Generation,
                                          request.Load or 0, etree.tostring(request.Summary))
        self.shared.installed_now(route, server, request.Generation)
        if not stored:  # another process stored a newer one meanwhile: route with that
            self.shared.install_stored(entry, server)
        self.loads[server] = request.Load or 0
        self.summary_versions[route] = self.summary_versions.get(route, 0) + 1
        return True

    # -- routing (the hot path) ----------------------------------------------------------------
    def dispatch(self, entry: NamespaceEntry, message: IncomingMessage) -> Reply | None:
        if self.tree is not None:
            # An event published here would reach this subtree only, not the whole network.
            raise sender_fault("this dispatcher is a child in a dispatch tree: publish at a "
                               f"root dispatcher (its parents: {', '.join(self.settings.parent)})")
        self.shared.sync()  # routed with every summary another process acknowledged
        entry = self.routes.get(entry.name)  # UnknownEntry if another process deleted it
        body = message.body
        events = batch_events(body) if body.tag == EVENT_BATCH else [body]
        message_id = message.addressing.message_id if message.addressing is not None else None
        try:
            claim = self.recent.begin(entry.name, message_id)
        except StillInProgress:
            raise receiver_fault("a message with this MessageID is still being published; "
                                 "send it again later") from None
        if claim is DUPLICATE:  # a retry of a message accepted already: acknowledged again
            return None
        accepted = False
        try:
            self.route_events(entry, events)
            accepted = True
        finally:
            self.recent.finish(claim, accepted)
        return None

    def route_events(self, entry: NamespaceEntry, events, *,
                     upstream: tuple[str, int] | None = None) -> int:
        """Route ``events`` (elements of one message) and queue their copies; returns the
        number of copies. The batch is read and routed in one call (the matcher's
        ``match_many``); each event is serialized once, and its copies share those bytes.
        ``upstream``: (parent dispatcher id, last seq) of a parent's batch, recorded with the
        copies (:mod:`.tree`)."""
        if not events:
            if upstream is not None and self.event_log is not None:
                self.forwarder.forward_logged([], upstream=upstream)
            return 0
        matcher = entry.matcher
        started = time.thread_time()  # CPU of this thread: GIL waits excluded
        calibrated = calibration_cpu()
        match_many = getattr(matcher, "match_many", None)
        if self.routing == ROUTING_FLOODING:  # nothing read: every node below gets everything
            every = list(self.servers)
            answers = [every for _ in events]
        elif match_many is not None:
            answers = match_many(events)
        else:  # a plugin matcher without batches: one event at a time, each standalone
            answers = [matcher.match(standalone(event)) for event in events]
        calibration_seconds = calibration_cpu() - calibrated
        route_seconds = time.thread_time() - started - calibration_seconds
        copies = 0
        hits: dict[str, int] = {}
        logged = []  # (topic, event, targets): committed to the log in one transaction
        for event, targets in zip(events, answers):
            if not targets:
                continue
            data = etree.tostring(event)
            if self.event_log is not None:
                logged.append((entry.name, data, targets))
            else:
                copies += self.forwarder.forward(entry.name, data, targets)
            for server in targets:
                hits[server] = hits.get(server, 0) + 1
        if logged or (upstream is not None and self.event_log is not None):
            # durable before the reply; LogFull refuses the whole message
            forwarder = self.forwarder
            try:
                copies += forwarder.forward_logged(logged, upstream=upstream)
            except LaneLost:  # the publisher retries; this process logs in another lane
                self._claim_again(forwarder)
                raise
        if self.recorder.spec is not None:  # routed: a publisher's retry is not kept twice
            self.recorder.offer(entry.name, events)
        with self.counters_lock:
            c = self.counters
            c.events_in += len(events)
            c.copies_out += copies
            c.route_seconds += route_seconds
            c.calibration_seconds += calibration_seconds
            for server, n in hits.items():
                c.per_server_hits[server] = c.per_server_hits.get(server, 0) + n
        if self.backpressure and hits:
            self._hold_back(hits)
        return copies

    def _hold_back(self, servers) -> None:
        """Wait until the queues of the live servers just used are short again (see the
        package docstring); never longer than ``backpressure_timeout`` in all."""
        deadline = time.monotonic() + self.backpressure_timeout
        for server in servers:
            channel = self.forwarder.channels.get(server)
            if channel is not None and channel.stats.depth > self.backpressure:
                with self.busy.idle():  # waiting on the link, not working
                    room = channel.wait_for_room(self.backpressure,
                                                 max(0.0, deadline - time.monotonic()))
                if not room:
                    with self.counters_lock:
                        self.backpressure_timeouts += 1
                    return

    # -- statistics and lifetime ---------------------------------------------------------------
    def stats(self, with_trace: bool = True) -> dict[str, float]:
        return dispatcher_figures(self, with_trace)

    def close(self) -> None:
        if self.peer_roots is not None:
            self.peer_roots.stop()
        if self.tree is not None:
            self.tree.stop()
        self.control.stop()
        self.recorder.close()
        if self._lane_sweeper is not None:
            self._lane_sweeper.stop()
        self.forwarder.close()
        if self.lanes is not None:
            self.lanes.release_own(self.event_log)
            self.lanes.close()


def build_dispatcher(config, *, transport=None, **kwargs):
    """The ``dispatcher`` role: a service whose topics are routes to subscription servers."""
    from wsdl.admin import serve_admin_wsdl
    from wsframework.service import Service
    service = Service(config, topic_admin=False, names=protocol.SERVICE_NAMES, **kwargs)
    serve_admin_wsdl(service, protocol.ADMIN_OPERATIONS)
    try:
        service.dispatcher = Dispatcher(service, transport=transport)
        install_console(service)  # the web console's panels ({base}/console)
        from .metrics import serve_dispatcher_metrics
        serve_dispatcher_metrics(service, service.dispatcher)  # Prometheus: {base}/metrics
    except BaseException:
        service.close()
        raise
    return service


build_dispatcher.settings = (DispatcherSettings, SelfTuningSettings, AdmissionSettings)  # edn serve checks --set


def log_lanes(service, settings: DispatcherSettings, forwarder_for) -> LogLanes:
    """The lanes of the durable log: lane 0 in the service's store, lane ``k`` in the store
    ``lane{k}.db`` of its data directory (a schema beside the main one on PostgreSQL)."""
    data = Path(service.config.data_dir)
    s = settings
    return LogLanes(
        service.store, lane_path=lambda k: data / f"lane{k}.db",
        open_log=lambda store: EventLog(store, max_events=s.log_max_events,
                                        max_bytes=s.log_max_bytes, max_age=s.log_max_age,
                                        policy=s.log_full, group_commit=s.log_group_commit),
        forwarder_for=forwarder_for)


def _single_worker(settings) -> str | None:
    """Why this dispatcher must run in one worker, or None: a child of a dispatch tree keeps
    its parents' positions in its own lane of the log, so a parent's batch resent to another
    process would be logged twice."""
    parents = read_settings(settings, DispatcherSettings, SelfTuningSettings,
                            allow_unknown=True)[0].parent
    return ("a child of a dispatch tree records its parents' positions in one process's log"
            if parents else None)


build_dispatcher.single_worker = _single_worker  # edn serve refuses --workers > 1 when set


def _stamped(key: str, value: str, routes) -> str:
    """A Configure value as this dispatcher stores it: a profile or a recording stamped
    with its time of taking it (what a sender said is ignored). A recording of a topic
    that is not here is refused; a value that does not parse goes on as it is, for
    :meth:`Dispatcher._apply_settings` to refuse."""
    if key == "profile":
        return _applied_now(value)
    if key != "record":
        return value
    try:
        spec = RecordingSpec.parse(value)
    except ValueError:
        return value
    if spec is None:
        return value
    if spec.topic not in routes:
        raise InvalidConfiguration(f"record: no topic {spec.topic!r} here")
    return spec.stamped(time.time()).to_text()


def _applied_now(profile_text: str) -> str:
    """A profile's Configure value stamped with this dispatcher's time of applying it (what
    a sender said is ignored); a value that is no profile goes on as it is, for
    :meth:`PrecisionControl.configure` to refuse."""
    try:
        return PrecisionProfile.parse(profile_text).stamped(time.time()).to_text()
    except InvalidPrecisionProfile:
        return profile_text
