"""``edn bench storage``: what "acknowledged means on disk" costs, side by side in one run.

Every figure is taken for four stores, alternating them so the shared machine's drift falls
on all:

* ``normal`` -- SQLite, ``edn serve --durable-sync normal`` (committed, not synced: survives
  ``kill -9``, not a power cut);
* ``full`` -- SQLite, the default: an fdatasync of the store's log before the answer, shared
  by the requests waiting at once;
* ``postgresql`` -- ``--store postgresql://...``: a local PostgreSQL (``fsync=on``,
  ``synchronous_commit=on``), over its Unix socket;
* ``postgresql_standby`` -- the same with a synchronous standby (another cluster on this
  machine, streaming; ``synchronous_standby_names`` names it, so a commit returns once the
  standby has flushed it too).

The figures:

* ``fdatasync_p50_ms`` / ``_p99_ms`` -- this disk's own sync time (4 KB appended each time),
  for reading the rest: on a disk with a volatile cache honoured by fsync it is 0.1 ms, on a
  spinning one 5-10 ms;
* ``subscribe_per_s_*`` -- durable Subscribes a source answers, from ``CLIENTS`` concurrent
  clients (each Subscribe is a commit the answer waits for);
* ``publish_per_s_*`` -- publications a source acknowledges (202) on a topic with
  ``PUBLISH_FANOUT`` subscriptions, each publication committing its notifications to the
  outbox;
* ``live_events_per_s_*`` -- the live network (:mod:`benchmarks.livenet`: a dispatcher with
  its durable log, servers with their outboxes; link uncapped), every role at that setting;
* ``*_full_vs_normal`` -- the ratio of the medians (the goal for live events/s: at least
  0.8); ``*_postgresql_vs_full`` and ``*_postgresql_standby_vs_full`` likewise;
* ``commits_per_sync_full`` -- per ``full`` round, the source's commits over its syncs (from
  its ``edn_store_*`` metrics): how many commits, from the 16 clients, shared one sync;
* ``dispatcher_events_per_s_workers_1`` / ``_2`` -- events/s a dispatcher with its durable
  log on the local PostgreSQL acknowledges with one and with two gunicorn workers (each
  logging in a lane of its own), counted by publishers saturating it, rounds alternated;
  ``dispatcher_workers_2_vs_1`` is the ratio of the medians. Every role shares this
  machine's cores: the figure says what a second worker adds here, not on a host of its own;
* ``host_loss`` -- as root (the lab of hosts): :mod:`benchmarks.lab.host_loss`, the
  primary's host lost under load: acknowledged notifications and subscriptions lost, and the
  time from the cut to the first acknowledgement after the failover.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import requests

from edn.localnet.processes import ServerProcess
from wsframework.admin import AdminClient

from ..livenet import Setup, acknowledged_events_per_s, live_events_per_s

MODES = ("normal", "full", "postgresql", "postgresql_standby")
_SQLITE = ("normal", "full")
_STANDBY = "bench_standby"
CLIENTS = 16
PUBLISH_FANOUT = 50


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _fdatasync_times(directory: Path, n: int = 300) -> list[float]:
    path = directory / "sync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return sorted(times)


def _envelopes(topic: str, body: bytes, action: str, n: int) -> list[bytes]:
    from lxml import etree

    from wsframework.addressing import WsaVersion, request_headers
    from wsframework.soap import SoapVersion, build_envelope
    element = etree.fromstring(body)
    return [build_envelope(SoapVersion.SOAP12, element,
                           request_headers(WsaVersion.WSA10, topic, action)) for _ in range(n)]


def _rate(url: str, envelopes: list[bytes], expect: int) -> float:
    """Requests/s of ``envelopes`` posted to ``url`` by :data:`CLIENTS` threads, each on one
    kept-alive connection; every answer must be ``expect``."""
    share = [envelopes[k::CLIENTS] for k in range(CLIENTS)]
    failures = []

    def client(mine):
        with requests.Session() as session:
            for envelope in mine:
                answer = session.post(url, data=envelope, timeout=30,
                                      headers={"Content-Type": "application/soap+xml"})
                if answer.status_code != expect:
                    failures.append(answer.status_code)
    threads = [threading.Thread(target=client, args=(mine,)) for mine in share]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed: {failures[:5]}")
    return len(envelopes) / took


class Databases:
    """A local PostgreSQL primary and its streaming standby, both on this machine; the
    standby is made synchronous or not per round (:meth:`for_mode`), and every round gets a
    database of its own."""

    def __init__(self, base: Path):
        from benchmarks.postgres_cluster import PostgresCluster
        self.primary = PostgresCluster(base / "pg-primary", port=5432, settings={
            "wal_level": "replica", "max_wal_senders": "4", "shared_buffers": "128MB"})
        self.standby = PostgresCluster(base / "pg-standby", port=5433)
        self._databases = 0

    def start(self) -> "Databases":
        from benchmarks.postgres_cluster import run_checked
        self.primary.init().start()
        self.standby.root.mkdir(parents=True, exist_ok=True)
        self.standby.own_directory()
        run_checked(self.standby._as_owner(
            [str(self.standby.bin / "pg_basebackup"), "-h", str(self.primary.socket_dir),
             "-p", str(self.primary.port), "-U", "postgres", "-D", str(self.standby.data),
             "-R", "-X", "stream"]))
        self.standby.configure({
            "port": str(self.standby.port),
            "unix_socket_directories": f"'{self.standby.socket_dir}'",
            "primary_conninfo": f"'host={self.primary.socket_dir} port={self.primary.port} "
                                f"user=postgres application_name={_STANDBY}'"})
        self.standby.start()
        return self

    def for_mode(self, mode: str) -> str:
        """A new database for a round at ``mode``, the standby synchronous or not."""
        names = f"'{_STANDBY}'" if mode == "postgresql_standby" else "''"
        self.primary.psql(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
        self.primary.psql("SELECT pg_reload_conf()")
        if mode == "postgresql_standby":
            deadline = time.monotonic() + 30
            while self.primary.psql("SELECT sync_state FROM pg_stat_replication").strip() != "sync":
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby did not become synchronous")
                threading.Event().wait(0.1)
        self._databases += 1
        return self.primary.create_database(f"bench_{self._databases}")

    def close(self) -> None:
        self.standby.close()
        self.primary.close()


def _serve_args(mode: str, databases: Databases | None) -> list[str]:
    if mode in _SQLITE:
        return ["--durable-sync", mode]
    return ["--store", databases.for_mode(mode)]


def _source_rates(mode: str, base: Path, subscribes: int, publishes: int, sink_url: str,
                  databases: Databases | None) -> tuple[float, float, float | None]:
    from subscription_manager.client import subscribe_body
    from wsframework.publisher import PUBLISH_ACTION
    from lxml import etree
    with ServerProcess("source", data_dir=base / f"source-{mode}-{time.monotonic_ns()}",
                       extra_args=[*_serve_args(mode, databases), "--log-level", "warning"]
                       ) as source:
        AdminClient(source.base_url, source.admin_token).create_topic("stocks")
        topic = f"{source.base_url}/topics/stocks"
        subscribe = etree.tostring(subscribe_body("2011", sink_url + "/n", expires="PT1H"))
        from subscription_manager.versions import VERSIONS
        action = VERSIONS["2011"].action("Subscribe")
        subscribe_rate = _rate(topic, _envelopes(topic, subscribe, action, subscribes), 200)
        # publications on a topic of their own, with PUBLISH_FANOUT subscriptions
        AdminClient(source.base_url, source.admin_token).create_topic("prices")
        prices = f"{source.base_url}/topics/prices"
        _rate(prices, _envelopes(prices, subscribe, action, PUBLISH_FANOUT), 200)
        quote = b'<q:quote xmlns:q="urn:q"><q:price>1</q:price></q:quote>'
        publish_rate = _rate(prices, _envelopes(prices, quote, PUBLISH_ACTION, publishes), 202)
        return subscribe_rate, publish_rate, _commits_per_sync(source, mode)


def _store_figures(source: ServerProcess) -> dict[str, float]:
    text = requests.get(source.base_url + "/metrics", timeout=10,
                        headers={"Authorization": f"Bearer {source.admin_token}"}).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("edn_store_syncs_total", "edn_store_commits_synced_total"):
            values[name] = values.get(name, 0.0) + float(value)
    return values


def _commits_per_sync(source: ServerProcess, mode: str) -> float | None:
    """From the source's /metrics: commits covered per sync (None at ``normal``). The
    workers' counters reach /metrics within a mirror interval (a second): read until two
    reads a mirror interval apart agree."""
    if mode != "full":
        return None
    from wsframework.metrics import MIRROR_INTERVAL
    last, deadline = None, time.monotonic() + 10
    while time.monotonic() < deadline:
        values = _store_figures(source)
        if values.get("edn_store_syncs_total") and values == last:
            break
        last = values
        threading.Event().wait(MIRROR_INTERVAL * 1.2)
    syncs = last.get("edn_store_syncs_total") if last else None
    return round(last["edn_store_commits_synced_total"] / syncs, 2) if syncs else None


def _live(mode: str, setup: Setup, databases: Databases | None) -> float:
    return live_events_per_s(replace(setup, serve_args=tuple(_serve_args(mode, databases))),
                             "precise", log=_log)


def run(quick: bool = False) -> dict:
    from benchmarks.postgres_cluster import unavailable_reason
    from edn.sink import FastSink
    rounds = 1 if quick else 4
    subscribes, publishes = (200, 200) if quick else (2_000, 2_000)
    live_setup = replace(Setup.quick(), servers=2, per_server=300, link_mbps=10_000.0,
                         warmup=0.5 if quick else 2.0, seconds=1.0 if quick else 4.0,
                         publishers=4)
    why_not = unavailable_reason()
    modes = MODES if why_not is None else _SQLITE
    figures: dict = {"clients": CLIENTS, "rounds": rounds, "modes": list(modes)}
    if why_not:
        figures["postgresql_not_measured"] = why_not
    rates: dict[str, dict[str, list[float]]] = {m: {"subscribe": [], "publish": [], "live": []}
                                                for m in modes}
    with tempfile.TemporaryDirectory(prefix="edn-bench-storage-") as tmp:
        base = Path(tmp)
        os.chmod(base, 0o711)  # the PostgreSQL clusters below it run as the postgres user
        syncs = _fdatasync_times(base)
        figures["fdatasync_p50_ms"] = round(statistics.median(syncs) * 1e3, 3)
        figures["fdatasync_p99_ms"] = round(syncs[int(len(syncs) * 0.99) - 1] * 1e3, 3)
        databases = Databases(base).start() if why_not is None else None
        try:
            with FastSink() as sink:
                for k in range(rounds):
                    for mode in (modes if k % 2 == 0 else modes[::-1]):
                        subscribe, publish, shared = _source_rates(
                            mode, base, subscribes, publishes, sink.url, databases)
                        if shared is not None:
                            figures.setdefault("commits_per_sync_full", []).append(shared)
                        rates[mode]["subscribe"].append(round(subscribe, 1))
                        rates[mode]["publish"].append(round(publish, 1))
                        _log(f"  {mode}: {subscribe:.0f} Subscribes/s, "
                             f"{publish:.0f} publications/s")
            for k in range(rounds if quick else 2):
                for mode in (modes if k % 2 == 0 else modes[::-1]):
                    rates[mode]["live"].append(_live(mode, live_setup, databases))
                    _log(f"  {mode}: live {rates[mode]['live'][-1]} events/s")
        finally:
            if databases is not None:
                databases.close()
    for kind, key in (("subscribe", "subscribe_per_s"), ("publish", "publish_per_s"),
                      ("live", "live_events_per_s")):
        for mode in modes:
            figures[f"{key}_{mode}"] = rates[mode][kind]
        full = statistics.median(rates["full"][kind])
        for mode in modes:
            if mode == "full":
                continue
            other = statistics.median(rates[mode][kind])
            ratio = (full / other) if mode == "normal" else (other / full)
            name = "full_vs_normal" if mode == "normal" else f"{mode}_vs_full"
            figures[f"{key}_{name}"] = round(ratio, 3) if other and full else None
    figures["live_servers"] = live_setup.servers
    if why_not is None:
        figures.update(_dispatcher_workers(live_setup, rounds if quick else 2))
    figures["host_loss"] = _host_loss(quick)
    return figures


def _dispatcher_workers(setup: Setup, rounds: int) -> dict:
    """Events/s acknowledged by a dispatcher of one and of two workers, its durable log on
    a local PostgreSQL (a database of its own each round), every other role on SQLite."""
    from benchmarks.postgres_cluster import PostgresCluster
    setup = replace(setup, publishers=8)  # connections enough to reach every worker
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="edn-bench-workers-") as tmp:
        os.chmod(tmp, 0o711)
        with PostgresCluster(Path(tmp) / "pg", settings={"shared_buffers": "128MB"}) as cluster:
            for k in range(rounds):
                for workers in ((1, 2) if k % 2 == 0 else (2, 1)):
                    database = cluster.create_database(f"workers_{k}_{workers}")
                    rate = acknowledged_events_per_s(
                        replace(setup, dispatcher_workers=workers,
                                dispatcher_args=("--store", database)), "precise", log=_log)
                    rates[workers].append(rate)
                    _log(f"  dispatcher of {workers} worker(s) on PostgreSQL: {rate} events/s")
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    return {"dispatcher_events_per_s_workers_1": rates[1],
            "dispatcher_events_per_s_workers_2": rates[2],
            "dispatcher_workers_2_vs_1": round(two / one, 3) if one else None}


def _host_loss(quick: bool) -> dict:
    from benchmarks.lab import why_not_available
    from benchmarks.postgres_cluster import unavailable_reason
    reason = why_not_available() or unavailable_reason()
    if reason:
        return {"not_measured": reason}
    from benchmarks.lab.host_loss import run_host_loss
    size = dict(subscriptions=20, before_s=3.0, after_s=3.0) if quick else \
        dict(subscriptions=100, before_s=10.0, after_s=10.0)
    return run_host_loss(rate=20.0, log=_log, **size).figures()
