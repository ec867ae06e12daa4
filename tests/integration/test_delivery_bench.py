"""benchmarks/performance/delivery.py in its quick form: every figure ``edn bench eventpath`` reads is
there and sane (real processes: a source under gunicorn, the fast sink, blasters)."""
from __future__ import annotations

from benchmarks.performance.delivery import run


def test_quick_delivery_benchmark_reports_its_figures():
    figures = run(quick=True)
    for name in ("notifications_per_s", "sink_ceiling_per_s", "sink_cpu_bound_per_s",
                 "notifications_per_s_requests", "source_cpu_us_per_notification",
                 "source_cpu_us_per_notification_requests", "speedup"):
        assert figures[name] > 0, name
    assert len(figures["notifications_per_s_rounds"]) == 3
    assert set(figures["client_cpu_us_per_post"]) >= {"lean", "requests"}
    assert figures["notifications"] == figures["subscriptions"] * figures["events"]
