"""The self-tuning state machine driven step by step with a fake clock and fake CPU readings:
no threads, no sleeps. Most of it is the paper's rule (IV-B); the comparing rule's own cases
are in test_throughput_climb.py, its wiring at the end here."""
import threading

import pytest

from route_manager.models.measurement import Counters
from route_manager.selftuning import SelfTuner, SelfTuningSettings, Ticker
from wsframework.settings import SettingsError, UnknownSetting, read_settings


def paper_rule(**fields) -> SelfTuningSettings:
    return SelfTuningSettings(rule="paper", **fields)


class Driver:
    """Feeds a tuner cumulative counters: ``cpu`` (load) and ``rate`` (events/s) per tick."""

    def __init__(self, config=None, precision=0.5, tick=0.25):
        self.config = config or paper_rule(interval=1.0, factor=2.0, max_interval=4.0,
                                                 threshold=0.9, throughput_change=0.2)
        self.now = 100.0
        self.cpu_seconds = 0.0
        self.events = 0.0
        self.busy_seconds = 0.0
        self.copies = 0.0
        self.backlog = 0.0
        self.sent = 0.0
        self.tick = tick
        self.tuner = SelfTuner(self.config, precision, self.reading())

    def reading(self):
        return Counters(time=self.now, cpu=self.cpu_seconds, events=self.events,
                        busy=self.busy_seconds, copies=self.copies, backlog=self.backlog,
                        sent=self.sent)

    def run(self, seconds, cpu, rate=100.0, busy=0.0, copies=0.0, growth=0.0, sent=None):
        """Advance ``seconds`` at constant ``cpu``, ``rate``, utilization ``busy``, copies
        queued per second, backlog ``growth`` per second and copies ``sent`` per second
        (default: those queued less the growth); the steps taken."""
        steps = []
        for _ in range(round(seconds / self.tick)):
            self.now += self.tick
            self.cpu_seconds += cpu * self.tick
            self.events += rate * self.tick
            self.busy_seconds += busy * self.tick
            self.copies += copies * self.tick
            self.backlog += growth * self.tick
            self.sent += (copies - growth if sent is None else sent) * self.tick
            step = self.tuner.sample(self.reading())
            if step is not None:
                steps.append(step)
        return steps

    def until_step(self, cpu, rate=100.0, limit=100.0, busy=0.0, copies=0.0, growth=0.0,
                   sent=None):
        waited = 0.0
        while waited < limit:
            steps = self.run(self.tick, cpu, rate, busy, copies, growth, sent)
            waited += self.tick
            if steps:
                return steps[0]
        raise AssertionError("no step")


def test_cpu_bound_lowers_precision_and_idle_raises_it():
    d = Driver(precision=0.5)
    step = d.until_step(cpu=0.97)
    assert step.cpu_bound and step.previous == 0.5 and step.precision == 0.4
    assert step.cpu == pytest.approx(0.97) and step.events_per_s == pytest.approx(100)
    assert step.reason == "timeout" and step.step == 1
    step = d.until_step(cpu=0.5)
    assert not step.cpu_bound and step.precision == 0.5


def test_steps_come_every_interval_and_clamp_at_the_ends():
    d = Driver(precision=0.1)
    steps = d.run(4.0, cpu=1.0)
    assert [s.precision for s in steps] == [0.0, 0.0, 0.0, 0.0]  # none is the floor
    assert [round(s.time - 100.0, 2) for s in steps] == [1.0, 2.0, 3.0, 4.0]
    d = Driver(precision=0.9)
    assert [s.precision for s in d.run(3.0, cpu=0.1)] == [1.0, 1.0, 1.0]  # precise: the top
    no_none = Driver(paper_rule(interval=1.0, with_none=False), precision=0.1)
    assert [s.precision for s in no_none.run(2.0, cpu=1.0)] == [0.1, 0.1]


def test_threshold_is_inclusive_and_configurable():
    d = Driver(paper_rule(interval=1.0, threshold=0.96), precision=0.5)
    assert not d.until_step(cpu=0.95).cpu_bound
    assert d.until_step(cpu=0.96).cpu_bound


def test_a_saturated_dispatcher_is_the_bottleneck_even_below_the_cpu_threshold():
    # A Python dispatcher with its publishers always waiting on it, but reading only 0.8
    # of a core (GIL hand-offs, other processes on the machine): utilization decides.
    d = Driver(paper_rule(interval=1.0, threshold=0.85, busy_threshold=0.97), precision=1.0)
    step = d.until_step(cpu=0.80, busy=0.99)
    assert step.cpu_bound and step.precision == 0.9 and step.busy == pytest.approx(0.99)
    assert step.signal == "busy"
    step = d.until_step(cpu=0.80, busy=0.90)  # link-bound: publishers held back part of the time
    assert not step.cpu_bound and step.precision == 1.0
    assert d.until_step(cpu=0.90, busy=0.5).signal == "cpu"  # the paper's test still applies
    assert d.until_step(cpu=0.90, busy=1.0).signal == "cpu+busy"
    assert d.until_step(cpu=0.50, busy=0.5).signal == "none"
    paper = Driver(paper_rule(interval=1.0, threshold=0.85, busy_threshold=0), precision=1.0)
    assert not paper.until_step(cpu=0.80, busy=1.0).cpu_bound  # 0: CPU only, as in the paper


def test_a_growing_outgoing_backlog_means_the_link_is_the_bottleneck():
    # Just after precision dropped below what the link can carry: the dispatcher routes
    # flat out (CPU and utilization high) while its copies pile up in the queues.
    config = paper_rule(interval=1.0, backlog_growth=0.1, backlog_floor=256)
    d = Driver(config, precision=0.3)
    step = d.until_step(cpu=0.95, busy=1.0, copies=3000, growth=900)
    assert not step.cpu_bound and step.precision == 0.4 and step.signal == "backlog"
    assert step.backlog == pytest.approx(900) and step.copies == pytest.approx(3000)
    # batching noise: a few hundred copies either way, under the floor or the share
    assert d.until_step(cpu=0.95, busy=1.0, copies=3000, growth=200).cpu_bound
    assert d.until_step(cpu=0.95, busy=1.0, copies=30_000, growth=2000).cpu_bound
    assert d.until_step(cpu=0.95, busy=1.0, copies=3000, growth=-900).cpu_bound  # draining
    off = Driver(paper_rule(interval=1.0, backlog_growth=0), precision=0.3)
    assert off.until_step(cpu=0.95, busy=1.0, copies=3000, growth=900).cpu_bound


def oscillate(d, around_cpu=(0.97, 0.5), steps=20):
    """CPU-bound at the higher precision, not at the lower: the optimum lies between."""
    high = d.tuner.precision
    out = []
    for _ in range(steps):
        cpu = around_cpu[0] if d.tuner.precision >= high else around_cpu[1]
        out.append(d.until_step(cpu))
    return out


def test_oscillation_damping_multiplies_the_interval_by_n_up_to_max_t():
    d = Driver(precision=0.5)  # interval 1, n = 2, maxT = 4
    steps = oscillate(d, steps=24)
    assert [s.precision for s in steps[:6]] == [0.4, 0.5, 0.4, 0.5, 0.4, 0.5]
    intervals = [s.interval for s in steps]
    # precision[p] == precision[p-2], precision[p-1] == precision[p-3] and an upward move
    # counts one oscillation; the third one doubles t (and resets the count) ...
    assert intervals[:5] == [1.0] * 5
    first_double = intervals.index(2.0)
    assert intervals[first_double:first_double + 6].count(2.0) == 6
    # ... and t never exceeds maxT
    assert max(intervals) == 4.0 and intervals[-1] == 4.0
    gaps = [b.time - a.time for a, b in zip(steps, steps[1:])]
    assert max(gaps) == pytest.approx(4.0)


def test_n_equal_one_never_damps():
    d = Driver(paper_rule(interval=1.0, factor=1.0, max_interval=8.0), precision=0.5)
    assert {s.interval for s in oscillate(d, steps=15)} == {1.0}


def test_a_broken_pattern_resets_t_to_the_base_interval():
    d = Driver(precision=0.5)
    oscillate(d, steps=12)
    assert d.tuner.t > 1.0
    # CPU-bound twice in a row: 0.4 -> 0.3 (or 0.5 -> 0.4 -> 0.3): no oscillation any more
    d.until_step(0.97, limit=10)
    step = d.until_step(0.97, limit=10)
    assert step.interval == 1.0 and d.tuner.num_oscillations == 0


def test_update_t_verbatim_on_a_history():
    tuner = SelfTuner(paper_rule(interval=1.0, factor=3.0, max_interval=9.0), 0.5,
                      Counters(time=0.0))
    tuner.history.clear()
    trace = []
    for p, level in enumerate([5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5], start=0):
        tuner.p = p
        tuner.history.append(level)
        tuner.update_t()
        trace.append((tuner.num_oscillations, tuner.t))
    # p < 3: t = 1; from p = 3 the pattern holds; upward moves (p = 4, 6, 8, 10) count
    assert trace[:3] == [(0, 1.0)] * 3
    assert trace[3] == (0, 1.0) and trace[4] == (1, 1.0) and trace[6] == (2, 1.0)
    assert trace[8] == (0, 3.0)  # third oscillation: t = n*t = 3, count reset
    assert trace[10] == (1, 3.0)


def test_throughput_change_ends_a_long_interval_early():
    d = Driver(precision=0.5)
    oscillate(d, steps=24)
    assert d.tuner.t == 4.0  # damped: room for windows after the first base interval
    t = d.tuner.t
    start = d.now
    # the first base interval sets the reference; then throughput drops by half
    assert d.run(1.0, cpu=0.5, rate=100.0) == []
    step = d.until_step(cpu=0.5, rate=50.0, limit=t)
    assert step.reason == "throughput"
    assert step.time - start < t and step.events_per_s == pytest.approx(50.0)


def test_small_throughput_changes_do_not_trigger():
    d = Driver(precision=0.5)
    oscillate(d, steps=24)
    t = d.tuner.t
    d.run(1.0, cpu=0.5, rate=100.0)
    step = d.until_step(cpu=0.5, rate=90.0, limit=t + 1)
    assert step.reason == "timeout"


def test_trace_is_bounded_and_records_each_step():
    d = Driver(paper_rule(interval=1.0, trace=5), precision=0.5)
    d.run(12.0, cpu=0.2)
    assert len(d.tuner.trace) == 5 and d.tuner.p == 12
    last = d.tuner.trace[-1].as_dict()
    assert last["step"] == 12 and last["precision_label"] == "precise"
    assert set(last) >= {"step", "time", "precision", "events_per_s", "cpu", "interval"}


def test_settle_leaves_the_first_part_of_an_interval_out():
    d = Driver(paper_rule(interval=2.0, settle=1.0, threshold=0.9), precision=0.5)
    d.run(1.0, cpu=2.0)         # a transient right after the (initial) switch
    step = d.until_step(cpu=0.5)
    assert not step.cpu_bound and step.cpu == pytest.approx(0.5)


def test_operator_reset_starts_again_from_their_precision():
    d = Driver(precision=0.5)
    d.tuner.reset(0.2, d.reading())
    assert d.until_step(cpu=0.2).precision == 0.3


def test_settings_from_the_set_names_and_validation():
    config, = read_settings({"selftuning_threshold": "0.96", "selftuning_factor": "1",
                             "selftuning_with_none": "false"}, SelfTuningSettings)
    assert config.threshold == 0.96 and config.factor == 1.0 and config.with_none is False
    assert config.interval == SelfTuningSettings().interval  # the rest keep their defaults
    with pytest.raises(UnknownSetting):
        read_settings({"selftuning_threshhold": "0.9"}, SelfTuningSettings)
    with pytest.raises(SettingsError):  # one boolean parser: a typo is no "false"
        read_settings({"selftuning_with_none": "flase"}, SelfTuningSettings)
    for bad in ({"step": 0.3}, {"factor": 0.5}, {"interval": 5, "max_interval": 2},
                {"threshold": 0}, {"busy_threshold": 1.5}, {"busy_threshold": -0.1},
                {"backlog_growth": -1}, {"backlog_floor": -1}, {"rule": "magic"},
                {"rule": ""}, {"margin": -0.1}, {"margin": 1.0}, {"hold": 0},
                {"hold": 5, "max_hold": 4}, {"max_hold": 10**6}, {"band": -0.1},
                {"band": 0.5}, {"keep": -1}, {"keep": 11}, {"keep": float("nan")}):
        with pytest.raises(ValueError):
            SelfTuningSettings(**bad)


def test_the_comparing_rule_is_the_default_and_judges_the_sustained_rate():
    # the bottleneck test says "down" every interval; the comparing rule measures instead
    d = Driver(SelfTuningSettings(interval=1.0, hold=1), precision=0.5)
    assert d.tuner.climb is not None
    # the first interval follows the operator's (or the start's) move: not judged
    assert d.until_step(cpu=1.0, rate=1000).decision == "settle"
    scout = d.until_step(cpu=1.0, rate=1000)  # precise first: it is yet to be measured
    assert scout.decision == "probe" and scout.precision == 1.0
    assert d.until_step(cpu=1.0, rate=1000).decision == "settle"
    back = d.until_step(cpu=1.0, rate=900)
    assert back.decision == "revert" and back.precision == 0.5
    assert d.until_step(cpu=1.0, rate=1000).decision == "settle"
    probe = d.until_step(cpu=1.0, rate=1000)  # no hold after a scout: the neighbours next
    assert probe.decision == "probe" and probe.precision == 0.4 and probe.cpu_bound
    assert d.until_step(cpu=1.0, rate=1200).decision == "settle"
    # at 0.4 it takes more events in, but their copies pile up: the link carried 2,000 of
    # the 3,000 copies made per second, so this precision can keep up 800 events/s
    judged = d.until_step(cpu=1.0, rate=1200, copies=3000, growth=1000)
    assert judged.events_per_s == pytest.approx(1200)
    assert judged.sustained == pytest.approx(800)
    assert judged.decision == "revert" and judged.precision == 0.5
    assert d.until_step(cpu=1.0, rate=1000).decision == "settle"
    assert d.until_step(cpu=1.0, rate=1000).decision == "hold"
    probe = d.until_step(cpu=1.0, rate=1000)  # the way not tried yet: up
    assert probe.decision == "probe" and probe.precision == 0.6
    assert d.until_step(cpu=0.5, rate=1000).decision == "settle"
    # right after the step up the queues still drain the old copies, and publishers are
    # held back (half the time busy): 400 events/s taken, but the link carried 2,000
    # copies/s against 400 of this precision's, and the dispatcher routes 800 per busy second
    judged = d.until_step(cpu=0.5, rate=400, busy=0.5, copies=400, growth=-1600, sent=2000)
    assert judged.sustained == pytest.approx(800) and judged.decision == "revert"
    assert d.tuner.t == 1.0  # no damping of t in this rule


def test_the_comparing_rule_waits_for_an_interval_with_events():
    d = Driver(SelfTuningSettings(interval=1.0, max_interval=4.0), precision=0.5)
    first = d.until_step(cpu=0.5, rate=1000)
    assert first.time == pytest.approx(101.0)
    # publishers held back for seconds: no events, so no figure yet
    assert d.run(2.0, cpu=0.0, rate=0.0) == []
    step = d.until_step(cpu=0.5, rate=1000)
    assert step.time == pytest.approx(103.25)
    assert d.run(3.75, cpu=0.0, rate=0.0) == []
    step = d.until_step(cpu=0.0, rate=0.0)  # at maxT it takes the silence as the figure
    assert step.time - 103.25 == pytest.approx(4.0) and step.sustained == 0


def test_the_sustained_rate_is_the_events_taken_while_the_queues_are_short():
    from route_manager.selftuning import Averages

    short = Averages(rate=1000, copies=500, sent=100, depth=255, busy=0.5)
    assert short.sustained(queued=256) == 1000  # batching noise, not a busy link
    link = Averages(rate=1000, copies=500, sent=250, depth=256, busy=0.5)
    assert link.sustained(queued=256) == 500
    dispatcher = Averages(rate=1000, copies=500, sent=2000, depth=5000, busy=0.8)
    assert dispatcher.sustained(queued=256) == pytest.approx(1250)
    unmeasured = Averages(rate=1000, copies=500, sent=2000, depth=5000)
    assert unmeasured.sustained(queued=256) == 4000
    for nothing in (Averages(rate=1000, copies=0, sent=5, depth=900),
                    Averages(rate=1000, copies=5, sent=0, depth=900)):
        assert nothing.sustained(queued=256) == 1000


def test_the_profile_is_the_comparing_rules_prior_and_an_operator_reset_forgets():
    d = Driver(SelfTuningSettings(interval=1.0), precision=0.5)
    d.tuner.model = {0.4: 900.0, 0.5: 1000.0, 0.6: 1300.0}
    assert d.tuner.climb.model == d.tuner.model
    # the paper's test says down (CPU-bound); the profile predicts up is faster
    assert d.until_step(cpu=1.0, rate=1000).decision == "settle"
    assert d.until_step(cpu=1.0, rate=1000).precision == 0.6
    d.tuner.reset(0.2, d.reading())
    assert d.tuner.climb.figures == {} and d.tuner.climb.level == 2
    paper = Driver(precision=0.5)
    paper.tuner.model = {0.5: 1.0}
    assert paper.tuner.model is None  # the paper's rule has no prior


def test_ticker_calls_until_stopped():
    calls = []
    done = threading.Event()

    def work(now):
        calls.append(now)
        if len(calls) >= 3:
            done.set()

    ticker = Ticker(work, 0.01).start()
    assert done.wait(5)
    ticker.stop()
    assert len(calls) >= 3 and calls == sorted(calls)


def test_bench_helpers_find_the_near_optimal_band_and_time_spent_in_it():
    from benchmarks.reproductions.selftuning import in_band, near_optimal, steps_to_reach

    sweep = [{"precision": p, "events_per_s": tp}
             for p, tp in [(0.0, 300), (0.3, 950), (0.4, 1000), (0.5, 910), (1.0, 600)]]
    assert near_optimal(sweep) == [0.3, 0.4, 0.5]
    trace = [{"step": k, "precision": p} for k, p in enumerate([0.9, 0.7, 0.5, 0.4, 0.6, 0.5], 1)]
    assert in_band(trace, [0.3, 0.4, 0.5]) == {"steps": 3, "share_in_band": 0.75}
    assert in_band(trace, [0.3, 0.4, 0.5], after=3) == {"steps": 1, "share_in_band": 0.667}
    assert in_band(trace, [0.1]) == {"steps": None, "share_in_band": 0.0}
    assert steps_to_reach(trace, 0.4) == 3  # within one step (0.1) of 0.4 at step 3


def test_the_bench_judges_where_a_run_settled_by_its_precisions_measured_side_by_side():
    from benchmarks.reproductions.selftuning import (candidates, settled_fraction,
                                                     tail_seconds, taken_fraction)

    # an interval runs at its step's "previous" precision
    trace = [{"time": t, "previous": p, "events_per_s": tp} for t, p, tp in [
        (0.0, 0.5, 500), (1.0, 0.5, 700), (2.0, 0.9, 900), (3.0, 0.9, 950), (5.0, 0.8, 800)]]
    assert tail_seconds(trace, 3) == {0.9: 2.0, 0.8: 2.0}
    assert tail_seconds(trace, 9) == {}
    measured = [{"precision": 0.8, "events_per_s": 800.0},
                {"precision": 0.9, "events_per_s": 1000.0}]
    assert settled_fraction(trace, measured, 3) == pytest.approx(0.9)  # half at 0.9, half at 0.8
    assert settled_fraction(trace[-2:], measured, 1) == pytest.approx(0.8)
    assert settled_fraction(trace, [], 3) == 0.0
    # the events it took in, over the optimum's figure, weighted by time
    assert taken_fraction(trace, 1000.0, 3) == pytest.approx(0.863)  # (900 + 950 + 2 * 800) / 4
    sweep = [{"precision": p, "events_per_s": tp} for p, tp in [(0.7, 5), (1.0, 9), (0.3, 8)]]
    assert candidates(sweep, 2, trace, tail=3) == [0.3, 0.8, 0.9, 1.0]
