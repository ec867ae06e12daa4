"""The durable outbox: accepted events and their pending notifications, in the service's store.

An event is accepted (the publisher, or the dispatcher for a batch, gets its success answer)
only once one write transaction has committed the event row and one outbox row per matched
subscription. Each outbox row carries a ``wsa:MessageID`` chosen at acceptance, so every
delivery of that notification -- the first, a retry, a redelivery after a restart or from
the dead letters -- carries the same id and a sink can drop duplicates.

Delivery itself stays in memory (:mod:`.delivery`): the rows committed are handed to the
deliverer at once (the fast path), and a delivered row is deleted later, in batches
(:meth:`Outbox.delivered` / :meth:`Outbox.flush`). A process that dies with rows in flight
leaves them in the table: at-least-once, never at-most-once.

Ownership. Every gunicorn worker shares the store. A row belongs to the process that
accepted (or claimed) it: ``owner`` is ``pid:start-time`` (the start time tells a reused pid
from the process that died). Owners beat a heartbeat row (``eventing_outbox_owners``) at every
sweep; a sweep (and a process's startup) claims, with one conditional UPDATE, the rows of
owners whose process is gone (same machine: the SQLite file is local) or whose heartbeat is
older than the lease. Claimed rows, and a process's own rows that are due and not in its
memory (a retry after a restart, a job the full queue dropped), are loaded by :meth:`due`.

Paging. Rows accepted past the delivery queue's room (``in_memory`` at :meth:`accept`) are
*spilled*: written due at once, not handed to memory (rows the queue drops after all are
marked so by :meth:`spill`); the queue takes them a page at a time as it empties
(:meth:`due`, oldest first): a backlog of any size waits on disk.

Retries are persisted: a failed attempt updates ``attempts``, ``next_attempt_at`` and the last
error in the row, so a restart neither resets the count nor delivers early. When the
attempts or the age run out, the notification (its rendered bytes) moves to
``eventing_dead_letters`` in the same transaction that deletes the row.

EDN servers also keep, per dispatcher, the sequence number of the last event applied
(``eventing_batch_positions``), updated in the transaction that commits a batch's outbox rows:
a batch the dispatcher replays after a restart is acknowledged without matching twice.

Durability: see :mod:`wsframework.store`: a request that committed outbox rows (a
publication, a batch) is answered only once they are on disk (``edn serve --durable-sync
full``, the default; ``normal`` survives ``kill -9`` but not a power cut).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterable, NamedTuple, Sequence

from wsframework.migrations import migrate
from wsframework.store import Store

from .message_ids import new_message_id, new_message_ids
from .outbox_dead_letters import (DEAD_TABLE, MAX_DEAD_LETTER_LIST, DeadLetter, DeadLetterTable,
                                  chunks)
from .process_owner import owner_alive, process_owner

__all__ = ["Outbox", "OutboxRow", "DeadLetter", "new_message_id",
           "new_message_ids", "MAX_DEAD_LETTER_LIST"]

_EVENTS = "eventing_outbox_events"
_OUTBOX = "eventing_outbox"
_OWNERS = "eventing_outbox_owners"
_POSITIONS = "eventing_batch_positions"


_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_EVENTS} (
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    action TEXT NOT NULL,
    body BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS {_OUTBOX} (
    id INTEGER PRIMARY KEY,
    event_id INTEGER,
    subscription_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    created REAL NOT NULL,
    first_attempt REAL,
    last_attempt REAL,
    last_error TEXT,
    owner TEXT NOT NULL,
    url TEXT,
    content_type TEXT,
    action TEXT,
    payload BLOB
);
CREATE INDEX IF NOT EXISTS {_OUTBOX}_owner_due ON {_OUTBOX}(owner, next_attempt_at);
CREATE INDEX IF NOT EXISTS {_OUTBOX}_event ON {_OUTBOX}(event_id);
CREATE TABLE IF NOT EXISTS {_OWNERS} (
    owner TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    heartbeat REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS {DEAD_TABLE} (
    id INTEGER PRIMARY KEY,
    subscription_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    url TEXT NOT NULL,
    content_type TEXT NOT NULL,
    action TEXT NOT NULL,
    message_id TEXT NOT NULL,
    payload BLOB NOT NULL,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    created REAL NOT NULL,
    first_attempt REAL,
    last_attempt REAL,
    dead_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS {DEAD_TABLE}_subscription ON {DEAD_TABLE}(subscription_id);
CREATE INDEX IF NOT EXISTS {DEAD_TABLE}_topic ON {DEAD_TABLE}(topic);
CREATE TABLE IF NOT EXISTS {_POSITIONS} (
    dispatcher TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL
);
"""

_ROW_COLUMNS = (f"o.id, o.subscription_id, o.message_id, o.attempts, o.next_attempt_at, "
                f"o.created, o.first_attempt, o.last_attempt, o.url, o.content_type, o.action, "
                f"o.payload, e.topic AS event_topic, e.action AS event_action, e.body")


_PAGE_COLUMNS = ("id, subscription_id, message_id, attempts, next_attempt_at, created, "
                 "first_attempt, last_attempt, url, content_type, action, payload, event_id")


class OutboxRow(NamedTuple):
    """A pending notification as loaded from the outbox. ``payload`` (with ``url``,
    ``content_type``, ``action``) is set for a redelivered dead letter, which is sent as it
    was; otherwise the notification is rendered from the event (``event_action``, ``body``)
    with the subscription's template. (A tuple: a page makes thousands.)"""

    id: int
    subscription_id: str
    message_id: str
    attempts: int
    next_attempt_at: float
    created: float
    first_attempt: float | None
    last_attempt: float | None
    url: str | None
    content_type: str | None
    action: str | None
    payload: bytes | None
    event_topic: str | None
    event_action: str | None
    body: bytes | None


class Accepted(NamedTuple):
    """One outbox row just committed: the row id and the message id its notification keeps.
    (A tuple: one is made per notification, and a frozen dataclass costs several times
    more to build.)"""

    id: int
    subscription_id: str
    message_id: str
    created: float


class Outbox(DeadLetterTable):
    """The outbox, dead-letter and batch-position tables of one service's store."""

    def __init__(self, store: Store, *, clock=time.time, lease: float = 30.0,
                 recheck: float = 60.0, flush_size: int = 256):
        """``lease``: seconds without a heartbeat after which another process takes an
        owner's rows; ``recheck``: a row handed to memory becomes due again after this long
        (a job the full queue dropped is retried by the sweep then)."""
        self.store = store
        self.clock = clock
        self.lease = lease
        self.recheck = recheck
        self.flush_size = flush_size
        migrate(store, "outbox", [_SCHEMA])
        self._done: list[int] = []
        self._done_lock = threading.Lock()
        self._owner_pid = -1
        self._owner = ""
        self.fixed_owner: str | None = None  # tests: act as another process
        self._counts = dict.fromkeys(("accepted", "dead_lettered", "claimed", "spilled",
                                      "redelivered_dead_letters", "replayed_events_skipped"), 0)

    @property
    def owner(self) -> str:
        if self.fixed_owner is not None:
            return self.fixed_owner
        pid = os.getpid()
        if pid != self._owner_pid:  # computed after fork, in the worker itself
            self._owner, self._owner_pid = process_owner(pid), pid
        return self._owner

    # == acceptance ========================================================================
    def accept(self, events: Sequence[tuple[str, str, bytes, Sequence[str]]], *,
               durable: bool = True, dispatcher: str | None = None,
               seqs: Sequence[int] | None = None,
               select: Callable | None = None,
               in_memory: int | None = None) -> list[list[Accepted] | None]:
        """Commit, in one transaction, each event (topic, action, body bytes, matched
        subscription ids) with one outbox row per subscription (none when ``durable`` is
        false: then only the position is kept). With ``dispatcher`` and ``seqs`` (each
        event's sequence number), an event at or below the dispatcher's last applied
        sequence is skipped (None in the result) and the position advances in the same
        transaction. With ``select(conn, index, ids)``, an event is queued for the ids it
        returns instead (decided inside this transaction: NotifyWhen's L, see
        :mod:`.notify_index`). With ``in_memory``, only that many rows (the first, in
        order) are to be handed to the delivery queue: the rest are spilled (due at once,
        for the queue to page in). Returns the rows, per event."""
        now = self.clock()
        owner = self.owner
        due = now + self.recheck
        memory_room = memory_left = None if in_memory is None else max(0, in_memory)
        result: list[list[Accepted] | None] = []
        with self.store.transaction() as conn:
            last = self.position_in(conn, dispatcher) if dispatcher is not None else None
            skipped = 0
            first = None  # the largest row id so far: read once, then counted on
            for index, (topic, action, body, ids) in enumerate(events):
                if last is not None and seqs is not None and seqs[index] <= last:
                    result.append(None)
                    skipped += 1
                    continue
                if select is not None and ids:
                    ids = select(conn, index, ids)
                if not ids or not durable:
                    result.append([])
                    continue
                event_id = conn.execute(
                    f"INSERT INTO {_EVENTS}(topic, action, body, created) VALUES (?, ?, ?, ?) "
                    "RETURNING id", (topic, action, body, now)).fetchone()[0]
                message_ids = new_message_ids(len(ids))
                if first is None:
                    first = conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {_OUTBOX}"
                                         ).fetchone()[0]
                kept = len(ids) if memory_left is None else min(memory_left, len(ids))
                if memory_left is not None:
                    memory_left -= kept
                # ids given in order after the previous maximum, inside the write
                # transaction (one writer at a time), so the caller knows each row's id
                conn.executemany(
                    f"INSERT INTO {_OUTBOX}(id, event_id, subscription_id, message_id, "
                    f"next_attempt_at, created, owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(first + 1 + i, event_id, sid, mid, due if i < kept else now, now, owner)
                     for i, (sid, mid) in enumerate(zip(ids, message_ids))])
                result.append([Accepted(first + 1 + i, sid, mid, now)
                               for i, (sid, mid) in enumerate(zip(ids, message_ids))])
                first += len(ids)
            if dispatcher is not None and seqs:
                self._set_position(conn, dispatcher, max(seqs))
            if durable:
                self._beat(conn, now)
        accepted = sum(len(r) for r in result if r)
        self._counts["accepted"] += accepted
        self._counts["replayed_events_skipped"] += skipped
        if memory_room is not None:
            self._counts["spilled"] += max(0, accepted - memory_room)
        return result

    def spill(self, row_ids: Sequence[int]) -> None:
        """Rows the delivery queue did not take after all: due at once, for it to page in
        (one UPDATE per run of consecutive ids)."""
        if not row_ids:
            return
        with self.store.transaction() as conn:
            conn.executemany(f"UPDATE {_OUTBOX} SET next_attempt_at = MIN(next_attempt_at, ?) "
                             f"WHERE id BETWEEN ? AND ? AND owner = ?",
                             [(self.clock(), low, high, self.owner)
                              for low, high in _runs(row_ids)])
        self._counts["spilled"] += len(row_ids)

    # == batch positions ===================================================================
    def position(self, dispatcher: str) -> int:
        rows = self.store.query(f"SELECT last_seq FROM {_POSITIONS} WHERE dispatcher = ?",
                                (dispatcher,))
        return rows[0][0] if rows else 0

    @staticmethod
    def _set_position(conn, dispatcher: str, last_seq: int) -> None:
        conn.execute(f"INSERT INTO {_POSITIONS}(dispatcher, last_seq) VALUES (?, ?) "
                     f"ON CONFLICT(dispatcher) DO UPDATE SET "
                     f"last_seq = MAX({_POSITIONS}.last_seq, excluded.last_seq)",
                     (dispatcher, last_seq))

    def position_in(self, conn, dispatcher: str) -> int:
        row = conn.execute(f"SELECT last_seq FROM {_POSITIONS} WHERE dispatcher = ?",
                           (dispatcher,)).fetchone()
        return row[0] if row else 0

    # == outcomes ==========================================================================
    def unflushed(self) -> set[int]:
        """Rows noted delivered and not deleted yet (no page may load them again)."""
        with self._done_lock:
            return set(self._done)

    def delivered(self, row_id: int) -> None:
        """A row's notification was delivered (or is no longer wanted): delete it with the
        next batch."""
        with self._done_lock:
            self._done.append(row_id)
            full = len(self._done) >= self.flush_size
        if full:
            self.flush()

    def flush(self) -> int:
        """Delete the delivered rows noted so far, and events left without rows."""
        with self._done_lock:
            done, self._done = self._done, []
        if not done:
            return 0
        with self.store.transaction() as conn:
            marks = ",".join("?" * len(done))
            events = [r[0] for r in conn.execute(
                f"SELECT DISTINCT event_id FROM {_OUTBOX} WHERE id IN ({marks}) "
                f"AND event_id IS NOT NULL", done)]
            conn.execute(f"DELETE FROM {_OUTBOX} WHERE id IN ({marks})", done)
            if events:
                emarks = ",".join("?" * len(events))
                conn.execute(f"DELETE FROM {_EVENTS} WHERE id IN ({emarks}) AND NOT EXISTS "
                             f"(SELECT 1 FROM {_OUTBOX} o WHERE o.event_id = {_EVENTS}.id)",
                             events)
        return len(done)

    def failed(self, row_id: int, attempts: int, next_attempt_at: float, error: str | None,
               first_attempt: float | None, last_attempt: float) -> None:
        """Persist a failed attempt: the count, when to try next, the error."""
        with self.store.transaction() as conn:
            conn.execute(f"UPDATE {_OUTBOX} SET attempts = ?, next_attempt_at = ?, "
                         f"last_error = ?, first_attempt = COALESCE(first_attempt, ?), "
                         f"last_attempt = ? WHERE id = ?",
                         (attempts, next_attempt_at, (error or "")[:500], first_attempt,
                          last_attempt, row_id))

    def dead_letter(self, row_id: int, *, topic: str, url: str, content_type: str, action: str,
                    payload: bytes, reason: str, attempts: int,
                    first_attempt: float | None, last_attempt: float | None) -> bool:
        """Move a row to the dead letters (its rendered payload); False if the row was gone
        (another process took it meanwhile)."""
        now = self.clock()
        with self.store.transaction() as conn:
            row = conn.execute(f"SELECT subscription_id, message_id, created, event_id, "
                               f"first_attempt FROM {_OUTBOX} WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                return False
            conn.execute(
                f"INSERT INTO {DEAD_TABLE}(subscription_id, topic, url, content_type, action, "
                f"message_id, payload, reason, attempts, created, first_attempt, last_attempt, "
                f"dead_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row["subscription_id"], topic, url, content_type, action, row["message_id"],
                 payload, reason[:500], attempts, row["created"],
                 row["first_attempt"] or first_attempt, last_attempt, now))
            conn.execute(f"DELETE FROM {_OUTBOX} WHERE id = ?", (row_id,))
            if row["event_id"] is not None:
                conn.execute(f"DELETE FROM {_EVENTS} WHERE id = ? AND NOT EXISTS "
                             f"(SELECT 1 FROM {_OUTBOX} WHERE event_id = ?)",
                             (row["event_id"], row["event_id"]))
        self._counts["dead_lettered"] += 1
        return True

    # == ownership =========================================================================
    def _beat(self, conn, now: float) -> None:
        conn.execute(f"INSERT INTO {_OWNERS}(owner, pid, heartbeat) VALUES (?, ?, ?) "
                     f"ON CONFLICT(owner) DO UPDATE SET heartbeat = excluded.heartbeat",
                     (self.owner, os.getpid(), now))

    def heartbeat(self) -> None:
        with self.store.transaction() as conn:
            self._beat(conn, self.clock())

    def claim(self) -> int:
        """Take the rows of owners that are gone (their process no longer runs, or their
        heartbeat is older than the lease); returns how many rows this call took."""
        now = self.clock()
        me = self.owner
        others = self.store.query(f"SELECT owner, heartbeat FROM {_OWNERS} WHERE owner != ?",
                                  (me,))
        gone = [r["owner"] for r in others
                if r["heartbeat"] < now - self.lease or not owner_alive(r["owner"])]
        if not gone:
            return 0
        claimed = 0
        with self.store.transaction() as conn:
            for owner in gone:
                # conditional: rows another process claimed first no longer name ``owner``
                # rows never tried are due at once; a failed row keeps its retry time
                claimed += conn.execute(
                    f"UPDATE {_OUTBOX} SET owner = ?, next_attempt_at = CASE WHEN attempts = 0 "
                    f"THEN MIN(next_attempt_at, ?) ELSE next_attempt_at END WHERE owner = ?",
                    (me, now, owner)).rowcount
                conn.execute(f"DELETE FROM {_OWNERS} WHERE owner = ?", (owner,))
            self._beat(conn, now)
        self._counts["claimed"] += claimed
        return claimed

    def due(self, exclude: Iterable[int] = (), limit: int = 1000) -> list[OutboxRow]:
        """A page: this process's rows whose next attempt is due, oldest first, at most
        ``limit``, except those in ``exclude`` (in memory already); their
        ``next_attempt_at`` moves ``recheck`` ahead. The ids are chosen from the index
        alone; only the page's rows are read whole (:meth:`_rows`)."""
        if limit <= 0:
            return []
        now = self.clock()
        exclude = exclude if isinstance(exclude, (set, frozenset)) else set(exclude)
        ids = [r[0] for r in self.store.query(
            f"SELECT id FROM {_OUTBOX} WHERE owner = ? AND next_attempt_at <= ? "
            f"ORDER BY next_attempt_at, id LIMIT ?", (self.owner, now, limit + len(exclude)))
            if r[0] not in exclude][:limit]
        found = self._rows(ids)
        if found:  # by runs of ids: every id in a run was chosen, so is due and ours
            with self.store.transaction() as conn:
                conn.executemany(f"UPDATE {_OUTBOX} SET next_attempt_at = ? WHERE id BETWEEN "
                                 f"? AND ? AND owner = ?",
                                 [(now + self.recheck, low, high, self.owner)
                                  for low, high in _runs([r.id for r in found])])
        return found

    def _rows(self, ids: list[int]) -> list[OutboxRow]:
        """The rows ``ids`` in full, oldest first: by runs of consecutive ids, as tuples,
        each event's body read once (a page of a backlog is mostly one long run)."""
        if not ids:
            return []
        cursor = self.store.connection().cursor()
        cursor.row_factory = None  # tuples: a Row and a dict per row cost more than the read
        wanted = sorted(ids)
        runs = _runs(wanted)
        rows: list[tuple] = []
        if len(runs) <= 64:
            for low, high in runs:
                rows += cursor.execute(f"SELECT {_PAGE_COLUMNS} FROM {_OUTBOX} WHERE id BETWEEN "
                                       f"? AND ? AND owner = ?", (low, high, self.owner)).fetchall()
        else:
            for chunk in chunks(wanted, 500):
                marks = ",".join("?" * len(chunk))
                rows += cursor.execute(f"SELECT {_PAGE_COLUMNS} FROM {_OUTBOX} WHERE id IN "
                                       f"({marks}) AND owner = ?", (*chunk, self.owner)).fetchall()
        events: dict[int, tuple] = {}
        for chunk in chunks(sorted({r[-1] for r in rows if r[-1] is not None}), 500):
            marks = ",".join("?" * len(chunk))
            for event_id, *event in cursor.execute(
                    f"SELECT id, topic, action, body FROM {_EVENTS} WHERE id IN ({marks})", chunk):
                events[event_id] = tuple(event)
        found = [OutboxRow(*r[:-1], *events.get(r[-1], (None, None, None))) for r in rows]
        return sorted(found, key=lambda r: (r.next_attempt_at, r.id))

    def pending(self) -> int:
        return self.store.query(f"SELECT COUNT(*) FROM {_OUTBOX}")[0][0]

    # == dead letters ======================================================================
    def redeliver(self, ids: Sequence[int] | None) -> list[int]:
        """Move dead letters (``ids``, or all for None) back to the outbox, attempts reset,
        same payload and MessageID, owned by this process and due now; returns the ids
        moved (unknown ids are skipped)."""
        now = self.clock()
        moved: list[int] = []
        with self.store.transaction() as conn:
            if ids is None:
                rows = conn.execute(f"SELECT * FROM {DEAD_TABLE} ORDER BY id").fetchall()
            else:
                rows = []
                for chunk in chunks(list(ids), 500):
                    marks = ",".join("?" * len(chunk))
                    rows += conn.execute(f"SELECT * FROM {DEAD_TABLE} WHERE id IN ({marks}) "
                                         f"ORDER BY id", chunk).fetchall()
            for row in rows:
                # an explicit id, as accept() gives (PostgreSQL's identity column would not
                # know of those)
                conn.execute(
                    f"INSERT INTO {_OUTBOX}(id, event_id, subscription_id, message_id, "
                    f"attempts, next_attempt_at, created, owner, url, content_type, action, "
                    f"payload) SELECT COALESCE(MAX(id), 0) + 1, NULL, ?, ?, 0, ?, ?, ?, ?, ?, "
                    f"?, ? FROM {_OUTBOX}",
                    (row["subscription_id"], row["message_id"], now, now, self.owner,
                     row["url"], row["content_type"], row["action"], row["payload"]))
                conn.execute(f"DELETE FROM {DEAD_TABLE} WHERE id = ?", (row["id"],))
                moved.append(row["id"])
            self._beat(conn, now)
        self._counts["redelivered_dead_letters"] += len(moved)
        return moved

    def stats(self) -> dict[str, int]:
        counts = dict(self._counts)
        counts["outbox_pending"] = self.pending()
        counts["dead_letters"] = self.dead_letter_count()
        return {("outbox_" + k if not k.startswith(("outbox", "dead_letters")) else k): v
                for k, v in counts.items()}


def _runs(ids) -> list[tuple[int, int]]:
    """``ids`` as runs of consecutive ids: [(first, last), ...], ascending."""
    runs: list[list[int]] = []
    for row_id in sorted(ids):
        if runs and row_id == runs[-1][1] + 1:
            runs[-1][1] = row_id
        else:
            runs.append([row_id, row_id])
    return [(low, high) for low, high in runs]
