"""`edn bench linkroutes --quick` and `edn bench distance --quick`: registered, serialisable,
and their figures say what the benchmarks exist to show."""
import json

from benchmarks import BENCHMARKS, run_benchmark


def test_quick_linkroutes_compares_the_pst_with_the_scan():
    assert "linkroutes" in BENCHMARKS
    figures = run_benchmark("linkroutes", quick=True)
    json.dumps(figures)
    (size,) = [k for k in figures if "x" in k]
    row = figures[size]
    for key in ("pst_us_per_event_batch1", "scan_us_per_event_batch1", "pst_steps_per_event",
                "events_until_rebuild", "build_cost_in_row_scans"):
        assert row[key] > 0, key
    assert 0 < row["y_links_per_event"] <= 4


def test_quick_distance_placement_keeps_subscriptions_nearer_than_the_rtree():
    assert "distance" in BENCHMARKS
    figures = run_benchmark("distance", quick=True)["independent"]
    json.dumps(figures)
    assert figures["local"]["mean_distance_ms"] == 0.0
    assert figures["online_distance"]["mean_distance_ms"] < figures["online_rtree"]["mean_distance_ms"]
    assert figures["offline_distance"]["cross_region"] < figures["offline_rtree"]["cross_region"]
    assert all(0.0 <= row["hit_ratio"] <= 1.0 for name, row in figures.items() if name != "meta")
