"""Recording the events a dispatcher routes, for offline profiles (``edn record``).

An operator arms a recording with the Configure setting ``record``, whose value is
``topic=NAME,events=N[,every=K]`` (``off`` stops it). The dispatcher that takes the
Configure stamps it with an id (its clock), and stores it with the other run-time settings,
so every process of the dispatcher records too (gunicorn workers, hosts sharing a
PostgreSQL store), into one table of that store (:class:`~.tables.DispatcherTables`), and a
restart goes on with it. Starting a recording deletes the events of every earlier one.

While armed, each process keeps every K-th event it routes on the topic (its XML and the
time it was routed, once the event is routed) and writes them in batches of about
:data:`FLUSH_AT` (a message's events go in whole), and once a second from a ticker thread.
It stops once the store holds N events or :data:`MAX_BYTES` of them: that is counted at
each write, so every process may overshoot by the batch it was writing, and the reader
takes the first N. Stopping (``off``) deletes what was recorded: ``edn record`` reads it
first.

Bounds (the value is operator input like any other): N at most :data:`MAX_EVENTS`, K at
most :data:`MAX_EVERY`, an event larger than :data:`MAX_EVENT_BYTES` serialized is skipped
and counted.

Cost: with no recording armed, one attribute read per published message. Armed, one
serialization per kept event, and one store write per full batch on the publisher's request
thread.

``GetRecording`` answers a page of the stored events (at most ``Max`` and about
:data:`PAGE_BYTES`), the cursor of the next page in ``next`` (absent on the last)::

    <edn:Recording xmlns:edn="urn:wsframework:edn" id="1767225600.123456" topic="quotes"
                   stored="5000" wanted="5000" next="64:host:812:9f3a">
      <edn:Schema>...</edn:Schema>          (the topic's event schema: first page only)
      <edn:Recorded at="1767225600.25"><q:quote .../></edn:Recorded>
    </edn:Recording>
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, replace

from lxml import etree

from matchers.vocabulary import EDN
from wsframework.namespace import InvalidName, validate_name

from .. import protocol
from ..selftuning import Ticker

__all__ = ["RecordingSpec", "Recorder", "parse_cursor", "MAX_EVENTS", "MAX_EVERY",
           "MAX_EVENT_BYTES", "MAX_BYTES", "PAGE_BYTES", "FLUSH_AT"]

log = logging.getLogger(__name__)

MAX_EVENTS = 100_000
MAX_EVERY = 1_000_000
MAX_EVENT_BYTES = 64 * 1024
MAX_BYTES = 256 * 1024 * 1024
PAGE_BYTES = 4 * 1024 * 1024  # the events of one GetRecording answer, about
FLUSH_AT = 64
_CHUNK = 256  # rows read at a time for a page
FLUSH_SECONDS = 1.0
_MAX_TEXT = 512
_KEYS = ("topic", "events", "every", "id")
_COUNT = re.compile(r"[0-9]{1,9}\Z")
_ID = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}\Z")
_CURSOR = re.compile(r"([0-9]{1,12}):(.{1,150})\Z", re.DOTALL)
# recorded events are the dispatcher's own serialization of events it parsed: read back
# without entities or network access all the same
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


@dataclass(frozen=True)
class RecordingSpec:
    """What to record: ``events`` events of ``topic``, every ``every``-th; ``id`` is the
    dispatcher's stamp (empty until stamped)."""

    topic: str
    events: int
    every: int = 1
    id: str = ""

    @classmethod
    def parse(cls, text: object) -> "RecordingSpec | None":
        """The spec of a Configure value (None for ``off``); ValueError for anything else."""
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise ValueError(f"record: at most {_MAX_TEXT} characters of "
                             "topic=NAME,events=N[,every=K], or off")
        if text.strip().lower() == "off":
            return None
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in _KEYS or key in fields:
                raise ValueError("record: topic=NAME,events=N[,every=K] (each once), or off")
            fields[key] = value.strip()
        if "topic" not in fields or "events" not in fields:
            raise ValueError("record: needs topic=NAME and events=N")
        try:
            topic = validate_name(fields["topic"])
        except InvalidName as exc:
            raise ValueError(f"record: {exc}") from None
        stamp = fields.get("id", "")
        if stamp and not _ID.match(stamp):
            raise ValueError("record: id is the dispatcher's stamp (seconds.fraction)")
        return cls(topic, _bounded(fields["events"], "events", MAX_EVENTS),
                   _bounded(fields.get("every", "1"), "every", MAX_EVERY), stamp)

    def stamped(self, now: float) -> "RecordingSpec":
        return replace(self, id=f"{now:.6f}")

    def to_text(self) -> str:
        text = f"topic={self.topic},events={self.events},every={self.every}"
        return f"{text},id={self.id}" if self.id else text


def _bounded(text: str, name: str, most: int) -> int:
    if not _COUNT.match(text) or not 1 <= int(text) <= most:
        raise ValueError(f"record: {name} is a whole number from 1 to {most:,}")
    return int(text)


def parse_cursor(text: str | None) -> tuple[str, int]:
    """(process, n) of a GetRecording cursor (the start for none); ValueError otherwise."""
    if not text:
        return "", 0
    match = _CURSOR.match(text)
    if match is None:
        raise ValueError("After is a cursor a previous GetRecording answered")
    return match.group(2), int(match.group(1))


def _process_name() -> str:
    """This process among the dispatcher's: host, pid and a random part (a pid is reused)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(4)}"


class Recorder:
    """One process's part of the recording in force (module docstring), over ``tables``."""

    def __init__(self, tables):
        self.tables = tables
        self.process = _process_name()
        self.spec: RecordingSpec | None = None  # read without the lock on the event path
        self.full = False
        self.failed = False
        self.stored = 0      # events of the recording in the store, at the last write
        self.skipped = 0     # events of this process too large to keep
        self._seen = 0
        self._n = 0
        self._buffer: list[tuple[int, float, bytes]] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write at a time: rows stay in n order
        self._ticker: Ticker | None = None

    # -- arming --------------------------------------------------------------------------------
    def arm(self, spec: RecordingSpec | None) -> None:
        """Record by ``spec`` from now on (None: stop, and delete what was recorded: the
        reader took it before it stopped). The same recording again (every process applies
        the stored setting) changes nothing. A store that fails raises, and nothing is
        armed."""
        with self._write_lock:  # no write of the recording before goes on meanwhile
            with self._lock:
                if spec == self.spec:
                    return
                self.spec, self.full, self.failed = None, False, False
                self._seen, self._n, self.skipped, self._buffer = 0, 0, 0, []
            self.tables.drop_recordings_but(spec.id if spec is not None else "")
            if spec is None:
                log.info("recording stopped")
                return
            stored = self.tables.recorded_count(spec.id)
            with self._lock:
                self.spec, self.stored = spec, stored
                self.full = stored >= spec.events
                if self._ticker is None:
                    self._ticker = Ticker(lambda _now: self.flush(), FLUSH_SECONDS,
                                          name="recorder").start()
        log.info("recording %s: %d events of %s, every %d", spec.id, spec.events, spec.topic,
                 spec.every)

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
        self.flush()

    # -- the event path ------------------------------------------------------------------------
    def offer(self, topic: str, events) -> None:
        """Keep what the recording in force takes of ``events`` (published on ``topic``)."""
        spec = self.spec
        if spec is None or topic != spec.topic or self.full:
            return
        with self._lock:
            first = self._seen
            self._seen += len(events)
        kept = [event for k, event in enumerate(events, start=first)
                if k % spec.every == 0]
        if not kept:
            return
        now = time.time()
        serialized = [etree.tostring(event) for event in kept]
        rows = [data for data in serialized if len(data) <= MAX_EVENT_BYTES]
        with self._lock:
            if self.spec is not spec:  # stopped or re-armed meanwhile
                return
            self.skipped += len(serialized) - len(rows)
            for data in rows:
                self._n += 1
                self._buffer.append((self._n, now, data))
            if len(self._buffer) < FLUSH_AT:
                return
        self.flush()

    def flush(self) -> None:
        """Write what this process kept so far (the event path when a batch is full, and a
        ticker once a second)."""
        with self._write_lock:
            with self._lock:
                spec, batch, self._buffer = self.spec, self._buffer, []
            if spec is None or not batch:
                return
            try:
                count, size = self.tables.save_recorded(spec.id, self.process, batch)
            except Exception:  # the events themselves are routed all the same
                log.exception("recording %s stopped in this process: the store failed",
                              spec.id)
                with self._lock:
                    if self.spec is spec:
                        self.failed = self.full = True
                return
            with self._lock:
                if self.spec is spec:
                    self.stored = count
                    self.full = count >= spec.events or size >= MAX_BYTES

    # -- reading -------------------------------------------------------------------------------
    def setting(self) -> str:
        spec = self.spec
        return spec.to_text() if spec is not None else "off"

    def figures(self) -> dict[str, object]:
        spec = self.spec
        if spec is None:
            return {"record.on": 0}
        return {"record.on": int(not self.full), "record.id": spec.id,
                "record.topic": spec.topic, "record.wanted": spec.events,
                "record.every": spec.every, "record.stored": self.tables.recorded_count(spec.id),
                "record.skipped": self.skipped, "record.failed": int(self.failed)}

    def page(self, after: str | None, limit: int, schema=None) -> etree._Element:
        """``edn:Recording``: up to ``limit`` stored events after the cursor ``after``
        (ValueError for a cursor that is none), with ``schema`` (the topic's, an
        ``edn:Schema`` element) first when given."""
        process, n = parse_cursor(after)
        root = etree.Element(protocol.RECORDING, nsmap={"edn": EDN})
        spec = self.spec
        if spec is None:
            root.set("stored", "0")
            return root
        if schema is not None:
            root.append(schema)
        root.set("id", spec.id)
        root.set("topic", spec.topic)
        root.set("wanted", str(spec.events))
        root.set("stored", str(self.tables.recorded_count(spec.id)))
        # at most ``limit`` events and about PAGE_BYTES of them (one at least), read a
        # chunk at a time: the rows are up to MAX_EVENT_BYTES each
        size, last, room = 0, None, True
        while room and limit > 0:
            chunk = min(limit, _CHUNK)
            rows = self.tables.recorded(spec.id, (process, n), chunk)
            for row in rows:
                if size and size + len(row[3]) > PAGE_BYTES:
                    room = False
                    break
                element = etree.SubElement(root, protocol.RECORDED, at=repr(float(row[2])))
                element.append(etree.fromstring(bytes(row[3]), _PARSER))
                size += len(row[3])
                limit -= 1
                process, n = last = row[0], row[1]
            room = room and len(rows) == chunk
        if last is not None and self.tables.recorded(spec.id, last, 1):
            root.set("next", f"{last[1]}:{last[0]}")
        return root
