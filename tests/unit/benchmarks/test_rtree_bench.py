"""`edn bench matchers --quick`: every study is present, side by side, and serialisable."""
import json

from benchmarks import BENCHMARKS, run_benchmark


def test_quick_matchers_benchmark_reports_every_study():
    assert "matchers" in BENCHMARKS
    figures = run_benchmark("matchers", quick=True)
    json.dumps(figures)
    for key in ("rtree_events_per_s_1k", "bruteforce_events_per_s_1k",
                "xpath_per_filter_events_per_s_1k", "rtree_xpath_filters_events_per_s_1k",
                "rtree_events_per_s_20k", "bruteforce_events_per_s_20k",
                "xpath_per_filter_events_per_s_20k_scaled_from_10k_sample",
                "route_us_per_event_batch_3x100_wide", "route_us_per_event_single_3x100_precise",
                "summary_ms_1k_p0.1", "ecube_rtree_us_per_query_d3_n1000",
                "ecube_bruteforce_us_per_query_d1_n100", "aim_route_batch_le_20us"):
        assert key in figures, key
    assert figures["summary_boxes_1k_p0.1"] == 100
    assert 0 < figures["route_hit_ratio_3x100_precise"] <= 1
    assert figures["route_batch_strategy_3x100_wide"] in ("scan", "rtree", "bitmap")
