"""Which NotifyWhen subscriptions an event's value reaches, without a scan (Chandramouli's
richer subscriptions, section 5.3.1).

:class:`NotifyIndex` keeps, for subscriptions that read the same Value, the two thresholds
of each (:meth:`NotifyWhen.thresholds <.notify_when.NotifyWhen.thresholds>`: L - delta and
L + delta, or their tolerance-band forms) in two sorted structures. A value v reaches the
subscriptions with ``lo >= v`` or ``hi <= v``: two range reads from the end of each
structure, O(log K + M) for M subscriptions reached among K distinct thresholds; re-keying
the M costs O(M log K). A scan would cost O(N) per event whatever M is.

Subscriptions with equal thresholds share one key (a set of ids under it): a *re-indexing*
is a key entering or leaving a sorted structure; moving a subscription to a key that is
already there is a dictionary update. With a tolerance t the thresholds lie on a grid of
spacing t, so subscriptions with the same t share keys much more often (section 5.4: fewer
re-indexings). :attr:`NotifyIndex.reindexings` counts them.

:class:`NotifyGate` is the source's decision for a batch of events, run inside the write
transaction that queues their notifications (the outbox's): it brings each index up to the
L others committed (the state table's generation), asks it for the subscriptions each value
reaches among those the filter matched, and records the new L in the same transaction. The
write transaction serializes every worker and process of the source, so two events never
both decide against the same old L. If that transaction fails, :meth:`NotifyGate.reset`
forgets the in-memory indexes, which are rebuilt from the store on the next event.
"""
from __future__ import annotations

import threading
from typing import Iterable

from sortedcontainers import SortedList

from matchers.schema.extraction import standalone

from .notify_when import NotifyWhen
from .notify_state import NotifyState
from .store import Subscription

__all__ = ["NotifyIndex", "NotifyGate", "ValueKey", "notify_when_selection"]

ValueKey = tuple  # NotifyWhen.value_key: (expression, namespaces)


class NotifyIndex:
    """Thresholds of subscriptions that read one Value; not thread-safe (the gate locks)."""

    def __init__(self):
        self._lo = SortedList()
        self._hi = SortedList()
        self._at_lo: dict[float, set[str]] = {}
        self._at_hi: dict[float, set[str]] = {}
        # id -> (condition, L, lo, hi); L None: nothing notified yet (every value reaches it)
        self._entries: dict[str, tuple[NotifyWhen, float | None, float, float]] = {}
        self._unset: set[str] = set()
        self.reindexings = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, subscription_id: str) -> bool:
        return subscription_id in self._entries

    def last(self, subscription_id: str) -> float | None:
        return self._entries[subscription_id][1]

    def condition(self, subscription_id: str) -> NotifyWhen:
        return self._entries[subscription_id][0]

    # -- keys ------------------------------------------------------------------------------
    def _put(self, sorted_keys: SortedList, at: dict, key: float, sid: str) -> None:
        members = at.get(key)
        if members is None:
            at[key] = {sid}
            sorted_keys.add(key)
            self.reindexings += 1
        else:
            members.add(sid)

    def _take(self, sorted_keys: SortedList, at: dict, key: float, sid: str) -> None:
        members = at[key]
        members.discard(sid)
        if not members:
            del at[key]
            sorted_keys.remove(key)
            self.reindexings += 1

    # -- changes ---------------------------------------------------------------------------
    def add(self, subscription_id: str, condition: NotifyWhen, last: float | None) -> None:
        if subscription_id in self._entries:
            self.remove(subscription_id)
        if last is None:
            self._entries[subscription_id] = (condition, None, 0.0, 0.0)
            self._unset.add(subscription_id)
            return
        lo, hi = condition.thresholds(last)
        self._entries[subscription_id] = (condition, last, lo, hi)
        self._put(self._lo, self._at_lo, lo, subscription_id)
        self._put(self._hi, self._at_hi, hi, subscription_id)

    def remove(self, subscription_id: str) -> None:
        entry = self._entries.pop(subscription_id, None)
        if entry is None:
            return
        if entry[1] is None:
            self._unset.discard(subscription_id)
            return
        self._take(self._lo, self._at_lo, entry[2], subscription_id)
        self._take(self._hi, self._at_hi, entry[3], subscription_id)

    def set_last(self, subscription_id: str, last: float) -> None:
        """L of one subscription is now ``last``: move its keys (only if they change)."""
        condition, old, lo, hi = self._entries[subscription_id]
        if old is None:  # first L: add() takes it out of the unset ones
            self.add(subscription_id, condition, last)
            return
        new_lo, new_hi = condition.thresholds(last)
        if new_lo != lo:
            self._take(self._lo, self._at_lo, lo, subscription_id)
            self._put(self._lo, self._at_lo, new_lo, subscription_id)
        if new_hi != hi:
            self._take(self._hi, self._at_hi, hi, subscription_id)
            self._put(self._hi, self._at_hi, new_hi, subscription_id)
        self._entries[subscription_id] = (condition, last, new_lo, new_hi)

    # -- lookups ---------------------------------------------------------------------------
    def reached(self, value: float) -> set[str]:
        """Every subscription ``value`` is to be notified to: ``lo >= value`` or
        ``hi <= value``, or nothing notified yet."""
        found = set(self._unset)
        for key in self._lo.irange(minimum=value):
            found.update(self._at_lo[key])
        for key in self._hi.irange(maximum=value):
            found.update(self._at_hi[key])
        return found

    def notify(self, value: float, candidates: Iterable[str] | None = None) -> list[str]:
        """The subscriptions (of ``candidates``, when given: those whose filter matched) that
        ``value`` reaches; their L becomes ``value``."""
        reached = self.reached(value)
        if candidates is not None:
            reached.intersection_update(candidates)
        for sid in reached:
            self.set_last(sid, value)
        return sorted(reached)

    def scan(self, value: float) -> set[str]:
        """The same answer as :meth:`reached` by checking every subscription (the O(N)
        method the index replaces; tests and benchmarks compare the two)."""
        return {sid for sid, (condition, last, _, _) in self._entries.items()
                if condition.fires(last, value)}


class NotifyGate:
    """The process's indexes (per topic and Value) and the decision made in a transaction."""

    #: below this share of an index's subscriptions among the candidates, the candidates
    #: are checked one by one (their filter matched few of them: cheaper than the subscriptions
    #: the index reaches whose filter did not match); the answer is the same
    DIRECT_SHARE = 0.25

    def __init__(self):
        self._lock = threading.Lock()
        self._indexes: dict[tuple[str, ValueKey], NotifyIndex] = {}
        self._where: dict[str, tuple[str, ValueKey]] = {}
        self._applied = 0  # the state generation the indexes reflect
        self.counts = {"notify_when_notified": 0, "notify_when_suppressed": 0,
                       "notify_when_unnumbered": 0}

    def reset(self) -> None:
        """Forget everything (a transaction that changed the indexes did not commit)."""
        with self._lock:
            self._indexes.clear()
            self._where.clear()
            self._applied = 0

    def forget(self, subscription_id: str) -> None:
        with self._lock:
            self._drop(subscription_id)

    def _drop(self, subscription_id: str) -> None:
        where = self._where.pop(subscription_id, None)
        if where is not None:
            self._indexes[where].remove(subscription_id)

    def reindexings(self) -> int:
        with self._lock:
            return sum(index.reindexings for index in self._indexes.values())

    def decide(self, conn, subscriptions: list[Subscription],
               values: dict[ValueKey, float | None]) -> set[str]:
        """Inside the write transaction ``conn``: the ids of ``subscriptions`` (those an
        event matched) to notify. Those without a NotifyWhen are all kept; one with a
        NotifyWhen is kept when its Value's number (``values``; None: no number) reaches
        it, and then its L is recorded in ``conn``."""
        keep = {s.id for s in subscriptions if s.notify_when is None}
        conditional = [s for s in subscriptions if s.notify_when is not None]
        if not conditional:
            return keep
        with self._lock:
            self._catch_up(conn)
            notified: dict[str, float] = {}
            unnumbered: dict[str, int] = {}
            groups: dict[tuple[str, ValueKey], list[Subscription]] = {}
            for s in conditional:
                groups.setdefault((s.topic_uid, s.notify_when.value_key), []).append(s)
            for where, members in groups.items():
                value = values.get(where[1])
                if value is None:
                    for s in members:
                        unnumbered[s.id] = 1
                    continue
                index = self._index(conn, where, members)
                ids = [s.id for s in members]
                if len(ids) < self.DIRECT_SHARE * len(index):
                    chosen = [sid for sid in ids if index.condition(sid).fires(index.last(sid), value)]
                    for sid in chosen:
                        index.set_last(sid, value)
                else:
                    chosen = index.notify(value, ids)
                notified.update((sid, value) for sid in chosen)
            seq = NotifyState.record(conn, notified, unnumbered)
            if seq:
                self._applied = seq
            self.counts["notify_when_notified"] += len(notified)
            self.counts["notify_when_unnumbered"] += len(unnumbered)
            self.counts["notify_when_suppressed"] += len(conditional) - len(notified) - len(unnumbered)
        keep.update(notified)
        return keep

    def _catch_up(self, conn) -> None:
        """Apply the L other workers and processes committed since this one last looked."""
        generation = NotifyState.generation_in(conn)
        if generation == self._applied:
            return
        for sid, last in NotifyState.changed_since(conn, self._applied):
            where = self._where.get(sid)
            if where is None:
                continue
            index = self._indexes[where]
            if last is not None and index.last(sid) != last:
                index.set_last(sid, last)
        self._applied = generation

    def _index(self, conn, where: tuple[str, ValueKey], members: list[Subscription]) -> NotifyIndex:
        """The index of one topic and Value, with ``members`` in it (a subscription seen for
        the first time is added with its stored L; one that moved to another Value or
        topic, impossible today, would be re-added)."""
        index = self._indexes.get(where)
        if index is None:
            index = self._indexes[where] = NotifyIndex()
        missing = [s for s in members if self._where.get(s.id) != where]
        if missing:
            stored = NotifyState.last_values(conn, [s.id for s in missing])
            for s in missing:
                self._drop(s.id)
                index.add(s.id, s.notify_when, stored.get(s.id))
                self._where[s.id] = where
        return index

    def load(self, conn, subscriptions: Iterable[Subscription]) -> int:
        """Index ``subscriptions`` (those with a NotifyWhen) with their stored L, e.g. every
        active one at start, so the first event's lookup is not a bulk insert."""
        by_where: dict[tuple[str, ValueKey], list[Subscription]] = {}
        for s in subscriptions:
            if s.notify_when is not None:
                by_where.setdefault((s.topic_uid, s.notify_when.value_key), []).append(s)
        with self._lock:
            self._catch_up(conn)
            for where, members in by_where.items():
                self._index(conn, where, members)
        return sum(len(m) for m in by_where.values())


def notify_when_selection(gate: NotifyGate, batch) -> tuple[dict[int, set[str]], object]:
    """For the events of ``batch`` (per event: its element and the subscriptions it is to
    be notified to) that reach subscriptions with an edn:NotifyWhen: the ``select`` the
    outbox calls in its transaction (:meth:`NotifyGate.decide`), and the dict it fills
    (event index -> ids kept). ``({}, None)`` when no event reaches any.

    The Value is read from the event element as matched, standing as the root of its own
    document (an absolute Value path starts at the event)."""
    values: dict[int, dict] = {}
    for index, (event, subscriptions) in enumerate(batch):
        conditions = {s.notify_when.value_key: s.notify_when
                      for s in subscriptions if s.notify_when is not None}
        if not conditions:
            continue
        root = standalone(event)
        values[index] = {key: c.value_of(root) for key, c in conditions.items()}
    if not values:
        return {}, None
    kept: dict[int, set[str]] = {}
    by_id = {s.id: s for _, subscriptions in batch for s in subscriptions}

    def select(conn, index, ids):
        if index not in values:
            return ids
        chosen = gate.decide(conn, [by_id[i] for i in ids], values[index])
        kept[index] = chosen
        return [i for i in ids if i in chosen]
    return kept, select
