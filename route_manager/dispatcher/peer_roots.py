"""Topics kept the same at every root dispatcher of a network (``--peer-root URL``).

Each root lists the other roots as its peers. Every ``topic_sync_interval`` seconds, and at
once after a CreateTopic or DeleteTopic here, a root sends its whole topic catalog
(:mod:`.topic_catalog`: live topics and tombstones, with versions) to every peer in a
``SyncTopics`` message; the peer merges it and answers with its own catalog, which the
sender merges in turn. One exchange thus carries changes both ways, and a root that was
down or cut off catches up at its first exchange after it is back, whichever side starts
it. A topic a root takes from a peer is created (or deleted) there exactly as an admin's
CreateTopic would be: on its route table and on every node registered below it.

Everything a peer sends is checked before anything is merged (a Sender fault otherwise):
at most :data:`~route_manager.protocol.MAX_SYNC_TOPICS` records, names valid and each once,
a live record with its matcher, a tombstone without a definition, options at most
:data:`~route_manager.protocol.MAX_SYNC_OPTIONS_BYTES`. A record this root cannot host (a
matcher it does not have, options its matcher refuses) is skipped, logged and counted; the
rest of the catalog is merged. Conflicts (one version, two definitions) are logged at ERROR
and shown in the ``topic_sync.conflict.NAME`` figures until resolved.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Sequence

from lxml import etree

from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault, WsFrameworkError, sender_fault
from wsframework.matching.errors import MatcherError
from wsframework.namespace import validate_name
from wsframework.transport import TransportError

from .. import protocol
from ..protocol import MAX_SYNC_OPTIONS_BYTES, MAX_SYNC_TOPICS
from .topic_catalog import TopicRecord, canonical_options, reconcile

log = logging.getLogger(__name__)

__all__ = ["PeerRoots", "records_from_wire", "records_to_wire"]


def records_from_wire(topics: Sequence | None) -> list[TopicRecord]:
    """The records of a SyncTopics (or its response), checked; a Sender fault
    (adm:InvalidRequest, adm:InvalidName) for anything a root must not merge."""
    topics = topics or []
    if len(topics) > MAX_SYNC_TOPICS:
        raise sender_fault(f"SyncTopics carries at most {MAX_SYNC_TOPICS} topics",
                           contracts.FAULT_INVALID_REQUEST)
    records, seen = [], set()
    for topic in topics:
        name = validate_name(topic.Name)
        if name in seen:
            raise sender_fault(f"SyncTopics names topic {name} twice",
                               contracts.FAULT_INVALID_REQUEST)
        seen.add(name)
        deleted = bool(topic.Deleted)
        options = canonical_options(topic.Options)
        if options is not None and len(options) > MAX_SYNC_OPTIONS_BYTES:
            raise sender_fault(f"SyncTopics: the options of topic {name} exceed "
                               f"{MAX_SYNC_OPTIONS_BYTES} bytes", contracts.FAULT_INVALID_REQUEST)
        matcher = (topic.Matcher or "").strip() or None
        try:
            records.append(TopicRecord(name, topic.Version, deleted, matcher, options))
        except ValueError as exc:
            raise sender_fault(f"SyncTopics: {exc}", contracts.FAULT_INVALID_REQUEST) from None
    return records


def records_to_wire(records: Iterable[TopicRecord]) -> list[protocol.TopicVersion]:
    return [protocol.TopicVersion(
        Name=r.name, Version=r.version, Deleted=int(r.deleted), Matcher=r.matcher,
        Options=etree.fromstring(r.options) if r.options else None) for r in records]


class PeerRoots:
    """Registers ``SyncTopics`` with the admin ``endpoint`` and exchanges catalogs with the
    ``peers`` (base URLs). It receives the dispatcher's ``catalog()`` (name -> record),
    ``take(record)`` (apply a newer peer record), the ``lock`` both take, and
    ``client_for(address)``, an admin client to a peer."""

    def __init__(self, endpoint, *, peers: Sequence[str], interval: float,
                 catalog: Callable[[], dict], take: Callable[[TopicRecord], None],
                 lock, client_for: Callable[[str], AdminClient]):
        self.peers = tuple(peers)
        self.interval = interval
        self.catalog = catalog
        self.take = take
        self.lock = lock
        self.client_for = client_for
        self.taken = 0          # peer records applied here
        self.skipped = 0        # peer records this root could not host
        self.exchanges = 0      # exchanges answered by a peer
        self.failures: dict[str, int] = {peer: 0 for peer in self.peers}  # in a row
        # topic -> (our version, what disagrees) until resolved
        self.conflicts: dict[str, tuple[int, str]] = {}
        self._step_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        endpoint.register(protocol.SyncTopics, self._on_sync)

    # -- merging -----------------------------------------------------------------------------
    def merge(self, records: list[TopicRecord], source: str) -> int:
        """Take the records newer than ours; returns how many were taken."""
        with self.lock:
            ours = self.catalog()
            plan = reconcile(ours, records)
            taken = 0
            for record in plan.take:
                try:
                    self.take(record)
                    taken += 1
                    log.info("topic %s %s at version %d, as at %s", record.name,
                             "deleted" if record.deleted else "created", record.version, source)
                except (WsFrameworkError, MatcherError, ValueError, etree.LxmlError) as exc:
                    self.skipped += 1
                    log.error("topic %s of %s cannot be hosted here: %s", record.name, source, exc)
            for mine, theirs in plan.conflicts:
                reason = (f"version {mine.version} is {_describe(mine)} here and "
                          f"{_describe(theirs)} at {source}")
                if self.conflicts.get(mine.name) != (mine.version, reason):
                    log.error("topic %s conflicts: %s; delete or re-create it at one root to "
                              "resolve", mine.name, reason)
                self.conflicts[mine.name] = (mine.version, reason)
            self.taken += taken
            self._forget_resolved(self.catalog())
            return taken

    def _forget_resolved(self, current: dict) -> None:
        """A conflict is shown until this root holds a newer version of the name than the
        one that conflicted (an operator's delete or re-create, here or taken from a peer)."""
        for name, (version, _) in list(self.conflicts.items()):
            record = current.get(name)
            if record is None or record.version > version:
                del self.conflicts[name]

    def _on_sync(self, request, message):
        records = records_from_wire(request.Topic)
        self.merge(records, "a peer root")
        return protocol.SyncTopicsResponse(Topic=records_to_wire(self.catalog().values()))

    # -- exchanges -----------------------------------------------------------------------------
    def exchange(self, peer: str) -> bool:
        """One SyncTopics with ``peer``; False when it did not answer or refused."""
        request = protocol.SyncTopics(Topic=records_to_wire(self.catalog().values()))
        try:
            response = self.client_for(peer).call(request)
            records = records_from_wire(response.Topic)
        except (TransportError, SoapFault) as exc:
            self.failures[peer] += 1
            log.log(logging.WARNING if self.failures[peer] == 1 else logging.DEBUG,
                    "topic exchange with peer root %s failed: %s", peer,
                    getattr(exc, "reason", exc))
            return False
        self.failures[peer] = 0
        self.exchanges += 1
        self.merge(records, peer)
        return True

    def step(self) -> int:
        """One exchange with every peer, synchronously; returns how many answered."""
        with self._step_lock:
            return sum(self.exchange(peer) for peer in self.peers)

    def wake(self) -> None:
        """Exchange now (a topic changed here), not at the next interval."""
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edn-peer-roots", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._wake.set()  # the first exchange at once: a restarted root catches up
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.step()
            except Exception:
                log.exception("topic exchange round failed")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- status --------------------------------------------------------------------------------
    def figures(self) -> dict[str, object]:
        out: dict[str, object] = {
            "topic_sync.peers": len(self.peers), "topic_sync.exchanges": self.exchanges,
            "topic_sync.taken": self.taken, "topic_sync.skipped": self.skipped,
            "topic_sync.conflicts": len(self.conflicts)}
        for index, peer in enumerate(self.peers):
            out[f"topic_sync.peer.{index}.address"] = peer
            out[f"topic_sync.peer.{index}.failures"] = self.failures[peer]
        for name, (_, reason) in self.conflicts.items():
            out[f"topic_sync.conflict.{name}"] = reason
        return out


def _describe(record: TopicRecord) -> str:
    return "deleted" if record.deleted else f"matcher {record.matcher}"
