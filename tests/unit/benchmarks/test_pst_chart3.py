"""Gryphon's Chart 3 workload on the parallel search tree: the figures are counted, not
assumed (matches equal a brute-force count), and steps grow less than linearly."""
from benchmarks.pst import chart3_steps, chart3_workload


def test_chart3_counts_match_brute_force_and_grow_sublinearly():
    subscriptions, events = chart3_workload(300, 50)
    expected = sum(all(e[a] == v for a, v in s.items()) for e in events for s in subscriptions)
    figures = chart3_steps([300, 3000], events=50)
    assert abs(figures["300"]["match_share"] - expected / (50 * 300)) < 1e-12
    assert 0 < figures["300"]["steps"] < figures["3000"]["steps"] < 10 * figures["300"]["steps"]
