"""``edn bench storage``: what "acknowledged means on disk" costs, side by side in one run.

Every figure is taken for ``edn serve --durable-sync normal`` (committed, not synced: survives
``kill -9``, not a power cut) and ``full`` (the default: an fdatasync of the store's log
before the answer, shared by the requests waiting at once), alternating the two so the
shared machine's drift falls on both:

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
  0.8);
* ``commits_per_sync_full`` -- per ``full`` round, the source's commits over its syncs (from
  its ``edn_store_*`` metrics): how many commits, from the 16 clients, shared one sync.

PostgreSQL is not a backend yet: its figures are not here.
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

from ..livenet import Setup, live_events_per_s

MODES = ("normal", "full")
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


def _source_rates(mode: str, base: Path, subscribes: int, publishes: int,
                  sink_url: str) -> tuple[float, float, float | None]:
    from subscription_manager.client import subscribe_body
    from wsframework.publisher import PUBLISH_ACTION
    from lxml import etree
    with ServerProcess("source", data_dir=base / f"source-{mode}-{time.monotonic_ns()}",
                       extra_args=["--durable-sync", mode, "--log-level", "warning"]) as source:
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


def _live(mode: str, setup: Setup) -> float:
    return live_events_per_s(replace(setup, serve_args=("--durable-sync", mode)), "precise",
                             log=_log)


def run(quick: bool = False) -> dict:
    from edn.sink import FastSink
    rounds = 1 if quick else 4
    subscribes, publishes = (200, 200) if quick else (2_000, 2_000)
    live_setup = replace(Setup.quick(), servers=2, per_server=300, link_mbps=10_000.0,
                         warmup=0.5 if quick else 2.0, seconds=1.0 if quick else 4.0,
                         publishers=4)
    figures: dict = {"clients": CLIENTS, "rounds": rounds}
    rates: dict[str, dict[str, list[float]]] = {m: {"subscribe": [], "publish": [], "live": []}
                                                for m in MODES}
    with tempfile.TemporaryDirectory(prefix="edn-bench-storage-") as tmp:
        base = Path(tmp)
        syncs = _fdatasync_times(base)
        figures["fdatasync_p50_ms"] = round(statistics.median(syncs) * 1e3, 3)
        figures["fdatasync_p99_ms"] = round(syncs[int(len(syncs) * 0.99) - 1] * 1e3, 3)
        with FastSink() as sink:
            for k in range(rounds):
                order = MODES if k % 2 == 0 else MODES[::-1]
                for mode in order:
                    subscribe, publish, shared = _source_rates(mode, base, subscribes,
                                                               publishes, sink.url)
                    if shared is not None:
                        figures.setdefault("commits_per_sync_full", []).append(shared)
                    rates[mode]["subscribe"].append(round(subscribe, 1))
                    rates[mode]["publish"].append(round(publish, 1))
                    _log(f"  {mode}: {subscribe:.0f} Subscribes/s, {publish:.0f} publications/s")
        for k in range(rounds if quick else 2):
            order = MODES if k % 2 == 0 else MODES[::-1]
            for mode in order:
                rates[mode]["live"].append(_live(mode, live_setup))
                _log(f"  {mode}: live {rates[mode]['live'][-1]} events/s")
    for kind, key in (("subscribe", "subscribe_per_s"), ("publish", "publish_per_s"),
                      ("live", "live_events_per_s")):
        for mode in MODES:
            figures[f"{key}_{mode}"] = rates[mode][kind]
        normal = statistics.median(rates["normal"][kind])
        full = statistics.median(rates["full"][kind])
        figures[f"{key}_full_vs_normal"] = round(full / normal, 3) if normal else None
    figures["live_servers"] = live_setup.servers
    return figures
