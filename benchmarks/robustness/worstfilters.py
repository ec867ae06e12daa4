"""The worst filters a subscriber can get accepted, beside normal ones, on a real source.

A source (``edn serve source``, its default worker model) serves one topic. Phase
``normal``: ``normal_subscribers`` subscriptions with ordinary XPath filters; publishes of
a small event and of a large one (``large_elements`` elements, under the source's
``event_max_elements``) are timed, while another thread times ``GET /health``. Phase
``worst``: on top of those, every filter in :data:`WORST` is offered ``copies`` times (the
most expensive shapes the filter limits of :mod:`wsframework.matching.limits` let through:
one descendant scan, XPath 2.0 on elementpath, the longest or-chains, string-value scans
of the whole event) and the same publishes are timed again. The regular-expression and
nested-scan filters the limits exist to stop are offered too and must be refused at
Subscribe.

Figures, for both phases side by side: p50/p95 of small and large publishes and of
``/health``; how many worst filters were accepted and refused; how many accepted worst
subscriptions the source ended for overrunning their per-event budget (``SubscriptionEnd``
at their EndTo); and whether every normal subscriber received exactly the notifications
its filter selects (``normal_delivery_exact``).
"""
from __future__ import annotations

import http.client
import shutil
import tempfile
import threading
import time
from pathlib import Path

from lxml import etree

from edn.localnet.processes import ServerProcess
from edn.sink import NotificationSink
from subscription_manager.client import EventingClient, subscribe_body
from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.publisher import PUBLISH_ACTION, topic_address
from wsframework.transport import HttpTransport

_TOKEN = "bench-token"
_TOPIC = "worst"
Q = "urn:bench:quotes"
XPATH20 = ns.XPATH20_DIALECT_2011

# (name, dialect, expression): accepted by the default limits, expensive on a large event,
# and matching nothing (what is measured is matching, not the delivery of extra copies)
_OR_CHAIN = " or ".join(f"q:price = {n}" for n in range(120))
WORST = [
    ("count_all", None, "count(//*) < 0"),
    ("descendant_scan", None, "//*[.//q:missing]"),
    ("string_scan", None, "contains(string(.), 'no-such-text-anywhere')"),
    ("or_chain", None, f"/q:quote[{_OR_CHAIN}]"),
    ("xpath2_count", XPATH20, "count(//*) lt 0"),
    ("xpath2_some", XPATH20, "some $x in //* satisfies $x = 'no-such-text'"),
]
# filters the limits must refuse at Subscribe (regular expressions, nested scans)
REFUSED = [
    ("regex", None, "re:test(string(.), '^(a+)+$')"),
    ("nested_1000", None, "//q:quote" + "[q:price > 3" * 1000 + "]" * 1000),
    ("xpath2_predicates", XPATH20, "q:price" + "[. > 1]" * 1000),
    ("nested_scan", None, "//*[.//*[.//*]]"),
]


def _small_event(price: int) -> etree._Element:
    event = etree.Element(f"{{{Q}}}quote", nsmap={"q": Q})
    etree.SubElement(event, f"{{{Q}}}symbol").text = "ACME"
    etree.SubElement(event, f"{{{Q}}}price").text = str(price)
    return event


def _large_event(elements: int, price: int) -> etree._Element:
    event = _small_event(price)
    for n in range(elements - 3):
        etree.SubElement(event, f"{{{Q}}}tick").text = str(n)
    return event


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)


class _HealthProbe:
    """Times ``GET /health`` every 50 ms while a phase runs."""

    def __init__(self, port: int):
        self.port = port
        self.latencies: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="health-probe")

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            started = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                try:
                    conn.request("GET", "/health")
                    response = conn.getresponse()
                    response.read()
                    ok = response.status == 200
                finally:
                    conn.close()
            except OSError:
                ok = False
            if ok:
                self.latencies.append((time.perf_counter() - started) * 1000)
            else:
                self.failed += 1

    def __enter__(self) -> "_HealthProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def _publish_phase(base_url: str, port: int, small: int, large: int,
                   large_elements: int) -> tuple[dict, int]:
    """Times ``small`` small and ``large`` large publishes; returns figures and how many
    events with price > 50 were published (what the normal filters select)."""
    transport = HttpTransport(timeout=(5.0, 120.0))
    client = SoapClient(transport)
    address = topic_address(base_url, _TOPIC)
    timings: dict[str, list[float]] = {"small": [], "large": []}
    faults = 0
    selected = 0
    try:
        with _HealthProbe(port) as health:
            for n in range(small + large):
                kind = "large" if n % max(1, (small + large) // max(1, large)) == 0 \
                    and len(timings["large"]) < large else "small"
                price = 40 + (n % 30)
                event = _large_event(large_elements, price) if kind == "large" \
                    else _small_event(price)
                started = time.perf_counter()
                try:
                    client.send(address, PUBLISH_ACTION, event)
                except SoapFault:
                    faults += 1
                    continue
                timings[kind].append((time.perf_counter() - started) * 1000)
                selected += price > 50
    finally:
        transport.close()
    return {
        "small_publish_p50_ms": _percentile(timings["small"], 0.5),
        "small_publish_p95_ms": _percentile(timings["small"], 0.95),
        "large_publish_p50_ms": _percentile(timings["large"], 0.5),
        "large_publish_p95_ms": _percentile(timings["large"], 0.95),
        "health_p95_ms": _percentile(health.latencies, 0.95),
        "health_max_ms": _percentile(health.latencies, 1.0),
        "health_failed": health.failed,
        "publish_faults": faults,
    }, selected


def _offer(client: EventingClient, address: str, sink_url: str, name: str, dialect: str | None,
           expression: str) -> bool:
    body = subscribe_body(client.version, f"{sink_url}/worst/{name}",
                          end_to=f"{sink_url}/ended/{name}", filter=expression,
                          dialect=dialect, namespaces={"q": Q, "re": "http://exslt.org/regular-expressions"},
                          expires="PT1H")
    try:
        client.subscribe_raw(address, body)
        return True
    except SoapFault:
        return False


def measure(*, normal_subscribers: int, copies: int, small: int, large: int,
            large_elements: int) -> dict:
    data_dir = tempfile.mkdtemp(prefix="edn-bench-worst-")
    source = ServerProcess("source", data_dir=Path(data_dir), admin_token=_TOKEN,
                           extra_args=["--log-level", "error"])
    sink = NotificationSink(keep_bodies=True).start()
    figures: dict = {"normal_subscribers": normal_subscribers, "large_elements": large_elements}
    try:
        source.start()
        AdminClient(source.base_url, _TOKEN).create_topic(_TOPIC)
        address = topic_address(source.base_url, _TOPIC)
        client = EventingClient("2011")
        for n in range(normal_subscribers):
            client.subscribe(address, f"{sink.url}/normal/{n}", filter="/q:quote[q:price > 50]",
                             namespaces={"q": Q}, expires="PT1H")
        normal, selected_normal = _publish_phase(source.base_url, source.port, small, large,
                                                 large_elements)
        accepted = refused = 0
        for copy in range(copies):
            for name, dialect, expression in WORST:
                accepted += _offer(client, address, sink.url, f"{name}-{copy}", dialect, expression)
        for name, dialect, expression in REFUSED:
            refused += not _offer(client, address, sink.url, name, dialect, expression)
        worst, selected_worst = _publish_phase(source.base_url, source.port, small, large,
                                               large_elements)
        expected = normal_subscribers * (selected_normal + selected_worst)
        def normal_received() -> int:
            return sum(1 for m in sink.messages if m.path.startswith("/normal/"))

        sink.wait_until(lambda: normal_received() >= expected, timeout=120.0)
        normal_got = normal_received()
        ended = len({m.path for m in sink.messages if m.path.startswith("/ended/")})
        figures.update({f"normal_{k}": v for k, v in normal.items()})
        figures.update({f"worst_{k}": v for k, v in worst.items()})
        figures.update({
            "worst_filters_offered": copies * len(WORST),
            "worst_filters_accepted": accepted,
            "refused_at_subscribe": f"{refused}/{len(REFUSED)}",
            "worst_subscriptions_ended": ended,
            "normal_notifications_expected": expected,
            "normal_notifications_received": normal_got,
            "normal_delivery_exact": normal_got == expected,
            "small_p95_ratio_worst_vs_normal": _ratio(worst["small_publish_p95_ms"],
                                                      normal["small_publish_p95_ms"]),
            "source_alive": source.proc.poll() is None,
        })
    finally:
        sink.stop()
        if source.alive():
            source.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else round(a / b, 2)


def run(quick: bool = False) -> dict:
    if quick:
        return measure(normal_subscribers=10, copies=1, small=40, large=4, large_elements=2000)
    return measure(normal_subscribers=50, copies=10, small=400, large=40, large_elements=9000)
