"""An EDN across the hosts of a lab, with a publisher and a recording subscriber: the
network of the fault campaign (``edn bench faults``) and the WAN figures (``edn bench wan``).

Hosts (one role each, on the lab's bridge):

- ``publisher``: a paced publisher (``rate`` events/s) failing over between the roots, each
  event one message with its own MessageID, retried with it (``attempts`` rounds); or a
  closed loop of batches (:meth:`LabNetwork.closed_loop`);
- ``root1``, ``root2``: two root dispatchers, every server (and the child) registered with
  both;
- ``child`` (with ``tree``): a child dispatcher under both roots, the last server below it;
- ``s1`` ... ``sN``: subscription servers, placement by the R-tree partitioner;
- ``subscriber``: a notification sink every subscription points at (``/n/K``), recording
  each notification's arrival time and MessageID.

Everything the network is asked to do goes into a :class:`~.history.History`.
"""
from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from lxml import etree

from benchmarks.lab.hosts import Lab
from edn.localnet.network import forwarded_all, stats
from matchers.vocabulary import RANGES_DIALECT
from route_manager import protocol
from route_manager.publisher import Publisher
from route_manager.workloads.grid_xml import GRID_EVENTS, event_element, range_filter, schema_element
from subscription_manager.client import EventingClient
from subscription_manager.server.moved_subscriptions import parse_subscriptions
from wsframework.admin import AdminClient

from .history import History, Notification

TOPIC = "grid"
D = 2
EXPIRES = "PT24H"  # far beyond any skew the campaign gives a host's clock


def subscriber_of(url_or_path: str) -> int | None:
    """K of a history subscription's ``.../n/K``; None for any other target."""
    head, _, tail = url_or_path.rpartition("/")
    return int(tail) if head.endswith("/n") and tail.isdigit() else None


class LabNetwork:
    def __init__(self, lab: Lab, *, servers: int = 2, tree: bool = False, rate: float = 20.0,
                 server_args=(), dispatcher_args=()):
        self.lab = lab
        self.servers = servers
        self.tree = tree
        self.rate = rate
        self.token = secrets.token_hex(16)
        self.history = History()
        self.private = ("--allow-private", str(lab.subnet))
        self.server_args = [*self.private, *server_args]
        self.dispatcher_args = [*self.private, *dispatcher_args]
        self.processes: dict[str, object] = {}
        self.data_dirs: dict[str, Path] = {}
        self._stop = threading.Event()
        self._publisher_thread: threading.Thread | None = None
        self.next_event = 0
        self.handles: list = []
        self.pending_routes: list[range] = []  # subscriptions made during a fault
        self._read, self._got = 0, set()  # sink messages read by drained(), their pairs
        self.notes: list[str] = []
        self.disk_answers: list[str] = []  # what a Subscribe got while a disk was full

    # -- building ------------------------------------------------------------------------------
    @staticmethod
    def host_names(servers: int = 2, tree: bool = False) -> list[str]:
        return ["publisher", "root1", "root2", *(["child"] if tree else []),
                *(f"s{k}" for k in range(1, servers + 1)), "subscriber"]

    @property
    def server_names(self) -> list[str]:
        return [f"s{k}" for k in range(1, self.servers + 1)]

    @property
    def below_child(self) -> str | None:
        """The server registered with the child dispatcher (the last), if a tree."""
        return self.server_names[-1] if self.tree else None

    @property
    def below_roots(self) -> int:
        """Nodes registered with each root: the servers, one of them behind the child."""
        return self.servers

    @property
    def roots(self) -> list:
        return [self.processes["root1"], self.processes["root2"]]

    def start(self, data_dirs: dict[str, Path] | None = None) -> "LabNetwork":
        self.data_dirs = dict(data_dirs or {})
        for name in ("root1", "root2"):
            self._serve(name, "dispatcher", *self.dispatcher_args)
        root_urls = [root.base_url for root in self.roots]
        if self.tree:
            self._serve("child", "dispatcher", *(a for u in root_urls for a in ("--parent", u)),
                        "--name", "child", *self.dispatcher_args)
        for name in self.server_names:
            self._serve_server(name)
        self.sink = self.lab.sink("subscriber")
        self.wait_registered()
        for root in self.roots:
            self.admin(root, lambda a: a.create_topic(TOPIC, None, schema_element(D)))
        for name in self.server_names:
            self.wait(lambda name=name: self.hosts_topic(name), f"the topic on {name}")
        return self

    def _serve_server(self, name: str, *args: str):
        ups = ([self.processes["child"].base_url] if name == self.below_child
               else [root.base_url for root in self.roots])
        return self._serve(name, "server", *(a for u in ups for a in ("--dispatcher", u)),
                           "--name", name, *(args or ("--partitioner", "rtree")),
                           *self.server_args)

    def wait_registered(self) -> None:
        for root in self.roots:
            self.wait(lambda root=root: self.figure(root, "servers") == self.below_roots,
                      f"every node registered at {root.base_url}")

    def _serve(self, name: str, role: str, *args: str):
        options = {"data_dir": self.data_dirs[name]} if name in self.data_dirs else {}
        process = self.lab.serve(name, role, *args, name=name, admin_token=self.token, **options)
        self.processes[name] = process
        return process

    def recover(self) -> None:
        """After a fault's end failed: every cut healed, every link repaired, every process
        resumed, and any that is not running started again on the true clock."""
        self.lab.heal()
        self.lab.repair()
        for name, process in self.processes.items():
            process.resume()
            if not process.alive():
                process.env = None
                try:
                    process.start()
                except Exception as exc:
                    self.notes.append(f"{name} did not start again: {exc}"[:400])

    # -- reading the network -------------------------------------------------------------------
    def admin(self, process, call, host: str = "subscriber"):
        """``call(AdminClient)`` for ``process``, from inside ``host``."""
        return self.lab[host].run(lambda: call(AdminClient(process.base_url, self.token)))

    def figures(self, process, prefix: str | None = None) -> dict[str, str]:
        return self.lab["subscriber"].run(stats, process.base_url, self.token, prefix)

    def figure(self, process, name: str) -> int:
        return int(self.figures(process, name).get(name, 0))

    def hosts_topic(self, name: str) -> bool:
        topics = self.admin(self.processes[name], lambda a: a.list_topics())
        return any(t["name"] == TOPIC for t in topics)

    def wait(self, condition, what: str, timeout: float = 60.0, poll: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except Exception:
                pass  # a host still cut or restarting: ask again
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}")
            time.sleep(poll)

    def holders(self) -> dict[int, list[str]]:
        """subscriber -> the servers whose export holds its subscription."""
        out: dict[int, list[str]] = {}
        for name in self.server_names:
            response = self.admin(self.processes[name],
                                  lambda a: a.call(protocol.ExportSubscriptions(Topic=TOPIC)))
            for subscription in parse_subscriptions(response.Subscriptions, topic=TOPIC, topic_uid=""):
                subscriber = subscriber_of(subscription.notify_to.address)
                if subscriber is None:
                    continue  # not one of the history's (a probe's)
                out.setdefault(subscriber, []).append(name)
        return out

    def everyone_routing(self) -> bool:
        """Every role answers its health check and both roots see every node below them."""
        if not all(p.healthy() for p in self.processes.values()):
            return False
        return all(self.figure(root, "servers") == self.below_roots for root in self.roots)

    def routed_load(self, root) -> int:
        figures = self.figures(root, "server.")
        return sum(int(v) for k, v in figures.items() if k.endswith(".load"))

    # -- subscriptions -------------------------------------------------------------------------
    def subscribe(self, count: int, *, seed: int = 7, width: float = 0.2,
                  at: list[str] | None = None, entries: list[str] | None = None,
                  wait_routed: bool = True) -> range:
        """``count`` range subscriptions (``width`` per dimension), made at the servers
        ``at`` (default all) in turn, or at ``entries[i]`` for the i-th, from the
        subscriber's host; with ``wait_routed``, until both roots route them (the history
        counts events from then on)."""
        rng = np.random.default_rng(seed)
        lo = rng.uniform(0, 1 - width, size=(count, D))
        hi = lo + width
        added = self.history.subscribed(lo, hi, active_from=float("inf"))
        names = at or self.server_names

        def one(k):
            name = entries[k - added.start] if entries else names[k % len(names)]
            server = self.processes[name]
            return EventingClient("2011").subscribe(
                f"{server.base_url}/topics/{TOPIC}", f"{self.sink.url}/n/{k}",
                filter=range_filter(self.history.lo[k], self.history.hi[k]),
                dialect=RANGES_DIALECT, expires=EXPIRES)

        def all_of_them():
            with ThreadPoolExecutor(8) as pool:
                return list(pool.map(one, added))
        self.handles.extend(self.lab["subscriber"].run(all_of_them))
        if wait_routed:
            self.wait_routed(added)
        return added

    def wait_routed(self, added: range, timeout: float = 60.0, poll: float = 0.1) -> None:
        live = len(self.history.lo) - len(self.history.ended)
        for root in self.roots:
            self.wait(lambda root=root: self.routed_load(root) == live,
                      f"{live} subscriptions routed at {root.base_url}", timeout, poll)
        self.history.routed(added, time.time())

    def subscribe_one_timed(self, k: int) -> float:
        """One Subscribe at a server in turn: seconds from its acknowledgement until both
        roots route it."""
        name = self.server_names[k % self.servers]
        added = self.subscribe(1, seed=1000 + k, at=[name], wait_routed=False)
        acknowledged = time.monotonic()
        self.wait_routed(added, poll=0.005)
        return time.monotonic() - acknowledged

    def unsubscribe(self, subscriber: int) -> None:
        """End one subscription on purpose (it must never come back)."""
        handle = self.handles[subscriber]
        self.lab["subscriber"].run(lambda: EventingClient("2011").unsubscribe(handle))
        self.history.ended.add(subscriber)

    # -- publishing ----------------------------------------------------------------------------
    def start_publishing(self, seed: int = 11, attempts: int = 3) -> None:
        """Events at ``rate`` per second from the publisher's host, each one message sent
        from a pool (so a slow or failing root holds no later event back), recorded."""
        rng = np.random.default_rng(seed)
        publisher = self.lab["publisher"].run(
            lambda: Publisher([r.base_url for r in self.roots], connect_timeout=3.0,
                              read_timeout=10.0, attempts=attempts))

        def one(event_id, point):
            self.history.sent(event_id, point, time.time())
            try:
                publisher.publish(TOPIC, event_element(point, event_id))
            except Exception as exc:
                self.history.failed(event_id, f"{type(exc).__name__}: {exc}"[:200])
            else:
                self.history.acknowledged(event_id, time.time())

        def pace():
            with ThreadPoolExecutor(32, thread_name_prefix="campaign-publish") as pool:
                began, first = time.monotonic(), self.next_event
                while not self._stop.is_set():
                    due = began + (self.next_event - first) / self.rate
                    delay = due - time.monotonic()
                    if delay > 0 and self._stop.wait(delay):
                        break
                    pool.submit(one, self.next_event, rng.uniform(0, 1, size=D))
                    self.next_event += 1
            publisher.close()
        self._publisher_thread = self.lab["publisher"].start_thread(pace, name="campaign-pacer")

    def stop_publishing(self) -> None:
        self._stop.set()
        if self._publisher_thread is not None:
            self._publisher_thread.join(60)

    # -- the history ---------------------------------------------------------------------------
    def record_notifications(self) -> None:
        """Every notification the sink took, into the history (read once, at the end)."""
        wsa = "{http://www.w3.org/2005/08/addressing}MessageID"
        for message in list(self.sink.messages):
            if subscriber_of(message.path) is None:
                continue
            envelope = etree.fromstring(message.body)
            event = envelope.find(f".//{{{GRID_EVENTS}}}event")
            message_id = envelope.find(f".//{wsa}")
            self.history.notified(Notification(
                int(message.path.rsplit("/", 1)[1]), int(event.get("id")),
                message_id.text if message_id is not None else "", message.at))

    def delivered(self) -> int:
        return self.sink.count

    def quiet(self) -> bool:
        """Nothing queued at any live dispatcher, nothing pending at any server."""
        for name in ("root1", "root2", *(["child"] if self.tree else [])):
            process = self.processes[name]
            if not process.alive():
                continue
            if not forwarded_all(self.figures(process, "server.")):
                return False
        return all(self.figure(self.processes[n], "pending") == 0 for n in self.server_names)

    def drained(self) -> bool:
        """Every expected notification has arrived (read from the sink's bodies, each
        once)."""
        messages = list(self.sink.messages)
        for message in messages[self._read:]:
            if subscriber_of(message.path) is None:
                continue
            event = etree.fromstring(message.body).find(f".//{{{GRID_EVENTS}}}event")
            self._got.add((int(message.path.rsplit("/", 1)[1]), int(event.get("id"))))
        self._read = len(messages)
        return self.history.expected() <= self._got

    def drained_quickly(self) -> bool:
        """:meth:`drained`, and no dispatcher or server holds anything."""
        return self.drained() and self.quiet()

    def reset_history(self) -> None:
        """Forget publications, notifications and faults (the subscriptions stay): the next
        phase is measured on its own."""
        with self.sink._cond:
            self.sink.messages.clear()
        self._read, self._got = 0, set()
        self.history.publications.clear()
        self.history.notifications.clear()
        self.history.faults.clear()
        self._stop.clear()

    # -- a closed loop ---------------------------------------------------------------------
    def closed_loop(self, seconds: float, *, threads: int = 3, batch: int = 20) -> dict:
        """``threads`` publishers at the first root, each sending ``edn:EventBatch``es of
        ``batch`` events as fast as they are acknowledged, for ``seconds``; then until every
        notification is delivered. Figures: events acknowledged per second, notifications
        per second into the subscriber's host, and the busiest server's notifications to it
        per second (over the time its last one took to arrive)."""
        rng = np.random.default_rng(17)
        lock = threading.Lock()
        began = time.time()
        deadline = time.monotonic() + seconds

        def loop():
            publisher = Publisher([self.roots[0].base_url], connect_timeout=3.0, read_timeout=30.0)
            try:
                while time.monotonic() < deadline:
                    with lock:
                        first = self.next_event
                        self.next_event += batch
                        points = rng.uniform(0, 1, size=(batch, D))
                    now = time.time()
                    for k, point in enumerate(points):
                        self.history.sent(first + k, point, now)
                    publisher.send_batch(TOPIC, [event_element(p, first + k)
                                                 for k, p in enumerate(points)])
                    now = time.time()
                    for k in range(batch):
                        self.history.acknowledged(first + k, now)
            finally:
                publisher.close()

        def all_loops():
            with ThreadPoolExecutor(threads) as pool:
                for future in [pool.submit(loop) for _ in range(threads)]:
                    future.result()
        self.lab["publisher"].run(all_loops)
        ended = time.time()
        acknowledged = sum(p.acknowledged_at is not None for p in self.history.publications.values())
        self.wait(self.drained, "every notification of the closed loop", 300, poll=0.5)
        self.record_notifications()
        holder = {k: names[0] for k, names in self.holders().items()}
        arrivals: dict[str, list[float]] = {}
        for n in self.history.notifications:
            arrivals.setdefault(holder.get(n.subscriber, "?"), []).append(n.arrived_at)
        last = max((max(a) for a in arrivals.values()), default=ended)
        busiest = max(arrivals.values(), key=len, default=[])
        return {"events_per_s": round(acknowledged / (ended - began), 1),
                "notifications_per_s": round(len(self.history.notifications) / (last - began), 1),
                "server_to_host_per_s": round(len(busiest) / (max(busiest) - began), 1)
                if busiest else 0.0}

    # -- placement -------------------------------------------------------------------------
    def placement_trial(self, partitioner: str, latency_file: Path, matrix: dict, count: int,
                        events: int) -> dict:
        """Fresh servers placing by ``partitioner`` (``--latency latency_file``); ``count``
        Subscribes, each entering at a random server; the mean distance (ms, from ``matrix``)
        from each Subscribe's entry to its holder, and the roots' hit ratio over ``events``."""
        for name in self.server_names:
            process = self.processes[name]
            process.stop()
            self.data_dirs.pop(name, None)
            self.processes[name] = self._serve_server(
                name, "--partitioner", partitioner, "--latency", str(latency_file))
        self.wait_registered()
        for name in self.server_names:
            self.wait(lambda name=name: self.hosts_topic(name), f"the topic on {name}")
        self.history.ended.update(range(len(self.history.lo)))  # held by the old servers
        rng = np.random.default_rng(29)
        entries = [str(n) for n in rng.choice(self.server_names, size=count)]
        added = self.subscribe(count, seed=31, entries=entries)
        holder = {k: names[0] for k, names in self.holders().items()}
        index = {name: i for i, name in enumerate(matrix["servers"])}
        distances = [matrix["ms"][index[entries[k - added.start]]][index[holder[k]]]
                     for k in added if k in holder]
        before = [self.figures(root) for root in self.roots]
        self.reset_history()
        self.closed_loop_events(events)
        after = [self.figures(root) for root in self.roots]
        sent = sum(int(a.get("events_in", 0)) - int(b.get("events_in", 0))
                   for a, b in zip(after, before))
        copies = sum(int(a.get("copies_out", 0)) - int(b.get("copies_out", 0))
                     for a, b in zip(after, before))
        return {"mean_entry_to_holder_ms": round(float(np.mean(distances)), 2),
                "held": {name: sum(1 for k in added if holder.get(k) == name)
                         for name in self.server_names},
                "hit_ratio": round(copies / (sent * self.below_roots), 4) if sent else None}

    def closed_loop_events(self, events: int, batch: int = 50) -> None:
        """``events`` events in batches at the first root, one batch after another."""
        rng = np.random.default_rng(37)

        def send():
            publisher = Publisher([self.roots[0].base_url], connect_timeout=3.0, read_timeout=30.0)
            try:
                for start in range(0, events, batch):
                    first = self.next_event
                    self.next_event += batch
                    publisher.send_batch(TOPIC, [event_element(p, first + k) for k, p in
                                                 enumerate(rng.uniform(0, 1, size=(batch, D)))])
            finally:
                publisher.close()
        self.lab["publisher"].run(send)
