"""Reading and purging the dead letters of an outbox (:class:`DeadLetterTable`, a part of
:class:`~.outbox.Outbox`): notifications whose attempts or age ran out, kept with their
rendered payload and ``wsa:MessageID`` until an operator redelivers or purges them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["DEAD_TABLE", "DeadLetter", "DeadLetterTable", "MAX_DEAD_LETTER_LIST", "chunks"]

DEAD_TABLE = "eventing_dead_letters"
MAX_DEAD_LETTER_LIST = 1000  # most entries one ListDeadLetters answers


@dataclass(frozen=True)
class DeadLetter:
    id: int
    subscription_id: str
    topic: str
    url: str
    reason: str
    attempts: int
    created: float
    first_attempt: float | None
    last_attempt: float | None
    dead_at: float
    message_id: str
    size: int


class DeadLetterTable:
    """Listing, counting and purging dead letters (``self.store``: the service's store)."""

    def dead_letters(self, *, topic: str | None = None, subscription: str | None = None,
                     limit: int = 100) -> list[DeadLetter]:
        limit = max(0, min(limit, MAX_DEAD_LETTER_LIST))
        where, params = [], []
        if topic:
            where.append("topic = ?")
            params.append(topic)
        if subscription:
            where.append("subscription_id = ?")
            params.append(subscription)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.store.query(
            f"SELECT id, subscription_id, topic, url, reason, attempts, created, first_attempt, "
            f"last_attempt, dead_at, message_id, LENGTH(payload) AS size FROM {DEAD_TABLE} {clause} "
            f"ORDER BY id LIMIT ?", (*params, limit))
        return [DeadLetter(**dict(r)) for r in rows]

    def dead_letter_count(self) -> int:
        return self.store.query(f"SELECT COUNT(*) FROM {DEAD_TABLE}")[0][0]

    def purge(self, ids: Sequence[int] | None = None, *, older_than: float | None = None) -> int:
        """Delete dead letters: ``ids``, or those dead before ``older_than`` (a time), or all
        when both are None. Returns how many went."""
        with self.store.transaction() as conn:
            if ids is not None:
                count = 0
                for chunk in chunks(list(ids), 500):
                    marks = ",".join("?" * len(chunk))
                    count += conn.execute(f"DELETE FROM {DEAD_TABLE} WHERE id IN ({marks})",
                                          chunk).rowcount
                return count
            if older_than is not None:
                return conn.execute(f"DELETE FROM {DEAD_TABLE} WHERE dead_at < ?",
                                    (older_than,)).rowcount
            return conn.execute(f"DELETE FROM {DEAD_TABLE}").rowcount


def chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start:start + size]
