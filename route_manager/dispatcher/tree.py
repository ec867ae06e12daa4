"""A dispatcher as a child in a dispatch tree (paper II): ``edn serve dispatcher --parent URL``.

Upwards, it is a node like a subscription server: it registers with each parent (``Kind``
``dispatcher``), hosts the topics the parent has (as routes, passed on to the nodes below it)
and reports, per route, one **sub-tree summary**: the union of the summaries its own
children reported (:func:`matchers.summary.union`), cut to the precision that parent routes
it with (:func:`matchers.summary.cut`; ``rectangles`` is the sum of its children's, so the
parent's own cut at that precision keeps it as it is). The union covers every child's
summary and every cut covers its input, so a parent's summary of a child covers the child's
whole subtree: no event a leaf server's subscriptions match is ever withheld on the way
down. Reports go out every ``tree_interval`` seconds when something changed (a burst of
route updates below costs one report), and again to a parent that restarted, forgot this
child, or routes it at another precision (``precision_poll``). Each parent's calls run on
its own lane (:mod:`route_manager.lanes`) and the loop waits for none, so a parent that is
down or hangs in a cut link never delays the reports to another.

Downwards, the parent's ``edn:EventBatch`` messages (the network credential, the parent's
``Dispatcher`` id and ``FirstSeq``) are routed through this dispatcher's own route set and
forwarded to its children like any publication. The parent's position is committed with the
copies in the durable log, in the same transaction, so a batch the parent resends after a
crash of either side is skipped up to that position: every event goes down each edge once.

Several parents (``--parent URL1 --parent URL2``, several roots): the child registers and
reports to each; a publisher publishes at any root, and each event reaches this child from
the one root it was published at.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping
from urllib.parse import urlsplit

from matchers.pst.links_route_set import predicates_element, union_predicates
from matchers.summary import Summary, cut, cut_to_bytes, summary_target, union
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.admin import AdminClient, carries_credential
from wsframework.exceptions import AccessDenied
from wsframework.messaging import IncomingMessage, MessageFilter
from wsframework.namespace import EntryExists

from ..protocol import (KIND_DISPATCHER, batch_events, batch_position,
                        require_event_batch)
from ..precision import PRECISE
from ..uplink import Generations, RouteReport, Uplink
from .routing import ModeCheck

log = logging.getLogger(__name__)

__all__ = ["TreeLink"]


class TreeLink:
    """The child side of a dispatcher with parents (``settings.parent``).

    It receives what it uses: the dispatcher's ``settings``, its service's ``base_url``,
    ``store`` (the report generations), ``messaging`` (where the parents' batches arrive) and
    ``credential`` (the network's, which a parent's batch carries); ``client_for(address)``,
    an admin client to a parent; the route namespace ``routes``; ``host_topic(name, matcher,
    options)``, which creates a parent's topic here and below; ``loads`` (node -> its load,
    the dispatcher's live mapping) and ``summary_version(route)``; ``entry_for(message)`` and
    ``route_events(entry, events, upstream=...)``, the dispatcher's routing; and its durable
    ``event_log`` (None without one), which keeps the parents' positions."""

    def __init__(self, settings, *, base_url: str, store, messaging, credential: str | None,
                 client_for: Callable[[str], AdminClient], routes,
                 host_topic: Callable, loads: Mapping[str, int],
                 summary_version: Callable[[str], int], entry_for: Callable,
                 route_events: Callable, event_log=None):
        self.routes = routes
        self.credential = credential
        self.host_topic = host_topic
        self.loads = loads
        self.summary_version = summary_version
        self.entry_for = entry_for
        self.route_events = route_events
        self.event_log = event_log
        self.name = settings.name or urlsplit(base_url).netloc
        self.generations = Generations(store)
        self.uplink = Uplink(name=self.name, address=base_url, kind=KIND_DISPATCHER,
                             upstreams=settings.parent, client_for=client_for,
                             on_registered=self._host_topics, cuts=True,
                             incarnation=self.generations.offset)
        self.modes = ModeCheck(settings.routing)  # a parent routing otherwise is refused
        self.interval = settings.tree_interval
        self.precision_poll = settings.precision_poll
        self.max_report_bytes = settings.tree_report_max_bytes
        self.replayed_skipped = 0
        self._positions: dict[str, int] = {}  # without a durable log: parent id -> last seq
        self._parent_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._step_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        messaging.route("edn.parent-batch",
                        MessageFilter(action=EVENT_BATCH_ACTION,
                                      path_prefix=f"/{routes.kind}/"),
                        self._on_parent_batch, priority=20)
        routes.on_change(lambda event, entry: self._wake.set())

    # -- upwards: registration and sub-tree summaries ------------------------------------------
    def _host_topics(self, parent: str, response) -> None:
        """A parent's topics become routes here, passed on to the nodes below."""
        if not self.modes.check(parent, response):
            return
        for spec in response.Topic or []:
            if spec.Name in self.routes:
                continue
            try:
                self.host_topic(spec.Name, spec.Matcher, spec.Options)
                log.info("hosting topic %s of %s", spec.Name, parent)
            except EntryExists:
                pass
            except Exception as exc:
                log.error("cannot host topic %s of %s: %s", spec.Name, parent, exc)

    def reports(self) -> list[RouteReport]:
        """One report per route whose children sent summaries (in ``linkmatching``: the
        union of their predicate reports)."""
        out = []
        if not self.modes.agrees():
            return out  # a parent routes by another mode: nothing it could use correctly
        for entry in list(self.routes.entries()):
            matcher = entry.matcher
            if hasattr(matcher, "predicates_of") and len(matcher):  # --routing linkmatching
                children = tuple(matcher.filter_ids())
                load = sum(self.loads.get(child, 0) for child in children)
                key = (entry.uid, self.summary_version(entry.name), children, load)
                out.append(RouteReport(entry.name, key,
                                       lambda _precision, m=matcher, c=children, n=load: (
                                           predicates_element(union_predicates(
                                               (child, m.predicates_of(child)) for child in c),
                                               m.schema),
                                           n)))
                continue
            if not hasattr(matcher, "summary_of") or not len(matcher):
                continue
            children = tuple(matcher.filter_ids())
            load = sum(self.loads.get(child, 0) for child in children)
            key = (entry.uid, self.summary_version(entry.name), children, load)
            out.append(RouteReport(entry.name, key,
                                   lambda precision, m=matcher, c=children, n=load:
                                   self._subtree(m, c, n, precision)))
        return out

    def _subtree(self, matcher, children, load: int, precision: float):
        """The sub-tree summary element of one route at ``precision`` and its load. A union
        larger than ``tree_report_max_bytes`` is cut to fit (a report the parent refused
        for its size would leave the subtree without routes)."""
        summaries = [matcher.summary_of(child) for child in children]
        rectangles = sum(matcher.rectangles_of(child) or (len(s) if s is not None else 1)
                         for child, s in zip(children, summaries))
        if any(s is None for s in summaries):  # a child without a summary takes everything
            if matcher.schema is None:
                raise ValueError("a child routes everything and the route has no schema")
            subtree = Summary.everything(matcher.schema)
        else:
            subtree = union(summaries)
            if precision < PRECISE:
                subtree = cut(subtree, summary_target(precision, rectangles))
            subtree = cut_to_bytes(subtree, self.max_report_bytes)
        element = subtree.to_element()
        element.set("rectangles", str(max(rectangles, len(subtree))))
        return element, load

    def step(self, *, wait: float | None = None) -> int:
        """One round: register where needed, send the reports due; returns how many were
        sent by the parents done within ``wait`` (None: synchronously, every parent). Rounds
        are made one at a time (the thread's and a caller's) and reach each parent in that
        order."""
        with self._step_lock:
            self.uplink.register_missing(wait=wait)
            return self.uplink.push(self.reports(), generation=self.generations.next,
                                    wait=wait)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edn-tree-uplink", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_poll = time.monotonic() + self.precision_poll
        self._wake.set()  # the first round at once
        while True:
            self._wake.wait(min(self.interval, max(0.0, next_poll - time.monotonic())))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                if time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + self.precision_poll
                    self.uplink.poll_precisions(wait=0)
                self.step(wait=0)
            except Exception:
                log.exception("sub-tree report round failed")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.uplink.close()

    # -- downwards: the parents' event batches -------------------------------------------------
    def _on_parent_batch(self, message: IncomingMessage) -> None:
        # Only a parent sends batches (with the network's credential); a publisher publishes
        # with the publish action, which the dispatcher routes and accounts for.
        if not carries_credential(message, self.credential):
            raise AccessDenied("an EventBatch needs the network's admin credential")
        entry = self.entry_for(message)
        body = message.body
        require_event_batch(body)
        parent, first_seq = batch_position(body)
        events = batch_events(body)
        if parent is None:
            self.route_events(entry, events)
            return None
        last_seq = first_seq + len(events) - 1
        with self._lock_for(parent):  # one batch of a parent at a time: positions in order
            done = self.position(parent)
            fresh = events[max(0, done - first_seq + 1):]
            self.replayed_skipped += len(events) - len(fresh)
            self.route_events(entry, fresh, upstream=(parent, last_seq))
            if self.event_log is None:
                self._positions[parent] = max(last_seq, self._positions.get(parent, 0))
        return None

    def position(self, parent: str) -> int:
        """The last seq of ``parent``'s batches routed here (0: none)."""
        if self.event_log is not None:
            return self.event_log.upstream.get(parent, 0)
        return self._positions.get(parent, 0)

    def _lock_for(self, parent: str) -> threading.Lock:
        with self._locks_lock:
            lock = self._parent_locks.get(parent)
            if lock is None:
                lock = self._parent_locks[parent] = threading.Lock()
            return lock

    # -- status --------------------------------------------------------------------------------
    def figures(self) -> dict[str, object]:
        return {"tree.name": self.name, "tree.parents": len(self.uplink.upstreams),
                "tree.replayed_skipped": self.replayed_skipped,
                **self.uplink.figures("tree.parent")}
