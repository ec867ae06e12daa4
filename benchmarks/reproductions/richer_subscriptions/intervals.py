"""S-CN notification conditions (seed section 5.3.3, 5.4): what the interval set sends per
update on a price trace, how many intervals it keeps, against unicast.

Workload.  A price trace: a random walk from 100 in ticks of 0.01 (steps N(0, 0.2), rounded to
the tick; a step that rounds to 0 repeats the price, an ignorable update), 20,000 updates
(``quick``: 2,000).  Maximum bounds δ_limit 1, 2 and 5; tolerance none (strict), δ_limit / 10
and δ_limit / 4.  Subscriptions: 10k, 100k and 1M with bounds uniform in (0, δ_limit].

Figures, per (δ_limit, tolerance) in ``interval_sets``:

* ``messages_per_update``: messages the publisher sends per update (the S-CN cost; ignorable
  updates count, with 0; the first value's announcement to every bound included);
* ``intervals_max`` / ``intervals_mean`` / ``intervals_final``: the interval set's size after
  each update; ``intervals_bound``: ceil(δ_limit / t) with a tolerance (section 5.4's bound);
* ``us_per_update``: the interval set's own time per update (this machine, pure Python);

``continuous_interval_sets``: the same for the strict set on the walk without rounding
(with a tick of 0.01 every edge lies on the tick grid, so the tick bounds the intervals by
δ_limit / 0.01 as a tolerance would; unrounded, every distance is a new edge);

and per subscription count in ``unicast`` (per update after the first value, which every
subscription starts from):

* ``unicast_per_update``: one message per affected subscription under strict semantics
  (the 5.3.1 server's outgoing messages), the mean over updates;
* ``scn_deliveries_per_update``: subscriptions the interval messages reach per update (equal
  to unicast for strict, checked; with a tolerance, the relaxed deliveries);
  ``extra_deliveries_share``: deliveries beyond strict ones / strict ones (the tolerance's
  unsolicited notifications).

How deliveries are counted.  A message <LOW, HIGH, UPDATE> reaches the subscriptions with
LOW < δ <= HIGH, counted by binary search over the sorted bounds, so a million subscriptions
cost nothing per message.  That this equals the strict semantics is the property the unit
tests prove; here it is checked again against a direct per-subscription simulation
(L_i tracked for every subscription) at 10k subscriptions (``checked_against_direct``), and
the relaxed semantics (every "must" received, nothing outside "may") likewise
(``tolerance_semantics_hold``).
"""
from __future__ import annotations

import time

import numpy as np

from subscription_manager.stateful.intervals import IntervalSet

__all__ = ["interval_figures", "price_trace"]

LIMITS = (1.0, 2.0, 5.0)
TOLERANCE_SHARES = (None, 0.1, 0.25)  # tolerance as a share of δ_limit
SUBSCRIPTIONS = (10_000, 100_000, 1_000_000)
DIRECT_CHECK_SUBSCRIPTIONS = 10_000


def price_trace(n: int, seed: int = 7, sigma: float = 0.2,
                tick: float | None = 0.01) -> np.ndarray:
    """A random walk from 100 with steps N(0, sigma), rounded to ``tick`` (None: not)."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0, sigma, n)
    if tick is None:
        return 100.0 + np.cumsum(steps)
    return np.round(100.0 + np.cumsum(np.round(steps / tick)) * tick, 2)


def _run(trace: np.ndarray, limit: float, tolerance: float | None):
    """The interval set over the trace: its figures and every message as (update index, low,
    high) arrays."""
    intervals = IntervalSet(limit, tolerance)
    sizes = np.empty(len(trace), dtype=np.int64)
    at, lows, highs = [], [], []
    start = time.perf_counter()
    for i, value in enumerate(trace.tolist()):
        for message in intervals.update(value):
            at.append(i)
            lows.append(message.low)
            highs.append(message.high)
        sizes[i] = len(intervals)
    elapsed = time.perf_counter() - start
    figures = {
        "limit": limit, "tolerance": tolerance,
        "messages_per_update": round(len(at) / len(trace), 4),
        "intervals_max": int(sizes.max()), "intervals_mean": round(float(sizes.mean()), 2),
        "intervals_final": int(sizes[-1]),
        "intervals_bound": intervals.max_intervals(),
        "us_per_update": round(elapsed / len(trace) * 1e6, 2),
    }
    return figures, (np.array(at, dtype=np.int64), np.array(lows), np.array(highs))


def _reached(messages, sorted_bounds: np.ndarray) -> np.ndarray:
    """Per message after the first value's (everyone starts at v0, as the paper assumes), how
    many bounds lie in (low, high]."""
    at, lows, highs = messages
    later = at > 0
    return (np.searchsorted(sorted_bounds, highs[later], side="right")
            - np.searchsorted(sorted_bounds, lows[later], side="right"))


def _direct(trace: np.ndarray, bounds: np.ndarray, messages, tolerance: float | None) -> bool:
    """Every subscription's L_i tracked directly: with no tolerance, the messages reach exactly
    the strict deliveries; with one, every must and nothing outside may."""
    at, lows, highs = messages
    last = np.full(len(bounds), trace[0])
    order = np.argsort(at, kind="stable")
    at, lows, highs = at[order], lows[order], highs[order]
    edges = np.searchsorted(at, np.arange(len(trace) + 1))
    for i in range(1, len(trace)):
        value = trace[i]
        reach = np.zeros(len(bounds), dtype=bool)
        for k in range(edges[i], edges[i + 1]):
            reach |= (lows[k] < bounds) & (bounds <= highs[k])
        distance = np.abs(value - last)
        must = distance >= bounds
        if tolerance is None:
            if not np.array_equal(reach, must):
                return False
        elif np.any(must & ~reach) or np.any(reach & (distance < bounds - tolerance)):
            return False
        last[reach] = value
    return True


def _figures(updates: int, limits, shares, subscriptions, seed: int = 7) -> dict:
    trace = price_trace(updates, seed)
    rng = np.random.default_rng(seed + 1)
    out = {
        "trace": {"updates": updates, "start": 100.0, "tick": 0.01, "step_sigma": 0.2,
                  "ignorable_updates": int(np.sum(np.diff(trace) == 0)),
                  "range": [float(trace.min()), float(trace.max())]},
        "interval_sets": [], "unicast": [],
        "checked_against_direct": True, "tolerance_semantics_hold": True,
    }
    for limit in limits:
        # bounds uniform in (0, limit]: 1 - U with U in [0, 1)
        bounds = {n: np.sort(limit * (1.0 - rng.random(n))) for n in subscriptions}
        strict_deliveries = {}
        for share in shares:
            tolerance = None if share is None else limit * share
            figures, messages = _run(trace, limit, tolerance)
            out["interval_sets"].append(figures)
            check = bounds[min(subscriptions)][:DIRECT_CHECK_SUBSCRIPTIONS]
            if not _direct(trace, check, messages, tolerance):
                out["checked_against_direct" if tolerance is None
                    else "tolerance_semantics_hold"] = False
            for n, sorted_bounds in bounds.items():
                deliveries = int(_reached(messages, sorted_bounds).sum())
                if tolerance is None:
                    strict_deliveries[n] = deliveries
                row = {"limit": limit, "tolerance": tolerance, "subscriptions": n,
                       "scn_messages_per_update": figures["messages_per_update"],
                       "scn_deliveries_per_update": round(deliveries / (updates - 1), 2)}
                if n in strict_deliveries:
                    strict = strict_deliveries[n]
                    row["unicast_per_update"] = round(strict / (updates - 1), 2)
                    row["extra_deliveries_share"] = round(deliveries / strict - 1, 4)
                out["unicast"].append(row)
    # without the tick every distance is a new edge: the strict set's growth unbounded by a grid
    continuous = price_trace(updates, seed, tick=None)
    out["continuous_interval_sets"] = [_run(continuous, limit, None)[0] for limit in limits]
    return out


def interval_figures(quick: bool) -> dict:
    """The figures above; ``quick``: a 2,000-update trace."""
    return _figures(2_000 if quick else 20_000, LIMITS, TOLERANCE_SHARES, SUBSCRIPTIONS)


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(interval_figures("--quick" in sys.argv), indent=1))
