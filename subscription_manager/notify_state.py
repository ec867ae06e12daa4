"""The last value notified to each subscription with an edn:NotifyWhen (its L), durable in
its own table of the service's store (:class:`NotifyState`); the decision that reads and
moves L runs in :mod:`.notify_index`.
"""
from __future__ import annotations

from typing import Mapping

from wsframework.migrations import migrate
from wsframework.store import Store

from .lifecycle import State

__all__ = ["NotifyState", "NOTIFY_GENERATION", "NOTIFY_SCHEMA"]

NOTIFY_GENERATION = "eventing:notify_state"
_NOTIFY_STATE = "eventing_notify_state"
NOTIFY_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_NOTIFY_STATE} (
    subscription_id TEXT PRIMARY KEY,
    last_value REAL,
    unnumbered INTEGER NOT NULL DEFAULT 0,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {_NOTIFY_STATE}_seq ON {_NOTIFY_STATE}(seq);
"""


class NotifyState:
    """L per subscription with a NotifyWhen, apart from the subscription rows: L changes
    with events, and a change to a subscription row makes every process reload (and
    reinstall the filter of) that subscription. Each change bumps its own generation and
    stamps the rows (``seq``), as the subscriptions do, so a process catches up on the L
    that others set by reading the rows above the generation it applied.

    The writers take the caller's write transaction (``conn``): the outbox's, in which the
    notifications that L stands for are queued, so L and the notifications commit together.
    A row of an ended subscription stays until :meth:`purge` (cheap, one row each)."""

    def __init__(self, store: Store):
        self.store = store
        migrate(store, "notify_state", [NOTIFY_SCHEMA])

    @staticmethod
    def generation_in(conn) -> int:
        row = conn.execute("SELECT value FROM generations WHERE name = ?",
                           (NOTIFY_GENERATION,)).fetchone()
        return row[0] if row else 0

    @staticmethod
    def changed_since(conn, seq: int) -> list[tuple[str, float | None]]:
        return [(r[0], r[1]) for r in conn.execute(
            f"SELECT subscription_id, last_value FROM {_NOTIFY_STATE} WHERE seq > ?", (seq,))]

    @staticmethod
    def last_values(conn, ids) -> dict[str, float | None]:
        """id -> L of ``ids`` that have a row (:meth:`states`, L only)."""
        return {sid: state[0] for sid, state in NotifyState.states(conn, ids).items()}

    @staticmethod
    def record(conn, notified: dict[str, float], unnumbered: dict[str, int]) -> int:
        """Set L for ``notified`` (id -> value) and add to the unnumbered-event counts;
        returns the new generation (0 when nothing changed)."""
        if not notified and not unnumbered:
            return 0
        seq = Store.bump(conn, NOTIFY_GENERATION)
        conn.executemany(
            f"INSERT INTO {_NOTIFY_STATE}(subscription_id, last_value, seq) VALUES (?, ?, ?) "
            "ON CONFLICT(subscription_id) DO UPDATE SET last_value = excluded.last_value, "
            "seq = excluded.seq", [(sid, value, seq) for sid, value in notified.items()])
        conn.executemany(
            f"INSERT INTO {_NOTIFY_STATE}(subscription_id, last_value, unnumbered, seq) "
            "VALUES (?, NULL, ?, ?) ON CONFLICT(subscription_id) DO UPDATE SET "
            f"unnumbered = {_NOTIFY_STATE}.unnumbered + excluded.unnumbered",
            [(sid, count, seq) for sid, count in unnumbered.items()])
        return seq

    @staticmethod
    def states(conn, ids) -> dict[str, tuple[float | None, int, int]]:
        """id -> (L, events without a number, the row's ``seq``) of ``ids`` that have a
        row; ``seq`` changes whenever L does (what a move compares, :mod:`.edn.moves`)."""
        ids = list(ids)
        found: dict[str, tuple[float | None, int, int]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            found.update((r[0], (r[1], r[2], r[3])) for r in conn.execute(
                f"SELECT subscription_id, last_value, unnumbered, seq FROM {_NOTIFY_STATE} "
                f"WHERE subscription_id IN ({','.join('?' * len(chunk))})", chunk))
        return found

    @staticmethod
    def replace(conn, ids, states: Mapping[str, tuple[float | None, int]]) -> int:
        """Make the rows of ``ids`` exactly ``states`` (id -> (L, events without a
        number); an id without one has no row): subscriptions moved here bring theirs.
        Bumps the generation when a row is written, so every process's index catches up
        on an L it already held (:meth:`NotifyGate._catch_up
        <.notify_index.NotifyGate._catch_up>`; it skips rows without an L, so a copy
        adopted with nothing notified yet over one another process indexed with an L is
        not seen there: only the importing process forgets its entry); returns it (0:
        nothing written)."""
        NotifyState.drop(conn, ids)
        if not states:
            return 0
        seq = Store.bump(conn, NOTIFY_GENERATION)
        conn.executemany(
            f"INSERT INTO {_NOTIFY_STATE}(subscription_id, last_value, unnumbered, seq) "
            "VALUES (?, ?, ?, ?)",
            [(sid, last, unnumbered, seq) for sid, (last, unnumbered) in states.items()])
        return seq

    @staticmethod
    def drop(conn, ids) -> None:
        """Delete the rows of ``ids`` (subscriptions that moved away)."""
        conn.executemany(f"DELETE FROM {_NOTIFY_STATE} WHERE subscription_id = ?",
                         [(sid,) for sid in ids])

    def last_value(self, subscription_id: str) -> tuple[float | None, int]:
        """(L or None, events without a number) of one subscription."""
        rows = self.store.query(f"SELECT last_value, unnumbered FROM {_NOTIFY_STATE} "
                                "WHERE subscription_id = ?", (subscription_id,))
        return (rows[0][0], rows[0][1]) if rows else (None, 0)

    def purge(self) -> int:
        """Delete the rows of subscriptions that are no longer active."""
        from .store import SUBSCRIPTIONS_TABLE  # imported here: the store imports this module
        with self.store.transaction() as conn:
            return conn.execute(
                f"DELETE FROM {_NOTIFY_STATE} WHERE subscription_id NOT IN "
                f"(SELECT id FROM {SUBSCRIPTIONS_TABLE} WHERE status = ?)", (State.ACTIVE.value,)).rowcount
