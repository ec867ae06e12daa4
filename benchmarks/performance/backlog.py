"""Delivery when it falls behind: a durable backlog drained, a far host, an outage.

Call :func:`run` (``edn bench backlog``). One real source process (``edn serve source``,
gunicorn, one gevent worker: the same :class:`~subscription_manager.manager.SubscriptionManager`
delivery path as the EDN server role) delivers to one sink host, the
:class:`~edn.sink.FastSink`. Figures:

* ``backlog_drain_per_s`` -- ``backlog`` notifications are accepted (durable outbox rows)
  while the sink's port has nothing listening; then the sink starts on that port and the
  figure is the backlog over the time until the sink has counted all of it. The backlog is
  four times the delivery queue (the default 50,000 in the full run), so most of it waits
  in the outbox, not in memory;
* ``rtt40_per_s`` -- notifications/s to one host whose every answer comes 40 ms after its
  request (the fast sink's ``answer_delay_ms``: a simulated round trip on loopback, not a
  delayed link), from a burst of publications until the sink has them all; beside it
  ``rtt40_fixed8_per_s`` (8 per host, no adaptation: the old ceiling of 8 / RTT) and
  ``rtt40_pipelined16_per_s`` (8 per host, 16 pipelined POSTs each: the opt-in);
* ``outage10_drain_s`` -- under a steady ``outage_load_per_s`` notifications/s the sink
  process is stopped for 10 s and started again on the same port; the figure is the time
  from its restart until it has counted every notification accepted before the restart
  (counts before and after the restart summed; a notification answered while the sink
  stopped may be counted twice, which can only make this figure shorter by those few);
* ``source_cpu_s`` per phase and the source's delivery counters at the end of each
  (``dropped``: jobs the full queue left in the outbox).
"""
from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import threading
import time

import requests

from edn.sink import FastSink
from wsframework.ports import free_port

from .delivery import _process_cpu, _worker_pid
from .eventing import ADMIN_TOKEN, SourceProcess

_QUEUE_SIZE = 50_000  # the default delivery queue: the backlog is several times this
_COUNTERS = {"delivered": "edn_notifications_delivered_total",
             "dropped": "edn_notifications_dropped_total",
             "spilled": "edn_notifications_spilled_total",
             "failed": "edn_notifications_failed_total",
             "retries": "edn_notification_retries_total",
             "queue_depth": "edn_delivery_queue_depth"}


class _Source:
    """A source with ``subscriptions`` subscriptions (all matching every event) to
    ``sink_url`` (16 paths on one host), and a publisher."""

    def __init__(self, sink_url: str, subscriptions: int, settings: dict[str, str] | None = None):
        from subscription_manager.client import EventingClient
        from wsframework.admin import AdminClient
        from wsframework.client import SoapClient
        from wsframework.transport import HttpTransport

        self.data_dir = tempfile.mkdtemp(prefix="edn-bench-backlog-")
        limit = str(subscriptions + 10)
        self.process = SourceProcess(self.data_dir, {
            "delivery_queue_size": str(_QUEUE_SIZE), "max_subscriptions_per_host": limit,
            "max_subscriptions_per_topic": limit, "max_subscriptions": limit,
            **(settings or {})})
        try:
            self.process.wait_healthy()
            AdminClient(self.process.base_url, ADMIN_TOKEN).create_topic("rate")
            self.topic = self.process.base_url + "/topics/rate"
            transport = HttpTransport()
            eventing = EventingClient("2011", transport=transport)
            for n in range(subscriptions):
                eventing.subscribe(self.topic, f"{sink_url}/n{n % 16}",
                                   filter="/q:quote[q:price >= 0]",
                                   namespaces={"q": "urn:quotes"}, expires="PT1H")
            transport.close()
            self.subscriptions = subscriptions
            self.worker = _worker_pid(self.process.proc.pid)
            self._transport = HttpTransport(timeout=(3.0, 60.0))
            self._publisher = SoapClient(self._transport)
            self.published = 0
        except BaseException:
            self.stop()
            raise

    def publish(self, events: int) -> None:
        from lxml import etree

        from wsframework.publisher import PUBLISH_ACTION
        for _ in range(events):
            event = etree.fromstring(f'<q:quote xmlns:q="urn:quotes"><q:price>{self.published}'
                                     f'</q:price></q:quote>')
            self._publisher.send(self.topic, PUBLISH_ACTION, event)
            self.published += 1

    @property
    def accepted(self) -> int:
        """Notifications accepted so far (every event matches every subscription)."""
        return self.published * self.subscriptions

    def cpu(self) -> float:
        return _process_cpu(self.worker)

    def counters(self) -> dict[str, int]:
        """The deliverer's counters, read from the source's /metrics."""
        text = requests.get(self.process.base_url + "/metrics", timeout=10,
                            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
        found = {}
        for name, metric in _COUNTERS.items():
            match = re.search(rf"^{metric}(?:{{[^}}]*}})?\s+([0-9.e+]+)$", text, re.M)
            if match:
                found[name] = int(float(match.group(1)))
        return found

    def settled_counters(self, delivered: int, timeout: float = 30.0) -> dict[str, int]:
        """:meth:`counters` once the source has counted ``delivered`` deliveries: a sink
        that received the last notifications answers before the source's workers count
        those answers."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.counters()
            if found.get("delivered", 0) >= delivered or time.monotonic() > deadline:
                return found
            time.sleep(0.1)  # polling /metrics: the count has no notification to wait on

    def stop(self) -> None:
        if getattr(self, "_transport", None) is not None:
            self._transport.close()
        self.process.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def backlog_drain(backlog: int, subscriptions: int = 500, timeout: float = 600.0,
                  queue_size: int = _QUEUE_SIZE) -> dict:
    """``backlog`` notifications accepted while the sink is down, then drained."""
    port = free_port()
    source = _Source(f"http://127.0.0.1:{port}", subscriptions,
                     {"delivery_queue_size": str(queue_size)})
    sink = None
    try:
        events = backlog // subscriptions
        built = time.perf_counter()
        source.publish(events)
        build_s = time.perf_counter() - built
        sink = FastSink(port=port).start()
        cpu0 = source.cpu()
        started = time.perf_counter()
        sink.wait_for(source.accepted, timeout=timeout)
        elapsed = time.perf_counter() - started
        return {"backlog_drain_per_s": round(source.accepted / elapsed),
                "backlog": source.accepted, "queue_size": queue_size,
                "backlog_build_s": round(build_s, 2),
                "backlog_drain_s": round(elapsed, 2),
                "backlog_source_cpu_s": round(source.cpu() - cpu0, 2),
                "backlog_counters": source.settled_counters(source.accepted)}
    finally:
        source.stop()
        if sink is not None:
            sink.stop()


def rtt_delivery(answer_delay_ms: int, notifications: int, subscriptions: int = 100,
                 settings: dict[str, str] | None = None, timeout: float = 600.0) -> dict:
    """Notifications/s to one sink host that answers each POST ``answer_delay_ms`` late."""
    sink = FastSink(answer_delay_ms=answer_delay_ms).start()
    source = None
    try:
        source = _Source(sink.url, subscriptions, settings)
        cpu0 = source.cpu()
        started = time.perf_counter()
        source.publish(notifications // subscriptions)
        sink.wait_for(source.accepted, timeout=timeout)
        elapsed = time.perf_counter() - started
        return {"per_s": round(source.accepted / elapsed), "notifications": source.accepted,
                "seconds": round(elapsed, 2), "source_cpu_s": round(source.cpu() - cpu0, 2),
                "counters": source.settled_counters(source.accepted)}
    finally:
        if source is not None:
            source.stop()
        sink.stop()


def outage_drain(outage_s: float, load_per_s: int, subscriptions: int = 200,
                 timeout: float = 300.0) -> dict:
    """Seconds from the end of an ``outage_s`` sink outage until the sink has every
    notification accepted before it came back, under ``load_per_s`` notifications/s."""
    port = free_port()
    sink = FastSink(port=port).start()
    source = None
    stop = threading.Event()
    failures: list[BaseException] = []
    events_per_tick = max(1, load_per_s // subscriptions // 10)  # ten ticks a second
    try:
        source = _Source(sink.url, subscriptions)

        def publish() -> None:
            next_tick = time.monotonic()
            try:
                while not stop.is_set():
                    source.publish(events_per_tick)
                    next_tick += 0.1
                    stop.wait(max(0.0, next_tick - time.monotonic()))
            except BaseException as exc:  # reported below
                failures.append(exc)

        publisher = threading.Thread(target=publish, name="outage-publisher", daemon=True)
        publisher.start()
        stop.wait(3.0)  # steady state before the outage
        before = sink.count
        sink.stop()
        stop.wait(outage_s)
        sink = FastSink(port=port).start()
        healed = time.perf_counter()
        expected = source.accepted  # everything accepted before the sink came back
        backlog = expected - before
        if not sink.wait_count(expected - before, timeout=timeout):
            raise AssertionError(f"the outage's backlog did not drain in {timeout:g} s")
        drain_s = time.perf_counter() - healed
        stop.set()
        publisher.join(10)
        if failures:
            raise failures[0]
        return {"drain_s": round(drain_s, 2), "backlog": backlog,
                "load_per_s": events_per_tick * 10 * subscriptions,
                "counters": source.counters()}
    finally:
        stop.set()
        if source is not None:
            source.stop()
        sink.stop()


def run(quick: bool = False) -> dict:
    backlog = 40_000 if quick else 200_000
    rtt_notifications = 8_000 if quick else 40_000
    figures: dict = {}
    drained = backlog_drain(backlog, queue_size=backlog // 4)  # most of it waits on disk
    figures.update(drained)
    rtt = rtt_delivery(40, rtt_notifications)
    figures["rtt40_per_s"] = rtt["per_s"]
    figures["rtt40"] = rtt
    # side by side: a fixed limit of 8 per host (no adaptation), and that limit with
    # pipelining (opt-in) instead of adaptation
    fixed = {"delivery_per_host_max": "8"}
    figures["rtt40_fixed8_per_s"] = rtt_delivery(40, rtt_notifications // 10, settings=fixed)["per_s"]
    figures["rtt40_pipelined16_per_s"] = rtt_delivery(
        40, rtt_notifications, settings={**fixed, "delivery_pipeline": "16"})["per_s"]
    outage = outage_drain(10.0 if not quick else 5.0, 2_000)
    figures["outage10_drain_s"] = outage["drain_s"]
    figures["outage"] = outage
    figures["outage_s"] = 10.0 if not quick else 5.0
    figures["rtt_note"] = ("the 40 ms round trip is simulated by the sink holding each "
                           "answer 40 ms on loopback, not by a delayed link")
    figures["role"] = "source (edn serve source, gunicorn, 1 gevent worker)"
    return figures


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
