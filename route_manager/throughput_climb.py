"""The self-tuner's comparing rule: a precision step is kept only when the throughput measured
after it beats the throughput measured before it.

Why
    The paper's rule (IV-B) assumes that a dispatcher which is the bottleneck always gains
    by routing more cheaply, so it lowers precision whenever the dispatcher is busy. A fast
    dispatcher breaks that assumption: after the Fig. 17 switch to clustered events every
    precision from 0.4 up routed 20-30k events/s with the dispatcher busy at each of them,
    and the paper's rule slid down to where the link gave out. Measuring says at once
    whether a step helped.

How
    :class:`ThroughputClimb` is fed one figure per interval: the sustained events/s at the
    level the interval ran at. It remembers the latest figure of each level (a level's
    consecutive intervals averaged), and moves through a small state machine:

    - **probe**: after ``hold`` intervals at its level it tries a neighbour, the one the
      profile (the prior) predicts to be faster, else the one not tried last, else the
      direction the paper's bottleneck test suggests;
    - **climb**: the neighbour beat the level it came from (by more than ``margin``), so the
      step is kept and the next one goes the same way;
    - **revert**: it did not, so it goes back and holds; when both directions have failed
      since the last gain, the hold doubles (up to ``max_hold``), so a tuner at the
      optimum spends ever less time away from it;
    - **changed**: a level's figure moved by more than ``change`` between two consecutive
      intervals at it, so the traffic changed: everything measured elsewhere is forgotten
      and it probes at once;
    - **settle**: the interval right after any move is not judged. The outgoing queues
      still hold the old precision's copies, or have yet to fill with the new one's, for
      seconds; a figure taken then would judge the queues, not the precision.

The prior (:attr:`model`, the applied profile's predicted events/s by precision) only orders
the probes: its figures come from a model of another moment's traffic, and the measurements
decide. Everything here is a pure function of the figures fed in: no clock, no threads.
"""
from __future__ import annotations

from dataclasses import dataclass

from .precision import Ladder

__all__ = ["ClimbSettings", "ThroughputClimb"]


@dataclass(frozen=True)
class ClimbSettings:
    margin: float = 0.0     # a step is kept when it beats the old level by more than this
    hold: int = 3           # intervals at a level before the next probe
    max_hold: int = 24      # the longest hold, after repeated failed probes both ways
    change: float = 0.2     # a level's figure moving by more than this: the traffic changed
    forget_after: int = 40  # intervals after which a level's figure is too old to compare
    settle: bool = True     # the interval after a move is not judged


class ThroughputClimb:
    """Hill climbing on measured throughput over the precision ladder (module docstring)."""

    def __init__(self, ladder: Ladder, level: int, settings: ClimbSettings = ClimbSettings()):
        self.ladder = ladder
        self.settings = settings
        self.model: dict[float, float] | None = None
        self.restart(level)

    def restart(self, level: int) -> None:
        """Start again at ``level`` knowing nothing (an operator set the precision)."""
        self.level = level
        self.count = 0                                   # intervals seen
        self.figures: dict[int, tuple[float, int]] = {}  # level -> (events/s, interval seen)
        self.trial: tuple[int, int] | None = None        # (level it came from, direction)
        self.hold = 0
        self.hold_length = self.settings.hold
        self.failed: set[int] = set()   # directions whose probe failed since the last gain
        self.last_probe = 0
        self.settling = False           # the next interval follows a move: not judged

    # -- one interval --------------------------------------------------------------------------
    def decide(self, rate: float, hint: int) -> tuple[int, str]:
        """The interval at :attr:`level` sustained ``rate`` events/s; ``hint`` is the paper's
        direction (-1: the dispatcher is the bottleneck, +1: it is not). Returns the level of
        the next interval and the decision ("climb", "kept", "revert", "probe", "hold",
        "changed" or "settle")."""
        self.count += 1
        self._forget_old()
        if self.settling:
            # the first interval after a move: the queues still hold the old precision's
            # copies (or have yet to fill), so its figure says little of this level
            self.settling = False
            return self.level, "settle"
        if self.trial is not None:
            return self._judge_trial(rate)
        changed = self._record(rate)
        if changed:
            self.figures = {self.level: self.figures[self.level]}
            self.hold, self.hold_length, self.failed = 0, self.settings.hold, set()
        if self.hold > 0:
            self.hold -= 1
            return self.level, "hold"
        direction = self._probe_direction(hint)
        if direction == 0:
            self.hold = self.hold_length
            return self.level, "changed" if changed else "hold"
        self.trial = (self.level, direction)
        self.last_probe = direction
        self._move_to(self.level + direction)
        return self.level, "changed" if changed else "probe"

    def _judge_trial(self, rate: float) -> tuple[int, str]:
        origin, direction = self.trial
        self.trial = None
        self.figures[self.level] = (rate, self.count)
        before = self.figures.get(origin)
        if before is None or rate > before[0] * (1 + self.settings.margin):
            self.failed.clear()
            self.hold_length = self.settings.hold
            if self._on_ladder(self.level + direction):
                self.trial = (self.level, direction)
                self._move_to(self.level + direction)
                return self.level, "climb"
            self.hold = self.hold_length
            return self.level, "kept"
        self.failed.add(direction)
        self.failed |= {d for d in (-1, 1) if not self._on_ladder(origin + d)}  # an end
        if self.failed == {-1, 1}:
            self.hold_length = min(2 * self.hold_length, self.settings.max_hold)
            self.failed = set()
        self.hold = self.hold_length
        self._move_to(origin)
        return self.level, "revert"

    def _move_to(self, level: int) -> None:
        self.level = level
        self.settling = self.settings.settle

    # -- what it knows -------------------------------------------------------------------------
    def _record(self, rate: float) -> bool:
        """Fold this interval into the level's figure; True when it moved so far since the
        last visit that the traffic must have changed."""
        known = self.figures.get(self.level)
        if known is None:
            self.figures[self.level] = (rate, self.count)
            return False
        figure, seen = known
        steady = seen == self.count - 1  # the interval before was judged at this level too
        if steady and abs(rate - figure) > self.settings.change * max(figure, rate):
            self.figures[self.level] = (rate, self.count)
            return True
        # consecutive intervals at one level: their mean; a level come back to: the new one
        self.figures[self.level] = ((figure + rate) / 2 if steady else rate, self.count)
        return False

    def _forget_old(self) -> None:
        oldest = self.count - self.settings.forget_after
        self.figures = {lv: f for lv, f in self.figures.items() if f[1] >= oldest}

    def _on_ladder(self, level: int) -> bool:
        return self.ladder.bottom <= level <= self.ladder.top

    def _probe_direction(self, hint: int) -> int:
        """The neighbour to try next: 0 when there is none (a one-level ladder)."""
        choices = [d for d in (-1, 1) if self._on_ladder(self.level + d)]
        if len(choices) < 2:
            return choices[0] if choices else 0
        expected = {d: self._expected(self.level + d) for d in choices}
        if None not in expected.values() and expected[-1] != expected[1]:
            best = max(choices, key=lambda d: expected[d])
            if best not in self.failed:
                return best
        if self.failed and len(self.failed) == 1:
            return -next(iter(self.failed))
        if self.last_probe:
            return -self.last_probe
        return -1 if hint < 0 else 1

    def _expected(self, level: int) -> float | None:
        """The profile's figure for ``level`` relative to the current level's (None: no
        profile, or it does not cover both)."""
        if not self.model:
            return None
        here = self.model.get(self.ladder.precision(self.level))
        there = self.model.get(self.ladder.precision(level))
        if here is None or there is None or here <= 0:
            return None
        return there / here
