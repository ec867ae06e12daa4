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
membership, ``UpdateSummary`` (the route update message), ``GetStats`` for the counters,
``Configure`` for the run-time settings (``precision``, ``self_tuning``).

Precision and self-tuning (paper IV, V; :mod:`.precision`, :mod:`.selftuning`)
    Servers send precise summaries and the number of subscription rectangles they cover
    (the summary's ``rectangles`` attribute; else the UpdateSummary ``Load``). Every route
    is routed with all summaries cut to the dispatcher's current precision: ``none`` (no
    summary: every event to every server), 0.1 ... 0.9, ``precise``. A change builds the new
    routing tables and swaps one reference per route (cuts and tables are cached per
    precision): every event is routed by exactly one table. Self-tuning (on by default)
    samples the process's CPU load and its utilization (time with a request in hand,
    :mod:`wsframework.busy`) every interval and moves precision down when the dispatcher is
    the bottleneck, up otherwise.

Measurement (:mod:`.measurement`)
    A monitor thread reads the counters every ``monitor_interval`` seconds into a sliding
    window: T_f, T_d, T_c, R, S_m, events/s, CPU and bytes out, exposed as ``measure.*``
    figures and logged at INFO every ``stats_log_interval`` seconds while events flow.

Backpressure
    A publish request whose events leave some live server's queue above ``backpressure``
    events waits (at most ``backpressure_timeout`` seconds) until it is below: a publisher
    faster than the outgoing link is slowed down instead of having its events dropped, and
    the dispatcher's CPU then says truthfully that it is not the bottleneck (the
    self-tuning relies on that): the wait does not count as busy time. Servers marked down
    are not waited for.

Settings (``edn serve dispatcher --set KEY=VALUE``; flags where noted)
    ``initial_precision`` (precise | none | 0..1; the Spark profile job's choice),
    ``self_tuning`` (true; ``--no-self-tuning``), ``selftuning_step`` / ``_threshold`` /
    ``_busy_threshold`` / ``_backlog_growth`` / ``_backlog_floor`` / ``_interval`` /
    ``_factor`` / ``_max_interval`` / ``_oscillations`` / ``_throughput_change`` / ``_with_none`` / ``_settle`` (:class:`.selftuning.SelfTuningConfig`),
    ``link_mbps`` (outgoing cap; ``--link-mbps``), ``backpressure`` (1000; 0: off),
    ``backpressure_timeout`` (5 s), ``monitor_interval`` (0.25 s), ``measure_window`` (10 s),
    ``stats_log_interval`` (10 s; 0: off).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
import time
from dataclasses import dataclass, field

from lxml import etree

from matchers import FilterSpec, MatcherError
from wsframework import ns
from wsframework.admin import AdminClient, contracts
from wsframework.busy import BusyMeter
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.messaging import IncomingMessage, Reply
from wsframework.namespace import NamespaceEntry, validate_name
from wsframework.transport import HttpTransport

from . import edn_wire
from .base import BaseRouteManager
from .edn_wire import FAULT_UNKNOWN_SERVER
from .forwarding import EVENT_BATCH, Forwarder, TokenBucket
from .measurement import Counters, SlidingWindow, thread_cpu_seconds
from .precision import PRECISE, format_precision, parse_precision
from .selftuning import SelfTuner, SelfTuningConfig, Ticker

log = logging.getLogger(__name__)

SUMMARY_DIALECT = ns.SUMMARY_DIALECT

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
    route_seconds: float = 0.0  # CPU seconds of the routing threads inside match()
    per_server_hits: dict = field(default_factory=dict)


_TUNING_FIELDS = {f.name for f in dataclasses.fields(SelfTuningConfig)}


def _flag(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class Dispatcher(BaseRouteManager):
    default_route_matcher = ns.MATCHER_RTREE_ROUTE_SET
    default_server_matcher = ns.MATCHER_RTREE_ENGINE

    def __init__(self, service, *, settings: dict | None = None, transport=None):
        settings = dict(service.config.settings, **(settings or {}))
        super().__init__(service)
        self.store = service.store
        self.store.executescript(_SCHEMA)
        link = settings.get("link_mbps")
        self.link_mbps = float(link) if link else None
        self.forwarder = Forwarder(
            transport or HttpTransport(timeout=(2.0, float(settings.get("forward_timeout", 10.0)))),
            capacity=int(settings.get("queue_capacity", 10_000)),
            batch_max=int(settings.get("batch_max", 64)),
            policy=settings.get("overflow_policy", "drop-newest"),
            link=TokenBucket.megabits(float(link)) if link else None)
        # Admin propagation to servers reuses one pooled transport (the service's own
        # unless a test injects one), not a new connection pool per message.
        self._admin_transport = transport or service.transport
        self._summary_lock = threading.Lock()  # generation check, install and store are one step
        self.counters = DispatcherCounters()
        self._lock = threading.Lock()        # counters
        self._match_lock = threading.Lock()  # libspatialindex is not thread-safe
        self.servers: dict[str, str] = {}
        self._loads: dict[str, int] = {}
        # utilization: the service counts requests in hand; the hold-back wait is taken out
        self._busy: BusyMeter = getattr(service, "busy", None) or BusyMeter()
        self._init_precision(settings)
        self._register_admin(service.admin)
        from .repartition import Repartitioner  # offline partitioning: Repartition (moves)
        self.repartitioner = Repartitioner(self, transport=transport)
        self.routes.on_change(self._on_route_change)
        self._load()
        service.add_component(self)
        self._monitor = Ticker(self._tick, self.monitor_interval, name="dispatcher-monitor").start()

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
        if hasattr(entry.matcher, "set_precision"):
            entry.matcher.set_precision(self.precision)
        rows = self.store.query("SELECT server, summary, load FROM edn_summaries WHERE route = ?",
                                (entry.name,))
        for row in rows:
            try:
                self._install(entry, row["server"], etree.fromstring(row["summary"]), row["load"])
                self._loads[row["server"]] = row["load"]
            except (MatcherError, etree.XMLSyntaxError) as exc:
                log.error("stored summary of %s for %s unusable: %s", row["server"], entry.name, exc)

    def _install(self, entry: NamespaceEntry, server: str, summary: etree._Element,
                 load: int | None = None) -> None:
        if summary.get("rectangles") is None and load:
            # A server that does not say how many rectangles its summary covers: its load
            # (subscriptions on all its topics) is the best denominator for precision.
            summary.set("rectangles", str(load))
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
            with self._match_lock:
                started = time.thread_time()  # CPU of this thread: GIL waits excluded
                targets = entry.matcher.match(event)
                route_seconds += time.thread_time() - started
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
        if self.backpressure and hits:
            self._hold_back(hits)
        return copies

    def _hold_back(self, servers) -> None:
        """Wait until the queues of the live servers just used are short again (see the
        module docstring); never longer than ``backpressure_timeout`` in all."""
        deadline = time.monotonic() + self.backpressure_timeout
        for server in servers:
            channel = self.forwarder.channels.get(server)
            if channel is not None and channel.stats.depth > self.backpressure:
                with self._busy.idle():  # waiting on the link, not working
                    room = channel.wait_for_room(self.backpressure,
                                                 max(0.0, deadline - time.monotonic()))
                if not room:
                    with self._lock:
                        self._backpressure_timeouts += 1
                    return

    # -- precision, measurement, self-tuning ---------------------------------------------------
    def _init_precision(self, settings: dict) -> None:
        initial = settings.get("initial_precision")
        self.precision = parse_precision(initial) if initial not in (None, "") else PRECISE
        self._precision_lock = threading.Lock()
        self.backpressure = int(settings.get("backpressure", 1000))
        self.backpressure_timeout = float(settings.get("backpressure_timeout", 5.0))
        self._backpressure_timeouts = 0
        self.monitor_interval = float(settings.get("monitor_interval", 0.25))
        self.window = SlidingWindow(float(settings.get("measure_window", 10.0)))
        self.stats_log_interval = float(settings.get("stats_log_interval", 10.0))
        self._last_log = time.monotonic()
        self._forward_cpu = 0.0
        self._forward_seen: dict[int, float] = {}
        self._reading_lock = threading.Lock()
        self.tuning_config = SelfTuningConfig.from_settings(settings)
        self.tuner: SelfTuner | None = None
        self._precision_changes = 0
        if _flag(settings.get("self_tuning", "true")):
            self._start_tuner()

    def _start_tuner(self) -> None:
        reading = self.counters_now()
        self.tuner = SelfTuner(self.tuning_config, self.precision, reading)

    def set_precision(self, precision: float, *, source: str = "operator") -> None:
        """Route every route with summaries cut to ``precision`` (0.0 none .. 1.0 precise)."""
        with self._precision_lock:
            changed = precision != self.precision
            self.precision = precision
            for entry in list(self.routes.entries()):
                if hasattr(entry.matcher, "set_precision"):
                    entry.matcher.set_precision(precision)
            if changed:
                self._precision_changes += 1
        if changed:
            log.log(logging.DEBUG if source == "self-tuning" else logging.INFO,
                    "precision %s (%s)", format_precision(precision), source)

    def set_self_tuning(self, on: bool) -> None:
        with self._precision_lock:
            if on and self.tuner is None:
                self._start_tuner()
            elif not on:
                self.tuner = None

    def counters_now(self) -> Counters:
        """One reading of the cumulative counters (:mod:`.measurement`)."""
        with self._lock:
            events, copies, route = (self.counters.events_in, self.counters.copies_out,
                                     self.counters.route_seconds)
        sent = bytes_out = backlog = 0
        with self._reading_lock:  # the monitor thread and GetStats both read
            forward = self._forward_cpu
            for channel in list(self.forwarder.channels.values()):
                sent += channel.stats.sent
                bytes_out += channel.stats.bytes_out
                if channel.stats.up:  # a dead server's queue says nothing of the link
                    backlog += channel.stats.depth
                thread = channel.sender_thread
                now = thread_cpu_seconds(thread)
                seen = self._forward_seen.get(id(thread), 0.0)
                if now > seen:
                    forward += now - seen
                    self._forward_seen[id(thread)] = now
            self._forward_cpu = forward
        return Counters(time=time.monotonic(), cpu=time.process_time(), route_cpu=route,
                        forward_cpu=forward, events=events, copies=copies, sent=sent,
                        bytes_out=bytes_out, servers=len(self.servers),
                        busy=self._busy.seconds(), backlog=backlog)

    def _tick(self, now: float) -> None:
        reading = self.counters_now()
        self.window.add(reading)
        tuner = self.tuner
        if tuner is not None:
            with self._precision_lock:
                step = tuner.sample(reading) \
                    if tuner is self.tuner else None
            if step is not None:
                self.set_precision(step.precision, source="self-tuning")
        if self.stats_log_interval and reading.time - self._last_log >= self.stats_log_interval:
            self._last_log = reading.time
            m = self.window.measurement(self.stats_log_interval)
            if m is not None and m.events:
                log.info("precision %s%s: %.1f events/s, cpu %.2f, busy %.2f, T_f %.0f us, "
                         "T_d %.1f us, T_c %.1f us, R %.3f, S_m %.0f B, out %.2f MB/s "
                         "(last %.0f s)", format_precision(self.precision),
                         " (self-tuning)" if self.tuner is not None else "", m.events_per_s,
                         m.cpu, m.busy, m.t_f * 1e6, m.t_d * 1e6, m.t_c * 1e6, m.hit_ratio,
                         m.message_size, m.bytes_out_per_s / 1e6, m.seconds)

    def settings_in_force(self) -> dict[str, str]:
        c = self.tuning_config
        return {"precision": format_precision(self.precision),
                "self_tuning": "on" if self.tuner is not None else "off",
                "link_mbps": repr(self.link_mbps) if self.link_mbps else "none",
                "backpressure": str(self.backpressure),
                "selftuning.step": repr(c.step), "selftuning.threshold": repr(c.threshold),
                "selftuning.busy_threshold": repr(c.busy_threshold),
                "selftuning.backlog_growth": repr(c.backlog_growth),
                "selftuning.backlog_floor": repr(c.backlog_floor),
                "selftuning.interval": repr(c.interval), "selftuning.factor": repr(c.factor),
                "selftuning.max_interval": repr(c.max_interval),
                "selftuning.throughput_change": repr(c.throughput_change)}

    def _configure(self, request, message):
        """``Configure``: ``precision`` (none | precise | 0..1 | N%) and ``self_tuning``
        (on | off). Everything is validated before anything changes."""
        changes = {}
        for setting in request.Setting or []:
            name = (setting.Name or "").strip().lower().replace("-", "_")
            try:
                if name == "precision":
                    changes[name] = parse_precision(setting.Value)
                elif name in ("self_tuning", "selftuning"):
                    value = str(setting.Value).strip().lower()
                    if value not in ("on", "off", "true", "false", "1", "0", "yes", "no"):
                        raise ValueError(f"self_tuning is on or off, not {setting.Value!r}")
                    changes["self_tuning"] = _flag(value)
                elif name.startswith("selftuning.") and name[11:] in _TUNING_FIELDS:
                    field_name = name[11:]
                    kind = type(getattr(self.tuning_config, field_name))
                    value = (_flag(setting.Value) if kind is bool else kind(setting.Value))
                    changes.setdefault("tuning", {})[field_name] = value
                else:
                    raise ValueError(f"unknown setting {setting.Name!r} (known: precision, "
                                     "self_tuning, selftuning.<field>)")
            except ValueError as exc:
                raise sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST) from None
        if "tuning" in changes:
            try:
                config = dataclasses.replace(self.tuning_config, **changes["tuning"])
            except ValueError as exc:
                raise sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST) from None
            with self._precision_lock:
                self.tuning_config = config
                if self.tuner is not None:  # a new tuner with the new parameters
                    self.tuner = None
                    restart = True
                else:
                    restart = False
            if restart:
                self.set_self_tuning(True)
        if "self_tuning" in changes and not changes["self_tuning"]:
            self.set_self_tuning(False)
        if "precision" in changes:
            self.set_precision(changes["precision"])
            tuner = self.tuner
            if tuner is not None:  # self-tuning goes on from the operator's precision
                reading = self.counters_now()
                with self._precision_lock:
                    tuner.reset(self.precision, reading)
        if changes.get("self_tuning"):
            self.set_self_tuning(True)
        return contracts.ConfigureResponse(Setting=[
            contracts.Figure(Name=k, Value=v) for k, v in self.settings_in_force().items()])

    def tuning_figures(self, with_trace: bool = True) -> dict[str, object]:
        tuner = self.tuner
        c = self.tuning_config
        figures: dict[str, object] = {
            "selftuning.on": int(tuner is not None),
            "selftuning.threshold": c.threshold, "selftuning.busy_threshold": c.busy_threshold,
            "selftuning.backlog_growth": c.backlog_growth,
            "selftuning.backlog_floor": c.backlog_floor, "selftuning.step_size": c.step,
            "selftuning.base_interval": c.interval, "selftuning.factor": c.factor,
            "selftuning.max_interval": c.max_interval,
        }
        if tuner is not None:
            figures["selftuning.steps"] = tuner.p
            figures["selftuning.interval"] = tuner.t
            figures["selftuning.oscillations"] = tuner.num_oscillations
            if with_trace:
                for step in list(tuner.trace):
                    figures[f"selftuning.trace.{step.step:06d}"] = json.dumps(
                        {"step": step.step, "time": round(step.time, 3),
                         "precision": step.precision, "previous": step.previous,
                         "events_per_s": round(step.events_per_s, 2), "cpu": round(step.cpu, 4),
                         "busy": round(step.busy, 4), "backlog": round(step.backlog),
                         "copies": round(step.copies), "signal": step.signal,
                         "cpu_bound": step.cpu_bound, "interval": step.interval,
                         "reason": step.reason}, separators=(",", ":"))
        return figures

    # -- administration ------------------------------------------------------------------------
    def _register_admin(self, admin) -> None:
        admin.register(contracts.CreateTopic, self._create_topic)
        admin.register(contracts.DeleteTopic, self._delete_topic)
        admin.register(contracts.ListTopics, self._list_topics)
        admin.register(edn_wire.RegisterServer, self._register_server)
        admin.register(edn_wire.ListServers, self._list_servers)
        admin.register(edn_wire.UpdateSummary, self._update_summary)
        admin.register(contracts.GetStats, self._get_stats)
        admin.register(contracts.Configure, self._configure)

    def topic_specs(self) -> list[edn_wire.TopicSpec]:
        specs = []
        for row in self.store.query("SELECT name, server_matcher, options FROM edn_topics ORDER BY name"):
            if row["name"] in self.routes:
                options = etree.fromstring(row["options"]) if row["options"] else None
                specs.append(edn_wire.TopicSpec(Name=row["name"], Matcher=row["server_matcher"],
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
        client = self._admin_client(address)
        try:
            client.create_topic(name, matcher, options)
        except SoapFault as fault:
            if fault.subcode != contracts.FAULT_TOPIC_EXISTS:
                log.warning("server %s refused topic %s: %s", server, name, fault.reason)
        except Exception as exc:  # a server that is down gets the topic when it registers
            log.warning("server %s unreachable for topic %s: %s", server, name, exc)

    def _admin_client(self, address: str) -> AdminClient:
        return AdminClient(address, self.service.config.admin_token, transport=self._admin_transport)

    def _delete_topic(self, request, message):
        name = self.route_admin.delete(request.Name)
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM edn_topics WHERE name = ?", (name,))
            conn.execute("DELETE FROM edn_summaries WHERE route = ?", (name,))
        for server, address in sorted(self.servers.items()):
            client = self._admin_client(address)
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
        return edn_wire.RegisterServerResponse(Name=name, Topic=self.topic_specs(),
                                               Peer=self._server_infos(exclude=name))

    def _server_infos(self, exclude: str | None = None, prefix: str | None = None):
        return [edn_wire.ServerInfo(Name=n, Address=a, Load=self._loads.get(n, 0))
                for n, a in sorted(self.servers.items())
                if n != exclude and (not prefix or n.startswith(prefix))]

    def _list_servers(self, request, message):
        return edn_wire.ListServersResponse(Server=self._server_infos(prefix=request.Prefix))

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
        return edn_wire.UpdateSummaryResponse(Route=route, Accepted=int(accepted))

    def _apply_summary(self, entry: NamespaceEntry, server: str, request) -> bool:
        route = entry.name
        row = self.store.query("SELECT generation FROM edn_summaries WHERE route = ? AND server = ?",
                               (route, server))
        if row and row[0]["generation"] >= request.Generation:
            return False
        try:
            self._install(entry, server, request.Summary, request.Load)  # validates first
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
    def stats(self, with_trace: bool = True) -> dict[str, float]:
        with self._lock:
            c = self.counters
            figures = {
                "events_in": c.events_in,
                "copies_out": c.copies_out,
                "servers": len(self.servers),
                "hit_ratio": (c.copies_out / (c.events_in * len(self.servers))
                              if c.events_in and self.servers else 0.0),
                "route_us_per_event": (c.route_seconds / c.events_in * 1e6) if c.events_in else 0.0,
                "backpressure_timeouts": self._backpressure_timeouts,
            }
            hits = dict(c.per_server_hits)
        figures["precision"] = format_precision(self.precision)
        figures["precision_value"] = float(self.precision)
        figures["precision_changes"] = self._precision_changes
        figures["link_mbps"] = float(self.link_mbps or 0.0)
        described = [e.matcher.describe() for e in list(self.routes.entries())
                     if hasattr(e.matcher, "set_precision")]
        figures["route_boxes"] = sum(int(d.get("boxes", 0)) for d in described)
        # how single events are matched (measured per table: numpy columns or the R-tree)
        figures["route_strategy"] = ",".join(sorted({str(d.get("single_strategy"))
                                                     for d in described})) or "none"
        reading = self.counters_now()
        for name in ("time", "cpu", "route_cpu", "forward_cpu", "events", "copies", "sent",
                     "bytes_out", "busy"):
            figures[f"counters.{name}"] = getattr(reading, name)
        m = self.window.measurement()
        if m is not None:
            figures.update({
                "measure.window_s": m.seconds, "measure.events_per_s": m.events_per_s,
                "measure.cpu": m.cpu, "measure.busy": m.busy, "measure.t_f_us": m.t_f * 1e6,
                "measure.t_d_us": m.t_d * 1e6,
                "measure.t_c_us": m.t_c * 1e6, "measure.hit_ratio": m.hit_ratio,
                "measure.message_bytes": m.message_size,
                "measure.bytes_out_per_s": m.bytes_out_per_s,
                "measure.copies_per_s": m.copies_per_s,
                "measure.tp_d": m.tp_d if m.events else 0.0,
            })
        figures.update(self.tuning_figures(with_trace))
        for server, channel in self.forwarder.stats().items():
            for key, value in channel.items():
                figures[f"server.{server}.{key}"] = value
            figures[f"server.{server}.hits"] = hits.get(server, 0)
            figures[f"server.{server}.load"] = self._loads.get(server, 0)
        return figures

    def _get_stats(self, request, message):
        prefix = request.Prefix or ""
        with_trace = "selftuning.trace".startswith(prefix) or prefix.startswith("selftuning.trace")
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in self.stats(with_trace).items() if k.startswith(prefix)])

    def close(self) -> None:
        self._monitor.stop()
        self.forwarder.close()


def _server_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 128 or any(c in name for c in "/<>&\"' \t\n"):
        raise sender_fault(f"invalid server name {name!r}", contracts.FAULT_INVALID_NAME)
    return name


def build_dispatcher(config, *, transport=None, **kwargs):
    """The ``dispatcher`` role: a service whose topics are routes to subscription servers."""
    from wsdl.admin import serve_admin_wsdl
    from wsframework.service import Service
    service = Service(config, topic_admin=False, **kwargs)
    serve_admin_wsdl(service, edn_wire.ADMIN_OPERATIONS)
    try:
        service.dispatcher = Dispatcher(service, transport=transport)
    except BaseException:
        service.close()
        raise
    return service
