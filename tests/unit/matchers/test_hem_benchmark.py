"""benchmarks.performance.hem at a tiny size: every path of the cell-bitmap engine answers as the numpy
scan does (wide predicates, so that events do match)."""

import numpy as np

from benchmarks.performance import hem


def test_hem_benchmark_is_exact_at_a_tiny_size():
    figures = hem.run(n=5_000, events=50, width=0.6)
    assert figures["hem_n"] == 5_000 and figures["hem_events"] == 50
    assert figures["hem_exact_sample"] == 50
    assert figures["hem_1m_exact_checked"] is True
    assert figures["hem_1m_matches_per_event"] > 1  # 0.6^10 x 5,000 ~ 30 expected
    assert figures["hem_1m_ms_per_event"] > 0 and figures["hem_1m_bruteforce_ms_per_event"] > 0


def test_hem_subscriptions_follow_the_workload():
    schema = hem.hem_schema()
    mins, maxs = hem.hem_subscriptions(np.random.default_rng(1), 1_000, schema)
    constrained = mins >= 0  # unconstrained sides start at NULL, below the domain
    assert (constrained.sum(axis=1) == hem.PREDICATES).all()
    assert np.all((maxs - mins)[constrained] == np.floor(hem.WIDTH * hem.DOMAIN))
    assert np.all(mins[~constrained] == schema.null[0]) and np.all(maxs[~constrained] == schema.domain_hi[0])
