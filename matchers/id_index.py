"""Filter id -> sequence number for the R-tree engine's :class:`~.filter_table.FilterTable`,
without an object per filter.

A dictionary from id to number costs about 74 bytes a filter at a million (its entry and
the number's int object), more than the filter's rectangle. Here most ids are *settled*:
their hashes in one sorted int64 array, their numbers in another beside it (16 bytes a
filter). A lookup bisects the hashes and confirms a hit against the table's own id of that
number, so two ids of one hash never mix. Ids added one at a time wait in a dictionary
until there are enough of them to merge (:data:`IdIndex.MERGE_AT`, or an eighth of those
settled), so that adding stays amortized O(1): a merge is linear (two sorted runs), about
80 ms at a million, once every 125,000 additions there. A batch as large settles at once.
A removed settled id leaves a tombstone (number -1) until the next merge.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

if TYPE_CHECKING:
    from .filter_table import FilterTable

__all__ = ["IdIndex"]

_GONE = -1
_hash = hash  # str's own hash: cached in each id, and stable within a process


class IdIndex:
    """The ids a :class:`~.filter_table.FilterTable` holds, and their sequence numbers; read
    like the dictionary it replaces (``get``, ``[]``, ``pop``, ``in``, ``len``, ``items``
    and iteration in insertion order)."""

    MERGE_AT = 4096  # ids waiting in the dictionary before they settle (at least)

    def __init__(self, table: FilterTable) -> None:
        # ``table.ids[seq]``: the id a number belongs to, or None (a proxy: the table holds
        # this index, and a cycle would keep a dropped engine's arrays until a full collection)
        self._table = weakref.proxy(table)
        self._hashes = np.empty(0, dtype=np.int64)  # sorted
        self._seqs = np.empty(0, dtype=np.int64)  # beside ``_hashes``; _GONE once removed
        self._recent: dict[str, int] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, filter_id: object) -> bool:
        return self.get(filter_id) is not None

    def __iter__(self) -> Iterator[str]:
        """The ids in insertion order (their numbers only grow)."""
        return (filter_id for filter_id, _ in self.items())

    def items(self) -> Iterator[tuple[str, int]]:
        """(id, number) in insertion order."""
        table = self._table
        return ((i, seq) for seq, i in enumerate(table.ids[:table.next_seq].tolist())
                if i is not None)

    def __getitem__(self, filter_id: str) -> int:
        seq = self.get(filter_id)
        if seq is None:
            raise KeyError(filter_id)
        return seq

    def get(self, filter_id: object, default: int | None = None) -> int | None:
        seq = self._recent.get(filter_id) if isinstance(filter_id, str) else None
        if seq is not None:
            return seq
        found = self._settled(filter_id)
        return int(self._seqs[found]) if found is not None else default

    def pop(self, filter_id: str, default: int | None = None) -> int | None:
        seq = self._recent.pop(filter_id, None)
        if seq is None:
            found = self._settled(filter_id)
            if found is None:
                return default
            seq = int(self._seqs[found])
            self._seqs[found] = _GONE
        self._count -= 1
        return seq

    def add(self, ids: list[str], first: int) -> None:
        """Number ``ids`` (new, distinct) ``first``, ``first + 1``, ..."""
        self._count += len(ids)
        if len(ids) >= self._merge_at():
            self._merge(ids, np.arange(first, first + len(ids), dtype=np.int64))
            return
        self._recent.update(zip(ids, range(first, first + len(ids))))
        if len(self._recent) >= self._merge_at():
            self._merge([], np.empty(0, dtype=np.int64))

    def isdisjoint(self, ids: Iterable[str]) -> bool:
        """Whether none of ``ids`` is held (the hashes of many are looked up at once)."""
        ids = list(ids)
        if any(i in self._recent for i in ids):
            return False
        if not len(self._hashes) or not ids:
            return True
        hashes = np.fromiter(map(_hash, ids), dtype=np.int64, count=len(ids))
        # bisected, not np.isin: that sorts the whole settled array on every call
        at = np.minimum(np.searchsorted(self._hashes, hashes), len(self._hashes) - 1)
        candidates = np.flatnonzero(self._hashes[at] == hashes)
        return not any(self._settled(ids[k]) is not None for k in candidates.tolist())

    def _settled(self, filter_id: object) -> int | None:
        """The position of a settled, unremoved ``filter_id`` in the arrays, or None."""
        hashes = self._hashes
        if not len(hashes) or not isinstance(filter_id, str):
            return None
        key = _hash(filter_id)
        position = int(np.searchsorted(hashes, key))
        ids = self._table.ids
        while position < len(hashes) and hashes[position] == key:
            seq = int(self._seqs[position])
            if seq != _GONE and ids[seq] == filter_id:
                return position
            position += 1
        return None

    def _merge_at(self) -> int:
        return max(self.MERGE_AT, len(self._hashes) // 8)

    def _merge(self, ids: list[str], seqs: np.ndarray) -> None:
        """Settle ``ids`` (numbered ``seqs``) and the waiting ones; drop the tombstones."""
        waiting = list(self._recent)
        kept = self._seqs != _GONE
        added_ids = waiting + ids
        added_hashes = np.fromiter(map(_hash, added_ids), dtype=np.int64, count=len(added_ids))
        added_seqs = np.concatenate([np.fromiter(self._recent.values(), dtype=np.int64,
                                                 count=len(waiting)), seqs])
        order = np.argsort(added_hashes, kind="stable")
        hashes = np.concatenate([self._hashes[kept], added_hashes[order]])
        merged = np.argsort(hashes, kind="stable")  # two sorted runs: a linear merge
        self._hashes = hashes[merged]
        self._seqs = np.concatenate([self._seqs[kept], added_seqs[order]])[merged]
        self._recent = {}
