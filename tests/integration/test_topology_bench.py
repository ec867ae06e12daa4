"""benchmarks/reproductions/topology.py at a small size: a flat network and a 2-level dispatch tree of real
processes, one window each; the tree's root forwards to its children only, every level's hit
ratio is the one precise summaries give (the exact oracle), and the model fed by the
measured parameters accounts for each dispatcher's CPU per event."""
from __future__ import annotations

import pytest

from benchmarks.reproductions.topology import Setup, compare


def test_flat_against_tree_side_by_side():
    setup = Setup(servers=4, per_server=300, children=2, events=64 * 20, oracle_events=200,
                  publishers=2, warmup=0.5, seconds=1.5, rounds=1)
    figures = compare(setup, log=lambda text: None)
    flat, tree = figures["flat"], figures["tree"]
    assert flat["root_fan_out"] == 4 and tree["root_fan_out"] == 2
    assert flat["events_per_s"] > 0 and tree["events_per_s"] > 0
    assert len(flat["hit_ratio_per_level"]) == 1 and len(tree["hit_ratio_per_level"]) == 2
    # the children's level of the tree routes with the servers' own summaries, as the flat
    # dispatcher does; the root routes with their (coarser or equal) unions
    assert tree["hit_ratio_per_level"][1] == pytest.approx(flat["hit_ratio_per_level"][0],
                                                           abs=0.03)
    assert tree["hit_ratio_per_level"][0] >= tree["oracle_hit_ratio_per_level"][0] - 0.05
    for row in (flat, tree):
        for measured, model in zip(row["hit_ratio_per_level"], row["model_hit_ratio_per_level"]):
            assert model == pytest.approx(measured, abs=0.02)
        # eq. (3) from the dispatcher's own T_f, T_d, T_c, R is its process CPU per event
        assert row["model_root_cpu_us_per_event"] == pytest.approx(
            row["root_cpu_us_per_event"], rel=0.25)
    assert set(tree["nodes"]) == {"root", "c1", "c2"}
