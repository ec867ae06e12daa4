"""The dispatcher's durable log: every accepted event -- its topic, its bytes and its copies
(server, per-server sequence number) -- is committed to SQLite (WAL) *before* the publisher
is answered; an event's row is deleted once every server it went to has acknowledged (2xx)
the batch that carried its copy.

The tables and the row format: :mod:`.log_rows`.

Sequence numbers start at 1 per server and never repeat for one dispatcher id: the next one
is one past the larger of the highest logged and the highest acknowledged. A dispatcher
re-created on an empty data dir gets a new id (so a server does not skip its events).

Bounds (``log_max_events``, ``log_max_bytes``): an append that would exceed them is refused
with :class:`LogFull` (``log_full=refuse``) or makes room by deleting the oldest events with
undelivered copies (``log_full=drop-oldest``; their copies are counted in ``dropped`` and
logged). ``log_max_events`` counts undelivered copies, ``log_max_bytes`` the bytes of the
events held. Age (``log_max_age``): a copy waits that long for its server; then, whatever the
policy, the event's undelivered copies expire (counted in ``expired``, logged with their
servers). Age never refuses new events: a server that never comes back would otherwise stop
the whole network's publications once its oldest copy was ``log_max_age`` old.

One process owns a log: it holds the store's exclusive hold on ``log`` (a ``flock`` on
``{store}.log-lock``, or a PostgreSQL advisory lock; released when the process dies, ``kill
-9`` included), and a second process on the same store is refused. Several processes of one
dispatcher each own a log of their own, a *lane* (:mod:`.log_lanes`).

A PostgreSQL advisory lock is also released when its session ends with the process alive (a
network cut between the process and the database, a failover to the standby). So the hold
is *fenced*: opening a log writes a new holder token (``edn_log_meta``), and every
transaction of the log checks it first. A process whose log another opened meanwhile gets
:class:`LaneLost` instead of writing: two processes never number copies of one lane.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Sequence

from wsframework.exceptions import SoapFault, receiver_fault
from wsframework.faults import translate
from wsframework.migrations import migrate
from wsframework.store import HeldElsewhere

from ..protocol import FAULT_LOG_FULL
from ..exceptions import RouteManagerError

from .log_rows import MIGRATIONS, LogCopy, copies_named, seq_named

log = logging.getLogger(__name__)

__all__ = ["EventLog", "LaneLost", "LogFull", "LOG_FULL_POLICIES"]

LOG_FULL_POLICIES = ("refuse", "drop-oldest")
_tuple_new = tuple.__new__  # LogCopy rows built by a C call (see log_rows.copy_of)
ACK_DELAY = 0.05  # seconds an acknowledgement may wait for an append's transaction
_HOLDER_UPSERT = ("INSERT INTO edn_log_meta(key, value) VALUES ('holder', ?) "
                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value")


class LogFull(RouteManagerError):
    """The durable log is at one of its bounds and its policy is to refuse new events."""


class LaneLost(RouteManagerError):
    """Another process opened this log after this one did (its hold had lapsed): this one
    may no longer write to it."""


@dataclass
class _Append:
    copies: list
    offer: object
    upstream: tuple | None = None  # (parent dispatcher id, last seq of its batch)
    done: bool = False
    error: BaseException | None = None
    logged: dict = field(default_factory=dict)  # server -> its new copies, in seq order
    commit: int = 0  # the store's commit that holds it (its caller owes its sync)

    def copies_logged(self) -> list[LogCopy]:
        return [c for copies in self.logged.values() for c in copies]


class EventLog:
    def __init__(self, store, *, max_events: int = 1_000_000, max_bytes: int = 1 << 30,
                 max_age: float = 86_400.0, policy: str = "refuse", clock=time.time,
                 group_commit: bool = True):
        if policy not in LOG_FULL_POLICIES:
            raise ValueError(f"log_full must be one of {', '.join(LOG_FULL_POLICIES)}")
        try:
            self._lockfile = store.hold_exclusive("log")
        except HeldElsewhere as exc:
            raise HeldElsewhere(f"{exc}: each process of a dispatcher logs in a lane of its "
                                "own") from None
        try:
            self._open(store, max_events, max_bytes, max_age, policy, clock, group_commit)
        except BaseException:  # the hold goes with the failed log, not with its collection
            if self._lockfile is not None:
                self._lockfile.close()
            raise

    def _open(self, store, max_events, max_bytes, max_age, policy, clock, group_commit):
        self.store = store
        self.max_events, self.max_bytes, self.max_age = max_events, max_bytes, max_age
        self.policy = policy
        self.clock = clock
        self.group_commit = group_commit
        self._lock = threading.RLock()  # seqs, counters, and append-then-offer order
        self._group = threading.Condition()  # group commit: pending appends, one committer
        self._pending: list[_Append] = []
        self._committing = False
        # Acknowledgements not yet written: server -> (last seq, copies), applied in the
        # next append's transaction or after ACK_DELAY (see acknowledge()).
        self._acks: dict[str, tuple[int, int]] = {}
        self._acked_ids: list[int] = []  # the events of those copies, one entry per copy
        self._acks_since = 0.0
        # event id -> copies still undelivered (what was acknowledged but not yet written
        # included); an event's row goes when its count reaches zero
        self._left: dict[int, int] = {}
        self._cursor: dict[str, tuple[int, int]] = {}  # server -> (seq, event id) last read
        self.commits = 0
        self.lost = False  # another process opened this log since (LaneLost)
        self.holder = uuid.uuid4().hex
        migrate(store, "log", MIGRATIONS)
        with store.transaction() as conn:
            row = conn.execute("SELECT value FROM edn_log_meta WHERE key='dispatcher'").fetchone()
            if row is None:
                self.dispatcher_id = uuid.uuid4().hex
                conn.execute("INSERT INTO edn_log_meta VALUES ('dispatcher', ?)",
                             (self.dispatcher_id,))
            else:
                self.dispatcher_id = row[0]
            conn.execute(_HOLDER_UPSERT, (self.holder,))
        self._next: dict[str, int] = {}
        self.upstream: dict[str, int] = {  # parent dispatcher id -> last seq logged
            row[0]: row[1] for row in store.query("SELECT dispatcher, seq FROM edn_log_upstream")}
        self.acked: dict[str, int] = {}
        for server, acked in store.query("SELECT server, acked FROM edn_log_position"):
            self.acked[server] = acked
            self._next[server] = acked + 1
        self.events = self.bytes = top = 0
        delivered = []
        for event_id, copies, size in store.query(
                "SELECT id, copies, length(event) FROM edn_log_event ORDER BY id"):
            top = event_id
            left = 0
            for server, seq in copies_named(copies):
                if seq >= self._next.get(server, 1):
                    self._next[server] = seq + 1
                if seq > self.acked.get(server, 0):
                    left += 1
            if left:
                self._left[event_id] = left
                self.events += left
                self.bytes += size
            else:  # every copy acknowledged before the row went: it goes now
                delivered.append(event_id)
        if delivered:
            with store.transaction() as conn:
                conn.execute("DELETE FROM edn_log_event WHERE id IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(delivered),))
        self._next_event = top + 1
        self.appended = 0
        self.dropped = 0
        self.expired = 0
        self.refused = 0

    # -- writing -----------------------------------------------------------------------------
    def append(self, events: list[tuple[str, bytes, Sequence[str]]], offer=None, *,
               upstream: tuple[str, int] | None = None) -> list[LogCopy]:
        """Log ``events`` ((topic, event, servers): one copy per server), committed when
        this returns; ``offer(copies)`` is called once with the new :class:`LogCopy` of each
        server (a dict: server -> its copies in seq order), before any later append's (so a
        channel receives each server's copies in the order of their seqs). Returns the new
        copies. Raises :class:`LogFull` (none of ``events`` logged) when the bounds refuse
        them. ``upstream`` (a parent dispatcher's id, the last seq of the batch these events
        came in) is recorded in the same transaction, even when no event has a copy.

        Group commit: the caller that finds no commit under way commits every append pending
        at that moment in one transaction (its own first); callers arriving meanwhile wait
        and are committed together by the next one. A lone publisher commits at once."""
        events = [e for e in events if e[2]]
        if not events and upstream is None:
            return []
        request = _Append(events, offer, upstream)
        if not self.group_commit:
            with self._lock:
                self._commit([request])
            if request.error is not None:
                raise request.error
            return request.copies_logged()
        with self._group:
            self._pending.append(request)
            if self._committing:
                self._group.notify_all()  # whoever watches the queue (tests); commit pending
            while not request.done:
                if self._committing:
                    self._group.wait()
                    continue
                self._committing = True
                batch, self._pending = self._pending, []
                self._group.release()
                try:
                    self._commit(batch)
                finally:
                    self._group.acquire()
                    self._committing = False
                    for each in batch:
                        each.done = True
                    self._group.notify_all()
        # the commit may be another caller's: this caller's answer waits for its sync too
        self.store.owe(request.commit)
        if request.error is not None:
            raise request.error
        return request.copies_logged()

    def _commit(self, batch: list["_Append"]) -> None:
        with self._lock:  # reentrant: the ungrouped path holds it already
            now = self.clock()
            saved = (dict(self._next), self.events, self.bytes, self._next_event)
            rows, added = [], []
            try:
                for request in batch:
                    copies = sum(len(servers) for _, _, servers in request.copies)
                    size = sum(len(event) for _, event, _ in request.copies)
                    try:
                        self._make_room(copies, size, now)
                    except LogFull as full:
                        request.error = full
                        continue
                    nxt = self._next
                    logged = request.logged
                    for topic, event, servers in request.copies:
                        event_id = self._next_event
                        self._next_event += 1
                        names = []
                        for server in servers:
                            seq = nxt.get(server, 1)
                            nxt[server] = seq + 1
                            names.append(f"{server}:{seq}")
                            mine = logged.get(server)
                            if mine is None:
                                mine = logged[server] = []
                            mine.append(_tuple_new(LogCopy, (server, seq, topic, event, now,
                                                             event_id)))
                        rows.append((event_id, topic, event, now, f" {' '.join(names)} "))
                        added.append((event_id, len(servers)))
                    self.events += copies
                    self.bytes += size
                upstream = {}
                for request in batch:
                    if request.upstream is not None and request.error is None:
                        parent, seq = request.upstream
                        upstream[parent] = max(seq, upstream.get(parent, 0))
                if rows or self._acks or upstream:
                    with self.store.transaction() as conn:
                        self._check_holder(conn)
                        self._write_acks(conn)
                        if rows:
                            conn.executemany("INSERT INTO edn_log_event(id, topic, event, "
                                             "created, copies) VALUES (?,?,?,?,?)", rows)
                        if upstream:
                            conn.executemany(
                                "INSERT INTO edn_log_upstream(dispatcher, seq) VALUES (?, ?) "
                                "ON CONFLICT(dispatcher) DO UPDATE SET "
                                "seq = max(edn_log_upstream.seq, excluded.seq)", list(upstream.items()))
            except BaseException as exc:  # nothing of this group is logged
                self._next, self.events, self.bytes, self._next_event = saved
                for request in batch:
                    request.logged = {}
                    request.error = request.error or exc
                raise
            commit = self.store.last_commit()
            for request in batch:
                request.commit = commit
            self._left.update(added)
            for parent, seq in upstream.items():
                self.upstream[parent] = max(seq, self.upstream.get(parent, 0))
            self.appended += sum(n for _, n in added)
            self.commits += 1
            for request in batch:
                if request.offer is not None and request.logged:
                    request.offer(request.logged)

    def _make_room(self, count: int, size: int, now: float) -> None:
        self._expire(now)

        def full() -> str | None:
            if self.events + count > self.max_events:
                return f"{self.events} events (log_max_events {self.max_events})"
            if self.bytes + size > self.max_bytes:
                return f"{self.bytes} bytes (log_max_bytes {self.max_bytes})"
            return None

        reason = full()
        if reason is None:
            return
        if self.policy == "refuse" or count > self.max_events or size > self.max_bytes:
            self.refused += count
            raise LogFull(f"the dispatcher's durable log is full: {reason}; retry later")
        self.flush_acks()  # never drop (and count twice) a copy delivered meanwhile
        dropped = 0
        while reason is not None and self.events:
            removed = self._delete_oldest("ORDER BY id LIMIT 256")
            if removed is None:
                break
            dropped += removed
            reason = full()
        self.dropped += dropped
        log.warning("durable log full: dropped the %d oldest undelivered copies", dropped)

    def expire(self) -> None:
        """Let the events older than ``max_age`` go now (a log that takes no appends, as an
        adopted lane, never reaches :meth:`_make_room`)."""
        with self._lock:
            self._expire(self.clock())

    def _expire(self, now: float) -> None:
        """Events older than ``max_age`` leave the log with their undelivered copies."""
        oldest = self._oldest_created()
        if oldest is None or now - oldest <= self.max_age:
            return
        self.flush_acks()  # the oldest rows may be delivered already
        expired, servers = 0, set()
        while True:
            removed = self._delete_oldest("WHERE created < ? ORDER BY id LIMIT 256",
                                          (now - self.max_age,), servers)
            if removed is None:
                break
            expired += removed
        self.expired += expired
        if expired:
            log.warning("durable log: %d undelivered copies older than log_max_age (%g s) "
                        "expired, for %s", expired, self.max_age, ", ".join(sorted(servers)))

    def _delete_oldest(self, selection: str, args=(), servers: set | None = None) -> int | None:
        """Delete the events ``selection`` picks (oldest first); their undelivered copies
        leave the channels (:meth:`on_drop`). Returns how many copies went, or None when
        nothing was selected."""
        with self.store.transaction() as conn:
            self._check_holder(conn)
            gone = conn.execute(
                f"DELETE FROM edn_log_event WHERE id IN (SELECT id FROM edn_log_event {selection}) "
                "RETURNING id, copies, length(event)", args).fetchall()
        if not gone:
            return None
        rows = []  # (event id, server, seq, event id) of the undelivered copies deleted
        for event_id, copies, size in sorted(tuple(row) for row in gone):
            self.events -= self._left.pop(event_id, 0)
            self.bytes -= size
            for server, seq in copies_named(copies):
                if seq > self.acked.get(server, 0):
                    rows.append((event_id, server, seq, event_id))
                    self.acked[server] = max(self.acked.get(server, 0), seq)
                    if servers is not None:
                        servers.add(server)
        self.on_drop(rows)
        return len(rows)

    def on_drop(self, rows) -> None:
        """Called with the (id, server, seq, event id) rows dropped to make room (the
        forwarder removes them from its channels)."""

    def acknowledge(self, server: str, last_seq: int, count: int, size: int = 0,
                    event_ids: Sequence[int] = ()) -> None:
        """``server`` answered 2xx to a batch of ``count`` copies (``size`` bytes; the events
        ``event_ids``) ending at ``last_seq``: its copies up to there are delivered, and
        those events may have no copy left.

        The delete and the position are written with the next append's transaction, or by
        this call once :data:`ACK_DELAY` has passed since the first unwritten one: one
        transaction per server batch would cost more than routing the events. Deferring is
        safe: a copy whose acknowledgement a crash loses is sent again, and the server skips
        seqs at or below the position it stored with the batch (delivery stays at least once).
        Under the log's lock, as appends: the process's writers queue on a Python lock
        instead of meeting in SQLite, whose busy handler sleeps (milliseconds) between tries."""
        with self._lock:
            if not self._acks:
                self._acks_since = time.monotonic()
            seq, copies = self._acks.get(server, (0, 0))
            self._acks[server] = (max(seq, last_seq), copies + count)
            if not event_ids:  # not named (tests, tools): found from the rows
                event_ids = [c.event_id for c in self._read(server, self.acked.get(server, 0))
                             if c.seq <= last_seq]
            self._acked_ids.extend(event_ids)
            self.events -= count  # the bytes go with the events' last copies, when written
            self.acked[server] = max(self.acked.get(server, 0), last_seq)
            if time.monotonic() - self._acks_since >= ACK_DELAY:
                self.flush_acks()

    def flush_acks(self) -> None:
        """Write the acknowledgements not written yet (an idle log, closing, tests). A log
        taken over by another process drops them: its new holder resends those copies, and
        the servers skip what they have."""
        with self._lock:
            if not self._acks:
                return
            if not self.lost:
                try:
                    with self.store.transaction() as conn:
                        self._check_holder(conn)
                        self._write_acks(conn)
                    return
                except LaneLost:
                    log.warning("durable log: taken over by another process; this one's "
                                "acknowledgements are dropped")
            self._acks.clear()
            self._acked_ids = []

    def _check_holder(self, conn) -> None:
        """Raise :class:`LaneLost` unless this log is still the one its store last opened
        (read in the transaction that would write)."""
        row = conn.execute("SELECT value FROM edn_log_meta WHERE key = 'holder'").fetchone()
        if row is None or row[0] != self.holder:
            self.lost = True
            raise LaneLost("the dispatcher's durable log was taken over by another process "
                           "(this one's hold had lapsed); retry: the dispatcher logs in a "
                           "lane of its own again")

    def _write_acks(self, conn) -> None:
        """Apply the pending acknowledgements in ``conn``'s transaction (under the lock):
        the servers' positions, and the rows of events no server waits for any more."""
        if not self._acks:
            return
        conn.executemany("INSERT INTO edn_log_position(server, acked) VALUES (?, ?) "
                         "ON CONFLICT(server) DO UPDATE SET "
                         "acked = max(edn_log_position.acked, excluded.acked)",
                         [(server, last_seq) for server, (last_seq, _) in self._acks.items()])
        self._acks.clear()
        left = self._left
        delivered = []
        for event_id in self._acked_ids:
            n = left.get(event_id)
            if n is None:  # dropped to make room meanwhile
                continue
            if n > 1:
                left[event_id] = n - 1
            else:
                del left[event_id]
                delivered.append(event_id)
        self._acked_ids = []
        if delivered:
            sizes = conn.execute("DELETE FROM edn_log_event WHERE id IN (SELECT value FROM "
                                 "json_each(?)) RETURNING length(event)",
                                 (json.dumps(delivered),)).fetchall()
            self.bytes -= sum(size for (size,) in sizes)

    # -- reading -----------------------------------------------------------------------------
    def pending(self, server: str) -> list[LogCopy]:
        """The unacknowledged copies of ``server``, oldest first (replay after a restart)."""
        with self._lock:
            return self._read(server, self.acked.get(server, 0))

    def read_after(self, server: str, seq: int, limit: int, into) -> None:
        """Hand ``into`` at most ``limit`` of ``server``'s logged copies after ``seq``, oldest
        first, under the log's lock: no append for that server slips in between (a channel
        refills its window from the log, and replays it after a restart, with this)."""
        with self._lock:
            into(self._read(server, seq, limit), limit)

    def _read(self, server: str, seq: int, limit: int | None = None) -> list[LogCopy]:
        """``server``'s copies after ``seq`` (and after its position), from the rows naming
        it; a read that goes on from the last one starts at that row."""
        after = max(seq, self.acked.get(server, 0))
        cursor_seq, start = self._cursor.get(server, (None, 0))
        if cursor_seq is None or cursor_seq > after:
            start = 0
        needle = f" {server}:"
        found: list[LogCopy] = []
        while limit is None or len(found) < limit:
            rows = self.store.query(
                "SELECT id, topic, event, created, copies FROM edn_log_event WHERE id > ? AND "
                "instr(copies, ?) > 0 ORDER BY id LIMIT 1024", (start, needle))
            if not rows:
                break
            for event_id, topic, event, created, copies in rows:
                start = event_id
                mine = seq_named(copies, needle)
                if mine is not None and mine > after:
                    found.append(_tuple_new(LogCopy, (server, mine, topic, event, created,
                                                      event_id)))
                    if limit is not None and len(found) >= limit:
                        break
        if found:
            self._cursor[server] = (found[-1].seq, found[-1].event_id)
        return found

    def copies(self) -> list[tuple[str, int]]:
        """(server, seq) of every undelivered copy, in event order (tests, tools)."""
        with self._lock:
            out = []
            for (copies,) in self.store.query("SELECT copies FROM edn_log_event ORDER BY id"):
                out.extend((server, seq) for server, seq in copies_named(copies)
                           if seq > self.acked.get(server, 0))
            return out

    def _oldest_created(self) -> float | None:
        row = self.store.query("SELECT created FROM edn_log_event ORDER BY id LIMIT 1")
        return row[0][0] if row else None

    def close(self) -> None:
        """Write what is acknowledged and release the log to another process (the rows
        stay)."""
        try:
            self.flush_acks()
        except Exception:  # the copies are sent again: at least once still holds
            log.exception("writing the last acknowledgements failed")
        if self._lockfile is not None:
            self._lockfile.close()
            self._lockfile = None

    def figures(self) -> dict[str, object]:
        oldest = self._oldest_created()
        figures = {"log.events": self.events, "log.bytes": self.bytes,
                   "log.oldest_age_s": (self.clock() - oldest) if oldest is not None else 0.0,
                   "log.appended": self.appended, "log.dropped": self.dropped,
                   "log.expired": self.expired,
                   "log.refused": self.refused, "log.commits": self.commits}
        with self._lock:
            for server, nxt in self._next.items():
                figures[f"server.{server}.lag"] = max(0, nxt - 1 - self.acked.get(server, 0))
        return figures


@translate(LogFull)
def _log_full(exc: LogFull) -> SoapFault:
    return receiver_fault(str(exc), FAULT_LOG_FULL)


@translate(LaneLost)
def _lane_lost(exc: LaneLost) -> SoapFault:
    return receiver_fault(str(exc))
