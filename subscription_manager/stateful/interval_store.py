"""The interval set of one value stream, durable in SQLite, with an outbox of its messages.

:meth:`IntervalStore.apply` takes a value and, in one write transaction, reads the stored
interval set, updates it (:class:`~.intervals.IntervalSet`), writes it back and appends the
messages to the outbox.  The caller sends the outbox's rows (:meth:`pending`) and deletes each
once the network has acknowledged it (:meth:`sent`); :mod:`.interval_publisher` does both.

What is guaranteed.
- A value is applied once :meth:`apply` has returned: the intervals and its messages survive
  ``kill -9`` of the process (WAL, ``synchronous=NORMAL``: only a power loss or an OS crash
  can lose the last transactions) and a restart continues from the same intervals.
- Every message is handed to the network at least once, in the order of the values: a
  message whose send was acknowledged but whose row was not yet deleted when the process died
  is sent again after the restart (same ``seq`` and ``part``, so a subscriber can drop it).
  A value that was not applied (the process died inside :meth:`apply`) sent nothing and
  changed nothing: the publisher applies it again.
- The stream's maximum bound and tolerance are fixed when the store is created; opening it
  with others is refused (the subscribers' filters were written against them).
- Each transaction reads the stored state, so several processes may apply values to one
  store; they are serialized by SQLite's write lock.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from wsframework.migrations import migrate
from wsframework.store import Store, store_exists

from .intervals import Interval, IntervalMessage, IntervalSet, InvalidIntervalState

__all__ = ["IntervalStore", "StoredMessage", "StoreMismatch"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scn_stream (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    max_bound REAL NOT NULL,
    tolerance REAL,
    last_value REAL,
    seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS scn_intervals (low REAL PRIMARY KEY, high REAL NOT NULL,
                                          lnv REAL NOT NULL);
CREATE TABLE IF NOT EXISTS scn_outbox (seq INTEGER NOT NULL, part INTEGER NOT NULL,
                                       low REAL NOT NULL, high REAL NOT NULL,
                                       value REAL NOT NULL, PRIMARY KEY (seq, part));
"""


class StoreMismatch(InvalidIntervalState):
    """The store holds a stream with another maximum bound or tolerance."""


@dataclass(frozen=True)
class StoredMessage:
    """A message of the outbox: ``seq`` numbers the values that sent messages (1 for the first),
    ``part`` the messages of one value."""

    seq: int
    part: int
    message: IntervalMessage


class IntervalStore:
    """One stream's interval set in the SQLite file ``path`` (created on first use with
    ``limit`` and ``tolerance``)."""

    def __init__(self, path: str | Path, *, limit: float, tolerance: float | None = None,
                 store: Store | None = None) -> None:
        template = IntervalSet(limit, tolerance)  # checks the parameters
        self.limit, self.tolerance = template.limit, template.tolerance
        self._store = store or Store(path)
        migrate(self._store, "intervals", [_SCHEMA])
        with self._store.transaction() as conn:
            row = conn.execute("SELECT max_bound, tolerance FROM scn_stream").fetchone()
            if row is None:
                conn.execute("INSERT INTO scn_stream(id, max_bound, tolerance) VALUES (1, ?, ?)",
                             (self.limit, self.tolerance))
            elif (row["max_bound"], row["tolerance"]) != (self.limit, self.tolerance):
                raise StoreMismatch(
                    f"{path} holds a stream with maximum bound {row['max_bound']!r} and "
                    f"tolerance {row['tolerance']!r}, not {self.limit!r} and {self.tolerance!r}")

    @classmethod
    def open_existing(cls, path: str | Path) -> "IntervalStore":
        """The store at ``path`` with the parameters it was created with."""
        if not store_exists(path):
            raise FileNotFoundError(f"no interval store at {path}")
        store = Store(path)
        migrate(store, "intervals", [_SCHEMA])
        row = store.query("SELECT max_bound, tolerance FROM scn_stream")
        if not row:
            raise InvalidIntervalState(f"{path} holds no stream")
        return cls(path, limit=row[0]["max_bound"], tolerance=row[0]["tolerance"], store=store)

    # -- reading ---------------------------------------------------------------------------
    def interval_set(self, conn=None) -> IntervalSet:
        conn = conn or self._store.connection()
        last = conn.execute("SELECT last_value FROM scn_stream").fetchone()["last_value"]
        rows = conn.execute("SELECT lnv, low, high FROM scn_intervals ORDER BY low").fetchall()
        return IntervalSet.restore(self.limit, self.tolerance, last,
                                   [Interval(r["lnv"], r["low"], r["high"]) for r in rows])

    def seq(self) -> int:
        return self._store.query("SELECT seq FROM scn_stream")[0]["seq"]

    def pending(self, limit: int = 1000) -> list[StoredMessage]:
        """The outbox's oldest messages, in the order they must be sent."""
        rows = self._store.query("SELECT seq, part, low, high, value FROM scn_outbox "
                                 "ORDER BY seq, part LIMIT ?", (limit,))
        return [StoredMessage(r["seq"], r["part"], IntervalMessage(r["low"], r["high"], r["value"]))
                for r in rows]

    # -- writing ---------------------------------------------------------------------------
    def apply(self, value: float) -> list[StoredMessage]:
        """Apply one value; its messages are in the outbox when this returns."""
        with self._store.transaction() as conn:
            intervals = self.interval_set(conn)
            messages = intervals.update(value)
            if not messages:  # ignorable: nothing changes
                return []
            seq = conn.execute("SELECT seq FROM scn_stream").fetchone()["seq"] + 1
            conn.execute("UPDATE scn_stream SET last_value = ?, seq = ?", (intervals.last, seq))
            conn.execute("DELETE FROM scn_intervals")
            conn.executemany("INSERT INTO scn_intervals(low, high, lnv) VALUES (?, ?, ?)",
                             [(i.low, i.high, i.lnv) for i in intervals.intervals])
            stored = [StoredMessage(seq, part, m) for part, m in enumerate(messages)]
            conn.executemany("INSERT INTO scn_outbox(seq, part, low, high, value) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(s.seq, s.part, s.message.low, s.message.high, s.message.update)
                              for s in stored])
        return stored

    def sent(self, messages: Iterable[StoredMessage]) -> None:
        """The network acknowledged ``messages``: they leave the outbox."""
        with self._store.transaction() as conn:
            conn.executemany("DELETE FROM scn_outbox WHERE seq = ? AND part = ?",
                             [(m.seq, m.part) for m in messages])

    def close(self) -> None:
        self._store.close()
