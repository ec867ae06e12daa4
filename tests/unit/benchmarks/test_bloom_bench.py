"""The Bloom-summary comparison runs in its quick form and its figures hang together."""

from benchmarks.reproductions.bloom import PRECISIONS, bloom_comparison


def test_quick_bloom_comparison():
    figures = bloom_comparison(quick=True)
    exact = figures["exact_hit_ratio"]
    assert 0 < exact <= 1
    for mode in ("boxes", "bloom"):
        for tag in PRECISIONS:
            key = f"{mode}_p{tag}"
            assert exact <= figures[f"{key}_hit_ratio"] <= 1  # summaries never miss
            assert figures[f"{key}_route_us_per_event"] > 0
            assert figures[f"{key}_summary_bytes"] > 0 and figures[f"{key}_summary_boxes"] > 0
    assert figures["boxes_p1_hit_ratio"] == exact  # degenerate boxes are exact here
    assert figures["bloom_p1_summary_bytes"] < figures["boxes_p1_summary_bytes"]
    assert 0 < figures["bloom_false_positive_rate"] < 0.01
    # placed by symbol, a Bloom summary keeps its precision where box cuts merge symbols
    assert figures["by_symbol_exact_hit_ratio"] <= figures["by_symbol_bloom_p0.1_hit_ratio"] \
        < figures["by_symbol_boxes_p0.1_hit_ratio"]
