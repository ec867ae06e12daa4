"""Slow and idle clients against a real ``edn serve source``: does it keep serving?

A source (gunicorn, ``workers`` x ``threads``, the default worker class of ``edn serve``
unless ``worker_class`` says otherwise) is started on a free loopback port. Then, all on
loopback and all at once:

* ``idle_connections`` TCP connections that never send a byte;
* ``slowloris`` requests whose headers arrive one short line per second and never end;
* ``slow_bodies`` POSTs that declare a 64 KiB body and send one byte per second;

and meanwhile another client sends ``probes`` normal requests, alternating ``GET /health``
(a new connection each) and a small Subscribe (keep-alive), each with a 3 s timeout. Figures:
``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms`` of the probes that were answered, ``failed``
(no answer in time, or an error status), and ``baseline_p95_ms`` (the same probes before the
hostile connections were opened). Everything stops by itself: the trickling stops when the
probes are done, and the probe phase ends after ``probe_budget_s`` whatever happened (the
probes not sent by then count as failed).
"""
from __future__ import annotations

import http.client
import resource
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path


from edn.gunicorn import default_worker_class
from edn.localnet.processes import ServerProcess
from edn.sink import NotificationSink
from subscription_manager.client import EventingClient
from wsframework.admin import AdminClient
from wsframework.transport import HttpTransport

_TOKEN = "bench-token"
_PROBE_TIMEOUT = 3.0


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))


class _Hostiles:
    """The idle, slowloris and slow-body connections, and the thread that trickles bytes."""

    _LORIS_HEAD = b"POST /topics/bench HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    _SLOW_BODY_HEAD = (b"POST /topics/bench HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       b"Content-Type: application/soap+xml\r\nContent-Length: 65536\r\n\r\n<")

    def __init__(self, port: int):
        self.port = port
        self.idle: list[socket.socket] = []
        self.loris: list[socket.socket] = []
        self.slow_bodies: list[socket.socket] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, name="slowclients-trickle",
                                        daemon=True)

    def open(self, idle: int, slowloris: int, slow_bodies: int) -> None:
        self.idle += self._connect(idle, b"")
        self.loris += self._connect(slowloris, self._LORIS_HEAD)
        self.slow_bodies += self._connect(slow_bodies, self._SLOW_BODY_HEAD)
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


def _probe(base_url: str, sink_url: str, count: int, budget: float) -> tuple[list[float], int]:
    """``count`` normal requests, alternating GET /health (new connection) and Subscribe;
    returns the latencies (ms) of the good answers and how many failed."""
    latencies: list[float] = []
    failed = 0
    transport = HttpTransport(timeout=(_PROBE_TIMEOUT, _PROBE_TIMEOUT))
    client = EventingClient("2011", transport=transport)
    deadline = time.monotonic() + budget
    host, port = base_url.rsplit("/", 1)[-1].split(":")
    try:
        for n in range(count):
            if time.monotonic() > deadline:
                failed += count - n
                break
            started = time.perf_counter()
            try:
                if n % 2 == 0:
                    conn = http.client.HTTPConnection(host, int(port), timeout=_PROBE_TIMEOUT)
                    try:
                        conn.request("GET", "/health")
                        response = conn.getresponse()
                        response.read()
                        ok = response.status == 200
                    finally:
                        conn.close()
                else:
                    client.subscribe(base_url + "/topics/bench", f"{sink_url}/p", expires="PT1H")
                    ok = True
            except Exception:
                ok = False
            if ok:
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                failed += 1
    finally:
        transport.close()
    return latencies, failed


def measure(*, idle: int, slowloris: int, slow_bodies: int, probes: int, workers: int = 2,
            threads: int = 8, worker_class: str | None = None,
            probe_budget_s: float = 60.0) -> dict:
    _raise_fd_limit(idle + slowloris + slow_bodies + 1024)
    data_dir = tempfile.mkdtemp(prefix="edn-bench-slowclients-")
    extra = ["--threads", str(threads), "--log-level", "error"]
    if worker_class:
        extra += ["--worker-class", worker_class]
    source = ServerProcess("source", data_dir=Path(data_dir), admin_token=_TOKEN,
                           workers=workers, extra_args=extra)
    sink = NotificationSink(keep_bodies=False).start()
    hostiles = _Hostiles(source.port)
    figures: dict = {}
    try:
        source.start()
        AdminClient(source.base_url, _TOKEN).create_topic("bench")
        baseline, baseline_failed = _probe(source.base_url, sink.url, min(probes, 50), 20.0)
        hostiles.open(idle, slowloris, slow_bodies)
        time.sleep(0.5)  # let the server take them all in
        started = time.monotonic()
        latencies, failed = _probe(source.base_url, sink.url, probes, probe_budget_s)
        figures = {
            "worker_class": worker_class or default_worker_class("source"),
            "workers": workers,
            "threads": threads,
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
            "probe_seconds": round(time.monotonic() - started, 2),
            "baseline_p95_ms": _round(_percentile(baseline, 0.95)),
            "baseline_failed": baseline_failed,
            "server_alive": source.proc.poll() is None,
        }
    finally:
        hostiles.close()
        sink.stop()
        if source.alive():
            source.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def run(quick: bool = False, worker_class: str | None = None) -> dict:
    if quick:
        return measure(idle=200, slowloris=20, slow_bodies=5, probes=40,
                       worker_class=worker_class, probe_budget_s=30.0)
    return measure(idle=2000, slowloris=200, slow_bodies=50, probes=200,
                   worker_class=worker_class, probe_budget_s=90.0)
