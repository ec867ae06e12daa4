"""An event distribution network on this machine: a dispatcher and N subscription servers as
real ``edn serve`` processes (gunicorn) on loopback, a notification sink, and the ground truth
a single event source would deliver, computed here from the same range filters.

Used by ``edn demo``, the network benchmarks and the integration tests. Every wait is on a
condition (the sink's count, the dispatcher's and servers' ``GetStats``), never a fixed sleep.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from lxml import etree

from edn.localnet.processes import ServerProcess, TlsFiles, stop_together
from edn.sink import NotificationSink
from matchers.vocabulary import RANGES_DIALECT
from route_manager import protocol
from route_manager.workloads.grid_xml import GRID_EVENTS, event_element, range_filter, schema_element
from route_manager.publisher import Publisher
from subscription_manager.client import EventingClient
from wsframework import pki
from wsframework.admin import AdminClient, contracts
from wsframework.tls import (ClientTls, ServerTls, process_client_tls, server_context,
                             set_process_client_tls)

TOPIC = "grid"


def wait_until(condition, timeout: float = 30.0, what: str = "condition", poll: float = 0.05):
    """Poll ``condition`` until it returns something true; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def stats(address: str, token: str, prefix: str | None = None) -> dict[str, str]:
    admin = AdminClient(address, token)
    return {f.Name: f.Value for f in admin.call(contracts.GetStats(Prefix=prefix)).Figure or []}


class LocalNetwork:
    """``servers`` is a list of (name, partitioner, workers).

    Topologies: ``roots`` root dispatchers (every node below registers with each; each
    lists the others with ``--peer-root``, so a topic created at one reaches all; events
    are published at the first that answers) and ``children``: child dispatcher name -> the
    names of the servers under it (``edn serve dispatcher --parent ...``, a dispatch tree);
    servers under no child register with the roots."""

    def __init__(self, data_dir: Path, servers, *, token: str, d: int = 4,
                 load_threshold: int = 20_000, sink: NotificationSink | None = None,
                 dispatcher_args=(), keep_bodies: bool = True, roots: int = 1,
                 children: dict[str, list[str]] | None = None, child_args=(),
                 tls_dir: Path | None = None):
        self.data_dir = Path(data_dir)
        self.token = token
        self.d = d
        self.pki = NetworkPki(Path(tls_dir)) if tls_dir is not None else None
        self.own_sink = sink is None
        self.sink = sink or NotificationSink(keep_bodies=keep_bodies,
                                             ssl_context=self.pki.sink_context() if self.pki else None)
        if roots < 1:
            raise ValueError("a network needs at least one root dispatcher")
        self.roots = [ServerProcess("dispatcher", data_dir=self.data_dir / _root_dir(k),
                                    admin_token=token, extra_args=list(dispatcher_args),
                                    tls=self._tls(_root_dir(k)))
                      for k in range(roots)]
        for root in self.roots:  # topics created at one root reach the others
            root.extra_args += [arg for other in self.roots if other is not root
                                for arg in ("--peer-root", other.base_url)]
        self.dispatcher = self.roots[0]
        children = dict(children or {})
        parent_of = {node: child for child, below in children.items() for node in below}
        self.depth = {name: _depth(name, parent_of) for name in [*children, *parent_of]}
        self.children: dict[str, ServerProcess] = {}
        for name in sorted(children, key=self.depth.get):  # parents first (they start first)
            ups = [self.children[parent_of[name]]] if name in parent_of else self.roots
            self.children[name] = ServerProcess(
                "dispatcher", data_dir=self.data_dir / name, admin_token=token, tls=self._tls(name),
                extra_args=[*(arg for up in ups for arg in ("--parent", up.base_url)),
                            "--name", name, *dispatcher_args, *child_args])
        self.below: dict[str, list[str]] = {  # node ("": the roots) -> the nodes under it
            "": [n for n in [*children, *(n for n, _, _ in servers)] if n not in parent_of],
            **{child: list(below) for child, below in children.items()}}
        self.servers: dict[str, ServerProcess] = {}
        for name, partitioner, workers in servers:
            child = parent_of.get(name)
            ups = [self.children[child]] if child else self.roots
            self.servers[name] = ServerProcess(
                "server", data_dir=self.data_dir / name, admin_token=token, workers=workers,
                tls=self._tls(name),
                extra_args=[*(arg for up in ups for arg in ("--dispatcher", up.base_url)),
                            "--name", name, "--partitioner", partitioner,
                            "--load-threshold", str(load_threshold)])
        self.lo = np.empty((0, d))
        self.hi = np.empty((0, d))
        self.handles: list = []
        self.published: list[tuple[int, np.ndarray]] = []
        self.next_event = 0

    def _tls(self, name: str) -> TlsFiles | None:
        return self.pki.member(name) if self.pki else None

    # -- lifecycle -----------------------------------------------------------------------------
    def dispatchers(self) -> list[ServerProcess]:
        """Every dispatcher: the roots, then the children."""
        return [*self.roots, *self.children.values()]

    def start(self) -> "LocalNetwork":
        if self.pki:  # this process's calls (admin, subscribe, publish) trust the network's CA
            self._previous_tls = process_client_tls()
            set_process_client_tls(self.pki.client("operator"))
        if self.own_sink:
            self.sink.start()
        for process in [*self.dispatchers(), *self.servers.values()]:
            process.start()
        self.admin = AdminClient(self.dispatcher.base_url, self.token)
        for root in self.roots:
            self._wait_registered(root, self.below[""], f"every node registered at {root.base_url}")
        for name, child in self.children.items():
            self._wait_registered(child, self.below[name], f"every server registered at {name}")
        return self

    def _wait_registered(self, dispatcher: ServerProcess, below, what: str) -> None:
        """Wait until ``dispatcher`` counts every node of ``below``; on timeout the error
        carries the end of its log and of each node's that should have registered."""
        try:
            wait_until(lambda: self.registered(dispatcher) == len(below), what=what)
        except AssertionError as exc:
            nodes = {**self.children, **self.servers}
            logs = [("the dispatcher", dispatcher)] + [(n, nodes[n]) for n in below if n in nodes]
            tails = "\n".join(f"--- {label} (last 2,000 characters of its log) ---\n"
                              f"{process.log_text()[-2000:]}" for label, process in logs)
            raise AssertionError(f"{exc}\n{tails}") from None

    def registered(self, dispatcher: ServerProcess) -> int:
        return int(self.node_stats(dispatcher, "servers").get("servers", 0))

    def close(self) -> None:
        # The servers together, then the dispatchers a level at a time, children first: a
        # node stops while the ones it reports to still answer.
        stop_together(self.servers.values())
        levels: dict[int, list[ServerProcess]] = {0: list(self.roots)}
        for name, child in self.children.items():
            levels.setdefault(self.depth[name], []).append(child)
        for depth in sorted(levels, reverse=True):
            stop_together(levels[depth])
        if self.own_sink:
            self.sink.stop()
        if self.pki and hasattr(self, "_previous_tls"):
            set_process_client_tls(self._previous_tls)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type, exc, tb):
        died = self.died_on_their_own() if exc is not None else []
        self.close()
        if died:
            # A refused connection says little; the process that went away, its exit code
            # and the end of its log say why.
            names = ", ".join(f"{label} exited with {process.proc.returncode}"
                              for label, process in died)
            tails = "\n".join(f"--- {label} (last 3,000 characters of its log) ---\n"
                              f"{process.log_text()[-3000:]}" for label, process in died)
            raise RuntimeError(f"{names} (then: {exc_type.__name__}: {exc})\n{tails}") from exc

    def died_on_their_own(self) -> list[tuple[str, ServerProcess]]:
        """(name, process) for each node that exited though nothing here stopped or killed it."""
        nodes = {**{_root_dir(k): r for k, r in enumerate(self.roots)}, **self.children,
                 **self.servers}
        return [(name, process) for name, process in nodes.items()
                if process.proc is not None and process.proc.poll() is not None
                and not process.stopped_here]

    # -- administration ------------------------------------------------------------------------
    def dispatcher_stats(self, prefix: str | None = None) -> dict[str, str]:
        return stats(self.dispatcher.base_url, self.token, prefix)

    def node_stats(self, process: ServerProcess, prefix: str | None = None) -> dict[str, str]:
        """The GetStats figures of any dispatcher or server of the network."""
        return stats(process.base_url, self.token, prefix)

    def level_hit_ratios(self) -> list[float]:
        """The hit ratio of each level of dispatchers, the roots first: copies the level
        forwarded / (events published x the nodes one level down), the paper's R per level.
        One level for a flat network; a tree adds one per depth of child dispatchers."""
        events = copies = 0
        for root in self.roots:
            figures = self.node_stats(root)
            events += int(figures.get("events_in", 0))
            copies += int(figures.get("copies_out", 0))
        levels = 1 + max((self.depth[name] for name in self.children), default=0)
        if not events:
            return [0.0] * levels
        ratios = [copies / (events * max(1, len(self.below[""])))]
        for level in range(1, levels):
            at = [name for name in self.children if self.depth[name] == level]
            below = sum(len(self.below[name]) for name in at)
            forwarded = sum(int(self.node_stats(self.children[name], "copies_out")
                                .get("copies_out", 0)) for name in at)
            ratios.append(forwarded / (events * max(1, below)))
        return ratios

    def server_stats(self, name: str, prefix: str | None = None) -> dict[str, str]:
        return stats(self.servers[name].base_url, self.token, prefix)

    def create_topic(self, topic: str = TOPIC):
        """The topic at the first root; the peer roots take it from there, and each passes
        it down to the nodes registered with it."""
        AdminClient(self.dispatcher.base_url, self.token).create_topic(topic, None,
                                                                      schema_element(self.d))
        wait_until(lambda: all(self.hosts_topic(r, topic) for r in self.roots),
                   what="the topic at every root")
        wait_until(lambda: all(self.hosts_topic(s, topic) for s in self.servers.values()),
                   what="the topic on every server")

    def hosts_topic(self, server: ServerProcess, topic: str = TOPIC) -> bool:
        """Whether ``server`` (a server or a dispatcher) lists ``topic``."""
        return any(t["name"] == topic for t in AdminClient(server.base_url, self.token).list_topics())

    def repartition(self, algorithm: str, topic: str = TOPIC):
        return self.admin.call(protocol.Repartition(Topic=topic, Algorithm=algorithm))

    # -- subscriptions -------------------------------------------------------------------------
    def subscribe(self, lo: np.ndarray, hi: np.ndarray, *, threads: int = 4, topic: str = TOPIC,
                  versions=("2011", "2011", "2011", "2011", "2004")) -> None:
        """Subscribe one range filter per row, spread over the servers (placement then moves
        each to the best server); every fifth through WS-Eventing 2004/08."""
        start = len(self.handles)
        names = list(self.servers)

        def one(i):
            server = self.servers[names[i % len(names)]]
            client = EventingClient(versions[i % len(versions)])
            return client.subscribe(f"{server.base_url}/topics/{topic}",
                                    f"{self.sink.url}/n/{start + i}",
                                    filter=range_filter(lo[i], hi[i]), dialect=RANGES_DIALECT,
                                    expires="PT1H")

        with ThreadPoolExecutor(threads) as pool:
            self.handles.extend(pool.map(one, range(len(lo))))
        self.lo = np.vstack([self.lo, lo])
        self.hi = np.vstack([self.hi, hi])
        self.wait_routed()

    def subscribe_in_bulk(self, lo: np.ndarray, hi: np.ndarray, *, topic: str = TOPIC,
                          chunk: int = 2500, version: str = "2011") -> None:
        """Subscribe one range filter per row as an operator's placed bulk subscribe does
        (``edn subscribe --from-file --place``): SubscribeMany messages of at most ``chunk``
        requests, sent to the servers in turn, as many at once as there are servers (each
        server places its message's requests as Subscribes would be, and sends every other
        server its share in one message; one message when the rows fit in one)."""
        from subscription_manager.bulk_subscribe import (SubscribeMany, parse_results,
                                                         requests_element)
        from subscription_manager.client import SubscriptionHandle, subscribe_body
        from subscription_manager.manager import MANAGER_PATH
        from subscription_manager.messages import manager_epr
        from subscription_manager.operations import Made
        from subscription_manager.versions import VERSIONS
        from wsframework.transport import HttpTransport
        start = len(self.handles)
        names = list(self.servers)
        size = max(1, chunk)
        parts = [range(i, min(i + size, len(lo))) for i in range(0, len(lo), size)]

        def send(k):
            server = self.servers[names[k % len(names)]]
            rows = parts[k]
            bodies = [subscribe_body(version, f"{self.sink.url}/n/{start + i}",
                                     filter=range_filter(lo[i], hi[i]),
                                     dialect=RANGES_DIALECT, expires="PT1H") for i in rows]
            transport = HttpTransport(timeout=(3.0, 600.0))
            try:
                answers = parse_results(AdminClient(server.base_url, self.token,
                                                    transport=transport).call(SubscribeMany(
                    Topic=topic, Requests=requests_element(version, bodies),
                    Place=True)).Results)
            finally:
                transport.close()
            refused = [a for a in answers if not isinstance(a, Made)]
            if refused or len(answers) != len(rows):
                raise RuntimeError(f"a placed bulk subscribe at {server.base_url} refused "
                                   f"{len(refused)} of {len(rows)}: {refused[:3]}")
            own = server.base_url + MANAGER_PATH
            return [SubscriptionHandle(VERSIONS[version],
                                       manager_epr(VERSIONS[version], a.manager or own, a.id),
                                       a.expires) for a in answers]

        with ThreadPoolExecutor(len(names)) as pool:
            for handles in pool.map(send, range(len(parts))):
                self.handles.extend(handles)
        self.lo = np.vstack([self.lo, lo])
        self.hi = np.vstack([self.hi, hi])
        self.wait_routed()

    def wait_routed(self, timeout: float = 60.0) -> None:
        """Until every root's route updates account for every subscription (a child
        dispatcher reports the load of its whole subtree)."""
        def total_load(root):
            figures = self.node_stats(root, "server.")
            return sum(int(v) for k, v in figures.items() if k.endswith(".load"))
        for root in self.roots:
            wait_until(lambda: total_load(root) == len(self.handles), timeout,
                       what=f"route updates at {root.base_url}")

    # -- events --------------------------------------------------------------------------------
    def publish(self, points: np.ndarray, topic: str = TOPIC, *, batch: int = 50,
                threads: int = 2, on_ack=None, at=None) -> tuple[int, int]:
        """Publish one event per row at the roots, ``batch`` events per message (an
        ``edn:EventBatch``; ``batch=1``: one event per message), from ``threads`` clients
        sharing one failover publisher (:class:`route_manager.publisher.Publisher`: at the
        first root, at the next when one dies); returns the range of event ids used.
        ``on_ack(rows, acknowledgement)``: called as each message is acknowledged. ``at``:
        the roots to publish at (default every root)."""
        first = self.next_event
        self.next_event += len(points)
        messages = []  # (its events, its (event id, point) pairs)
        for start in range(0, len(points), batch):
            rows = [(first + start + k, point) for k, point in enumerate(points[start:start + batch])]
            messages.append(([event_element(point, event_id) for event_id, point in rows], rows))
        lock = threading.Lock()
        # one root: nowhere to fail over to, so a slow connect gets as long as it always had
        roots = list(at or self.roots)
        publisher = Publisher([root.base_url for root in roots],
                              connect_timeout=0.5 if len(roots) > 1 else 3.0)

        def send(part):
            for events, rows in part:
                ack = (publisher.publish(topic, events[0]) if batch == 1
                       else publisher.send_batch(topic, events))
                with lock:  # published = acknowledged: the ground truth counts only those
                    self.published.extend(rows)
                    if on_ack is not None:
                        on_ack(rows, ack)
        try:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(send, [messages[k::threads] for k in range(threads)]))
        finally:
            publisher.close()
        return first, self.next_event

    def expected(self, first: int = 0, last: int | None = None) -> list[tuple[str, str]]:
        """What a single event source would deliver: (sink path, event id), sorted."""
        out = []
        for event_id, point in self.published:
            if event_id < first or (last is not None and event_id >= last):
                continue
            inside = np.all((self.lo <= point) & (self.hi >= point), axis=1)
            out.extend((f"/n/{i}", str(event_id)) for i in np.flatnonzero(inside))
        return sorted(out)

    def received(self, first: int = 0, last: int | None = None) -> list[tuple[str, str]]:
        out = []
        for message in list(self.sink.messages):
            event = etree.fromstring(message.body).find(f".//{{{GRID_EVENTS}}}event")
            event_id = int(event.get("id"))
            if event_id >= first and (last is None or event_id < last):
                out.append((message.path, str(event_id)))
        return sorted(out)

    def wait_counted(self, first: int, last: int, timeout: float = 60.0) -> bool:
        """Until the sink has counted what events ``first``..``last`` should bring (every
        earlier notification delivered once); False on timeout. A condition the sink
        signals: reading every body at each poll would cost the sink's own handlers."""
        target = self.delivered_before(first) + len(self.expected(first, last))
        return self.sink.wait_count(target, timeout)

    def wait_delivered(self, first: int, last: int, timeout: float = 60.0) -> list[tuple[str, str]]:
        expected = self.expected(first, last)
        # the count first, then the events themselves (a sink that missed or refused
        # earlier notifications never reaches the count: the poll below still decides)
        self.wait_counted(first, last, timeout)
        wait_until(lambda: len(self.received(first, last)) >= len(expected), timeout,
                   what=f"{len(expected)} notifications")
        wait_until(self.quiet, timeout, what="an idle network")
        return expected

    def delivered_before(self, event_id: int) -> int:
        """Notifications a single source would have delivered for the events before
        ``event_id`` (what the sink counted before them, when every delivery was exact)."""
        if not self.published or event_id <= self.published[0][0]:
            return 0
        return len(self.expected(0, event_id))

    def quiet(self) -> bool:
        """Nothing queued at any live dispatcher and nothing pending at any server."""
        for dispatcher in self.dispatchers():
            if not dispatcher.alive():
                continue
            if not forwarded_all(self.node_stats(dispatcher, "server.")):
                return False
        return all(int(self.server_stats(n, "pending").get("pending", 1)) == 0 for n in self.servers)


class NetworkPki:
    """A CA in ``directory`` (made on first use) and a certificate for each member, issued
    for loopback (``IP:127.0.0.1``, ``DNS:localhost``)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.ca_dir = directory / "ca"
        if not (self.ca_dir / pki.CA_CERT).exists():
            pki.init_ca(self.ca_dir)
        self.ca = self.ca_dir / pki.CA_CERT

    def _issued(self, name: str) -> pki.Issued:
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"
        if cert.exists() and key.exists():
            return pki.Issued(cert, key)
        return pki.issue(name, self.ca_dir, self.directory, sans=["IP:127.0.0.1", "DNS:localhost"])

    def member(self, name: str, client_auth: str | None = None) -> TlsFiles:
        issued = self._issued(name)
        return TlsFiles(issued.certificate, issued.key, self.ca, client_auth)

    def client(self, name: str) -> ClientTls:
        issued = self._issued(name)
        return ClientTls(ca=self.ca, cert=issued.certificate, key=issued.key)

    def sink_context(self):
        issued = self._issued("sink")
        return server_context(ServerTls(issued.certificate, issued.key))


def forwarded_all(figures: dict[str, str]) -> bool:
    """Whether a dispatcher's ``server.*`` figures say every copy it queued was sent or
    dropped (nothing left to forward)."""
    queued = sum(int(v) for k, v in figures.items() if k.endswith(".queued"))
    sent = sum(int(v) for k, v in figures.items() if k.endswith(".sent"))
    dropped = sum(int(v) for k, v in figures.items() if k.endswith(".dropped"))
    return queued == sent + dropped


def _root_dir(k: int) -> str:
    return "dispatcher" if k == 0 else f"dispatcher-{k + 1}"


def _depth(name: str, parent_of: dict[str, str]) -> int:
    """1 for a node under the roots, 2 under one of their children, ..."""
    depth, seen = 1, {name}
    while name in parent_of:
        name = parent_of[name]
        if name in seen:
            raise ValueError(f"the tree has a cycle through {name!r}")
        seen.add(name)
        depth += 1
    return depth
