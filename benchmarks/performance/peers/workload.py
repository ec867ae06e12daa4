"""What every system of ``edn bench peers`` is given, and how what it delivered is judged.

A workload is ``n`` range subscriptions over ``d`` attributes (per attribute the minimum and
maximum of two uniform draws in [0, 10], so about 1.2% of events match one at d = 4) and
``m`` events (uniform points), all rounded to 3 decimals. The oracle is the brute force:
event k goes to every subscription whose box holds it. A system's deliveries, as (subscription
index, event index, arrival time) triples, are checked against it exactly: nothing lost,
nothing extra, nothing twice.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from route_manager.workloads import uniform_events, uniform_rectangles

D = 4


@dataclass
class Workload:
    lo: np.ndarray
    hi: np.ndarray
    points: np.ndarray
    matches: list[np.ndarray] = field(default_factory=list)  # event -> subscription indices

    @classmethod
    def make(cls, n: int, m: int, *, d: int = D, seed: int = 29) -> "Workload":
        lo, hi = uniform_rectangles(n, d, seed=seed)
        points = uniform_events(m, d, seed=seed + 1)
        work = cls(np.round(lo, 3), np.round(hi, 3), np.round(points, 3))
        work.matches = [np.flatnonzero(np.all((work.lo <= p) & (work.hi >= p), axis=1))
                        for p in work.points]
        return work

    @property
    def n(self) -> int:
        return len(self.lo)

    @property
    def m(self) -> int:
        return len(self.points)

    def expected(self, first: int = 0, last: int | None = None) -> int:
        """Deliveries the oracle makes for events ``first`` to ``last`` (exclusive)."""
        return int(sum(len(x) for x in self.matches[first:last]))

    def codes(self) -> np.ndarray:
        """The oracle's (subscription, event) pairs as sorted integers ``event * n + sub``."""
        parts = [k * self.n + subs for k, subs in enumerate(self.matches)]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)


@dataclass
class Outcome:
    """How one system ran one workload in one mode."""
    seconds: float
    events: int
    deliveries: int
    cpu_seconds: float
    lost: int
    extra: int
    duplicates: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    own_figures: dict = field(default_factory=dict)  # figures of one kind of system only

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.extra == 0 and self.duplicates == 0

    def figures(self) -> dict:
        return {"events_per_s": round(self.events / self.seconds, 1),
                "deliveries_per_s": round(self.deliveries / self.seconds, 1),
                "cpu_ms_per_event": round(self.cpu_seconds / self.events * 1000, 3),
                "latency_p50_ms": self.latency_p50_ms, "latency_p99_ms": self.latency_p99_ms,
                "exact": self.exact, "lost": self.lost, "extra": self.extra,
                "duplicates": self.duplicates, **self.own_figures}


def judge(work: Workload, subs: np.ndarray, events: np.ndarray, arrived: np.ndarray,
          sent_at: np.ndarray, *, seconds: float, cpu_seconds: float) -> Outcome:
    """The outcome of deliveries ``(subs[i], events[i])`` that arrived at ``arrived[i]``
    (wall clock), event k having been sent at ``sent_at[k]``."""
    subs = np.asarray(subs, dtype=np.int64)
    events = np.asarray(events, dtype=np.int64)
    got = np.sort(events * work.n + subs)
    unique, counts = np.unique(got, return_counts=True)
    want = work.codes()
    lost = int(len(np.setdiff1d(want, unique, assume_unique=True)))
    extra = int(len(np.setdiff1d(unique, want, assume_unique=True)))
    latency = (np.asarray(arrived, dtype=float) - np.asarray(sent_at)[events]) * 1000
    return Outcome(seconds, work.m, len(got), cpu_seconds, lost, extra,
                   int((counts - 1).sum()),
                   round(float(np.percentile(latency, 50)), 2) if len(latency) else None,
                   round(float(np.percentile(latency, 99)), 2) if len(latency) else None)


class System:
    """A system under test, used as a context manager: :meth:`start` it, make the workload's
    subscriptions (:meth:`subscribe`, timed into ``subscribe_seconds``), :meth:`connect` its
    publisher; :meth:`close` whatever of that was done, on the way out or on a failure."""

    name = "system"
    subscribe_seconds = 0.0

    def start(self) -> None:
        raise NotImplementedError

    def subscribe(self) -> None:
        raise NotImplementedError

    def connect(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def run(self, mode: str, *, window: int, timeout: float) -> Outcome:
        raise NotImplementedError

    def __enter__(self):
        try:
            self.start()
            started = time.perf_counter()
            self.subscribe()
            self.subscribe_seconds = time.perf_counter() - started
            self.connect()
            return self
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()
