"""benchmarks.performance.serverpath in miniature: the figures are there, and every server measured
queued exactly the notifications brute force finds."""
from __future__ import annotations

import pytest

from benchmarks.performance import serverpath


@pytest.mark.parametrize("symbols", [False, True])
def test_the_server_path_benchmark_reports_exact_figures(symbols):
    figures = serverpath.run(True, per_server=1500, rounds=1, symbols=symbols)
    assert figures["exact"] is True
    if not symbols:
        assert figures["notifications_expected"] > 0  # exactness compared something
    assert figures["events_received"] == 2 * figures["events_per_round"]  # warm-up + 1
    for name in ("server_cpu_us_per_copy", "reference_cpu_us_per_copy",
                 "cell_bitmap_cpu_us_per_copy"):
        assert figures[name] > 0
    assert figures["reference_over_new"] == pytest.approx(
        figures["reference_cpu_us_per_copy"] / figures["server_cpu_us_per_copy"], rel=0.02)
