"""The self-tuner's comparing rule: the dispatcher routes at the precision whose throughput it
measured best, and keeps measuring the precisions around the best ones.

Why
    The paper's rule (IV-B) assumes that a dispatcher which is the bottleneck always gains
    by routing more cheaply, so it lowers precision whenever the dispatcher is busy. A fast
    dispatcher breaks that assumption: after the Fig. 17 switch to clustered events every
    precision from 0.4 up routed 20-30k events/s with the dispatcher busy at each of them,
    and the paper's rule slid down to where the link gave out. Measuring says at once
    whether a step helped. Measured curves are not smooth either: a precision can route
    10% less than both its neighbours, and a stretch of precisions can differ by less than
    the noise of one interval before the curve rises steeply. So a step that does not gain
    at once is not the end of the search.

How
    :class:`ThroughputClimb` is fed one figure per interval: the events/s sustained at the
    precision (level) the interval ran at. It remembers each level's latest figure (a
    level's consecutive intervals averaged) for ``forget_after`` intervals, and:

    - routes at the **home** level, the best it measured: a step is kept only when the
      level it led to measured more than home, by ``keep`` times the noise of one interval
      at home (or by ``margin``, when more); otherwise it goes back. On a flat top (after
      the Fig. 17 switch at 2 Mbps, 0.5 to precise measured within 10% of each other) a
      step kept on one lucky interval wanders among the levels, half its moves downwards.
      With twice the noise, ``edn bench climbnoise`` (this class on the measured curves)
      settles 0.94-0.95 of Fig. 17's runs at 0.95 of the optimum or more, against
      0.78-0.85 with none, and a level better by more than the margin is still found;
    - **probes** the *frontier*: the levels it does not know that neighbour a level within
      ``band`` of the best (wider when one interval strays further than that from the next:
      twice the noise measured at home). That crosses a dip or a flat stretch next to a good level, and
      never wanders off towards the bad ones. The first probe is the neighbour the profile
      (the prior) predicts faster, or else the one on the side the paper's bottleneck test
      points to;
    - **scouts** precise first, after a start and after a change of traffic, unless it
      is home already. Precise is the one summary that is not cut: where the cut
      summaries of wide boxes are poor at every level below it, the curve is a shelf
      with a cliff at precise (measured at 2 Mbps: 17-455 events/s from none to 0.9 in a
      short sweep, 1,235-1,315 at precise over 20 s), which a search of neighbours
      crosses only level by level, a hold after every probe that the noise makes look
      worse. A scout that does not gain goes back with no hold. An applied profile knows
      the curve's shape: with one, no scout;
    - **climbs** when a probe beat home: the probed level becomes home and the next probe
      follows at once;
    - **holds** after a probe that did not gain: ``hold`` intervals at first, twice as long
      after each such probe (up to ``max_hold``) until a probe gains; with nothing left to
      probe it looks again after as long.
      Figures older than ``forget_after`` intervals are forgotten, so each level near the
      best is measured again now and then;
    - takes the first interval after a move as **settle**, unjudged: the outgoing queues
      still hold the old precision's copies, or have yet to fill, for seconds. A probe whose
      settling interval is already far below home (under ``1 - 2 * band`` of it) goes back
      at once: a bad level costs one interval, not two;
    - **changed**: two consecutive intervals at home, each off home's figure by more than
      ``change`` the same way, mean the traffic changed (one alone is taken for noise and
      left out; so is the first interval back from a probe), so everything measured
      elsewhere is forgotten and the search starts again from home. When home's figure
      (the mean of its last ``average`` intervals in a row) falls below another level's
      by more than the noise, that level is probed again before it becomes home.

The prior (:attr:`model`, the applied profile's predicted events/s by precision) only orders
the probes: its figures come from a model of another moment's traffic, and the measurements
decide. Everything here is a pure function of the figures fed in: no clock, no threads.
"""
from __future__ import annotations

from dataclasses import dataclass

from .precision import Ladder

__all__ = ["ClimbSettings", "ThroughputClimb"]

_MOST_BAND = 0.45  # the band widened by noise, at most


@dataclass(frozen=True)
class ClimbSettings:
    margin: float = 0.0     # another level becomes home when it beat home by more than this
    keep: float = 2.0       # ... or by this many times the noise of one interval, when more
    hold: int = 3           # intervals at home after the first probe that did not gain
    max_hold: int = 24      # the longest hold, after probes that did not gain
    change: float = 0.2     # home's figure moving by this much: the traffic changed
    band: float = 0.15      # levels within this share of the best have their neighbours probed
    forget_after: int = 40  # intervals after which a level's figure is too old to go by
    settle: bool = True     # the interval after a move is not judged
    average: int = 6        # home's figure: the mean of up to this many intervals in a row
    scout: bool = True      # after a start or a change of traffic, probe precise first


class ThroughputClimb:
    """Search of the precision ladder by measured throughput (module docstring)."""

    def __init__(self, ladder: Ladder, level: int, settings: ClimbSettings = ClimbSettings()):
        self.ladder = ladder
        self.settings = settings
        self.model: dict[float, float] | None = None
        self.restart(level)

    def restart(self, level: int) -> None:
        """Start again at ``level`` knowing nothing (an operator set the precision)."""
        self.level = self.home = level
        self.count = 0                                   # intervals seen
        self.figures: dict[int, tuple[float, int]] = {}  # level -> (events/s, interval seen)
        self.trial = False        # the current level is a probe away from home
        self.settling = self.settings.settle  # the next interval follows a move: not judged
        self.hold = 0
        self.hold_length = self.settings.hold
        self.drift = 0            # the way home's last interval was far off its figure
        self.run = 0              # consecutive intervals at home folded into its figure
        self.noise = 0.0          # mean relative distance of an interval from home's figure
        self.scouted = not self.settings.scout  # precise was probed since the start or change
        self.scouting = False     # the current probe is that one

    # -- one interval --------------------------------------------------------------------------
    def decide(self, rate: float, hint: int) -> tuple[int, str]:
        """The interval at :attr:`level` sustained ``rate`` events/s; ``hint`` is the paper's
        direction (-1: the dispatcher is the bottleneck, +1: it is not). Returns the level of
        the next interval and the decision: "probe", "climb", "kept", "revert", "hold",
        "settle" or "changed"."""
        self.count += 1
        self._forget_old()
        if self.settling:
            self.settling = False
            if not (self.trial and self._far_below_home(rate)):
                return self.level, "settle"
        if self.trial:
            self.figures[self.level] = (rate, self.count)
            return self._judge_probe(hint)
        changed = self._record(rate)
        if changed:
            self.figures = {self.home: self.figures[self.home]}
            self.hold, self.hold_length = 0, self.settings.hold
            self.scouted = not self.settings.scout
        better = self._best()
        if better != self.home and self._beats_home(better, by=self._noise_margin()):
            # a level that measured better before home's figure fell: measured again, like
            # a probe, before it becomes home
            self.trial = True
            self._move_to(better)
            return self.level, "probe"
        if self.hold > 0:
            self.hold -= 1
            return self.level, "changed" if changed else "hold"
        decision = self._probe(hint)
        return self.level, "changed" if changed else decision

    def _judge_probe(self, hint: int) -> tuple[int, str]:
        probed, scouting = self.level, self.scouting
        self.trial = self.scouting = False
        if self._beats_home(probed, by=self._keep_margin()):
            self.home = probed
            self.hold_length = self.settings.hold
            decision = self._probe(hint)
            return self.level, "climb" if decision == "probe" else "kept"
        if not scouting:  # a scout that did not gain says nothing of home's neighbours
            self.hold = self.hold_length
            self.hold_length = min(2 * self.hold_length, self.settings.max_hold)
        self._move_to(self.home)
        return self.level, "revert"

    def _probe(self, hint: int) -> str:
        """Move to precise when it is yet to be scouted, else to the next frontier level
        ("probe"); hold longer when none is left."""
        top = self.ladder.top
        if not self.scouted and top not in self.figures and not self.model:
            self.scouted = self.scouting = self.trial = True
            self._move_to(top)
            return "probe"
        self.scouted = True
        frontier = self._frontier()
        if not frontier:  # nothing to probe until a figure ages out or the band widens
            self.hold = self.hold_length
            return "hold"
        self.trial = True
        self._move_to(max(frontier, key=lambda level: self._preference(level, hint)))
        return "probe"

    def _move_to(self, level: int) -> None:
        self.level = level
        self.settling = self.settings.settle

    # -- what it knows -------------------------------------------------------------------------
    def _record(self, rate: float) -> bool:
        """Fold an interval at home into its figure; True when it moved so far from the
        interval before (also at home) that the traffic must have changed."""
        known = self.figures.get(self.home)
        if known is None:
            self.figures[self.home] = (rate, self.count)
            self.run = 1
            return False
        figure, seen = known
        steady = seen == self.count - 1
        if abs(rate - figure) > self.settings.change * max(figure, rate):
            way = 1 if rate > figure else -1
            if self.drift == way:  # the second interval in a row that far off, the same way
                self.figures[self.home] = (rate, self.count)
                self.drift, self.run = 0, 1
                return True
            self.drift = way  # one such interval may be noise: not folded in
            self.figures[self.home] = (figure, self.count)
            return False
        self.drift = 0
        if steady and figure > 0:  # how far one interval strays from the figure, on average
            self.noise = 0.8 * self.noise + 0.2 * abs(rate - figure) / figure
        # consecutive intervals at home: their running mean (the last ``average`` of them,
        # about); home come back to: the new figure
        self.run = min(self.run + 1, self.settings.average) if steady else 1
        self.figures[self.home] = (figure + (rate - figure) / self.run, self.count)
        return False

    def _forget_old(self) -> None:
        oldest = self.count - self.settings.forget_after
        self.figures = {level: f for level, f in self.figures.items()
                        if f[1] >= oldest or level == self.home}

    def _best(self) -> int:
        return max(self.figures, key=lambda level: (self.figures[level][0], level == self.home))

    def _beats_home(self, level: int, by: float | None = None) -> bool:
        home = self.figures.get(self.home)
        margin = self.settings.margin if by is None else by
        return home is None or self.figures[level][0] > home[0] * (1 + margin)

    def _keep_margin(self) -> float:
        """How far a probe must beat home's figure to become home: the margin, or
        ``keep`` times the noise of one interval at home when that is more. A probe is
        judged on one interval, home on the mean of several: on a flat top, where the
        levels differ by less than the noise, a lucky interval would move home at every
        other probe, and half of those moves land lower."""
        return max(self.settings.margin, self.settings.keep * self.noise)

    def _noise_margin(self) -> float:
        """How far a level measured earlier must stand above home's figure to be measured
        again: the margin, or the noise of one interval at home when that is more (a figure
        from another moment, only as far above as home's own intervals stray, is no
        reason to leave)."""
        return max(self.settings.margin, self.noise)

    def _far_below_home(self, rate: float) -> bool:
        home = self.figures.get(self.home)
        return home is not None and rate < home[0] * (1 - 2 * self.settings.band)

    def _frontier(self) -> list[int]:
        """Levels not measured lately that neighbour one within ``band`` of the best."""
        if not self.figures:
            return []
        best = max(figure for figure, _ in self.figures.values())
        # a level whose figure is within the noise of the best cannot be ruled out either
        band = max(self.settings.band, min(_MOST_BAND, 2 * self.noise))
        good = [level for level, (figure, _) in self.figures.items()
                if figure >= (1 - band) * best]
        return sorted({level + step for level in good for step in (-1, 1)
                       if self.ladder.bottom <= level + step <= self.ladder.top
                       and level + step not in self.figures})

    def _preference(self, level: int, hint: int) -> tuple:
        """Which frontier level to probe first: the profile's prediction, then the side the
        paper's test points to, then the nearest to home."""
        side = 1 if (level - self.home) * hint > 0 else 0
        return (self._expected(level), side, -abs(level - self.home))

    def _expected(self, level: int) -> float:
        """The profile's figure for ``level`` relative to home's (0: no profile, or it
        does not cover both)."""
        if not self.model:
            return 0.0
        here = self.model.get(self.ladder.precision(self.home))
        there = self.model.get(self.ladder.precision(level))
        if here is None or there is None or here <= 0:
            return 0.0
        return there / here
