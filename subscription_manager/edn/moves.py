"""Moving subscriptions between servers (offline partitioning, paper III-A): export, import,
move, and the forwarding records that keep the subscribers' EPRs working.

Wire form of ``ExportSubscriptionsResponse.Subscriptions`` and
``ImportSubscriptions.Subscriptions``::

    <edn:Subscriptions xmlns:edn="urn:wsframework:edn" topic="stocks">
      <edn:Subscription id="9f0c..." version="2011" soap="http://www.w3.org/2003/05/soap-envelope"
                        format="http://www.w3.org/2011/03/ws-evt/DeliveryFormats/Unwrap"
                        expires="1767225600.0" expiresKind="duration" created="1767220000.5">
        <edn:Filter dialect="urn:wsframework:dialects:ranges">
          <edn:Expression>x in [1, 2] and y &lt; 3</edn:Expression>
          <edn:Namespace prefix="q" uri="urn:quotes"/>
        </edn:Filter>
        <edn:NotifyTo><wsa:Address>http://sink/1</wsa:Address>...</edn:NotifyTo>
        <edn:EndTo>...</edn:EndTo>
        <edn:Box lo="1.0 -10.0" hi="2.0 3.0"/>      (the filter's rectangles, for partitioners)
      </edn:Subscription>
    </edn:Subscriptions>

``expires`` and ``created`` are epoch seconds (absent: never expires), numbers written with
``repr`` so they come back bit for bit. EPRs use the WS-Addressing version of the
subscription's eventing version. A subscription keeps its identifier wherever it goes.

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
import math
import re
import time
from typing import Iterable, Sequence

from lxml import etree

from matchers import FilterSpec
from wsframework.matching.errors import MatcherError
from matchers.box_filters import compile_filter
from route_manager import edn_wire
from route_manager.forwarding import EDN_NS
from route_manager.placement import subscription_box
from wsframework.admin import contracts
from wsframework.addressing import EndpointReference
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.ns import qname
from wsframework.soap import SoapVersion
from wsframework.store import Store
from wsframework.transport import TransportError

from ..client import EventingClient
from ..manager import MANAGER_PATH
from ..messages import FORMATS, manager_epr
from ..store import Subscription
from ..versions import VERSIONS

log = logging.getLogger(__name__)

__all__ = ["ForwardingTable", "subscriptions_element", "parse_subscriptions", "Mover"]

SUBSCRIPTIONS = qname(EDN_NS, "Subscriptions")
SUBSCRIPTION = qname(EDN_NS, "Subscription")
FILTER = qname(EDN_NS, "Filter")
EXPRESSION = qname(EDN_NS, "Expression")
NAMESPACE = qname(EDN_NS, "Namespace")
NOTIFY_TO = qname(EDN_NS, "NotifyTo")
END_TO = qname(EDN_NS, "EndTo")
BOX = qname(EDN_NS, "Box")

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
_IMPORT_ATTEMPTS = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_forwarding (
    id TEXT PRIMARY KEY, topic TEXT NOT NULL, target TEXT NOT NULL, moved REAL NOT NULL);
"""


class ForwardingTable:
    """Durable ``subscription id -> server address`` records of subscriptions moved away."""

    def __init__(self, store: Store):
        self.store = store
        store.executescript(_SCHEMA)

    @staticmethod
    def record(conn, ids: Iterable[str], topic: str, target: str) -> None:
        now = time.time()
        conn.executemany("INSERT OR REPLACE INTO edn_forwarding(id, topic, target, moved) "
                         "VALUES (?, ?, ?, ?)", [(i, topic, target, now) for i in ids])

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


# -- the XML form --------------------------------------------------------------------------

def _floats(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def subscriptions_element(topic: str, subscriptions: Sequence[Subscription],
                          boxes_of=None) -> etree._Element:
    """The ``edn:Subscriptions`` element of ``subscriptions``; ``boxes_of(subscription)``
    gives its rectangles as ``(mins, maxs)`` arrays (omitted when None)."""
    root = etree.Element(SUBSCRIPTIONS, nsmap={"edn": EDN_NS})
    root.set("topic", topic)
    for s in subscriptions:
        element = etree.SubElement(root, SUBSCRIPTION)
        element.set("id", s.id)
        element.set("version", s.version.name)
        element.set("soap", s.soap_version)
        element.set("format", s.format)
        if s.expires is not None:
            element.set("expires", repr(float(s.expires)))
        element.set("expiresKind", s.expires_kind)
        element.set("created", repr(float(s.created)))
        if s.filter is not None:
            spec = etree.SubElement(element, FILTER)
            spec.set("dialect", s.filter.dialect)
            etree.SubElement(spec, EXPRESSION).text = s.filter.expression
            for prefix, uri in s.filter.namespaces:
                etree.SubElement(spec, NAMESPACE, prefix=prefix, uri=uri)
        element.append(s.notify_to.to_element(NOTIFY_TO, s.version.wsa))
        if s.end_to is not None:
            element.append(s.end_to.to_element(END_TO, s.version.wsa))
        if boxes_of is not None:
            boxes = boxes_of(s)
            if boxes is not None:
                for lo, hi in zip(*boxes):
                    etree.SubElement(element, BOX, lo=_floats(lo), hi=_floats(hi))
    return root


def _number(element, name: str, *, required: bool = True) -> float | None:
    text = element.get(name)
    if text is None:
        if required:
            raise ValueError(f"missing {name}")
        return None
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite")
    return value


def parse_subscriptions(element, *, topic: str, topic_uid: str) -> list[Subscription]:
    """Subscriptions from an ``edn:Subscriptions`` element, bound to the local topic;
    ``ValueError`` (with the reason) for anything malformed. Boxes are ignored."""
    if getattr(element, "tag", None) != SUBSCRIPTIONS:
        raise ValueError(f"expected {SUBSCRIPTIONS}")
    out: list[Subscription] = []
    seen: set[str] = set()
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag != SUBSCRIPTION:
            raise ValueError(f"unexpected element {child.tag}")
        subscription_id = child.get("id") or ""
        if not _ID.match(subscription_id) or subscription_id in seen:
            raise ValueError(f"invalid or repeated subscription id {subscription_id!r}")
        seen.add(subscription_id)
        try:
            version = VERSIONS[child.get("version", "")]
            soap = SoapVersion(child.get("soap", "")).value
        except (KeyError, ValueError):
            raise ValueError(f"subscription {subscription_id}: unknown eventing or SOAP "
                             "version") from None
        delivery_format = child.get("format", "")
        if delivery_format not in FORMATS:
            raise ValueError(f"subscription {subscription_id}: unknown format")
        spec = None
        filter_element = child.find(FILTER)
        if filter_element is not None:
            expression = filter_element.find(EXPRESSION)
            namespaces = tuple(sorted((n.get("prefix", ""), n.get("uri", ""))
                                      for n in filter_element.findall(NAMESPACE)))
            spec = FilterSpec(filter_element.get("dialect", ""),
                              (expression.text or "") if expression is not None else "",
                              namespaces)
        notify = child.find(NOTIFY_TO)
        if notify is None:
            raise ValueError(f"subscription {subscription_id}: no NotifyTo")
        end = child.find(END_TO)
        try:
            notify_to = EndpointReference.from_element(notify, version.wsa)
            end_to = EndpointReference.from_element(end, version.wsa) if end is not None else None
        except SoapFault as fault:
            raise ValueError(f"subscription {subscription_id}: {fault.reason}") from None
        out.append(Subscription(
            id=subscription_id, topic=topic, topic_uid=topic_uid, version=version,
            soap_version=soap, filter=spec, notify_to=notify_to, end_to=end_to,
            format=delivery_format, expires=_number(child, "expires", required=False),
            expires_kind=child.get("expiresKind") or "duration",
            created=_number(child, "created", required=False) or 0.0))
    return out


# -- the operations ------------------------------------------------------------------------

class Mover:
    """Export, import and move for one :class:`~subscription_manager.edn.EdnSubscriptionManager`."""

    def __init__(self, manager):
        self.manager = manager
        self.forwarding = ForwardingTable(manager.service.store)

    # -- export ----------------------------------------------------------------------------
    def active(self, topic: str, ids: Iterable[str] | None = None) -> list[Subscription]:
        """Active, unexpired subscriptions of ``topic`` held here (all, or those of ``ids``)."""
        manager = self.manager
        entry = manager.topic(topic)
        now = manager.clock()
        if ids is None:
            rows = manager.store.active(entry.uid)
        else:
            rows = [s for s in map(manager.store.get, dict.fromkeys(ids)) if s is not None]
        return [s for s in rows if s.is_active and s.topic_uid == entry.uid
                and not s.expired_at(now)]

    def export(self, topic: str, ids: Iterable[str] | None = None) -> etree._Element:
        entry = self.manager.topic(topic)
        schema = self.manager.matcher_for(entry).schema
        return subscriptions_element(entry.name, self.active(topic, ids),
                                     lambda s: _boxes(schema, s.filter))

    # -- import ----------------------------------------------------------------------------
    def import_(self, topic: str, element) -> int:
        """Store the subscriptions of ``element`` here under their ids (see the module
        docstring); returns how many. Faults (nothing stored) for an unknown topic or a
        subscription whose filter this server's engine refuses."""
        manager = self.manager
        entry = manager.topic(topic)
        engine = manager.matcher_for(entry)
        try:
            subscriptions = parse_subscriptions(element, topic=entry.name, topic_uid=entry.uid)
            for s in subscriptions:
                if s.filter is not None:
                    engine.check_dialect(s.filter)
                    subscription_box(engine.schema, s.filter)
        except (ValueError, MatcherError) as exc:
            raise sender_fault(f"cannot import into {entry.name}: {exc}",
                               contracts.FAULT_INVALID_REQUEST) from None
        if not subscriptions:
            return 0
        with manager.service.store.transaction() as conn:
            manager.store.adopt(conn, subscriptions)
            self.forwarding.forget(conn, [s.id for s in subscriptions])
        manager.sync()
        manager.count("imported", len(subscriptions))
        log.info("imported %d subscriptions into %s", len(subscriptions), entry.name)
        try:  # route update before answering: the dispatcher routes to us from now on
            manager.network.push_summaries(topics=[entry.name], force=True)
        except Exception as exc:  # the background loop retries
            log.warning("route update after an import failed: %s", exc)
        return len(subscriptions)

    # -- move ------------------------------------------------------------------------------
    def move(self, topic: str, target: str, ids: Iterable[str]) -> int:
        """Move the listed subscriptions of ``topic`` to the server at ``target`` (its base
        URL); returns how many moved. Ids not active here are skipped."""
        manager = self.manager
        entry = manager.topic(topic)
        target = target.rstrip("/")
        if target == manager.service.base_url:
            return 0
        ids = list(dict.fromkeys(ids))
        moved = 0
        for start in range(0, len(ids), manager.edn.move_chunk):
            moved += self._move_chunk(entry.name, target, ids[start:start + manager.edn.move_chunk])
        if moved:
            manager.count("moved_out", moved)
            log.info("moved %d subscriptions of %s to %s", moved, entry.name, target)
            try:
                manager.network.push_summaries(topics=[entry.name], force=True)
            except Exception as exc:
                log.warning("route update after a move failed: %s", exc)
        return moved

    def _move_chunk(self, topic: str, target: str, ids: list[str]) -> int:
        moved = 0
        pending = self.active(topic, ids)
        for _ in range(3):
            if not pending:
                break
            self._import_at(target, topic, pending)
            expected = {s.id: s.seq for s in pending}
            with self.manager.service.store.transaction() as conn:
                released = self.manager.store.release(conn, expected, f"moved to {target}")
                self.forwarding.record(conn, [s.id for s in released], topic, target)
            self.manager.sync()
            moved += len(released)
            changed = set(expected) - {s.id for s in released}
            if not changed:
                return moved
            # Renewed or ended by a concurrent request between export and release.
            now = self.manager.clock()
            current = [s for s in map(self.manager.store.get, changed) if s is not None]
            gone = [s for s in current if not s.is_active or s.expired_at(now)]
            for subscription in gone:
                self._unsubscribe_at(target, subscription)
            pending = [s for s in current if s.is_active and not s.expired_at(now)]
        if pending:
            log.error("subscriptions %s kept changing during a move to %s; they stay here "
                      "(the target may hold copies)", [s.id for s in pending], target)
        return moved

    def _import_at(self, target: str, topic: str, subscriptions: list[Subscription]) -> None:
        manager = self.manager
        # no rectangles: the importer compiles the filters itself (parse_subscriptions)
        request = edn_wire.ImportSubscriptions(
            Topic=topic, Subscriptions=subscriptions_element(topic, subscriptions))
        client = manager.admin_client(target)
        for attempt in range(_IMPORT_ATTEMPTS):
            try:
                response = client.call(request)
                if response.Imported != len(subscriptions):
                    raise sender_fault(f"{target} imported {response.Imported} of "
                                       f"{len(subscriptions)} subscriptions")
                return
            except TransportError as exc:
                if attempt + 1 == _IMPORT_ATTEMPTS:
                    log.error("import of %s into %s at %s got no answer (%s): the move "
                              "failed; the target may hold copies", [s.id for s in subscriptions],
                              topic, target, exc)
                    raise SoapFault("Receiver", f"{target} did not answer the import: {exc}") \
                        from None
                time.sleep(0.2 * (attempt + 1))

    def _unsubscribe_at(self, target: str, subscription: Subscription) -> None:
        client = EventingClient(subscription.version.name, transport=self.manager.service.transport)
        try:
            client.unsubscribe(manager_epr(subscription.version, target + MANAGER_PATH,
                                           subscription.id))
        except Exception as exc:
            log.warning("could not remove the copy of ended subscription %s at %s: %s",
                        subscription.id, target, exc)


def _boxes(schema, spec):
    """All rectangles of a filter (for the partitioners)."""
    if spec is None or schema.d == 0:
        lo, hi = schema.everything()
        return [lo], [hi]
    try:
        compiled = compile_filter(spec, schema)
    except MatcherError:
        return None
    if len(compiled.mins) == 0:
        lo, hi = schema.everything()
        return [lo], [hi]
    return compiled.mins, compiled.maxs

