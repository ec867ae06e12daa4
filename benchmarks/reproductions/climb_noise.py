"""The comparing self-tuner (route_manager.throughput_climb) fed the throughput curves that
``edn bench selftuning`` measured, with the noise of one interval drawn at random: where its
runs settle, by how far a probe must beat home to be kept (``keep``, in units of the noise).

A study tool: it runs the real tuner, interval by interval, on curves measured on the live
network, in process and in seconds, so that a rule can be judged over hundreds of runs where
the live bench gives one. It is not a measurement of the network: the live bench is.

Each run follows the live bench's settings: Fig. 16 (uniform events, 40 intervals, from 10%
and from 100%) and Fig. 17 (from 10%, 20 intervals of uniform events, then 40 of normal
ones). An interval's figure is the curve's events/s at its level times a lognormal error of
``sigma`` and a slow drift of the machine shared by all levels; the interval after a move
still carries some of the previous level's traffic. A run's settled fraction is its last
third's mean of the curve at the levels run, over the curve's best: the live bench's
``settled_fraction_of_optimum`` with the curve standing in for the side-by-side measurement.
"""
from __future__ import annotations

import math
import random
import statistics

from route_manager.precision import Ladder
from route_manager.throughput_climb import ClimbSettings, ThroughputClimb

#: events/s by level (none, 0.1 .. precise) from the selftuning bench's sweeps at tree
#: 27426ec; after the Fig. 17 switch, the levels it measured side by side after the runs
#: (2 Mbps: 0.4, 0.5 and 0.7 .. precise; 6.4 Mbps: 0.7, 0.8 and precise) by that figure
CURVES: dict[str, dict[str, list[float]]] = {
    "2Mbps": {"uniform": [124, 41, 32, 125, 222, 333, 286, 530, 280, 178, 1309],
              "normal": [103, 114, 83, 226, 5974, 7713, 7135, 8440, 7949, 8094, 8547]},
    "6.4Mbps": {"uniform": [184, 310, 563, 1018, 1368, 1300, 1209, 440, 140, 179, 3610],
                "normal": [186, 145, 454, 1361, 5572, 6921, 6704, 7808, 7669, 7332, 8011]},
    # not measured: a curve rising 6% a level, whose optimum moves to 0.7 at the switch (a
    # margin that keeps lucky intervals out must still let a steady slope be climbed)
    "slope": {"uniform": [100 * 1.06 ** lv for lv in range(11)],
              "normal": [100 * 1.06 ** (10 - abs(lv - 7)) for lv in range(11)]},
}
SETTINGS = {"fig16_from_10pct": ("uniform", 1, 40), "fig16_from_100pct": ("uniform", 10, 40),
            "fig17_after_change": ("normal", 1, 60)}
SWITCH = 20       # Fig. 17: the intervals of uniform events before the switch
CARRY = 0.6       # the share of the previous level's figure in the interval after a move
DRIFT = 0.02      # the machine's drift: the step of an AR(1) walk, shared by every level
PERSISTENCE = 0.7  # ... and the share of the drift an interval keeps from the one before


def settled_fraction(curve: dict[str, list[float]], setting: str, keep: float, sigma: float,
                     seed: int) -> float:
    """One run of the real tuner (module docstring)."""
    after, start, intervals = SETTINGS[setting]
    rng = random.Random(seed)
    climb = ThroughputClimb(Ladder(0.1, True), start, ClimbSettings(keep=keep))
    level = previous = start
    drift, tail, last = 1.0, [], intervals // 3
    for interval in range(1, intervals + 1):
        now = curve["uniform" if after == "uniform" or interval <= SWITCH else after]
        drift = 1 + PERSISTENCE * (drift - 1) + rng.gauss(0, DRIFT)
        mean = now[level] if previous == level else CARRY * now[previous] + (1 - CARRY) * now[level]
        if interval > intervals - last:
            tail.append(now[level] / max(now))
        previous = level
        level, _ = climb.decide(mean * math.exp(rng.gauss(0, sigma)) * drift, -1)
    return statistics.mean(tail)


def run(quick: bool = False, sigma: float = 0.05, keeps=(0.0, 1.0, 2.0, 3.0)) -> dict:
    runs = 40 if quick else 400
    figures: dict = {"benchmark": "climbnoise", "runs": runs, "sigma": sigma,
                     "settled_tail_intervals": {s: n // 3 for s, (_, _, n) in SETTINGS.items()}}
    for keep in keeps:
        by_setting = {}
        for name, curve in CURVES.items():
            for setting in SETTINGS:
                fractions = sorted(settled_fraction(curve, setting, keep, sigma, seed)
                                   for seed in range(runs))
                by_setting[f"{name} {setting}"] = {
                    "mean": round(statistics.mean(fractions), 3),
                    "p10": round(fractions[len(fractions) // 10], 3),
                    "share_at_0_95": round(sum(f >= 0.95 for f in fractions) / runs, 3)}
        figures[f"keep_{keep:g}"] = by_setting
    return figures
