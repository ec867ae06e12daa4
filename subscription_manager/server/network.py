"""A subscription server's conversation with the network: registration with the root
dispatchers, route updates (its summaries), and the periodic peer exchange of
subscription-routing summaries (paper II, III-A, V-A).

A server registers with, and reports every summary to, each of its root dispatchers
(``edn serve server --dispatcher URL1 --dispatcher URL2``) through one
:class:`route_manager.uplink.Uplink`: each root is independent (its calls run on its own
lane), so one that is down, refuses or hangs in a cut link never holds back the others, and a root that answers again, or restarted without our
registration, is registered again and gets every summary. Publishers may publish at any
root; each event is routed by the root it was published at, with the same summaries.

Routing modes (``edn serve dispatcher --routing``): the roots announce theirs at registration
and the server reports what they read: link matching's equality predicates
(:func:`~subscription_manager.server.summaries.box_predicates`), or its summaries (flooding reads
none, but loads, placement and status still come from them).

Every step is a plain method, so tests run them synchronously (:meth:`NetworkAgent.step`);
:meth:`NetworkAgent.start` runs them in two background threads:

* **summaries**: register where not registered yet (retrying each root with backoff until it
  answers), then every ``summary_interval`` seconds send an ``UpdateSummary`` for each topic
  whose summary (or load) changed since the last one that root accepted: N subscribes in a
  burst cost one or a few route updates per root, never one each. The loop waits for no
  root: each root's lane sends at its own pace, and a round made while a root's lane is still
  busy reaches that root once the lane is free, merged with any later one;
* **peers**: every ``peer_interval`` seconds ask every registered root for the servers it
  knows (``ListServers``; a root that does not list us forgot us: we register there again)
  (each root on its lane, waiting at most ``peer_interval`` for the answers) and send each
  peer a ``PeerUpdate`` per topic (when something changed, and at least every ``HEARTBEAT``
  intervals).

One worker per server: gunicorn may run several worker processes over one store (and on
PostgreSQL several hosts may); the one holding the store's election (:mod:`.election`) runs
the threads (the others retry every second, so a replacement takes over when the holder
dies: the lock goes with its process). Its summaries reflect every worker's subscriptions: it
follows the shared store (``manager.sync()``) before computing them.

Generations: the ``Generation`` of a route update is ``offset + G``, with ``G`` the
subscription store's generation read *before* syncing the view the summary is cut from (so
the summary covers every change up to ``G``, and two workers computing summaries
concurrently cannot make an older view win), and ``offset`` the second (since 2020) at which
this data directory first reported anything (:class:`route_manager.uplink.Generations`,
kept in the store). Both survive restarts, so generations only grow; a server whose data
directory was wiped starts above its old generations as long as it made fewer changes than
seconds have passed. Every root gets the same generation for the same view.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from matchers.pst.links_route_set import predicates_element
from matchers.summary import cut_to_bytes
from route_manager import protocol
from route_manager.protocol import KIND_SERVER, ROUTING_LINKMATCHING, ROUTING_SUMMARIES, routing_of
from route_manager.peers import PeerTable
from route_manager.uplink import Generations, RouteReport, Uplink
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault
from wsframework.namespace import EntryExists, Namespace
from matchers.vocabulary import MATCHER_RTREE_ENGINE
from wsframework.store import Store
from wsframework.transport import TransportError

from ..store import SubscriptionStore
from .election import Election
from .peer_health import PeerHealth
from .settings import EdnSettings
from .summaries import RoutingSummaries

log = logging.getLogger(__name__)

__all__ = ["NetworkAgent", "Election"]

HEARTBEAT = 10  # peer intervals between PeerUpdates that carry no news
_INT32_MAX = 2**31 - 1
MAX_LISTED = 100_000  # servers read from one ListServers answer (a root's answer is bounded)


class NetworkAgent:
    """The server's side of the network conversation (see the module docstring)."""

    def __init__(self, settings: EdnSettings, *, store: Store, subscriptions: SubscriptionStore,
                 topics: Namespace, peers: PeerTable, summaries: RoutingSummaries,
                 health: PeerHealth, base_url: str,
                 sync: Callable[[], object], admin_client: Callable[[str], AdminClient],
                 count: Callable[..., None]):
        """``settings``: the role's (name, roots, intervals, byte limits); ``store``: the
        service's store (the generation offset, and the election of the one worker that talks
        to the network); ``subscriptions``: the durable subscriptions (their generation);
        ``topics``: the topics hosted (created at registration); ``peers``: what the peers
        told; ``summaries``: this server's engines, load and summaries; ``health``: which
        peers answer; ``sync()``: bring the view up to date with the store;
        ``admin_client``, ``count``: as the manager's."""
        self.edn = settings
        self.subscriptions = subscriptions
        self.topics = topics
        self.peers = peers
        self.summaries = summaries
        self.health = health
        self.base_url = base_url
        self.sync = sync
        self.admin_client = admin_client
        self.count = count
        self._offset = Generations(store).offset
        self.uplink = Uplink(name=self.edn.name, address=base_url,
                             kind=KIND_SERVER, upstreams=self.edn.dispatchers,
                             client_for=admin_client,
                             on_registered=self._on_registered,
                             on_sent=lambda n: self.count("summary_updates_sent", n),
                             cuts=False, incarnation=self._offset)
        self.registered = threading.Event()  # with at least one root: the peers can be asked
        self.election = Election(store)
        self._told: dict[tuple[str, str], tuple] = {}    # (peer, topic) -> (what, when)
        self._routing: dict[str, str | None] = {}  # root -> the routing mode it announced
        self._push_lock = threading.Lock()  # one view of the subscriptions read at a time
        self._stop = threading.Event()
        self._wake_peers = threading.Event()  # a new topic: tell the peers now
        self._threads: list[threading.Thread] = []
        topics.on_change(lambda event, entry: self._wake_peers.set()
                         if event == "added" else None)

    # -- registration ----------------------------------------------------------------------
    def register(self, *, wait: float | None = None) -> bool:
        """RegisterServer at every root not registered yet whose retry time has come (each
        answer: the topics to host, the peers), then send every root the route updates due
        to it: all of them to a root that just registered us (a restarted server re-announces
        its summaries, a restarted root learns them again). Each root's calls run on its own
        lane, registration first; ``wait``: how long to wait for the roots (None: until each
        answered or failed). True when registered with every root."""
        self.uplink.register_missing(wait=wait)
        self.push_summaries(wait=wait)
        return self.uplink.is_registered()

    def _on_registered(self, root: str, response) -> None:
        try:
            self._routing[root] = routing_of(response)
        except SoapFault as fault:
            self._routing[root] = None
            log.error("%s announces an unknown routing mode: %s", root, fault.reason)
        topics = response.Topic or []
        for spec in topics:
            if spec.Name in self.topics:
                continue
            try:
                self.topics.create(spec.Name, spec.Matcher or MATCHER_RTREE_ENGINE, spec.Options)
                log.info("hosting topic %s", spec.Name)
            except EntryExists:
                pass
            except Exception as exc:
                log.error("cannot host topic %s: %s", spec.Name, exc)
        peers = (response.Peer or [])[:MAX_LISTED]
        self.peers.set_servers([(p.Name, p.Address, p.Load) for p in peers],
                               exclude=self.edn.name)
        self.count("registrations")
        log.info("registered with %s as %s (%d topics, %d peers)", root, self.edn.name,
                 len(topics), len(peers))
        self.registered.set()  # the topics are hosted: the peers can be asked now

    def _note_registration(self) -> None:
        if self.uplink.any_registered():
            self.registered.set()
        else:
            self.registered.clear()

    # -- route updates ---------------------------------------------------------------------
    def routing(self) -> str | None:
        """The network's routing mode, as the roots announced it at registration (summaries
        before any answered); None when they disagree or one announced an unknown mode: a
        misconfigured network, to which this server reports nothing rather than half."""
        modes = set(self._routing.values())
        if not modes:
            return ROUTING_SUMMARIES
        if len(modes) == 1 and None not in modes:
            return modes.pop()
        return None

    def _reports(self, entries, load: int) -> list[RouteReport]:
        """Per topic, what the network's routing mode reads: the subscriptions' equality
        predicates (linkmatching), or the summary (summaries; flooding reads none, but the
        root's loads, placement and status still come from these updates)."""
        summaries = self.summaries
        mode = self.routing()
        if mode is None:
            log.error("the roots announce different routing modes %s: reporting nothing",
                      sorted(map(str, self._routing.values())))
            return []
        if mode != ROUTING_LINKMATCHING:
            return [RouteReport(entry.name, (entry.uid, engine.summary_generation, load),
                                lambda _precision, engine=engine: self._summary(engine, load))
                    for entry in entries for engine in (summaries.matcher_for(entry),)]
        if mode == ROUTING_LINKMATCHING:
            return [RouteReport(entry.name, (entry.uid, engine.summary_generation,
                                             engine.rectangle_count, load, mode),
                                lambda _precision, entry=entry, engine=engine: (
                                    predicates_element(summaries.equality_predicates(entry),
                                                       engine.schema), load))
                    for entry in entries for engine in (summaries.matcher_for(entry),)]

    def push_summaries(self, *, topics=None, force: bool = False,
                       wait: float | None = None) -> int:
        """Send each registered root an UpdateSummary for every topic (of ``topics``, default
        all) whose summary or load changed since the last one it accepted (every one with
        ``force``); returns how many were sent by the roots that answered within ``wait``
        (None: every root; the counter ``summary_updates_sent`` counts them all). A root that
        does not answer gets them next call; one that no longer knows us is registered again
        first. The view is read once per call, by the first root's lane that needs it (none
        when no root is registered), so every root gets the same generation for it."""
        view: dict[str, object] = {}

        def read() -> dict[str, object]:
            with self._push_lock:
                if not view:
                    # before syncing: the view the summaries are cut from covers every change
                    # up to G
                    view["generation"] = min(self._offset + self.subscriptions.generation(),
                                             _INT32_MAX)
                    self.sync()
                    load = self.summaries.load()
                    view["reports"] = self._reports(
                        [entry for entry in list(self.topics.entries())
                         if topics is None or entry.name in topics], load)
                return view

        sent = self.uplink.push(lambda: read()["reports"], generation=lambda: read()["generation"],
                                force=force, wait=wait)
        self._note_registration()
        return sent

    def _summary(self, engine, load: int):
        """The summary of one topic as sent to the roots (each cuts it to the precision it
        routes with), precise unless larger than ``summary_max_bytes``, and the load."""
        with self.summaries.reading():
            summary = engine.summary(1.0)
            rectangles = engine.rectangle_count
        # a precise summary of tens of thousands of boxes would exceed the root's body limit
        summary = cut_to_bytes(summary, self.edn.summary_max_bytes)
        element = summary.to_element()
        # the denominator of the dispatcher's precision cuts (paper: summary boxes /
        # subscription rectangles of this server)
        element.set("rectangles", str(rectangles))
        return element, load

    # -- peer exchange ---------------------------------------------------------------------
    def exchange_peers(self) -> int:
        """Refresh the peer list from the roots and send each peer our routing summary and
        load per topic; returns how many PeerUpdates were sent."""
        summaries = self.summaries
        self._refresh_peers()
        peers = self.peers.servers()
        self.sync()
        load = summaries.load()
        now = time.monotonic()
        heartbeat = HEARTBEAT * self.edn.peer_interval
        sent = 0
        for entry in list(self.topics.entries()):
            engine = summaries.matcher_for(entry)
            what = (entry.uid, engine.summary_generation, load, summaries.route_count(entry))
            element = None
            for peer, (address, _) in sorted(peers.items()):
                told = self._told.get((peer, entry.name))
                if told is not None and told[0] == what and now - told[1] < heartbeat:
                    continue
                if element is None:
                    element = summaries.peer_summary(entry).to_element()
                try:
                    self.admin_client(address).call(protocol.PeerUpdate(
                        Server=self.edn.name, Address=self.base_url, Route=entry.name,
                        Load=load, Summary=element))
                except TransportError as exc:
                    self.health.mark_down(peer)
                    log.info("peer %s unreachable: %s", peer, exc)
                    continue
                except SoapFault as fault:
                    log.warning("peer %s refused our update of %s: %s", peer, entry.name,
                                fault.reason)
                    continue
                self.health.mark_up(peer)
                self._told[(peer, entry.name)] = (what, now)
                sent += 1
        self.count("peer_updates_sent", sent)
        return sent

    def _refresh_peers(self) -> None:
        """ListServers at every registered root: the first answer is the peer list (every
        root knows every server that registered with it, normally all); a root that does not
        list us forgot us (it restarted without our registration) and is registered with
        again next round. Asking each root, not one, matters: a root that forgot us routes
        nothing to us, and an unchanged summary would never tell us so. The roots are asked
        concurrently, each on its lane; one that has not answered within ``peer_interval``
        (a cut link) is left out of this round."""
        answers = self.uplink.ask("list-servers", self._list_servers,
                                  wait=self.edn.peer_interval)
        listed = next((servers for servers in answers.values() if servers is not None), None)
        if listed is not None:
            self.peers.set_servers([(s.Name, s.Address, s.Load) for s in listed],
                                exclude=self.edn.name)
        self._note_registration()

    def _list_servers(self, root: str):
        """The servers ``root`` lists (None: it did not answer); forgets it when it does not
        list us."""
        try:
            servers = (self.admin_client(root).call(protocol.ListServers()).Server
                       or [])[:MAX_LISTED]
        except (TransportError, SoapFault) as exc:
            log.warning("peer list not read from %s: %s", root, getattr(exc, "reason", exc))
            return None
        if self.edn.name not in {s.Name for s in servers}:
            log.warning("%s forgot us: registering again", root)
            self.uplink.forget(root)
        return servers

    def figures(self) -> dict[str, object]:
        """``registered`` (roots we are registered with) and ``root.N.*`` of GetStats."""
        registered = sum(u.registered for u in self.uplink.upstreams.values())
        return {"registered": registered, "roots": len(self.uplink.upstreams),
                **self.uplink.figures("root")}

    # -- running ---------------------------------------------------------------------------
    def step(self) -> None:
        """One round of everything, synchronously (tests, demos)."""
        self.register()
        self.exchange_peers()

    def start(self) -> None:
        for target, name in ((self._summary_loop, "edn-summaries"), (self._peer_loop, "edn-peers")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _summary_loop(self) -> None:
        while not self._stop.is_set():
            if not self.election.try_acquire():
                self._stop.wait(1.0)
                continue
            try:
                # each root not registered yet is tried when its own backoff allows (the
                # uplink's), and each root's calls run on its own lane: the loop waits for
                # none, so a root that is down or hangs costs the others nothing
                self.register(wait=0)
            except Exception:
                log.exception("route update round failed")
            self._stop.wait(self.edn.summary_interval)

    def _peer_loop(self) -> None:
        while not self._stop.is_set():
            if not self.registered.wait(0.5):
                continue
            self._wake_peers.clear()
            try:
                self.exchange_peers()
            except Exception:
                log.exception("peer exchange failed")
            self._wake_peers.wait(self.edn.peer_interval)

    def close(self) -> None:
        self._stop.set()
        self.registered.set()  # wake the peer loop
        self._wake_peers.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        self.uplink.close()
        self.election.release()
