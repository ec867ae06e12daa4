"""Every role's Prometheus metrics at ``{base}/metrics`` (Prometheus text exposition format).

Who may read it (an environment variable the application names,
:attr:`ServiceNames.metrics_access_env <wsframework.service.ServiceNames>`, by default
:data:`ACCESS_ENV`; read when the role is built, and a server may check it before any worker
starts with :func:`access_mode`):

``token`` (the default)
    only a request with the admin credential, ``Authorization: Bearer TOKEN`` (a Prometheus
    scrape config's ``authorization: {credentials_file: ...}``); anything else is a 401.
``loopback``
    also any request from a loopback address without the credential (a Prometheus or an
    exporter on the same host).
``open``
    everyone: an explicit choice for a network where the port is already fenced.

What is measured comes from the counters the roles already keep, read at scrape time (no
work on the event path), as :class:`Reading` values a role's reader returns. A few
histograms are observed on the event path, once per message or batch (see the roles'
modules; one multiprocess observation costs ~2 us).

Several gunicorn workers add up through prometheus_client's multiprocess mode: the arbiter
gives every worker ``PROMETHEUS_MULTIPROC_DIR`` (emptied at start, see
:mod:`edn.gunicorn`), each worker copies its readings into the memory-mapped files there
every :data:`MIRROR_INTERVAL` seconds and just before it answers a scrape, and the scraped
worker sums every worker's file. So a scrape shows the other workers' counters as they were
at most a second ago. Kinds of reading, by how workers combine:

``counter``  cumulative in each worker; summed, and kept after a worker exits (a Prometheus
             counter never goes down when a worker is replaced)
``gauge``    a worker's current amount (its queue); summed over the live workers
``max``      a value every worker holds (the precision in force); the largest live one
``shared``   read from state the workers share (the durable store: subscriptions, outbox,
             dead letters); the scraped worker's reading, never summed
``shared_counter``  the same for a cumulative count kept in shared state (a sequence number)
"""
from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from .http_routes import HttpRequest, HttpResponse, text

log = logging.getLogger(__name__)

_TORN_READS = 5  # reads of the workers' files before a scrape fails

__all__ = ["Reading", "RoleMetrics", "METRICS_PATH", "ACCESS_ENV", "ACCESS_MODES",
           "MULTIPROC_ENV", "access_mode", "prepare_multiproc_dir", "mark_worker_dead"]

METRICS_PATH = "/metrics"
ACCESS_ENV = "WSFRAMEWORK_METRICS_ACCESS"  # the default; an application names its own
ACCESS_MODES = ("token", "loopback", "open")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
MIRROR_INTERVAL = 1.0
KINDS = ("counter", "gauge", "max", "shared", "shared_counter")
_SHARED = ("shared", "shared_counter")
_GAUGE_MODES = {"gauge": "livesum", "max": "livemax"}


@dataclass(frozen=True)
class Reading:
    """One sample: ``name`` by Prometheus conventions (the application's prefix,
    :attr:`ServiceNames.metric_prefix <wsframework.service.ServiceNames>`; a counter's ends in
    ``_total``), ``labels`` only of bounded values (a server's name, never a subscription)."""
    name: str
    kind: str
    help: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


Reader = Callable[[], Iterable[Reading]]


def access_mode(value: str | None = None, env: str = ACCESS_ENV) -> str:
    """The access mode: ``value``, else the environment variable ``env``, else ``token``;
    anything but :data:`ACCESS_MODES` is a ValueError."""
    mode = (value if value is not None else os.environ.get(env, "token")).strip().lower()
    if mode not in ACCESS_MODES:
        raise ValueError(f"{env} must be one of {', '.join(ACCESS_MODES)}: {mode!r}")
    return mode


def prepare_multiproc_dir(path: Path) -> Path:
    """In the arbiter, before any worker: an empty directory for the workers' files (a
    previous run's counters must not be added to this one's) named in the environment the
    workers inherit."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def mark_worker_dead(pid: int) -> None:
    """In the arbiter when a worker exits: its live gauges no longer count (its counters
    do)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess
        multiprocess.mark_process_dead(pid)


def _multiprocess_values() -> None:
    # prometheus_client chooses how values are stored when it is first imported; the arbiter
    # may have imported it before it set the directory, so a worker chooses again here.
    from prometheus_client import values
    if values.ValueClass is values.MutexValue:
        values.ValueClass = values.MultiProcessValue()


def _is_loopback(address: str | None) -> bool:
    try:
        ip = ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


class RoleMetrics:
    """A role's metrics endpoint: register readers (:meth:`add_reader`) and histograms
    (:meth:`histogram`); serves ``GET {base}/metrics``. Every role reports its process
    readings, named with the service's metric prefix (``service.names.metric_prefix``)."""

    def __init__(self, service, *, access: str | None = None,
                 mirror_interval: float = MIRROR_INTERVAL):
        self.token = service.config.admin_token
        self.prefix = service.names.metric_prefix
        self.access = access_mode(access, service.names.metrics_access_env)
        self.multiproc_dir = os.environ.get(MULTIPROC_ENV) or None
        if self.multiproc_dir:
            _multiprocess_values()
        self._readers: list[Reader] = []
        self._histograms: list = []
        self._mirrored: dict[str, object] = {}  # name -> prometheus_client metric
        self._last: dict[tuple, float] = {}     # (name, labels) -> value already counted
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.add_reader(lambda: _process_readings(self.prefix, service.busy))
        gate = getattr(service, "gate", None)
        if gate is not None and gate.enabled:
            self.add_reader(lambda: _gate_readings(self.prefix, gate))
        group_sync = getattr(getattr(service, "store", None), "group_sync", None)
        if group_sync is not None:
            self.add_reader(lambda: _store_readings(self.prefix, group_sync))
        tls = getattr(service.config, "tls", None)
        if tls is not None:
            self.add_reader(lambda: _certificate_readings(self.prefix, tls.cert))
        service.http_routes.add(METRICS_PATH, self.handle, methods=("GET",))
        service.add_component(self)
        self._thread = None
        if self.multiproc_dir and mirror_interval > 0:
            self._thread = threading.Thread(target=self._mirror_loop, args=(mirror_interval,),
                                            name="metrics-mirror", daemon=True)
            self._thread.start()

    # -- composition ---------------------------------------------------------------------
    def add_reader(self, reader: Reader) -> None:
        self._readers.append(reader)

    def histogram(self, name: str, documentation: str, buckets: Iterable[float]):
        """A prometheus_client Histogram (seconds) observed by the role; in multiprocess mode
        its file is summed with the other workers'."""
        from prometheus_client import Histogram
        histogram = Histogram(name, documentation, buckets=tuple(buckets), registry=None)
        self._histograms.append(histogram)
        return histogram

    # -- reading -------------------------------------------------------------------------
    def readings(self) -> list[Reading]:
        out: list[Reading] = []
        for reader in self._readers:
            try:
                out.extend(reader())
            except Exception:  # one broken figure must not hide the others
                log.exception("a metrics reader failed")
        return out

    def exposition(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest
        readings = self.readings()
        registry = CollectorRegistry(auto_describe=False)
        if self.multiproc_dir:
            from prometheus_client import multiprocess
            self._mirror([r for r in readings if r.kind not in _SHARED])
            multiprocess.MultiProcessCollector(registry, path=self.multiproc_dir)
            registry.register(_ReadingsCollector([r for r in readings if r.kind in _SHARED]))
        else:
            registry.register(_ReadingsCollector(readings))
            for histogram in self._histograms:
                registry.register(histogram)
        for attempt in range(_TORN_READS):
            try:
                return generate_latest(registry)
            except RuntimeError:
                # prometheus_client reads the other workers' files without a lock: one
                # caught mid-write ("Read beyond file size") reads right a moment later
                if attempt == _TORN_READS - 1:
                    raise
                log.debug("a worker's metrics file was read mid-write; reading again")
        raise AssertionError("unreachable")

    def _mirror(self, readings: list[Reading]) -> None:
        """Copy this worker's readings into its multiprocess files."""
        from prometheus_client import Counter, Gauge
        with self._lock:
            for r in readings:
                metric = self._mirrored.get(r.name)
                labelnames = tuple(k for k, _ in r.labels)
                if metric is None:
                    if r.kind == "counter":
                        metric = Counter(r.name, r.help, labelnames, registry=None)
                    elif r.kind in _GAUGE_MODES:
                        metric = Gauge(r.name, r.help, labelnames, registry=None,
                                       multiprocess_mode=_GAUGE_MODES[r.kind])
                    else:
                        raise ValueError(f"unknown kind of reading {r.kind!r} ({r.name})")
                    self._mirrored[r.name] = metric
                child = metric.labels(*(v for _, v in r.labels)) if labelnames else metric
                if r.kind == "counter":
                    key = (r.name, r.labels)
                    delta = r.value - self._last.get(key, 0.0)
                    self._last[key] = r.value
                    if delta > 0:  # a counter that restarted (a removed channel) adds anew
                        child.inc(delta)
                else:
                    child.set(r.value)

    def _mirror_loop(self, interval: float) -> None:
        while True:  # at once, so a new worker counts in the sums from its start
            try:
                self._mirror([r for r in self.readings() if r.kind not in _SHARED])
            except Exception:
                log.exception("copying metrics to the multiprocess files failed")
            if self._stop.wait(interval):
                return

    # -- the endpoint --------------------------------------------------------------------
    def allowed(self, request: HttpRequest) -> bool:
        if self.access == "open":
            return True
        if self.access == "loopback" and _is_loopback(request.remote_addr):
            return True
        given = request.headers.get("authorization", "")
        scheme, _, credential = given.partition(" ")
        return (scheme.lower() == "bearer" and bool(credential)
                and hmac.compare_digest(credential.strip().encode(), self.token.encode()))

    def handle(self, request: HttpRequest) -> HttpResponse:
        if request.path != METRICS_PATH:
            return text(404, "not found\n")
        if not self.allowed(request):
            return text(401, "the metrics need the admin credential: "
                             "Authorization: Bearer TOKEN\n",
                        headers=[("WWW-Authenticate",
                                  f'Bearer realm="{self.prefix.rstrip("_")} metrics"'),
                                 ("Cache-Control", "no-store")])
        from prometheus_client import CONTENT_TYPE_LATEST
        return HttpResponse(200, [("Content-Type", CONTENT_TYPE_LATEST),
                                  ("Cache-Control", "no-store")], self.exposition())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.multiproc_dir:  # the last figures of a worker that stops
            try:
                self._mirror([r for r in self.readings() if r.kind not in _SHARED])
            except Exception:
                log.exception("copying metrics at close failed")


class _ReadingsCollector:
    """Readings as metric families (readings of one name share a family)."""

    def __init__(self, readings: list[Reading]):
        self._readings = readings

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        families: dict[str, object] = {}
        for r in self._readings:
            family = families.get(r.name)
            if family is None:
                labelnames = [k for k, _ in r.labels]
                if r.kind in ("counter", "shared_counter"):
                    family = CounterMetricFamily(r.name, r.help, labels=labelnames)
                else:
                    family = GaugeMetricFamily(r.name, r.help, labels=labelnames)
                families[r.name] = family
            family.add_metric([v for _, v in r.labels], r.value)
        return list(families.values())


def _certificate_readings(prefix: str, certificate) -> list[Reading]:
    """When the certificate the role serves with expires, read from its file at each scrape
    (so a renewed file shows once the workers reload it)."""
    from .tls import certificate_expiry
    return [Reading(f"{prefix}tls_certificate_expiry_seconds", "max",
                    "When the certificate this role serves HTTPS with expires (seconds since "
                    "the epoch; alert on it minus time())", certificate_expiry(certificate))]


def _store_readings(prefix: str, group_sync) -> list[Reading]:
    """The store's syncs before acknowledgements (:class:`~wsframework.store.GroupSync`):
    their count, their time (a slow disk shows here first) and the commits they covered
    (``commits / syncs``: how many requests shared a sync)."""
    return [
        Reading(f"{prefix}store_syncs_total", "counter",
                "fdatasyncs of the store's log made before acknowledging", group_sync.syncs),
        Reading(f"{prefix}store_sync_seconds_total", "counter",
                "Seconds those syncs took (rate over syncs: the disk's sync time)",
                group_sync.sync_seconds),
        Reading(f"{prefix}store_commits_synced_total", "counter",
                "Commits those syncs covered (over syncs: requests sharing a sync)",
                group_sync.commits_synced),
    ]


def _gate_readings(prefix: str, gate) -> list[Reading]:
    """The control gate (:mod:`wsframework.admission`): requests waiting for a slot, those
    told to come back later, and how long slots rested while events flowed."""
    return [
        Reading(f"{prefix}control_waiting", "gauge",
                "Control requests waiting for a slot now, per worker", gate.waiting),
        Reading(f"{prefix}control_refused_total", "counter",
                "Control requests answered EndpointUnavailable after control_wait",
                gate.refused),
        Reading(f"{prefix}control_rested_seconds_total", "counter",
                "Seconds control slots rested so that events kept their share", gate.rested),
    ]


def _process_readings(prefix: str, busy) -> list[Reading]:
    """What every role reports: its CPU and the time it had a request in hand
    (``rate(PREFIXbusy_seconds_total[1m])`` is its utilization, :mod:`wsframework.utilization`)."""
    return [
        Reading(f"{prefix}process_cpu_seconds_total", "counter",
                "CPU seconds of the role's worker processes", time.process_time()),
        Reading(f"{prefix}busy_seconds_total", "counter",
                "Seconds with at least one request in hand, per worker (rate: utilization)",
                busy.seconds()),
        Reading(f"{prefix}workers", "gauge", "Worker processes serving the role", 1),
    ]
