"""Slow and idle clients against every role (``source``, ``server``, ``dispatcher``): does
each keep serving?

Each role runs as a real ``edn serve`` process (gunicorn; the default worker class of
``edn serve ROLE`` unless ``worker_class`` says otherwise) on a free loopback port: the
source alone; the server and the dispatcher as a small network
(:class:`~edn.localnet.network.LocalNetwork`: one dispatcher and one server, a topic with one
subscription that takes every event, so each publication is routed and forwarded). Then,
against the role measured, all on loopback and all at once:

* ``idle_connections`` TCP connections that never send a byte;
* ``slowloris`` requests whose headers arrive one short line per second and never end;
* ``slow_bodies`` POSTs that declare a 64 KiB body and send one byte per second;

and meanwhile another client sends ``probes`` normal requests of that role, alternating
``GET /health`` (a new connection each) and the role's own small SOAP request over a
keep-alive connection: a Subscribe on the source and on the server, the publication of one
small event on the dispatcher (routed and forwarded to the server). Each has a 3 s timeout.
Figures per role: ``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms`` of the probes that were
answered, ``failed`` (no answer in time, or an error status), ``baseline_p95_ms`` (the same
probes before the hostile connections were opened), ``server_alive`` (the role's process
still runs). The top level holds every role's figures under ``roles`` and the worst of them
(most failed, highest percentiles, all alive?) under the same names. Everything stops by
itself: the trickling stops when the probes are done, and a probe phase ends after
``probe_budget_s`` whatever happened (the probes not sent by then count as failed).
"""
from __future__ import annotations

import http.client
import itertools
import resource
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from edn.gunicorn import default_worker_class
from edn.localnet.network import LocalNetwork, wait_until
from edn.localnet.processes import ServerProcess
from edn.sink import NotificationSink
from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import event_element, range_filter
from subscription_manager.client import EventingClient
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION
from wsframework.transport import HttpTransport

ROLES = ("source", "server", "dispatcher")
_TOKEN = "bench-token"
_PROBE_TIMEOUT = 3.0
_SOURCE_TOPIC = "bench"
_NET_TOPIC = "grid"
_D = 2  # dimensions of the network's events (x0, x1 in [0, 10])


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))


class _Hostiles:
    """The idle, slowloris and slow-body connections, and the thread that trickles bytes."""

    def __init__(self, port: int, path: str):
        self.port = port
        self._loris_head = b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path.encode()
        self._slow_body_head = (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                b"Content-Type: application/soap+xml\r\n"
                                b"Content-Length: 65536\r\n\r\n<" % path.encode())
        self.idle: list[socket.socket] = []
        self.loris: list[socket.socket] = []
        self.slow_bodies: list[socket.socket] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, name="slowclients-trickle",
                                        daemon=True)

    def open(self, idle: int, slowloris: int, slow_bodies: int) -> None:
        self.idle += self._connect(idle, b"")
        self.loris += self._connect(slowloris, self._loris_head)
        self.slow_bodies += self._connect(slow_bodies, self._slow_body_head)
        self._thread.start()

    def _connect(self, count: int, first: bytes) -> list[socket.socket]:
        opened = []
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=2.0)
                if first:
                    sock.sendall(first)
                opened.append(sock)
            except OSError:
                self.refused += 1
        return opened

    def _trickle(self) -> None:
        # Every second: one more header line per slowloris request, one more body byte per
        # slow body; until told to stop (the probe phase is bounded, so is this).
        n = 0
        while not self._stop.wait(1.0):
            n += 1
            for sock, data in ([(s, b"X-%d: a\r\n" % n) for s in self.loris]
                               + [(s, b"a") for s in self.slow_bodies]):
                try:
                    sock.sendall(data)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for sock in self.idle + self.loris + self.slow_bodies:
            try:
                sock.close()
            except OSError:
                pass


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _health(process: ServerProcess) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", process.port, timeout=_PROBE_TIMEOUT)
    try:
        conn.request("GET", "/health")
        response = conn.getresponse()
        response.read()
        return response.status == 200
    finally:
        conn.close()


def _probe(process: ServerProcess, request: Callable[[], bool], count: int,
           budget: float) -> tuple[list[float], int]:
    """``count`` normal requests, alternating GET /health (new connection) and the role's
    own ``request``; returns the latencies (ms) of the good answers and how many failed."""
    latencies: list[float] = []
    failed = 0
    deadline = time.monotonic() + budget
    for n in range(count):
        if time.monotonic() > deadline:
            failed += count - n
            break
        started = time.perf_counter()
        try:
            ok = _health(process) if n % 2 == 0 else request()
        except Exception:
            ok = False
        if ok:
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            failed += 1
    return latencies, failed


class _Target:
    """One role under test: its process, the path its hostile requests name, and its own
    small SOAP request (``request()`` -> answered well?)."""

    def __init__(self, role: str, process: ServerProcess, path: str,
                 request: Callable[[], bool]):
        self.role = role
        self.process = process
        self.path = path
        self.request = request


def _transport() -> HttpTransport:
    return HttpTransport(timeout=(_PROBE_TIMEOUT, _PROBE_TIMEOUT))


def _subscriber(process: ServerProcess, topic: str, sink: NotificationSink,
                transport: HttpTransport, **options) -> Callable[[], bool]:
    client = EventingClient("2011", transport=transport)
    numbers = itertools.count()

    def subscribe() -> bool:
        client.subscribe(f"{process.base_url}/topics/{topic}", f"{sink.url}/p{next(numbers)}",
                         expires="PT1H", **options)
        return True
    return subscribe


def _publisher(process: ServerProcess, transport: HttpTransport) -> Callable[[], bool]:
    client = SoapClient(transport)
    numbers = itertools.count()

    def publish() -> bool:
        n = next(numbers)
        point = ((n * 0.37) % 10, (n * 0.61) % 10)
        status = client.send(f"{process.base_url}/topics/{_NET_TOPIC}", PUBLISH_ACTION,
                             event_element(point, n))
        return status < 300
    return publish


def _measure_target(target: _Target, *, idle: int, slowloris: int, slow_bodies: int,
                    probes: int, probe_budget_s: float) -> dict:
    baseline, baseline_failed = _probe(target.process, target.request, min(probes, 50), 20.0)
    hostiles = _Hostiles(target.process.port, target.path)
    try:
        hostiles.open(idle, slowloris, slow_bodies)
        time.sleep(0.5)  # let the server take them all in
        started = time.monotonic()
        latencies, failed = _probe(target.process, target.request, probes, probe_budget_s)
        probe_seconds = time.monotonic() - started
    finally:
        hostiles.close()
    return {
        "idle_connections": len(hostiles.idle),
        "slowloris": len(hostiles.loris),
        "slow_bodies": len(hostiles.slow_bodies),
        "refused_connections": hostiles.refused,
        "probes": probes,
        "answered": len(latencies),
        "failed": failed,
        "p50_ms": _round(_percentile(latencies, 0.50)),
        "p95_ms": _round(_percentile(latencies, 0.95)),
        "p99_ms": _round(_percentile(latencies, 0.99)),
        "max_ms": _round(max(latencies) if latencies else None),
        "probe_seconds": round(probe_seconds, 2),
        "baseline_p95_ms": _round(_percentile(baseline, 0.95)),
        "baseline_failed": baseline_failed,
        "server_alive": target.process.alive(),
    }


def _process_args(worker_class: str | None, threads: int) -> list[str]:
    extra = ["--threads", str(threads), "--log-level", "error"]
    return extra + (["--worker-class", worker_class] if worker_class else [])


def _measure_source(data_dir: Path, sink: NotificationSink, *, workers: int, threads: int,
                    worker_class: str | None, **sizes) -> dict:
    source = ServerProcess("source", data_dir=data_dir / "source", admin_token=_TOKEN,
                           workers=workers, extra_args=_process_args(worker_class, threads))
    transport = _transport()
    try:
        source.start()
        AdminClient(source.base_url, _TOKEN).create_topic(_SOURCE_TOPIC)
        target = _Target("source", source, f"/topics/{_SOURCE_TOPIC}",
                         _subscriber(source, _SOURCE_TOPIC, sink, transport))
        return {"workers": workers, **_measure_target(target, **sizes)}
    finally:
        transport.close()
        if source.alive():
            source.stop()


def _measure_network(data_dir: Path, sink: NotificationSink, roles, *, workers: int,
                     threads: int, worker_class: str | None, **sizes) -> dict[str, dict]:
    """The server and the dispatcher, each measured in turn in one small network. The
    dispatcher runs one worker (its routes and queues live in its process); the server
    ``workers``."""
    network = LocalNetwork(data_dir / "net", [("s1", "local", workers)], token=_TOKEN, d=_D,
                           sink=sink, dispatcher_args=_process_args(worker_class, threads))
    server = network.servers["s1"]
    server.extra_args += _process_args(worker_class, threads)
    figures: dict[str, dict] = {}
    transport = _transport()
    try:
        network.start()
        network.create_topic(_NET_TOPIC)
        network.subscribe(np.zeros((1, _D)), np.full((1, _D), 10.0), threads=1,
                          versions=("2011",))  # every event goes to the server, then the sink
        targets = {
            # Tiny boxes at a corner no published event reaches: these probes add no load
            # to the dispatcher's measurement.
            "server": _Target("server", server, f"/topics/{_NET_TOPIC}", _subscriber(
                server, _NET_TOPIC, sink, transport, dialect=RANGES_DIALECT,
                filter=range_filter([10.0] * _D, [10.0] * _D))),
            "dispatcher": _Target("dispatcher", network.dispatcher, f"/topics/{_NET_TOPIC}",
                                  _publisher(network.dispatcher, transport)),
        }
        for role in roles:
            target = targets[role]
            role_workers = 1 if role == "dispatcher" else workers
            figures[role] = {"workers": role_workers, **_measure_target(target, **sizes)}
            if role == "dispatcher":  # the probes' events were routed and forwarded
                try:
                    wait_until(network.quiet, timeout=30, what="the dispatcher's queues drained")
                except AssertionError as exc:  # say what was still queued or pending, and where
                    raise AssertionError(
                        f"{exc}: dispatcher {network.dispatcher_stats('server.')}, server "
                        f"{network.server_stats('s1', 'pending')}, "
                        f"{network.server_stats('s1', 'delivery')}") from None
                stats = network.dispatcher_stats()
                figures[role]["events_forwarded"] = sum(
                    int(v) for k, v in stats.items()
                    if k.startswith("server.") and k.endswith(".sent"))
    finally:
        transport.close()
        network.close()
    return figures


def measure(*, idle: int, slowloris: int, slow_bodies: int, probes: int, workers: int = 2,
            threads: int = 8, worker_class: str | None = None, probe_budget_s: float = 60.0,
            roles=ROLES) -> dict:
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown roles {sorted(unknown)}; known: {', '.join(ROLES)}")
    _raise_fd_limit(idle + slowloris + slow_bodies + 1024)
    data_dir = Path(tempfile.mkdtemp(prefix="edn-bench-slowclients-"))
    sink = NotificationSink(keep_bodies=False).start()
    options = dict(idle=idle, slowloris=slowloris, slow_bodies=slow_bodies, probes=probes,
                   probe_budget_s=probe_budget_s, workers=workers, threads=threads,
                   worker_class=worker_class)
    per_role: dict[str, dict] = {}
    try:
        if "source" in roles:
            per_role["source"] = _measure_source(data_dir, sink, **options)
        network_roles = [r for r in roles if r != "source"]
        if network_roles:
            per_role.update(_measure_network(data_dir, sink, network_roles, **options))
    finally:
        sink.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    for role, figures in per_role.items():
        figures["worker_class"] = worker_class or default_worker_class(role)
        figures["threads"] = threads
    return {**_worst(per_role), "roles": {r: per_role[r] for r in roles if r in per_role}}


def _worst(per_role: dict[str, dict]) -> dict:
    """The figures of the role that fared worst, under the per-role names."""
    rows = list(per_role.values())

    def top(key):
        values = [r[key] for r in rows if r[key] is not None]
        return max(values) if values else None

    return {
        "idle_connections": min(r["idle_connections"] for r in rows),
        "slowloris": min(r["slowloris"] for r in rows),
        "slow_bodies": min(r["slow_bodies"] for r in rows),
        "refused_connections": sum(r["refused_connections"] for r in rows),
        "probes": sum(r["probes"] for r in rows),
        "failed": sum(r["failed"] for r in rows),
        **{key: top(key) for key in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "baseline_p95_ms")},
        "server_alive": all(r["server_alive"] for r in rows),
        "worst_role": max(per_role, key=lambda role: (per_role[role]["failed"],
                                                      per_role[role]["p95_ms"] or 0.0)),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def run(quick: bool = False, worker_class: str | None = None, roles=ROLES) -> dict:
    if quick:
        return measure(idle=200, slowloris=20, slow_bodies=5, probes=40, roles=roles,
                       worker_class=worker_class, probe_budget_s=30.0)
    return measure(idle=2000, slowloris=200, slow_bodies=50, probes=200, roles=roles,
                   worker_class=worker_class, probe_budget_s=90.0)
