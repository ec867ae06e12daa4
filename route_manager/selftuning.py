"""Self-tuning summary precision (paper IV-B, V-C), as a pure state machine plus a thin thread.

Two rules choose each step (``selftuning_rule``):

- **compare** (the default): the dispatcher routes at the precision whose sustained
  events/s it measured best, and keeps probing the precisions around the best ones; a step
  is kept only when it measured better than where it came from (:mod:`.throughput_climb`).
  The applied profile is the prior that orders the probes, and the readings below say
  which side the paper would go to, which breaks ties.
- **paper**: IV-B as published, below. It assumes that a busy dispatcher always gains by
  routing more cheaply, which is false for a dispatcher fast enough to be busy at every
  precision near the optimum (it then slides down to where the link gives out).

Theory of operation (the paper's rule)
    The dispatcher watches only its own CPU. Each step it compares the average CPU load of
    the interval that just ended with a threshold: CPU-bound means the dispatcher is the
    bottleneck, so precision goes *down* by ``x`` (cheaper routing, more copies); otherwise the
    outgoing link or the servers are, so precision goes *up* by ``x`` (fewer copies). A step
    happens when the interval ``t`` runs out, or earlier when the throughput changed
    significantly. After every step ``update_t()`` (verbatim from the paper)::

        if p < 3:                                   t = base
        elif prec[p] == prec[p-2] and prec[p-1] == prec[p-3]:      (an oscillation)
            if prec[p] > prec[p-1]:
                numOscillations += 1
                if numOscillations >= 3 and n*t <= maxT:  t = n*t; numOscillations = 0
        else:                                       numOscillations = 0; t = base

    so a tuner that keeps oscillating between two neighbouring levels (the optimum lies
    between them) lengthens its interval by ``n`` (up to ``maxT``): fewer switches, more
    stability; any other pattern returns to the base interval. With ``n = 1`` (the paper's
    experiments) there is no damping.

CPU load is process CPU time / wall time over the interval, as a fraction of ONE core: the
dispatcher is a Python process whose routing, parsing and forwarding all need the GIL, so one
core is its ceiling however many the machine has. In practice a saturated Python dispatcher
does not even reach that: its request threads and its ten sender threads hand the GIL to each
other, and every handoff leaves the core idle for a moment. Measured on the 2-core machine
this was developed on (``edn bench throughput`` / ``selftuning``, 10 servers): a dispatcher
that was the bottleneck used 0.88-0.90 of a core with CPU to spare on the machine and
0.78-0.91 while the ten servers competed for the two cores; link-bound it used 0.1-0.7. A CPU
threshold between those ranges (default 0.85; the paper's 96% assumes a dedicated
single-processor dispatcher that reads ~100% when busy) is right on average and wrong in
about one interval of three at full precision, where the readings straddle it.

Hence a second reading, the dispatcher's *utilization* (:mod:`wsframework.utilization`): the
fraction of the interval during which it had a request in hand, not counting publishers it
was holding back because the outgoing queues were full. A dispatcher that is the bottleneck
always has a publisher waiting on it, so this reads ~1.0 however little CPU the machine
lets it have; link-bound, its publishers spend their time held back and it reads less;
with too few publishers it reads less too. The dispatcher counts as CPU-bound ("the
bottleneck", ``Step.cpu_bound``) when its CPU load reaches ``threshold`` (the paper's test)
**or** its utilization reaches ``busy_threshold`` (default 0.97; 0 turns the second test off).

Both readings lie for a while after precision drops to where the outgoing link (or a
server) cannot keep up: the per-server queues take seconds to fill up to the backpressure
level, and meanwhile the dispatcher routes flat out, CPU-bound by either test, although
the copies it makes are piling up. So a third reading overrides them: when the live
servers' outgoing backlog (events queued, not yet sent) grew during the interval by more
than ``backlog_growth`` (default 10%) of the copies queued in it, and by at least
``backlog_floor`` copies (one batch per server or so; the noise of batching), the outgoing
side is the bottleneck and the dispatcher is not. ``backlog_growth = 0`` and
``busy_threshold = 0`` leave the paper's CPU test alone. ``edn bench selftuning`` reports
which test decided each step.

Throughput trigger: within an interval longer than the base (after damping), the events/s of
the latest base-length window are compared with those of the interval's first base-length
window (both at the interval's precision, so the precision change itself is no "change"); a
relative difference above ``throughput_change`` ends the interval at once. With intervals of
the base length the timeout always comes first.

Everything here is driven by :meth:`SelfTuner.sample` with explicit times and cumulative
counters (a :class:`~.measurement.Counters` reading): unit tests feed a fake clock and fake readings step by step,
no threads, no sleeps. :class:`Ticker` is the thread that feeds it live.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple

from wsframework.settings import Settings, setting

from .models.measurement import Counters
from .precision import Ladder, format_precision
from .throughput_climb import ClimbSettings, ThroughputClimb

__all__ = ["Averages", "SelfTuningSettings", "SelfTuner", "Step", "Ticker"]

_BOTTLENECK = ("cpu", "busy", "cpu+busy")  # Step.signal values that lower precision
RULES = ("compare", "paper")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfTuningSettings(Settings):
    """The self-tuner's parameters: ``edn serve dispatcher --set selftuning_<field>=VALUE`` at
    start, ``Configure`` (the same names) at run time."""

    PREFIX = "selftuning_"

    rule: str = setting("compare", "compare: keep a step only when the measured throughput "
                        "improves (route_manager.throughput_climb) | paper: IV-B as published")
    step: float = setting(0.1, "x: precision change per step (must divide 1)")
    threshold: float = setting(0.85, "CPU load (of one core) at or above which the dispatcher "
                               "is the bottleneck")
    busy_threshold: float = setting(0.97, "... or utilization at or above which it is (0: off)")
    backlog_growth: float = setting(0.1, "... unless the outgoing backlog grew by this share of "
                                    "the copies queued (0: off)")
    backlog_floor: int = setting(256, "... and by at least this many copies")
    interval: float = setting(2.0, "base interval t, seconds")
    factor: float = setting(2.0, "n >= 1: t = n*t after repeated oscillations (1: no damping)")
    max_interval: float = setting(16.0, "maxT, seconds")
    oscillations: int = setting(3, "repeated oscillations before t grows")
    throughput_change: float = setting(0.2, "relative events/s change that ends an interval "
                                       "(paper) or says the traffic changed (compare) (0: off)")
    margin: float = setting(0.0, "compare: another precision becomes home when its throughput "
                            "beats home's by more than this share")
    keep: float = setting(2.0, "compare: ... or by this many times the noise of one interval "
                          "at home, when more (0: one lucky interval may move home)")
    hold: int = setting(3, "compare: intervals at home after a probe that did not gain")
    max_hold: int = setting(24, "compare: the longest hold, after probes that did not gain")
    band: float = setting(0.15, "compare: precisions within this share of the best measured "
                          "have their neighbours probed")
    with_none: bool = setting(True, "may go below the first step to no summary")
    settle: float = setting(0.0, "seconds after a step left out of the averages")
    trace: int = setting(2000, "steps kept in memory")

    def validate(self) -> None:
        Ladder(self.step, self.with_none)  # validates the step
        if self.rule not in RULES:
            raise ValueError(f"rule is one of {', '.join(RULES)}")
        if not 0 <= self.margin < 1 or not 1 <= self.hold <= self.max_hold <= 10_000:
            raise ValueError("need 0 <= margin < 1 and 1 <= hold <= max_hold <= 10000")
        if not 0 <= self.keep <= 10:
            raise ValueError("keep is a multiple of the noise of one interval in [0, 10]")
        if not 0 <= self.band < 0.5:
            raise ValueError("band is a share of the best throughput in [0, 0.5)")
        if not 0 < self.threshold <= 2:
            raise ValueError("threshold is a CPU load in (0, 2] (cores)")
        if not 0 <= self.busy_threshold <= 1:
            raise ValueError("busy_threshold is a utilization in [0, 1] (0: not used)")
        if self.backlog_growth < 0 or self.backlog_floor < 0:
            raise ValueError("backlog_growth and backlog_floor are >= 0 (0: not used)")
        if self.interval <= 0 or self.max_interval < self.interval:
            raise ValueError("need 0 < interval <= max_interval")
        if self.factor < 1:
            raise ValueError("the damping factor n must be >= 1")
        if self.oscillations < 1 or self.trace < 1:
            raise ValueError("oscillations and trace must be >= 1")
        if self.throughput_change < 0 or not 0 <= self.settle < self.interval:
            raise ValueError("throughput_change >= 0 and 0 <= settle < interval")


@dataclass(frozen=True)
class Step:
    """One self-tuning step: what was measured over the interval that ended and what follows."""

    step: int             # p, from 1
    time: float           # clock time of the step
    precision: float      # precision in force from this step on
    previous: float       # precision during the interval that ended
    events_per_s: float   # throughput measured over that interval
    cpu: float            # CPU load over that interval (fraction of one core)
    signal: str           # what decided: "cpu", "busy", "cpu+busy" (the bottleneck),
                          # "backlog" (the link or a server is) or "none"
    interval: float       # t chosen by update_t() for the next interval
    reason: str           # "timeout" | "throughput"
    busy: float = 0.0     # utilization over that interval (wsframework.utilization)
    backlog: float = 0.0  # growth of the outgoing backlog over that interval (copies)
    copies: float = 0.0   # copies queued for servers over that interval
    sustained: float = 0.0  # events/s this precision can keep up (Averages.sustained)
    decision: str = ""    # compare rule: climb, kept, revert, probe, hold or changed

    @property
    def cpu_bound(self) -> bool:
        """The dispatcher was the bottleneck (precision went down)."""
        return self.signal in _BOTTLENECK

    def as_dict(self) -> dict:
        out = asdict(self)
        out["cpu_bound"] = self.cpu_bound
        out["precision_label"] = format_precision(self.precision)
        return out


class Averages(NamedTuple):
    """What an interval looked like, from two readings."""

    cpu: float = 0.0       # CPU load (of one core)
    rate: float = 0.0      # events/s
    busy: float = 0.0      # utilization
    copies: float = 0.0    # copies queued during it
    backlog: float = 0.0   # growth of the backlog during it
    sent: float = 0.0      # copies the senders delivered during it
    depth: float = 0.0     # the larger backlog of its two ends (copies)

    def sustained(self, queued: float) -> float:
        """The events/s this precision can keep up, which the events taken in an interval
        right after a step are not: after a step down the dispatcher takes events flat out
        until the outgoing queues fill, and after a step up it is held back while they
        drain the copies of the old precision.

        While at least ``queued`` copies wait (the link is busy all along), the link is the
        limit: the copies it carried per second over this precision's copies per event.
        That is capped by what the dispatcher itself can route, events per second of
        utilization (when that is measured). With shorter queues the events taken are the
        figure."""
        if self.depth < queued or self.copies <= 0 or self.sent <= 0:
            return self.rate
        by_link = self.rate * self.sent / self.copies
        return min(by_link, self.rate / self.busy) if self.busy > 0 else by_link


class SelfTuner:
    """Self-tuning by ``config.rule`` (module docstring). Feed :meth:`sample` readings of the
    cumulative counters; it answers a :class:`Step` at the end of every interval (None
    otherwise), with the precision for the next one."""

    def __init__(self, config: SelfTuningSettings, precision: float, reading: Counters):
        self.config = config
        self.ladder = Ladder(config.step, config.with_none)
        self.level = self.ladder.level(precision)
        self.p = 0
        self.t = config.interval
        self.num_oscillations = 0
        self.history: collections.deque[int] = collections.deque([self.level], maxlen=4)
        self.trace: collections.deque[Step] = collections.deque(maxlen=config.trace)
        self.climb = ThroughputClimb(self.ladder, self.level, ClimbSettings(
            margin=config.margin, keep=config.keep, hold=config.hold, max_hold=config.max_hold,
            band=config.band,
            change=config.throughput_change or float("inf"))) \
            if config.rule == "compare" else None
        self._begin(reading)

    @property
    def model(self) -> dict[float, float] | None:
        """The applied profile's predicted events/s by precision (0.0: no summary), handed
        over by the dispatcher: the comparing rule's prior (the paper's rule has none)."""
        return self.climb.model if self.climb is not None else None

    @model.setter
    def model(self, curve: dict[float, float] | None) -> None:
        if self.climb is not None:
            self.climb.model = curve

    @property
    def precision(self) -> float:
        return self.ladder.precision(self.level)

    def _begin(self, reading: Counters) -> None:
        self._started = reading.time
        # the readings since the interval began: one per tick, at most maxT / tick of them
        self._samples: list[Counters] = [reading]

    # -- feeding -------------------------------------------------------------------------------
    def sample(self, reading: Counters) -> Step | None:
        c = self.config
        self._samples.append(reading)
        now = reading.time
        elapsed = now - self._started
        if elapsed >= self.t and (self.climb is None or elapsed >= c.max_interval
                                  or reading.events > self._samples[0].events):
            # the comparing rule waits (up to maxT) for an interval that saw events: a
            # publisher held back for longer than t would read as no throughput at all
            return self._step(now, self._average(self._started + c.settle, now), "timeout")
        if c.throughput_change > 0 and elapsed >= 2 * c.interval:
            first = self._average(self._started + c.settle, self._started + c.interval).rate
            latest = self._average(now - c.interval, now)
            if first > 0 and abs(latest.rate - first) > c.throughput_change * first:
                return self._step(now, latest, "throughput")
        return None

    def _at(self, when: float) -> Counters:
        """The last reading taken at or before ``when`` (the first one if none)."""
        chosen = self._samples[0]
        for sample in self._samples:
            if sample.time > when:
                break
            chosen = sample
        return chosen

    def _average(self, begin: float, end: float) -> Averages:
        """The interval between the readings nearest ``begin`` and ``end``."""
        a, b = self._at(begin), self._at(end)
        if b.time <= a.time:
            a = self._samples[0]
        wall = b.time - a.time
        if wall <= 0:
            return Averages()
        return Averages(cpu=(b.cpu - a.cpu) / wall, rate=(b.events - a.events) / wall,
                        busy=min(1.0, (b.busy - a.busy) / wall), copies=b.copies - a.copies,
                        backlog=b.backlog - a.backlog, sent=b.sent - a.sent,
                        depth=max(a.backlog, b.backlog))

    def bottleneck(self, interval: Averages) -> str:
        """Was the dispatcher the bottleneck ("CPU-bound")? The reading that says so ("cpu",
        "busy", "cpu+busy"), or why not ("backlog", "none"). See the module docstring."""
        c = self.config
        if (c.backlog_growth > 0 and interval.backlog >= c.backlog_floor
                and interval.backlog > c.backlog_growth * interval.copies):
            return "backlog"  # copies piling up: the link or a server is the bottleneck
        by_cpu = interval.cpu >= c.threshold
        by_busy = c.busy_threshold > 0 and interval.busy >= c.busy_threshold
        return {(True, True): "cpu+busy", (True, False): "cpu", (False, True): "busy",
                (False, False): "none"}[by_cpu, by_busy]

    # -- the algorithm -------------------------------------------------------------------------
    def _step(self, now: float, interval: Averages, reason: str) -> Step:
        previous = self.precision
        signal = self.bottleneck(interval)
        down = signal in _BOTTLENECK
        decision = ""
        sustained = interval.sustained(self.config.backlog_floor)
        if self.climb is None:
            self.level = self.ladder.level(self.ladder.precision(self.level + (-1 if down else 1)))
        else:
            self.level, decision = self.climb.decide(sustained, -1 if down else 1)
        self.p += 1
        self.history.append(self.level)
        if self.climb is None:
            self.update_t()
        step = Step(self.p, now, self.precision, previous, interval.rate, interval.cpu, signal,
                    self.t, reason, interval.busy, interval.backlog, interval.copies,
                    round(sustained, 3), decision)
        self.trace.append(step)
        self._begin(self._samples[-1])
        log.debug("self-tuning step %d (%s): cpu %.3f, busy %.3f, backlog %+.0f of %.0f "
                  "copies: %s, %.1f events/s (%.1f sustained)%s: precision %s -> %s, next "
                  "interval %.1fs", step.step, reason, interval.cpu, interval.busy,
                  interval.backlog, interval.copies, signal, interval.rate, sustained,
                  f", {decision}" if decision else "", format_precision(previous),
                  format_precision(step.precision), self.t)
        return step

    def update_t(self) -> None:
        """The paper's update_t(), on the precision history (levels) and step index p."""
        c, h = self.config, self.history
        if self.p < 3:
            self.t = c.interval
        elif h[-1] == h[-3] and h[-2] == h[-4]:
            if h[-1] > h[-2]:
                self.num_oscillations += 1
                if self.num_oscillations >= c.oscillations and c.factor * self.t <= c.max_interval:
                    self.t = c.factor * self.t
                    self.num_oscillations = 0
        else:
            self.num_oscillations = 0
            self.t = c.interval

    def reset(self, precision: float, reading: Counters) -> None:
        """An operator set the precision: start again from it (history, interval, trace kept)."""
        self.level = self.ladder.level(precision)
        self.history.append(self.level)
        self.t = self.config.interval
        self.num_oscillations = 0
        if self.climb is not None:
            self.climb.restart(self.level)
        self._begin(reading)


class Ticker:
    """Calls ``work(now)`` every ``period`` seconds in a daemon thread until stopped."""

    def __init__(self, work: Callable[[float], None], period: float, *, name: str = "ticker",
                 clock: Callable[[], float] = time.monotonic):
        self.work = work
        self.period = period
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "Ticker":
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = self.clock() + self.period
        while not self._stop.wait(max(0.0, next_at - self.clock())):
            try:
                self.work(self.clock())
            except Exception:
                log.exception("periodic work failed")
            next_at += self.period
            now = self.clock()
            if next_at < now:  # fell behind (a long pause): do not try to catch up
                next_at = now + self.period

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
