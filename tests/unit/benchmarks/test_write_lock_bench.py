"""edn bench writelock --quick: both ways measured, and the ratio is of the figures printed."""
import pytest

from benchmarks.performance import write_lock

pytestmark = pytest.mark.sqlite_only("SQLite's write lock between two processes")


def test_write_lock_bench_reports_both_ways_and_their_ratio():
    figures = write_lock.run(quick=True)
    for way in write_lock.WAYS:
        p50, p99 = figures[f"write_lock_p50_ms_{way}"], figures[f"write_lock_p99_ms_{way}"]
        assert 0 <= p50 <= p99 <= figures[f"write_lock_max_ms_{way}"]
    expected = (figures["write_lock_p99_ms_sqlite_busy_handler"]
                / figures["write_lock_p99_ms_store"])
    assert figures["write_lock_p99_busy_handler_over_store"] == pytest.approx(expected, abs=0.01)
