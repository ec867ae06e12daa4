"""`edn bench partitioning --quick`: every figure of section III-C is present and sane."""
import json

from benchmarks import BENCHMARKS, run_benchmark


def test_quick_partitioning_benchmark_has_every_figure():
    assert "partitioning" in BENCHMARKS
    figures = run_benchmark("partitioning", quick=True)
    json.dumps(figures)  # serialisable as `--json` prints it
    for prefix in ("fig3.servers_4.", "fig4.servers_4.online_rtree.depth_1.", "fig5.alpha_1_0.",
                   "fig6.alpha_4_0.", "load_factor.factor_1_0.", "offline_share.share_50.",
                   "dimensions.d_6.", "event_routing_precision."):
        assert any(k.startswith(prefix) for k in figures), prefix
    ratios = {k: v for k, v in figures.items()
              if k.startswith(("fig3.", "fig5.", "fig6.")) and k.count(".") == 2}
    assert ratios and all(0.0 <= v <= 1.0 for v in ratios.values())
    assert figures["fig3.servers_4.random"] > figures["fig3.servers_4.offline_rtree"]
