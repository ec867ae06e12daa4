"""Which worker process of a server runs its network conversation (:mod:`.network`).

gunicorn may run several worker processes over one store, and on PostgreSQL several hosts
may; the one that holds the store's exclusive ``election`` (:meth:`Store.hold_exclusive`: a
lock file beside a SQLite store, a session advisory lock on PostgreSQL) runs the threads.
The lock goes with its holder's process (or its database connection), so when the holder
dies another worker's next attempt takes over.
"""
from __future__ import annotations

__all__ = ["Election"]

_IN_MEMORY = object()  # an in-memory store has no other process to exclude


class Election:
    def __init__(self, store, purpose: str = "election"):
        self.store = store
        self.purpose = purpose
        self._hold = None

    @property
    def held(self) -> bool:
        return self._hold is not None

    def try_acquire(self) -> bool:
        if self._hold is not None:
            return True
        try:
            self._hold = self.store.hold_exclusive(self.purpose) or _IN_MEMORY
        except RuntimeError:
            return False
        return True

    def release(self) -> None:
        hold, self._hold = self._hold, None
        if hold is not None and hold is not _IN_MEMORY:
            hold.close()
