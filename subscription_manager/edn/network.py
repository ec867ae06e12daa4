"""A subscription server's conversation with the network: registration with the dispatcher,
route updates (its summaries), and the periodic peer exchange of subscription-routing
summaries (paper II, III-A, V-A).

Every step is a plain method, so tests run them synchronously (:meth:`NetworkAgent.step`);
:meth:`NetworkAgent.start` runs them in two background threads:

* **summaries**: register (retrying with backoff until the dispatcher answers), then every
  ``summary_interval`` seconds send an ``UpdateSummary`` for each topic whose summary (or
  load) changed since the last one sent: N subscribes in a burst cost one or a few route
  updates, never one each;
* **peers**: every ``peer_interval`` seconds refresh the peer list (``ListServers``) and send
  each peer a ``PeerUpdate`` per topic (when something changed, and at least every
  ``HEARTBEAT`` intervals).

One worker per server: gunicorn may run several worker processes over one data directory;
the one holding an exclusive ``flock`` on ``DATA/edn-server.lock`` runs the threads (the
others retry every second, so a replacement takes over when the holder dies: the kernel
drops the lock with the process). Its summaries reflect every worker's subscriptions: it
follows the shared store (``manager.sync()``) before computing them.

Generations: the ``Generation`` of a route update is ``offset + G``, with ``G`` the
subscription store's generation read *before* syncing the view the summary is cut from (so
the summary covers every change up to ``G``, and two workers computing summaries
concurrently cannot make an older view win), and ``offset`` the second (since 2020) at which
this data directory first announced anything, kept in the store. Both survive restarts, so
generations only grow; a server whose data directory was wiped starts above its old
generations as long as it made fewer changes than seconds have passed.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from route_manager import edn_wire
from route_manager.edn_wire import FAULT_UNKNOWN_SERVER
from wsframework.exceptions import SoapFault
from wsframework.namespace import EntryExists
from wsframework.ns import MATCHER_RTREE_ENGINE
from wsframework.transport import TransportError

from .election import Election

log = logging.getLogger(__name__)

__all__ = ["NetworkAgent", "Election"]

HEARTBEAT = 10  # peer intervals between PeerUpdates that carry no news
_EPOCH_2020 = 1_577_836_800
_INT32_MAX = 2**31 - 1
_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_server_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class NetworkAgent:
    def __init__(self, manager):
        self.manager = manager
        self.edn = manager.edn
        store = manager.service.store
        store.executescript(_STATE_SCHEMA)
        with store.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO edn_server_state(key, value) VALUES (?, ?)",
                         ("generation_offset", max(0, int(time.time()) - _EPOCH_2020)))
        self._offset = store.query("SELECT value FROM edn_server_state WHERE key = ?",
                                   ("generation_offset",))[0]["value"]
        self.registered = threading.Event()
        self.election = Election(Path(manager.service.config.data_dir) / "edn-server.lock")
        self._announced: dict[str, tuple] = {}           # topic -> what its last update held
        self._told: dict[tuple[str, str], tuple] = {}    # (peer, topic) -> (what, when)
        self._push_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_peers = threading.Event()  # a new topic: tell the peers now
        self._threads: list[threading.Thread] = []
        manager.topics.on_change(lambda event, entry: self._wake_peers.set()
                                 if event == "added" else None)

    def _dispatcher(self):
        return self.manager.admin_client(self.edn.dispatcher)

    # -- registration ----------------------------------------------------------------------
    def register(self) -> bool:
        """RegisterServer at the dispatcher; host its topics, remember the peers, announce
        every summary. False when the dispatcher did not answer (or refused)."""
        m = self.manager
        try:
            response = self._dispatcher().call(edn_wire.RegisterServer(
                Name=self.edn.name, Address=m.service.base_url))
        except (TransportError, SoapFault) as exc:
            log.warning("registration at %s failed: %s", self.edn.dispatcher,
                        getattr(exc, "reason", exc))
            return False
        for spec in response.Topic or []:
            if spec.Name in m.topics:
                continue
            try:
                m.topics.create(spec.Name, spec.Matcher or MATCHER_RTREE_ENGINE, spec.Options)
                log.info("hosting topic %s", spec.Name)
            except EntryExists:
                pass
            except Exception as exc:
                log.error("cannot host topic %s: %s", spec.Name, exc)
        m.peers.set_servers([(p.Name, p.Address, p.Load) for p in response.Peer or []],
                            exclude=self.edn.name)
        with self._push_lock:
            self._announced.clear()
        self.registered.set()
        m.count("registrations")
        log.info("registered with %s as %s (%d topics, %d peers)", self.edn.dispatcher,
                 self.edn.name, len(response.Topic or []), len(response.Peer or []))
        self.push_summaries(force=True)  # a restarted server re-announces its summaries
        return True

    # -- route updates ---------------------------------------------------------------------
    def push_summaries(self, *, topics=None, force: bool = False) -> int:
        """Send an UpdateSummary for every topic (of ``topics``, default all) whose summary
        or load changed since the last one sent (every one with ``force``); returns how many
        were sent. A dispatcher that does not answer leaves them due for the next call."""
        m = self.manager
        client = self._dispatcher()
        with self._push_lock:
            generation = min(self._offset + m.store.generation(), _INT32_MAX)
            m.sync()
            load = m.load()
            sent = 0
            for entry in list(m.topics.entries()):
                if topics is not None and entry.name not in topics:
                    continue
                engine = m.matcher_for(entry)
                key = (entry.uid, engine.summary_generation, load)
                if not force and self._announced.get(entry.name) == key:
                    continue
                with m.reading():
                    summary = engine.summary(1.0)
                    rectangles = engine.rectangle_count
                element = summary.to_element()
                # the denominator of the dispatcher's precision cuts (paper: summary boxes /
                # subscription rectangles of this server)
                element.set("rectangles", str(rectangles))
                request = edn_wire.UpdateSummary(Server=self.edn.name, Route=entry.name,
                                                 Generation=generation, Load=load,
                                                 Summary=element)
                try:
                    client.call(request)
                except TransportError as exc:
                    log.warning("route update for %s not sent: %s", entry.name, exc)
                    break
                except SoapFault as fault:
                    if fault.subcode == FAULT_UNKNOWN_SERVER:
                        log.warning("the dispatcher does not know us: registering again")
                        self.registered.clear()
                        break
                    log.warning("route update for %s refused: %s", entry.name, fault.reason)
                self._announced[entry.name] = key
                sent += 1
            m.count("summary_updates_sent", sent)
            return sent

    # -- peer exchange ---------------------------------------------------------------------
    def exchange_peers(self) -> int:
        """Refresh the peer list from the dispatcher and send each peer our routing summary
        and load per topic; returns how many PeerUpdates were sent."""
        m = self.manager
        try:
            listed = self._dispatcher().call(edn_wire.ListServers()).Server or []
            m.peers.set_servers([(s.Name, s.Address, s.Load) for s in listed],
                                exclude=self.edn.name)
            if self.registered.is_set() and self.edn.name not in {s.Name for s in listed}:
                log.warning("the dispatcher forgot us: registering again")
                self.registered.clear()  # the summary loop registers and re-announces
        except (TransportError, SoapFault) as exc:
            log.warning("peer list not refreshed: %s", getattr(exc, "reason", exc))
        peers = m.peers.servers()
        m.sync()
        load = m.load()
        now = time.monotonic()
        heartbeat = HEARTBEAT * self.edn.peer_interval
        sent = 0
        for entry in list(m.topics.entries()):
            engine = m.matcher_for(entry)
            what = (entry.uid, engine.summary_generation, load, m.route_count(entry))
            element = None
            for peer, (address, _) in sorted(peers.items()):
                told = self._told.get((peer, entry.name))
                if told is not None and told[0] == what and now - told[1] < heartbeat:
                    continue
                if element is None:
                    element = m.peer_summary(entry).to_element()
                try:
                    m.admin_client(address).call(edn_wire.PeerUpdate(
                        Server=self.edn.name, Address=m.service.base_url, Route=entry.name,
                        Load=load, Summary=element))
                except TransportError as exc:
                    m.mark_down(peer)
                    log.info("peer %s unreachable: %s", peer, exc)
                    continue
                except SoapFault as fault:
                    log.warning("peer %s refused our update of %s: %s", peer, entry.name,
                                fault.reason)
                    continue
                m.mark_up(peer)
                self._told[(peer, entry.name)] = (what, now)
                sent += 1
        m.count("peer_updates_sent", sent)
        return sent

    # -- running ---------------------------------------------------------------------------
    def step(self) -> None:
        """One round of everything, synchronously (tests, demos)."""
        if not self.registered.is_set():
            self.register()
        self.push_summaries()
        self.exchange_peers()

    def start(self) -> None:
        for target, name in ((self._summary_loop, "edn-summaries"), (self._peer_loop, "edn-peers")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _summary_loop(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            if not self.election.try_acquire():
                self._stop.wait(1.0)
                continue
            try:
                if not self.registered.is_set():
                    if not self.register():
                        self._stop.wait(backoff)
                        backoff = min(backoff * 2, 5.0)
                        continue
                    backoff = 0.2
                self.push_summaries()
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
        self.election.release()
