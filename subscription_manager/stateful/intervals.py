"""The publisher-side interval set of S-CN with passive subscriptions
(Chandramouli, section 5.3.3).

Theory of operation.  Every subscription to one value stream has a bound δ in (0, δ_limit]
and wants the strict semantics of section 5.2: it is notified of a value v exactly when
|v - L| >= δ, L being the value it was last notified (all start at the stream's first value
v0).  The publisher does not know the subscriptions.  It keeps a set of *intervals* of bounds,
``[LNV, B_low, B_high]``: every subscription whose bound lies in (B_low, B_high] was last
notified LNV.  The intervals partition (0, δ_limit], so every bound lies in exactly one.

On an update v' an interval is affected when d = |v' - LNV| > B_low (a bound δ <= d must
hear of v').  When d >= B_high the whole interval is affected and becomes [v', B_low, B_high];
otherwise it splits into [v', B_low, d] and [LNV, d, B_high].  The affected parts travel as
messages ``<LOW, HIGH, UPDATE>``; a subscription takes one when LOW < δ <= HIGH (a range
predicate the network evaluates statelessly) and then knows L = UPDATE.  After each update,
neighbouring intervals with the same LNV merge (they are one interval again), and affected
parts that touch travel as one message.

Figure 24 (δ_limit 10): 100 -> 105 sends <0, 5, 105> and leaves [105, 0, 5], [100, 5, 10];
-> 108 sends <0, 3, 108> and <5, 8, 108> and leaves four intervals.

Large updates.  The paper says an update with |v' - v| >= δ_limit merges everything back into
one interval.  Under strict semantics that is not so: after 100 -> 95 (limit 10) the bounds in
(5, 10] still hold L = 100, and 105 (|105 - 95| = 10) is only 5 away from it, so a
subscription with δ = 7 must not hear of 105.  What holds: every unaffected interval contains
the last update within B_low of its LNV, so an update with |v' - v| >= 2 δ_limit affects every
interval wholly and the set collapses to ``[v', 0, δ_limit]`` with one message.  This module
follows the semantics; the collapse happens whenever every interval is wholly affected.

Tolerance (section 5.4).  With a common tolerance t a subscription *must* receive a value with
|v - L| >= δ and *may* receive one with |v - L| >= δ - t.  Intervals then break only at
multiples of t (and δ_limit), so there are at most ceil(δ_limit / t) of them.  The paper breaks
"along the immediately lower partition boundary"; that would withhold the value from the
bounds between that boundary and d, which *must* receive it.  We break at the smallest
multiple k t >= d: bounds up to d receive it (must), and the extra ones, d < δ <= k t, have
δ - t <= (k - 1) t < d (may).

This module is pure (values in, messages out); :mod:`.interval_store` makes it durable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

__all__ = ["Interval", "IntervalMessage", "IntervalSet", "InvalidIntervalState",
           "MAX_GRID_CELLS"]

MAX_GRID_CELLS = 1_000_000  # ceil(δ_limit / t) at most: k t stays exact enough to compare


class InvalidIntervalState(ValueError):
    """Parameters or a stored interval set that break the invariants (a corrupt store, a
    tolerance above the limit, a value that is not a finite number)."""


def _finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidIntervalState(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise InvalidIntervalState(f"{name} must be finite, not {value!r}")
    return number


@dataclass(frozen=True)
class Interval:
    """The bounds (low, high] whose subscriptions were last notified ``lnv``."""

    lnv: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.low < self.high:
            raise InvalidIntervalState(f"an interval needs 0 <= low < high: {self}")


@dataclass(frozen=True)
class IntervalMessage:
    """``<LOW, HIGH, UPDATE>``: every subscription with LOW < δ <= HIGH is notified UPDATE."""

    low: float
    high: float
    update: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.low < self.high:
            raise InvalidIntervalState(f"a message needs 0 <= low < high: {self}")

    def reaches(self, bound: float) -> bool:
        return self.low < bound <= self.high


class IntervalSet:
    """The interval set for one value stream with maximum bound ``limit`` (δ_limit) and an
    optional common ``tolerance`` t (None or 0: strict semantics).

    ``update(v)`` returns the messages for v; the first value starts the stream and is
    announced to every bound (``<0, limit, v0>``: everyone's L starts there).  An update equal
    to the last one is ignorable: no message, nothing changes."""

    def __init__(self, limit: float, tolerance: float | None = None) -> None:
        self.limit = _finite("the maximum bound", limit)
        if self.limit <= 0:
            raise InvalidIntervalState(f"the maximum bound must be positive, not {limit!r}")
        self.tolerance = None if not tolerance else _finite("the tolerance", tolerance)
        if self.tolerance is not None and not 0 < self.tolerance <= self.limit:
            raise InvalidIntervalState(f"the tolerance must lie in (0, {self.limit!r}], "
                                       f"not {tolerance!r}")
        if self.tolerance is not None and self.limit / self.tolerance > MAX_GRID_CELLS:
            # a finer grid bounds nothing, and its multiples k t lose the precision of k
            raise InvalidIntervalState(f"the tolerance {tolerance!r} cuts (0, {self.limit!r}] "
                                       f"into more than {MAX_GRID_CELLS:,} cells")
        self.last: float | None = None
        self._intervals: list[Interval] = []

    # -- reading ---------------------------------------------------------------------------
    @property
    def intervals(self) -> tuple[Interval, ...]:
        """The intervals, by increasing bounds."""
        return tuple(self._intervals)

    def __len__(self) -> int:
        return len(self._intervals)

    def last_notified(self, bound: float) -> float | None:
        """L of a subscription with this bound: the LNV of the interval holding it (what a
        subscription joining now starts from, so that the messages stay exact for it)."""
        for interval in self._intervals:
            if interval.low < bound <= interval.high:
                return interval.lnv
        return None

    def max_intervals(self) -> int | None:
        """ceil(δ_limit / t) with a tolerance; None (no bound but O(k^2)) without."""
        return None if self.tolerance is None else math.ceil(self.limit / self.tolerance)

    # -- restoring -------------------------------------------------------------------------
    @classmethod
    def restore(cls, limit: float, tolerance: float | None, last: float | None,
                intervals: Iterable[Interval]) -> "IntervalSet":
        """An interval set from stored state, its invariants checked (a partition of
        (0, limit], on the tolerance grid, neighbours with different LNVs)."""
        restored = cls(limit, tolerance)
        restored._intervals = sorted(intervals, key=lambda i: i.low)
        restored.last = None if last is None else _finite("the last update", last)
        restored._check()
        return restored

    def _check(self) -> None:
        if self.last is None:
            if self._intervals:
                raise InvalidIntervalState("intervals without a first value")
            return
        edge = 0.0
        for before, interval in zip([None, *self._intervals], self._intervals):
            if interval.low != edge:
                raise InvalidIntervalState(f"the intervals do not cover (0, {self.limit!r}] "
                                           f"without gaps or overlaps at {edge!r}")
            if before is not None and before.lnv == interval.lnv:
                raise InvalidIntervalState(f"neighbours with one LNV were not merged at {edge!r}")
            if interval.high != self.limit and not self._on_grid(interval.high):
                raise InvalidIntervalState(f"edge {interval.high!r} is off the tolerance grid")
            edge = interval.high
        if edge != self.limit:
            raise InvalidIntervalState(f"the intervals end at {edge!r}, not at {self.limit!r}")

    def _on_grid(self, edge: float) -> bool:
        return self.tolerance is None or self._grid_edge(edge) == edge

    # -- updating --------------------------------------------------------------------------
    def update(self, value: float) -> list[IntervalMessage]:
        value = _finite("an update", value)
        if self.last is None:
            self.last = value
            self._intervals = [Interval(value, 0.0, self.limit)]
            return [IntervalMessage(0.0, self.limit, value)]
        if value == self.last:
            return []
        after: list[Interval] = []
        affected: list[tuple[float, float]] = []
        for interval in self._intervals:
            distance = abs(value - interval.lnv)
            if distance <= interval.low:
                after.append(interval)
                continue
            cut = distance if self.tolerance is None else self._grid_edge(distance)
            if cut >= interval.high:
                after.append(Interval(value, interval.low, interval.high))
                affected.append((interval.low, interval.high))
            else:
                after.append(Interval(value, interval.low, cut))
                after.append(Interval(interval.lnv, cut, interval.high))
                affected.append((interval.low, cut))
        self.last = value
        self._intervals = _merged(after)
        return [IntervalMessage(low, high, value) for low, high in _joined(affected)]

    def _grid_edge(self, distance: float) -> float:
        """The smallest multiple k t >= distance (at most the limit), computed as ``k * t``
        always, so that the same edge is the same float every time."""
        if distance >= self.limit:  # the overflow of |v' - LNV| (inf) included
            return self.limit
        t = self.tolerance
        k = math.ceil(distance / t)
        if k * t < distance:  # the division rounded down
            k += 1
        while k > 1 and (k - 1) * t >= distance:  # ... or up
            k -= 1
        return min(k * t, self.limit)


def _merged(intervals: Sequence[Interval]) -> list[Interval]:
    """Neighbours (by bounds) with one LNV become one interval."""
    out: list[Interval] = []
    for interval in intervals:
        if out and out[-1].lnv == interval.lnv and out[-1].high == interval.low:
            out[-1] = Interval(interval.lnv, out[-1].low, interval.high)
        else:
            out.append(interval)
    return out


def _joined(ranges: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Touching affected ranges become one message (they share the new LNV)."""
    out: list[tuple[float, float]] = []
    for low, high in ranges:
        if out and out[-1][1] == low:
            out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out
