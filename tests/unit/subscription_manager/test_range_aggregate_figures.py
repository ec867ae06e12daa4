"""benchmarks.richer_aggregate: the unicast count from the messages equals the number of
subscriptions whose result changed (by recomputation), and the quick figures are complete."""

import time

import numpy as np

from benchmarks.reproductions.richer_subscriptions.aggregate import affected_subscriptions, aggregate_figures, subscriptions
from subscription_manager.stateful.range_min_table import RangeMinTable, recompute


def test_unicast_count_is_the_number_of_changed_results():
    rng = np.random.default_rng(3)
    x1, x2 = subscriptions(400, rng)
    table, tuples = RangeMinTable(), {}
    for i in range(60):
        tuples[str(i)] = (float(rng.uniform(0, 10_000)), float(rng.uniform(0, 10_000)))
        table.update(str(i), *tuples[str(i)])
    before = [recompute(tuples, a, b) for a, b in zip(x1, x2)]
    changed = 0
    for _ in range(300):
        key = str(int(rng.integers(0, 60)))
        x = tuples[key][0]
        y = float(rng.uniform(0, 10_000)) if rng.random() < 0.9 else float(rng.uniform(0, 1))
        tuples[key] = (x, y)
        counted_now = affected_subscriptions(table.update(key, x, y)[1], x1, x2)
        after = [recompute(tuples, a, b) for a, b in zip(x1, x2)]
        changed_now = sum(p != q for p, q in zip(before, after))
        assert counted_now == changed_now
        changed += changed_now
        before = after
    assert changed > 300   # the check saw real work


def test_quick_figures_are_complete_and_fast():
    started = time.perf_counter()
    figures = aggregate_figures(quick=True)
    assert time.perf_counter() - started < 10
    runs = [key[: -len("_scn")] for key in figures if key.endswith("_scn")]
    assert len(runs) == 4
    for run in runs:
        assert 1 <= figures[f"{run}_scn"] < figures[f"{run}_unicast"]
        assert 0 < figures[f"{run}_bad_share"] < 1
