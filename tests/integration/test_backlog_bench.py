"""benchmarks/performance/backlog.py in its quick form: every figure is there and sane (real
processes: a source under gunicorn, the fast sink stopped and started on one port)."""
from __future__ import annotations

from benchmarks.performance.backlog import run


def test_quick_backlog_benchmark_reports_its_figures():
    figures = run(quick=True)
    for name in ("backlog_drain_per_s", "rtt40_per_s", "rtt40_fixed8_per_s",
                 "rtt40_pipelined16_per_s", "outage10_drain_s"):
        assert figures[name] > 0, name
    assert figures["backlog_counters"]["delivered"] == figures["backlog"] == 40_000
    assert figures["backlog_counters"]["spilled"] > 0  # the backlog waited on disk
    assert figures["outage"]["backlog"] > 0
