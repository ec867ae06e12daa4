"""A populated event distribution network under publisher load, and its readings.

What the throughput, durability, self-tuning, event-path and topology benchmarks share: a dispatcher and servers on loopback
(:class:`~edn.localnet.network.LocalNetwork`) holding narrow random range subscriptions
imported in bulk, publisher threads that saturate the dispatcher with pre-built
``edn:EventBatch`` messages, and the dispatcher's counters and every process's CPU over a
measured window.
"""
from __future__ import annotations

import http.client
import os
import re
import secrets
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from route_manager.workloads.grid_xml import GRID_EVENTS, event_element, range_filter
from route_manager.models.measurement import Counters, Measurement, between
from route_manager.precision import format_precision, parse_precision
from route_manager import protocol
from route_manager.protocol import EVENT_BATCH
from matchers.vocabulary import EDN, RANGES_DIALECT
from wsframework import ns, progress
from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION
from wsframework.tls import process_client_context

D = 8
TOPIC = "grid"
XPATH10 = ns.XPATH10_DIALECT_2011
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Setup:
    servers: int = 10
    per_server: int = 10_000
    half_width: float = 2.5
    partition: str = "rtree"        # offline R-tree bulk loading (paper III-A) | random
    symbols: int = 16               # subscriptions also ask @sym = one of this many symbols
    link_mbps: float = 6.4
    batch: int = 64
    publishers: int = 6
    warmup: float = 3.0
    seconds: float = 6.0
    levels: tuple = ("none", 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, "precise")
    seed: int = 7
    dispatcher_settings: dict = field(default_factory=dict)
    serve_args: tuple = ()          # given to every role's edn serve (e.g. --durable-sync)
    dispatcher_workers: int = 1     # the dispatcher's gunicorn workers (each logs in a lane)
    dispatcher_args: tuple = ()     # given to the dispatcher's edn serve only (e.g. --store)

    @classmethod
    def quick(cls) -> "Setup":
        return cls(servers=4, per_server=2000, half_width=2.5, link_mbps=2.0, warmup=1.0,
                   seconds=2.0, levels=("none", 0.3, 0.6, "precise"))


# -- workload ----------------------------------------------------------------------------------

def narrow_rectangles(n: int, half_width: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0, 10, (n, D))
    half = rng.uniform(0, half_width, (n, D))
    return np.round(np.clip(centre - half, 0, 10), 3), np.round(np.clip(centre + half, 0, 10), 3)


def partition_labels(lo: np.ndarray, hi: np.ndarray, setup: Setup) -> np.ndarray:
    """Server of each subscription: offline R-tree bulk loading (root fan-out = servers,
    equal loads) or at random."""
    if setup.partition == "random":
        return np.arange(len(lo)) % setup.servers
    from route_manager.partitioning import OfflineRTreePartitioner
    return OfflineRTreePartitioner().fit(lo, hi, setup.servers).labels_


def xpath_filter(lo, hi, symbol: int | None) -> str:
    """An XPath 1.0 filter: the ranges (extracted into the engine's box, the summary) and,
    with ``symbol``, an equality on the event's ``@sym`` that no summary carries (paper II:
    summaries over a subset of the attributes) -- it only makes exact matches rarer."""
    ranges = " and ".join(f"e:x{k} >= {float(a)!r} and e:x{k} <= {float(b)!r}"
                          for k, (a, b) in enumerate(zip(lo, hi)))
    return ranges if symbol is None else f"{ranges} and @sym = 'S{symbol}'"


def range_subscriptions(lo: np.ndarray, hi: np.ndarray, rows, notify_base: str, *,
                        first: int = 0, symbols: np.ndarray | None = None,
                        created: float) -> list:
    """One durable subscription (WS-Eventing 2011, unwrapped) per row of ``rows``: the range
    filter of ``lo[i]..hi[i]`` (with ``symbols``, the XPath filter with the symbol test),
    NotifyTo ``{notify_base}/n/{first + i}``, id ``b{first + i}``."""
    from matchers import FilterSpec
    from subscription_manager.messages import UNWRAP
    from subscription_manager.store import Subscription
    from subscription_manager.versions import VERSIONS
    from wsframework.addressing import EndpointReference
    from wsframework.soap import SoapVersion

    return [Subscription(
        id=f"b{first + i}", topic=TOPIC, topic_uid="", version=VERSIONS["2011"],
        soap_version=SoapVersion.SOAP12.value,
        filter=(FilterSpec(RANGES_DIALECT, range_filter(lo[i], hi[i])) if symbols is None
                else FilterSpec(XPATH10, xpath_filter(lo[i], hi[i], int(symbols[i])),
                                (("e", GRID_EVENTS),))),
        notify_to=EndpointReference(f"{notify_base}/n/{first + i}"), end_to=None,
        format=UNWRAP, expires=None, expires_kind="duration", created=created) for i in rows]


def import_subscriptions(network: LocalNetwork, server: str, lo: np.ndarray, hi: np.ndarray,
                         first: int, *, symbols: np.ndarray | None = None,
                         chunk: int = 2500) -> None:
    """Store one subscription per row on ``server`` (NotifyTo: the sink) in bulk."""
    from subscription_manager.server.moves import subscriptions_element
    from wsframework.transport import HttpTransport

    admin = AdminClient(network.servers[server].base_url, network.token,
                        transport=HttpTransport(timeout=(3.0, 600.0)))
    now = time.time()
    for start in range(0, len(lo), chunk):
        subscriptions = range_subscriptions(lo, hi, range(start, min(start + chunk, len(lo))),
                                            network.sink.url, first=first, symbols=symbols,
                                            created=now)
        admin.call(protocol.ImportSubscriptions(
            Topic=TOPIC, Subscriptions=subscriptions_element(TOPIC, subscriptions)))


def batch_payloads(network: LocalNetwork, points: np.ndarray, batch: int,
                   first_id: int = 0, symbols: np.ndarray | None = None) -> list[bytes]:
    """Pre-built SOAP envelopes, each an ``edn:EventBatch`` of ``batch`` events."""
    client = SoapClient()
    url = f"{network.dispatcher.base_url}/topics/{TOPIC}"
    payloads = []
    for start in range(0, len(points) - batch + 1, batch):
        body = etree.Element(EVENT_BATCH, nsmap={"edn": EDN})
        body.set("Topic", TOPIC)
        for k in range(start, start + batch):
            event = event_element(points[k], first_id + k)
            if symbols is not None:
                event.set("sym", f"S{int(symbols[k])}")
            body.append(event)
        payloads.append(client.envelope(url, PUBLISH_ACTION, body))
    return payloads


_MESSAGE_ID = re.compile(rb"(<wsa:MessageID[^>]*>)[^<]*(</wsa:MessageID>)")


def with_fresh_message_id(payload: bytes) -> bytes:
    """``payload`` with a new ``wsa:MessageID``: a root dispatcher publishes a repeated
    MessageID once (it is a publisher's retry), so every post of a pre-built batch is new."""
    return _MESSAGE_ID.sub(rb"\g<1>urn:uuid:" + str(uuid.uuid4()).encode() + rb"\g<2>",
                           payload, count=1)


class Publisher:
    """``threads`` closed-loop publishers, each POSTing pre-built batches over one keep-alive
    connection as fast as the dispatcher answers, each post with a fresh MessageID.
    ``payloads`` can be swapped while running (the event distribution change of Fig. 17)."""

    def __init__(self, base_url: str, payloads: list[bytes], batch: int, threads: int = 3):
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.https = parts.scheme == "https"
        self.path = f"/topics/{TOPIC}"
        self.payloads = payloads
        self.batch = batch
        self.sent_events = 0
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True,
                                          name=f"publisher-{k}") for k in range(threads)]

    def start(self) -> "Publisher":
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, k: int) -> None:
        headers = {"Content-Type": 'application/soap+xml; charset=utf-8; action="%s"' % PUBLISH_ACTION}
        connection = None
        i = k
        while not self._stop.is_set():
            payloads = self.payloads
            payload = with_fresh_message_id(payloads[i % len(payloads)])
            i += len(self._threads)
            try:
                if connection is None:
                    connection = (http.client.HTTPSConnection(self.host, self.port, timeout=30,
                                                              context=process_client_context())
                                  if self.https else
                                  http.client.HTTPConnection(self.host, self.port, timeout=30))
                connection.request("POST", self.path, payload, headers)
                response = connection.getresponse()
                response.read()
                if response.status >= 300:
                    raise RuntimeError(f"HTTP {response.status}")
                with self._lock:
                    self.sent_events += self.batch
            except Exception:
                with self._lock:
                    self.errors += 1
                if connection is not None:
                    connection.close()
                connection = None
                self._stop.wait(0.1)
        if connection is not None:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(35)


# -- making subscriptions in bulk ----------------------------------------------------------

BULK_CHUNK = 5_000


def bulk_subscribe(base_url: str, token: str, topic: str, lo: np.ndarray, hi: np.ndarray,
                   notify_to, indices=None) -> list[str]:
    """Range subscriptions ``lo[i]``..``hi[i]`` for each ``i`` of ``indices`` (default all),
    made at the source or server ``base_url`` with SubscribeMany in chunks of
    :data:`BULK_CHUNK`, each notifying ``notify_to(i)``; their ids. RuntimeError if any is
    refused."""
    from subscription_manager.bulk_subscribe import SubscribeMany, parse_results, requests_element
    from subscription_manager.client import subscribe_body
    from wsframework.transport import HttpTransport
    # a chunk into a server holding many takes longer than an admin call's usual 10 s
    admin = AdminClient(base_url, token, transport=HttpTransport(timeout=(3.0, 600.0)))
    indices = list(range(len(lo)) if indices is None else indices)
    ids = []
    for start in range(0, len(indices), BULK_CHUNK):
        bodies = [subscribe_body("2011", notify_to(i), expires="PT10H",
                                 filter=range_filter(lo[i], hi[i]), dialect=RANGES_DIALECT)
                  for i in indices[start:start + BULK_CHUNK]]
        answers = parse_results(admin.call(SubscribeMany(
            Topic=topic, Requests=requests_element("2011", bodies))).Results)
        refused = [a for a in answers if not hasattr(a, "id")]
        if refused:
            raise RuntimeError(f"bulk subscribe refused some: {refused[:3]}")
        ids += [a.id for a in answers]
    return ids


# -- reading the processes -----------------------------------------------------------------

def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user + system) of every live process in process group ``pgid``."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after "comm": state ppid pgrp ...
            total += int(fields[11]) + int(fields[12])
    return total / _CLK_TCK


def dispatcher_counters(network: LocalNetwork) -> tuple[Counters, dict]:
    figures = network.dispatcher_stats()
    seconds = ("time", "cpu", "route_cpu", "forward_cpu", "busy")
    reading = Counters(**{name: (float if name in seconds else int)(float(figures[f"counters.{name}"]))
                          for name in seconds + ("events", "copies", "sent", "bytes_out")},
                       servers=int(figures["servers"]))
    return reading, figures


class CpuMeter:
    """CPU seconds per process kind between :meth:`start` and :meth:`stop`."""

    def __init__(self, network: LocalNetwork):
        self.network = network

    def read(self) -> dict[str, float]:
        n = self.network
        return {"dispatcher": group_cpu_seconds(n.dispatcher.proc.pid),
                "servers": sum(group_cpu_seconds(s.proc.pid) for s in n.servers.values()),
                "bench": time.process_time(), "time": time.monotonic()}

    @staticmethod
    def loads(a: dict, b: dict) -> dict[str, float]:
        wall = b["time"] - a["time"]
        loads = {k: round((b[k] - a[k]) / wall, 3) for k in a if k != "time"}
        loads["machine"] = round(sum(loads.values()), 3)
        return loads


def configure(network: LocalNetwork, **settings) -> dict[str, str]:
    response = network.admin.call(contracts.Configure(Setting=[
        contracts.Figure(Name=k, Value=str(v)) for k, v in settings.items()]))
    return {f.Name: f.Value for f in response.Setting or []}


def measure(network: LocalNetwork, seconds: float, *,
            flow_timeout: float = 30.0) -> tuple[Measurement, dict]:
    """One measurement window of at least ``seconds``, from one admitted batch of events to
    a later one. Events enter in batches, and on a capped link at low precision a batch can
    take longer than the window to be admitted (each event is copied to every server): a
    window between two arbitrary instants would then count 0 or 1 batch, and the rate would
    be noise. So the window opens when the events counter moves, and closes at the first
    move after ``seconds`` (both bounded by ``flow_timeout``)."""
    meter = CpuMeter(network)
    a = _next_batch(network, dispatcher_counters(network)[0], flow_timeout)
    cpu_a = meter.read()
    time.sleep(seconds)
    b, figures = dispatcher_counters(network)
    if b.events == a.events:
        b = _next_batch(network, b, flow_timeout)
        figures = dispatcher_counters(network)[1]
    cpu_b = meter.read()
    return between(a, b), {"cpu": CpuMeter.loads(cpu_a, cpu_b), "boxes": int(figures["route_boxes"]),
                           "strategy": figures.get("route_batch_strategy", "?"),
                           "backpressure_timeouts": int(figures["backpressure_timeouts"])}


def _next_batch(network: LocalNetwork, since: Counters, timeout: float) -> Counters:
    """The first reading whose events counter moved past ``since`` (``since``'s successor
    when none did within ``timeout``)."""
    deadline = time.monotonic() + timeout
    reading = since
    while time.monotonic() < deadline:
        time.sleep(0.02)
        reading, _ = dispatcher_counters(network)
        if reading.events > since.events:
            return reading
    return reading


# -- the network -----------------------------------------------------------------------------

def start_network(setup: Setup, data_dir: Path, *, self_tuning: bool = False,
                  log=print, tls_dir: Path | None = None) -> tuple[LocalNetwork, dict]:
    """A running network with the subscriptions imported and every server's summary routed;
    with ``tls_dir``, every hop over mutual TLS (:class:`~edn.localnet.network.NetworkPki`)."""
    token = secrets.token_urlsafe(16)
    args = ["--link-mbps", str(setup.link_mbps), "--max-body", str(64 * 1024 * 1024),
            "--log-level", "warning"]
    if not self_tuning:
        args.append("--no-self-tuning")
    for key, value in setup.dispatcher_settings.items():
        args += ["--set", f"{key}={value}"]
    args += list(setup.serve_args) + list(setup.dispatcher_args)
    servers = [(f"s{i + 1:02d}", "local", 1) for i in range(setup.servers)]
    network = LocalNetwork(data_dir, servers, token=token, d=D, keep_bodies=False,
                           load_threshold=10 * setup.per_server, dispatcher_args=args,
                           tls_dir=tls_dir)
    for process in network.servers.values():
        # Peers exchange subscription-routing summaries (unused with the "local" placement
        # of imported subscriptions): keep those tiny and rare, so that the servers' CPU
        # goes to events.
        process.extra_args += ["--max-body", str(64 * 1024 * 1024), "--log-level", "warning",
                               "--set", "routing_precision=0.0005", "--set", "peer_interval=30"]
        process.extra_args += list(setup.serve_args)
    network.dispatcher.workers = setup.dispatcher_workers
    started = time.perf_counter()
    try:
        network.start()
        _populate(network, setup)
    except BaseException:
        network.close()
        raise
    info = _populate.info
    took = time.perf_counter() - started
    log(f"  {setup.servers} servers x {setup.per_server} subscriptions in d = {D} ready in "
        f"{took:.0f} s")
    return network, {**info, "setup_s": round(took, 1)}


def live_events_per_s(setup: Setup, precision, *, log=print, tls_dir: Path | None = None) -> float:
    """Events/s of a network started for the purpose (:func:`start_network`) at
    ``precision``, publishers saturating its dispatcher for ``setup.seconds`` after
    ``setup.warmup``; the network is stopped after."""
    with tempfile.TemporaryDirectory(prefix="edn-bench-live-") as tmp:
        network, _ = start_network(setup, Path(tmp), log=log, tls_dir=tls_dir)
        try:
            points, symbols = event_workload(setup, 64 * 100, setup.seed + 1)
            configure(network, precision=precision)
            publisher = Publisher(network.dispatcher.base_url,
                                  batch_payloads(network, points, setup.batch, symbols=symbols),
                                  setup.batch, setup.publishers).start()
            try:
                time.sleep(setup.warmup)  # the warm-up has no condition to wait on
                measured, _ = measure(network, setup.seconds)
            finally:
                publisher.stop()
            return round(measured.events_per_s, 1)
        finally:
            network.close()


def acknowledged_events_per_s(setup: Setup, precision, *, log=print) -> float:
    """Events/s the dispatcher acknowledges to publishers saturating it, counted by the
    publishers over ``setup.seconds`` after ``setup.warmup``: the measure for a dispatcher of
    several workers, whose own counters (GetStats) are each worker's."""
    # every worker starts at the precision (Configure would reach the one that takes it)
    setup = replace(setup, dispatcher_settings={**setup.dispatcher_settings,
                                                "initial_precision": precision})
    with tempfile.TemporaryDirectory(prefix="edn-bench-live-") as tmp:
        network, _ = start_network(setup, Path(tmp), log=log)
        try:
            points, symbols = event_workload(setup, 64 * 100, setup.seed + 1)
            publisher = Publisher(network.dispatcher.base_url,
                                  batch_payloads(network, points, setup.batch, symbols=symbols),
                                  setup.batch, setup.publishers).start()
            try:
                time.sleep(setup.warmup)  # the warm-up has no condition to wait on
                before, started = publisher.sent_events, time.perf_counter()
                time.sleep(setup.seconds)  # a measurement window, not a wait for a condition
                sent, took = publisher.sent_events - before, time.perf_counter() - started
            finally:
                publisher.stop()
            if publisher.errors:
                log(f"  {publisher.errors} publications failed")
            return round(sent / took, 1)
        finally:
            network.close()


def import_partitions(network: LocalNetwork, lo: np.ndarray, hi: np.ndarray,
                      labels: np.ndarray, per_server: int, *, symbols: np.ndarray | None = None,
                      timeout: float = 600) -> None:
    """Import subscription ``i`` on the ``labels[i]``-th server (in parallel), then wait until
    the root dispatcher's route updates account for every one (a child dispatcher of a tree
    reports its subtree's load)."""
    threads = [threading.Thread(target=import_subscriptions, args=(
        network, name, lo[labels == k], hi[labels == k], k * per_server * 10),
        kwargs={"symbols": symbols[labels == k] if symbols is not None else None})
        for k, name in enumerate(network.servers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = len(lo)

    def routed():
        figures = network.dispatcher_stats("server.")
        return sum(int(v) for k, v in figures.items() if k.endswith(".load")) == total
    wait_until(routed, timeout=timeout, what="every server's route update")


def _populate(network: LocalNetwork, setup: Setup) -> None:
    network.create_topic(TOPIC)
    lo, hi = narrow_rectangles(setup.servers * setup.per_server, setup.half_width, setup.seed)
    labels = partition_labels(lo, hi, setup)
    symbols = (np.random.default_rng(setup.seed + 2).integers(0, setup.symbols, len(lo))
               if setup.symbols else None)
    import_partitions(network, lo, hi, labels, setup.per_server, symbols=symbols)
    _populate.info = {"lo": lo, "hi": hi, "symbols": symbols}


def exact_matches_per_event(lo: np.ndarray, hi: np.ndarray, points: np.ndarray,
                            symbols=None, event_symbols=None) -> float:
    hits = 0
    for start in range(0, len(points), 50):
        p = points[start:start + 50, None, :]
        inside = ((lo[None] <= p) & (hi[None] >= p)).all(axis=2)
        if symbols is not None:
            inside &= symbols[None, :] == event_symbols[start:start + 50, None]
        hits += int(inside.sum())
    return hits / len(points)


def event_workload(setup: Setup, n: int, seed: int, kind: str = "uniform"):
    """``n`` event points (uniform in [0, 10]^8, or normal(9.5, 0.25) as in Fig. 17) and
    their symbols."""
    from route_manager.workloads import normal_events, uniform_events
    rng = np.random.default_rng(seed)
    points = uniform_events(n, D, rng) if kind == "uniform" else normal_events(n, D, rng)
    symbols = rng.integers(0, setup.symbols, n) if setup.symbols else None
    return np.round(points, 3), symbols


def warm_cuts(network: LocalNetwork, levels) -> float:
    """Cut every server's summary at every level once (cached at the dispatcher), so the
    measurements do not include the first cut's cost."""
    started = time.perf_counter()
    for level in levels:
        configure(network, precision=level)
    configure(network, precision="precise")
    return time.perf_counter() - started


# -- the experiment ----------------------------------------------------------------------------

def sweep(network: LocalNetwork, setup: Setup, publisher: Publisher, log=print,
          bar=None) -> list[dict]:
    """One measured point per precision level; ``bar`` (a progress bar) advances per level."""
    rows = []
    for level in setup.levels:
        if bar is not None:
            bar.describe(f"precision {level}")
        precision = parse_precision(level)
        configure(network, precision=precision)
        time.sleep(setup.warmup)
        m, extra = measure(network, setup.seconds)
        row = {"precision": precision, "label": format_precision(precision),
               "tp_measured": round(m.events_per_s, 1), "t_f_us": round(m.t_f * 1e6, 1),
               "t_d_us": round(m.t_d * 1e6, 2), "t_c_us": round(m.t_c * 1e6, 2),
               "hit_ratio": round(m.hit_ratio, 4), "message_bytes": round(m.message_size, 1),
               "bytes_out_per_s": round(m.bytes_out_per_s), "boxes": extra["boxes"],
               "route_strategy": extra["strategy"],
               "cpu_dispatcher_self": round(m.cpu, 3),
               **{f"cpu_{k}": v for k, v in extra["cpu"].items()},
               "backpressure_timeouts": extra["backpressure_timeouts"]}
        rows.append(row)
        log(f"  {row['label']:>8}: {row['tp_measured']:7.1f} events/s  R {row['hit_ratio']:.3f}  "
            f"T_d {row['t_d_us']:6.1f} us  T_f {row['t_f_us']:5.0f} us  T_c {row['t_c_us']:5.1f} us  "
            f"out {row['bytes_out_per_s'] / 1e6:5.2f} MB/s  CPU dispatcher "
            f"{row['cpu_dispatcher']:.2f} servers {row['cpu_servers']:.2f} bench "
            f"{row['cpu_bench']:.2f} machine {row['cpu_machine']:.2f}")
        if bar is not None:
            bar.advance()
    return rows


@dataclass
class SweepRun:
    """What one :func:`precision_sweep` measured: a row per precision level (see :func:`sweep`)."""

    rows: list[dict]
    info: dict                  # start_network's: setup_s and the subscriptions' boxes
    matches_per_event: float    # exact matches per event of the published workload
    notifications: int
    publisher_errors: int


def precision_sweep(setup: Setup, log=print) -> SweepRun:
    """Start the network of ``setup`` in a throw-away directory, saturate it with batches of
    uniform events and measure one row per precision level (the throughput benchmark's run,
    also used to compare dispatcher settings on the same network)."""
    with tempfile.TemporaryDirectory(prefix="edn-bench-tp-") as tmp:
        network, info = start_network(setup, Path(tmp), log=log)
        try:
            points, event_symbols = event_workload(setup, 64 * 200, setup.seed + 1)
            matches = exact_matches_per_event(info["lo"], info["hi"], points[:2000],
                                              info["symbols"], event_symbols)
            warm_s = warm_cuts(network, setup.levels)
            log(f"  cut every summary at every precision once: {warm_s:.1f} s; "
                f"{matches:.2f} exact matches per event")
            publisher = Publisher(network.dispatcher.base_url,
                                  batch_payloads(network, points, setup.batch,
                                                 symbols=event_symbols), setup.batch,
                                  setup.publishers).start()
            try:
                with progress.progress("throughput sweep", total=len(setup.levels),
                                       unit="level") as bar:
                    rows = sweep(network, setup, publisher, log, bar)
            finally:
                publisher.stop()
            notifications = network.sink.count
        finally:
            network.close()
    return SweepRun(rows, info, matches, notifications, publisher.errors)
