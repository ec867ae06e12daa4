"""Moving subscriptions between servers (offline partitioning, paper III-A): export, import,
move, and the forwarding records that keep the subscribers' EPRs working.

Subscriptions travel as the ``edn:Subscriptions`` element (:mod:`.moved_subscriptions`); a subscription
keeps its identifier wherever it goes.

The move protocol (no subscription lost or duplicated)
    1. the source reads the active subscriptions asked for (with the ``seq`` of each row);
    2. ``ImportSubscriptions`` on the target: the target stores them under their ids in one
       transaction (replacing rows with the same ids, so a retried import is harmless),
       drops its forwarding records for them, installs them, and pushes its route update to
       the dispatcher before answering (events published from then on reach it);
    3. the source, in one transaction, ends the rows that are still active *and unchanged*
       (``seq``) and records ``id -> target`` for them (forwarding records are durable);
    4. a row that changed meanwhile (renewed or ended by a concurrent request) is reconciled:
       still active -> exported and imported again (the newer row replaces the target's
       copy); ended -> the target's copy is unsubscribed.

    A subscription with an edn:NotifyWhen takes its condition and its state (L, the last
    value notified; :mod:`..notify_when`) along: the target adopts L in the transaction
    that stores the row, and the source deletes its L row in the transaction that ends
    its row. L may change at the source after the export (events still reach it until
    the release): a subscription whose L row changed (its ``seq``) is not released in
    step 3 but exported and imported again as in step 4, so the target goes on from the
    L the source last notified. On the last round it is released anyway (the target then
    holds an L older by what the source notified during that round trip: at worst one
    notification inside the band), since keeping it here would leave two active copies.

    If the import fails with a fault, nothing changes. If it fails without an answer (the
    target may or may not have committed), it is retried; when the target stays silent the
    move fails and the subscriptions stay here (an import the target committed without
    answering would leave copies there: logged with their ids).

    Renew, GetStatus and Unsubscribe for a moved id are forwarded to the target's
    subscription manager with the same identifier, and the reply is relayed: the EPRs the
    subscribers hold keep working (a subscription moved on again is forwarded again).
    Events published while a move runs may reach the source after it let go of a moved
    subscription and before the dispatcher routes them by the target's summary; a move is
    exact for events published after it returns.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from lxml import etree

from matchers.rtree_engine import RTreeMatchingEngine
from route_manager import protocol
from route_manager.placement_router import subscription_box
from wsframework.admission import waiting_on_peer
from wsframework.admin import AdminClient
from wsframework.matching.errors import MatcherError
from wsframework.matching.limits import check_filter_limits
from wsframework.migrations import migrate
from wsframework.namespace import NamespaceEntry
from wsframework.store import Store, upsert_sql
from wsframework.transport import TransportError

from ..client import EventingClient
from ..manager import MANAGER_PATH
from ..messages import manager_epr
from ..notify_index import NotifyGate
from ..notify_state import NotifyState
from ..store import Subscription, SubscriptionStore
from ..view import SubscriptionView
from .box_export import boxes_element
from .exceptions import IncompleteImport, UnansweredImport, UnusableImport
from .moved_subscriptions import filter_boxes, parse_import, parse_subscriptions, subscriptions_element

log = logging.getLogger(__name__)

# subscriptions_element and parse_subscriptions (.moved_subscriptions) stay importable from here too.
__all__ = ["ForwardingTable", "Mover", "subscriptions_element", "parse_subscriptions"]

_IMPORT_ATTEMPTS = 3
#: export / import / release rounds of one chunk (subscriptions changed meanwhile go again)
_MOVE_ROUNDS = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_forwarding (
    id TEXT PRIMARY KEY, topic TEXT NOT NULL, target TEXT NOT NULL, moved REAL NOT NULL);
"""


class ForwardingTable:
    """Durable ``subscription id -> server address`` records of subscriptions moved away."""

    def __init__(self, store: Store):
        self.store = store
        migrate(store, "forwarding", [_SCHEMA])

    @staticmethod
    def record(conn, ids: Iterable[str], topic: str, target: str) -> None:
        now = time.time()
        conn.executemany(upsert_sql("edn_forwarding", ("id", "topic", "target", "moved"), ("id",)),
                         [(i, topic, target, now) for i in ids])

    @staticmethod
    def forget(conn, ids: Iterable[str]) -> None:
        conn.executemany("DELETE FROM edn_forwarding WHERE id = ?", [(i,) for i in ids])

    def drop(self, subscription_id: str) -> None:
        with self.store.transaction() as conn:
            self.forget(conn, [subscription_id])

    def lookup(self, subscription_id: str) -> str | None:
        rows = self.store.query("SELECT target FROM edn_forwarding WHERE id = ?",
                                (subscription_id,))
        return rows[0]["target"] if rows else None

    def count(self) -> int:
        return self.store.query("SELECT COUNT(*) FROM edn_forwarding")[0][0]


# -- the operations ------------------------------------------------------------------------

class Mover:
    """Export, import and move of the subscriptions of one subscription server."""

    def __init__(self, *, store: Store, subscriptions: SubscriptionStore, view: SubscriptionView,
                 notify_gate: NotifyGate, transport, base_url: str,
                 topic: Callable[[str], NamespaceEntry],
                 matcher_for: Callable[[NamespaceEntry], RTreeMatchingEngine], clock,
                 sync: Callable[[], object], admin_client: Callable[[str], AdminClient],
                 count: Callable[..., None], move_chunk: int,
                 routes_changed: Callable[[list[str]], object]):
        """``store``: the service's store (the forwarding records, the L rows);
        ``subscriptions``: the durable subscriptions; ``view``: this process's view (synced
        by ``sync``); ``notify_gate``: NotifyWhen's decision, told of adopted L;
        ``transport``: for the Unsubscribe of stale copies; ``base_url``: this server;
        ``topic(name)``: the local topic (TopicNotHere otherwise); ``matcher_for(entry)``:
        its engine; ``admin_client(address)``: an admin client of another server;
        ``count(name, n)``: the server's counters; ``move_chunk``: subscriptions per
        export / import / release round; ``routes_changed(topics)``: send route updates
        now (after an import or a move)."""
        self.store = store
        self.subscriptions = subscriptions
        self.view = view
        self.notify_gate = notify_gate
        self.transport = transport
        self.base_url = base_url
        self.topic = topic
        self.matcher_for = matcher_for
        self.clock = clock
        self.sync = sync
        self.admin_client = admin_client
        self.count = count
        self.move_chunk = move_chunk
        self.routes_changed = routes_changed
        self.forwarding = ForwardingTable(store)

    # -- export ----------------------------------------------------------------------------
    def active(self, topic: str, ids: Iterable[str] | None = None) -> list[Subscription]:
        """Active, unexpired subscriptions of ``topic`` held here (all, or those of ``ids``)."""
        entry = self.topic(topic)
        now = self.clock()
        if ids is None:
            rows = self.subscriptions.active(entry.uid)
        else:
            rows = [s for s in map(self.subscriptions.get, dict.fromkeys(ids)) if s is not None]
        return [s for s in rows if s.is_active and s.topic_uid == entry.uid
                and not s.expired_at(now)]

    def boxes_page(self, topic: str, after: str, limit: int) -> etree._Element:
        """``ExportBoxes``: up to ``limit`` active subscriptions of ``topic`` after the
        cursor ``after`` as rectangles (:mod:`.box_export`)."""
        entry = self.topic(topic)
        schema = self.matcher_for(entry).schema
        now = self.clock()
        page = self.subscriptions.active_after(entry.uid, after, limit + 1)
        return boxes_element(entry.name, schema, page[:limit], more=len(page) > limit,
                             live=lambda s: not s.expired_at(now))

    def export(self, topic: str, ids: Iterable[str] | None = None) -> etree._Element:
        entry = self.topic(topic)
        schema = self.matcher_for(entry).schema
        subscriptions = self.active(topic, ids)
        return subscriptions_element(entry.name, subscriptions,
                                     lambda s: filter_boxes(schema, s.filter),
                                     self._notified(subscriptions))

    def _notify_rows(self, subscriptions: list[Subscription]) -> dict:
        """id -> (L, unnumbered, seq) of those of ``subscriptions`` with an edn:NotifyWhen
        and a stored state."""
        conditional = [s.id for s in subscriptions if s.notify_when is not None]
        if not conditional:
            return {}
        return NotifyState.states(self.store.connection(), conditional)

    def _notified(self, subscriptions: list[Subscription]) -> dict:
        """id -> (L, unnumbered): the edn:NotifyWhen state that travels with them."""
        return {sid: (last, unnumbered)
                for sid, (last, unnumbered, _) in self._notify_rows(subscriptions).items()}

    # -- import ----------------------------------------------------------------------------
    def import_(self, topic: str, element) -> int:
        """Store the subscriptions of ``element`` here under their ids (see the module
        docstring); returns how many. Nothing is stored when the topic is not here
        (:class:`~.exceptions.TopicNotHere`) or a subscription is malformed or has a filter
        this server's limits or engine refuse (:class:`~.exceptions.UnusableImport`)."""
        entry = self.topic(topic)
        engine = self.matcher_for(entry)
        try:
            subscriptions, notified = parse_import(element, topic=entry.name, topic_uid=entry.uid)
            for s in subscriptions:
                if s.filter is not None:
                    # bounded as a Subscribe's is, before the engine compiles it
                    check_filter_limits(s.filter, self.view.filter_limits)
                    engine.check_dialect(s.filter)
                    subscription_box(engine.schema, s.filter)
        except (ValueError, MatcherError) as exc:
            raise UnusableImport(entry.name, exc) from None
        if not subscriptions:
            return 0
        with self.store.transaction() as conn:
            self.subscriptions.adopt(conn, subscriptions, notified)  # and their L, in one step
            self.forwarding.forget(conn, [s.id for s in subscriptions])
        for s in subscriptions:  # re-read with the L just adopted at the next event
            if s.notify_when is not None:
                self.notify_gate.forget(s.id)
        self.sync()
        with self.view.lock.write():  # the filters came in one by one: page them for batches
            engine.pack()
        self.count("imported", len(subscriptions))
        log.info("imported %d subscriptions into %s", len(subscriptions), entry.name)
        try:  # route update before answering: the dispatcher routes to us from now on
            self.routes_changed([entry.name])
        except Exception as exc:  # the background loop retries
            log.warning("route update after an import failed: %s", exc)
        return len(subscriptions)

    # -- move ------------------------------------------------------------------------------
    def move(self, topic: str, target: str, ids: Iterable[str]) -> int:
        """Move the listed subscriptions of ``topic`` to the server at ``target`` (its base
        URL); returns how many moved. Ids not active here are skipped."""
        entry = self.topic(topic)
        target = target.rstrip("/")
        if target == self.base_url:
            return 0
        ids = list(dict.fromkeys(ids))
        moved = 0
        for start in range(0, len(ids), self.move_chunk):
            moved += self._move_chunk(entry.name, target, ids[start:start + self.move_chunk])
        if moved:
            self.count("moved_out", moved)
            log.info("moved %d subscriptions of %s to %s", moved, entry.name, target)
            try:
                self.routes_changed([entry.name])
            except Exception as exc:
                log.warning("route update after a move failed: %s", exc)
        return moved

    def _move_chunk(self, topic: str, target: str, ids: list[str]) -> int:
        moved = 0
        pending = self.active(topic, ids)
        for attempt in range(_MOVE_ROUNDS):
            if not pending:
                break
            # the L rows exported: one whose seq differs at the release changed after the
            # export (an equal seq means the export carried this very L)
            rows = self._notify_rows(pending)
            exported_l = {sid: row[2] for sid, row in rows.items()}
            self._import_at(target, topic, pending, {sid: row[:2] for sid, row in rows.items()})
            expected = {s.id: s.seq for s in pending}
            with self.store.transaction() as conn:
                releasable = expected
                if attempt + 1 < _MOVE_ROUNDS:
                    now_l = {sid: row[2] for sid, row in NotifyState.states(
                        conn, [s.id for s in pending if s.notify_when is not None]).items()}
                    releasable = {sid: seq for sid, seq in expected.items()
                                  if now_l.get(sid) == exported_l.get(sid)}
                released = self.subscriptions.release(conn, releasable, target)
                self.forwarding.record(conn, [s.id for s in released], topic, target)
            self.sync()
            moved += len(released)
            changed = set(expected) - {s.id for s in released}
            if not changed:
                return moved
            # Renewed or ended by a concurrent request between export and release, or its L
            # changed (notified here meanwhile): exported again, or the copy removed.
            now = self.clock()
            current = [s for s in map(self.subscriptions.get, changed) if s is not None]
            gone = [s for s in current if not s.is_active or s.expired_at(now)]
            for subscription in gone:
                self._unsubscribe_at(target, subscription)
            pending = [s for s in current if s.is_active and not s.expired_at(now)]
        if pending:
            log.error("subscriptions %s kept changing during a move to %s; they stay here "
                      "(the target may hold copies)", [s.id for s in pending], target)
        return moved

    def _import_at(self, target: str, topic: str, subscriptions: list[Subscription],
                   notified: dict) -> None:
        """Import ``subscriptions`` with their edn:NotifyWhen state ``notified`` (id -> (L,
        unnumbered)) at ``target``."""
        # no rectangles: the importer compiles the filters itself (parse_subscriptions)
        request = protocol.ImportSubscriptions(
            Topic=topic, Subscriptions=subscriptions_element(
                topic, subscriptions, notified=notified))
        client = self.admin_client(target)
        for attempt in range(_IMPORT_ATTEMPTS):
            try:
                response = client.call(request)
            except TransportError as exc:
                if attempt + 1 == _IMPORT_ATTEMPTS:
                    log.error("import of %s into %s at %s got no answer (%s): the move "
                              "failed; the target may hold copies", [s.id for s in subscriptions],
                              topic, target, exc)
                    raise UnansweredImport(target, exc) from None
                with waiting_on_peer():  # a pause before the peer again: no control slot
                    time.sleep(0.2 * (attempt + 1))
                continue
            if response.Imported != len(subscriptions):
                raise IncompleteImport(target, response.Imported, len(subscriptions))
            return

    def _unsubscribe_at(self, target: str, subscription: Subscription) -> None:
        client = EventingClient(subscription.version.name, transport=self.transport)
        try:
            client.unsubscribe(manager_epr(subscription.version, target + MANAGER_PATH,
                                           subscription.id))
        except Exception as exc:
            log.warning("could not remove the copy of ended subscription %s at %s: %s",
                        subscription.id, target, exc)
