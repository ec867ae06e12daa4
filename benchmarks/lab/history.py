"""The history of a fault campaign and its check, in the manner of Jepsen.

Everything the campaign saw is recorded as it happened: each publication (its events, when
it was sent, whether and when a root acknowledged it), each notification (which subscriber,
which event, its ``wsa:MessageID``, when it arrived), each subscription (its range filter,
whether it was ended on purpose) and each fault (when it began and healed). :func:`check`
then reads the history against the guarantees the README makes:

- every acknowledged event reaches every live subscription whose filter selects it (lost);
- no subscriber gets an event its filter does not select, nor one never published
  (unexpected);
- an event delivered twice to one subscriber is a duplicate, listed with its MessageIDs
  (the same MessageID twice is a redelivery, which at-least-once allows);
- every subscription made is held by exactly one server at the end, and none ended on purpose
  comes back (lost, resurrected);
- after each heal, how long until the first notification arrived, and the latency from
  publication to notification for events published in each period.

Pure data and arithmetic: no sockets, so the checker has fast tests of its own.
"""
from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Publication:
    event_id: int
    point: np.ndarray
    sent_at: float
    acknowledged_at: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Notification:
    subscriber: int
    event_id: int
    message_id: str
    arrived_at: float


@dataclass
class FaultWindow:
    name: str
    began_at: float
    healed_at: float | None = None


@dataclass
class History:
    """What happened; appended to from several threads."""

    lo: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    hi: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    # when each subscription was routed everywhere: events sent before then may reach it
    # (its filter selects them) but need not
    active_from: np.ndarray = field(default_factory=lambda: np.empty(0))
    ended: set[int] = field(default_factory=set)
    publications: dict[int, Publication] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)
    faults: list[FaultWindow] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def subscribed(self, lo: np.ndarray, hi: np.ndarray, active_from: float = 0.0) -> range:
        """Subscriptions added (their subscriber numbers are returned); ``active_from``:
        when every root routes them."""
        with self._lock:
            first = len(self.lo)
            lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
            self.lo = np.vstack([self.lo, lo]) if first else lo
            self.hi = np.vstack([self.hi, hi]) if first else hi
            self.active_from = np.concatenate([self.active_from, np.full(len(lo), active_from)])
            return range(first, len(self.lo))

    def routed(self, subscribers: range, at: float) -> None:
        self.active_from[subscribers.start:subscribers.stop] = at

    def sent(self, event_id: int, point: np.ndarray, at: float) -> None:
        with self._lock:
            self.publications[event_id] = Publication(event_id, np.asarray(point), at)

    def acknowledged(self, event_id: int, at: float) -> None:
        with self._lock:
            self.publications[event_id].acknowledged_at = at

    def failed(self, event_id: int, error: str) -> None:
        with self._lock:
            self.publications[event_id].error = error

    def notified(self, notification: Notification) -> None:
        with self._lock:
            self.notifications.append(notification)

    def began(self, name: str, at: float) -> FaultWindow:
        window = FaultWindow(name, at)
        with self._lock:
            self.faults.append(window)
        return window

    def as_json(self) -> dict:
        return {
            "subscriptions": [{"lo": list(map(float, lo)), "hi": list(map(float, hi)),
                               "active_from": float(at), "ended": k in self.ended}
                              for k, (lo, hi, at) in enumerate(zip(self.lo, self.hi, self.active_from))],
            "publications": [{"event": p.event_id, "point": list(map(float, p.point)),
                              "sent_at": p.sent_at, "acknowledged_at": p.acknowledged_at,
                              "error": p.error} for p in self.publications.values()],
            "notifications": [{"subscriber": n.subscriber, "event": n.event_id,
                               "message_id": n.message_id, "arrived_at": n.arrived_at}
                              for n in self.notifications],
            "faults": [{"name": f.name, "began_at": f.began_at, "healed_at": f.healed_at}
                       for f in self.faults],
        }

    def selects(self, subscriber: int, point: np.ndarray) -> bool:
        return bool(np.all((self.lo[subscriber] <= point) & (point <= self.hi[subscriber])))

    def expected(self) -> set[tuple[int, int]]:
        """(subscriber, event id) for every acknowledged event and every subscription not
        ended on purpose whose filter selects it."""
        live = np.array([k not in self.ended for k in range(len(self.lo))], dtype=bool)
        out = set()
        for publication in list(self.publications.values()):
            if publication.acknowledged_at is None:
                continue
            inside = np.all((self.lo <= publication.point) & (publication.point <= self.hi), axis=1)
            active = self.active_from <= publication.sent_at
            out.update((int(k), publication.event_id) for k in np.flatnonzero(inside & live & active))
        return out


def check(history: History, holders: dict[int, list[str]] | None = None) -> dict:
    """The campaign's verdict: counts, with examples of anything that broke a guarantee.
    ``holders``: subscriber -> the servers that hold its subscription at the end."""
    expected = history.expected()
    delivered: dict[tuple[int, int], list[Notification]] = defaultdict(list)
    for notification in history.notifications:
        delivered[(notification.subscriber, notification.event_id)].append(notification)
    unexpected = []
    for (subscriber, event_id), copies in delivered.items():
        publication = history.publications.get(event_id)
        if (publication is None or subscriber >= len(history.lo)
                or not history.selects(subscriber, publication.point)):
            unexpected.append({"subscriber": subscriber, "event": event_id,
                               "message_ids": [c.message_id for c in copies]})
    lost = sorted(expected - delivered.keys())
    duplicates = []
    for (subscriber, event_id), copies in sorted(delivered.items()):
        if len(copies) > 1:
            ids = [c.message_id for c in copies]
            duplicates.append({"subscriber": subscriber, "event": event_id, "message_ids": ids,
                               "same_message_id": len(set(ids)) == 1})
    verdict = {
        "published": len(history.publications),
        "acknowledged": sum(p.acknowledged_at is not None for p in history.publications.values()),
        "publish_failures": sum(p.error is not None for p in history.publications.values()),
        "expected_notifications": len(expected),
        "notifications": len(history.notifications),
        "lost": len(lost),
        "lost_examples": [{"subscriber": s, "event": e} for s, e in lost[:10]],
        "unexpected": len(unexpected),
        "unexpected_examples": unexpected[:10],
        "duplicates": len(duplicates),
        "duplicates_with_new_message_id": sum(not d["same_message_id"] for d in duplicates),
        "duplicate_examples": duplicates[:10],
    }
    if holders is not None:
        made = set(range(len(history.lo)))
        held = Counter({k: len(v) for k, v in holders.items() if v})
        verdict["subscriptions_lost"] = sorted(made - history.ended - held.keys())
        verdict["subscriptions_resurrected"] = sorted(history.ended & held.keys())
        verdict["subscriptions_held_twice"] = sorted(k for k, n in held.items() if n > 1)
    first = first_arrivals(history)  # read once for every fault's figures
    verdict["faults"] = [period_figures(history, k, first) for k in range(len(history.faults))]
    return verdict


def first_arrivals(history: History) -> list[Notification]:
    """The first copy of each (subscriber, event) to arrive: when the subscriber had it.
    A later copy is a duplicate (counted as such); it does not make delivery later (a
    request sent into a cut may still reach the sink long after its retry did)."""
    first: dict[tuple[int, int], Notification] = {}
    for n in history.notifications:
        key = (n.subscriber, n.event_id)
        if key not in first or n.arrived_at < first[key].arrived_at:
            first[key] = n
    return list(first.values())


def latencies(history: History, began: float, ended: float,
              first: list[Notification] | None = None) -> np.ndarray:
    """Seconds from publication to the first notification of each (subscriber, event) for
    the events sent in [began, ended)."""
    out = [n.arrived_at - history.publications[n.event_id].sent_at
           for n in (first if first is not None else first_arrivals(history))
           if n.event_id in history.publications
           and began <= history.publications[n.event_id].sent_at < ended]
    return np.array(out, dtype=float)


def _percentiles(values: np.ndarray) -> dict:
    if not len(values):
        return {"n": 0}
    return {"n": int(len(values)), "p50_s": round(float(np.percentile(values, 50)), 3),
            "p99_s": round(float(np.percentile(values, 99)), 3)}


# Events sent this close before the next fault began belong to it, not to the normal period:
# their notifications are still on their way when it strikes.
NEXT_FAULT_MARGIN_S = 1.0


def period_figures(history: History, k: int, first: list[Notification] | None = None) -> dict:
    """One fault's figures: how long it lasted; after its heal, when the first notification
    held back by it arrived (an event sent before the heal, delivered after it) and when the
    last one did (the backlog drained); the latency of events sent during it and in the
    normal period after it (until :data:`NEXT_FAULT_MARGIN_S` before the next fault); the
    duplicates of events sent during it or in that normal period."""
    window = history.faults[k]
    healed = window.healed_at if window.healed_at is not None else window.began_at
    following = (history.faults[k + 1].began_at - NEXT_FAULT_MARGIN_S
                 if k + 1 < len(history.faults) else float("inf"))
    if first is None:
        first = first_arrivals(history)
    held = [n.arrived_at for n in first
            if n.arrived_at >= healed and n.event_id in history.publications
            and history.publications[n.event_id].sent_at < healed]
    return {
        "fault": window.name,
        "lasted_s": round(healed - window.began_at, 2),
        "heal_to_first_held_delivery_s": round(min(held) - healed, 3) if held else None,
        "heal_to_drained_s": round(max(held) - healed, 3) if held else 0.0,
        "during": _percentiles(latencies(history, window.began_at, healed, first)),
        "after": _percentiles(latencies(history, healed, following, first)),
        "duplicates": _duplicates(history, window.began_at, following),
    }


def _duplicates(history: History, began: float, ended: float) -> dict:
    """Notifications beyond the first of one (subscriber, event), for events sent in
    [began, ended): with the MessageID of an earlier copy (redelivered) or a new one."""
    seen: dict[tuple[int, int], set[str]] = defaultdict(set)
    redelivered = new_id = 0
    for n in history.notifications:
        publication = history.publications.get(n.event_id)
        if publication is None or not began <= publication.sent_at < ended:
            continue
        ids = seen[(n.subscriber, n.event_id)]
        if ids:
            if n.message_id in ids:
                redelivered += 1
            else:
                new_id += 1
        ids.add(n.message_id)
    return {"same_message_id": redelivered, "new_message_id": new_id}
