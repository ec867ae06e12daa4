"""The kill matrix: ``kill -9`` of a subscription server, the dispatcher or a
standalone source at random moments during bursts of publications, each restarted on the
same data directory and port; then what every subscription received is compared with what
its filter selects of the events the publisher got a success answer for.

Real processes on loopback: a :class:`~edn.localnet.network.LocalNetwork` (a dispatcher and
two servers) and, for the source column, a standalone ``edn serve source``
(:class:`~edn.localnet.processes.ServerProcess`), each started in its own process group so
SIGKILL reaches the gunicorn master and its workers at once. One notification sink records
every notification's path and wsa:MessageID. Range filters on the grid
(:mod:`route_manager.workloads.grid_xml`) make the expected notifications computable.

A publisher thread per target sends bursts (``burst`` events from 8 concurrent
connections) alternating with 0.5 s of steady flow (one event every 20 ms); an event counts only when its publication was
answered with 2xx. The killer waits a random moment into a burst, kills, restarts, and
times the recovery: from launching the restart (process startup included) to the first
notification delivered afterwards to a subscription the killed process serves.

Figures per target (``server``, ``dispatcher``, ``source``) and in all: ``kills``,
``acknowledged`` events, ``expected`` notifications, ``lost`` (expected, never received),
``duplicates`` (a MessageID received more than once), ``duplicate_events`` (one
subscription notified of one event more than once, whatever the MessageID),
``unacknowledged_delivered`` (notifications of events whose publication got no success
answer -- the process died after accepting them: allowed), ``unexpected`` (notifications
the filter does not select, or of events never published: must be 0),
``recovery_ms`` (p50/max) and ``examples`` of lost notifications.
"""
from __future__ import annotations

import collections
import random
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from edn.localnet.processes import ServerProcess
from edn.sink import NotificationSink
from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
from subscription_manager.client import EventingClient
from matchers.vocabulary import MATCHER_RTREE_ENGINE, RANGES_DIALECT
from route_manager.workloads.grid_xml import GRID_EVENTS
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION
from wsframework.transport import HttpTransport

_TOKEN = "bench-token"
_D = 2
_TOPIC = "grid"
_EVENT = f"{{{GRID_EVENTS}}}event"


def _message_id(body: bytes) -> str | None:
    root = etree.fromstring(body)
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.endswith("}MessageID"):
            return (element.text or "").strip()
    return None


class _Publisher(threading.Thread):
    """Bursts and steady flow to ``address``; records the events answered with success."""

    def __init__(self, address: str, rng: random.Random, burst: int, first_id: int,
                 concurrency: int = 8):
        super().__init__(daemon=True, name="kill-publisher")
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self.address = address
        self.rng = rng
        self.burst = burst
        self.next_id = first_id
        self.acknowledged: dict[int, np.ndarray] = {}
        self.attempted: dict[int, np.ndarray] = {}
        self.refused = 0
        self.in_burst = threading.Event()
        self.stopping = threading.Event()
        self.client = SoapClient(HttpTransport(timeout=(1.0, 5.0)))

    def _one(self, _=None) -> None:
        with self._lock:
            point = np.array([self.rng.uniform(0, 10) for _ in range(_D)])
            event_id = self.next_id
            self.next_id += 1
            self.attempted[event_id] = point
        try:
            status = self.client.send(self.address, PUBLISH_ACTION, event_element(point, event_id))
        except Exception:  # noqa: BLE001 -- not acknowledged: not counted
            self.refused += 1
            return
        if 200 <= status < 300:
            self.acknowledged[event_id] = point
        else:
            self.refused += 1

    def run(self) -> None:
        while not self.stopping.is_set():
            self.in_burst.set()
            with ThreadPoolExecutor(self.concurrency) as pool:  # concurrent publishers
                list(pool.map(self._one, range(self.burst)))
            self.in_burst.clear()
            steady_until = time.monotonic() + 0.5
            while time.monotonic() < steady_until and not self.stopping.is_set():
                self._one()
                self.stopping.wait(0.02)


def _subscribe(address: str, sink: NotificationSink, path: str, lo, hi) -> str:
    """Subscribe; the address of the subscription manager that holds it."""
    handle = EventingClient("2011").subscribe(address, f"{sink.url}{path}",
                                              filter=range_filter(lo, hi),
                                              dialect=RANGES_DIALECT, expires="PT2H")
    return handle.manager.address


def _delivered_to(sink: NotificationSink, prefixes: tuple[str, ...], since: int) -> bool:
    """A notification to a path starting with one of ``prefixes`` after message ``since``."""
    return any(m.path.startswith(prefixes) for m in sink.messages[since:])


def _selected(events: dict[int, np.ndarray], lo, hi, prefix: str) -> set:
    out = set()
    for event_id, point in events.items():
        inside = np.all((lo <= point) & (hi >= point), axis=1)
        out.update((f"/{prefix}/{i}", event_id) for i in np.flatnonzero(inside))
    return out


def _judge(received, publisher: "_Publisher", lo, hi, prefix: str) -> dict:
    expected = _selected(publisher.acknowledged, lo, hi, prefix)
    possible = _selected(publisher.attempted, lo, hi, prefix)
    pairs = collections.Counter((path, event_id) for path, event_id, _ in received)
    ids = collections.Counter(mid for _, _, mid in received if mid)
    lost = sorted(expected - set(pairs))
    return {
        "acknowledged": len(publisher.acknowledged), "expected": len(expected),
        "received": len(received), "lost": len(lost),
        "duplicates": sum(c - 1 for c in ids.values() if c > 1),
        "duplicate_events": sum(c - 1 for c in pairs.values() if c > 1),
        # an event whose publisher got no answer (the process died after accepting it) may
        # be delivered; a notification its filter does not select, never
        "unacknowledged_delivered": len((set(pairs) & possible) - expected),
        "unexpected": len(set(pairs) - possible),
        "examples": [f"{p} event {e}" for p, e in lost[:5]],
    }


def _kill_loop(kill, restart, publisher: _Publisher, sink: NotificationSink, kills: int,
               rng: random.Random, down_s: float, watched=lambda: ("/",)) -> list[float]:
    """``watched()``: the sink paths whose next notification shows the killed process is
    back (the subscriptions a killed server holds; any, for the dispatcher or a source)."""
    recoveries = []
    for _ in range(kills):
        if not publisher.in_burst.wait(30):
            raise AssertionError("the publisher never started a burst")
        time.sleep(rng.uniform(0.0, 0.3))  # a random moment into the burst
        kill()
        time.sleep(down_s)  # the process stays dead for a while (part of the experiment)
        since = len(sink.messages)
        restarted = time.monotonic()  # recovery: from the restart's launch (startup included)
        restart()
        prefixes = watched()
        try:
            wait_until(lambda: _delivered_to(sink, prefixes, since), 30,
                       what="a notification after the restart", poll=0.005)
            recoveries.append(time.monotonic() - restarted)
        except AssertionError:
            recoveries.append(float("inf"))
        # let a burst and some steady flow pass under the restarted process
        time.sleep(rng.uniform(0.2, 0.8))
    return recoveries


def _summary(recoveries: list[float]) -> dict:
    finite = [r for r in recoveries if r != float("inf")]
    return {"recovery_ms_p50": round(float(np.median(finite)) * 1000, 1) if finite else None,
            "recovery_ms_max": round(max(finite) * 1000, 1) if finite else None,
            "not_recovered": len(recoveries) - len(finite)}


def _settle(sink: NotificationSink, quiet_s: float = 3.0, timeout: float = 90.0) -> None:
    """Until no notification has arrived for ``quiet_s`` (redeliveries included)."""
    deadline = time.monotonic() + timeout
    last, since = sink.count, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if sink.count != last:
            last, since = sink.count, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return


def measure(*, server_kills: int = 20, dispatcher_kills: int = 20, source_kills: int = 5,
            subscriptions: int = 40, burst: int = 200, down_s: float = 0.3,
            seed: int = 13) -> dict:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    lo = nrng.uniform(0, 7, (subscriptions, _D))
    hi = lo + nrng.uniform(1, 3, (subscriptions, _D))
    data_dir = Path(tempfile.mkdtemp(prefix="edn-bench-kill-"))
    sink = NotificationSink(keep_bodies=True)
    result: dict = {"subscriptions": subscriptions, "burst": burst, "down_s": down_s}
    try:
        sink.start()
        # -- the network: a dispatcher and two servers ------------------------------------
        with LocalNetwork(data_dir / "net", [("s1", "rtree", 1), ("s2", "rtree", 1)],
                          token=_TOKEN, d=_D, sink=sink) as net:
            net.create_topic()
            names = list(net.servers)
            holders: dict[int, str] = {}
            for i in range(subscriptions):
                server = net.servers[names[i % len(names)]]
                holders[i] = _subscribe(f"{server.base_url}/topics/{_TOPIC}", sink, f"/net/{i}/",
                                        lo[i], hi[i])
            wait_until(lambda: sum(int(v) for k, v in net.dispatcher_stats("server.").items()
                                   if k.endswith(".load")) == subscriptions, 60,
                       what="route updates")
            for target, kills in (("server", server_kills), ("dispatcher", dispatcher_kills)):
                if kills <= 0:
                    continue
                prefix = f"net-{target}"
                first_id = 1_000_000 if target == "server" else 2_000_000
                publisher = _Publisher(f"{net.dispatcher.base_url}/topics/{_TOPIC}", rng, burst,
                                       first_id=first_id)
                publisher.start()
                victims = ([net.servers[n] for n in names] if target == "server"
                           else [net.dispatcher])
                state = {"k": 0}

                def kill():
                    victim = victims[state["k"] % len(victims)]
                    state["victim"] = victim
                    state["k"] += 1
                    victim.kill()

                def restart():
                    state["victim"].start(60)

                def watched():
                    if target != "server":
                        return ("/net/",)
                    base = state["victim"].base_url + "/"
                    return tuple(f"/net/{i}/" for i, at in holders.items()
                                 if at.startswith(base)) or ("/net/",)

                try:
                    recoveries = _kill_loop(kill, restart, publisher, sink, kills, rng, down_s,
                                            watched)
                finally:
                    publisher.stopping.set()
                    publisher.join(30)
                _settle(sink)
                # every notification of this phase's events, whenever it came
                received = [(_sub_path(p, prefix), e, m)
                            for p, e, m in _received_since(sink, "net", 0)
                            if first_id <= e < publisher.next_id]
                figures = _judge(received, publisher, lo, hi, prefix)
                figures.update(_summary(recoveries), kills=kills, refused=publisher.refused)
                result[target] = figures
        # -- the standalone source --------------------------------------------------------
        if source_kills > 0:
            source = ServerProcess("source", data_dir=data_dir / "source", admin_token=_TOKEN)
            source.start()
            try:
                AdminClient(source.base_url, _TOKEN).create_topic(_TOPIC, MATCHER_RTREE_ENGINE,
                                                                   schema_element(_D))
                for i in range(subscriptions):
                    _subscribe(f"{source.base_url}/topics/{_TOPIC}", sink, f"/src/{i}/",
                               lo[i], hi[i])
                publisher = _Publisher(f"{source.base_url}/topics/{_TOPIC}", rng, burst,
                                       first_id=9_000_000)
                publisher.start()
                try:
                    recoveries = _kill_loop(source.kill, lambda: source.start(60), publisher,
                                            sink, source_kills, rng, down_s)
                finally:
                    publisher.stopping.set()
                    publisher.join(30)
                _settle(sink)
                received = [(_sub_path(p, "src"), e, m)
                            for p, e, m in _received_since(sink, "src", 0)]
                figures = _judge(received, publisher, lo, hi, "src")
                figures.update(_summary(recoveries), kills=source_kills,
                               refused=publisher.refused)
                result["source"] = figures
            finally:
                source.kill()
    finally:
        sink.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    targets = [t for t in ("server", "dispatcher", "source") if t in result]
    for name in ("kills", "acknowledged", "expected", "lost", "duplicates", "duplicate_events",
                 "unexpected"):
        result[name] = sum(result[t][name] for t in targets)
    return result


def _received_since(sink: NotificationSink, prefix: str, marker: int):
    """(path, event id, MessageID) of the notifications to /prefix/...; a body cut off by a
    kill (the sender died mid-request) is no notification and is left out."""
    out = []
    for message in list(sink.messages)[marker:]:
        if not message.path.startswith(f"/{prefix}/"):
            continue
        try:
            event = etree.fromstring(message.body).find(f".//{_EVENT}")
        except etree.XMLSyntaxError:
            continue
        if event is None:
            continue
        out.append((message.path, int(event.get("id")), _message_id(message.body)))
    return out


def _sub_path(path: str, prefix: str) -> str:
    """/net/7/ -> /PREFIX/7 (the subscription's index)."""
    index = path.split("/")[2]
    return f"/{prefix}/{index}"


def run(quick: bool = False) -> dict:
    if quick:
        return measure(server_kills=2, dispatcher_kills=2, source_kills=2, subscriptions=20,
                       burst=100)
    return measure()
