"""The event source over real HTTP: durable Subscribe throughput, and notifications per
second delivered to a local sink.

A real ``edn serve source`` process (gunicorn, one worker) is started on a free loopback
port with a throw-away data directory, and a :class:`~edn.sink.FastSink` (a counting sink in
its own process, tens of thousands of POSTs/s; the thread-per-connection
:class:`~edn.sink.NotificationSink` took a few thousand and capped the figure) listens on
another port. ``benchmarks/performance/delivery.py`` measures delivery alone, with the sink's ceiling.
Figures:

* ``subscribe_per_s`` -- Subscribe request/replies per second from ``clients`` threads, each
  with its own keep-alive connection; every reply is sent only after the subscription is
  committed to SQLite (WAL), so this is the durable rate;
* ``notifications_per_s`` -- ``subscriptions`` subscriptions that all match every event,
  ``events`` events published one by one: notifications delivered (counted at the sink)
  divided by the time from the first publication until the sink has them all;
* ``publish_per_s`` -- how fast the publisher got its 202s meanwhile (publication never
  waits for delivery).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import requests
from lxml import etree

from subscription_manager.client import EventingClient
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.ports import free_port
from wsframework.publisher import PUBLISH_ACTION
from edn.sink import FastSink
from wsframework.transport import HttpTransport

ADMIN_TOKEN = "bench-token"


class SourceProcess:
    """``edn serve source`` in a subprocess; waits for /health instead of sleeping."""

    def __init__(self, data_dir: str, settings: dict[str, str], extra_args=()):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "edn.cli", "serve", "source", "--host",
                   "127.0.0.1", "--port", str(self.port), "--data", data_dir,
                   f"--admin-token={ADMIN_TOKEN}", "--workers", "1", "--threads", "8", "--log-level", "warning",
                   "--access", "open"]  # anonymous publishers and subscribers
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        command += list(extra_args)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"source exited:\n{self.log.read().decode(errors='replace')}")
            try:
                if requests.get(self.base_url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise RuntimeError("source did not become healthy")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def _subscribe_rate(base_url: str, sink_url: str, total: int, clients: int) -> float:
    topic = base_url + "/topics/bench"
    per_client = total // clients
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def work(index: int) -> None:
        transport = HttpTransport()
        client = EventingClient("2011", transport=transport)
        try:
            barrier.wait()
            for n in range(per_client):
                client.subscribe(topic, f"{sink_url}/c{index}", expires="PT1H")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            transport.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return per_client * clients / elapsed


def run(quick: bool = False) -> dict:
    subscribes = 200 if quick else 1_000
    clients = 2 if quick else 4
    subscriptions = 200 if quick else 1_000
    events = 5 if quick else 20
    data_dir = tempfile.mkdtemp(prefix="edn-bench-eventing-")
    settings = {"delivery_queue_size": "100000",
                "delivery_retries": "1", "delivery_backoff": "0.05"}
    source = SourceProcess(data_dir, settings)
    sink = FastSink().start()
    figures: dict = {}
    try:
        source.wait_healthy()
        admin = AdminClient(source.base_url, ADMIN_TOKEN)
        admin.create_topic("bench")
        admin.create_topic("rate")

        # 1. durable Subscribe throughput (to a topic nobody publishes on)
        figures["subscribe_per_s"] = round(_subscribe_rate(source.base_url, sink.url,
                                                           subscribes, clients))
        figures["subscribes"] = subscribes
        figures["subscribe_clients"] = clients

        # 2. fan-out: `subscriptions` matching subscriptions on topic "rate"
        transport = HttpTransport()
        client = EventingClient("2011", transport=transport)
        for n in range(subscriptions):
            client.subscribe(source.base_url + "/topics/rate", f"{sink.url}/n{n % 16}",
                             filter="/q:quote[q:price >= 0]", namespaces={"q": "urn:quotes"})
        publisher = SoapClient(transport)
        before = sink.count
        expected = before + subscriptions * events
        started = time.perf_counter()
        for i in range(events):
            event = etree.fromstring(f'<q:quote xmlns:q="urn:quotes"><q:price>{i}</q:price></q:quote>')
            publisher.send(source.base_url + "/topics/rate", PUBLISH_ACTION, event)
        published = time.perf_counter() - started
        sink.wait_for(expected, timeout=110)
        elapsed = time.perf_counter() - started
        transport.close()
        figures["notifications_per_s"] = round(subscriptions * events / elapsed)
        figures["publish_per_s"] = round(events / published)
        figures["subscriptions"] = subscriptions
        figures["events"] = events
        figures["notifications"] = subscriptions * events
        figures["delivery_seconds"] = round(elapsed, 2)
    finally:
        sink.stop()
        source.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures
