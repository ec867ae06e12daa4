"""``edn bench control --quick --json`` end to end: the control path's figures come from real
processes (every Subscribe acknowledged, every probe delivered, the bulk file made whole),
and the one-server figures are named for the size they were measured at."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_control_quick():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "control", "--quick",
                             "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["subscribe_per_s"] > 0 and figures["bulk_subscribe_per_s"] > 0
    assert figures["placed_bulk_subscribe_per_s"] > 0
    assert 0 < figures["summary_propagation_p50_ms"] <= figures["summary_propagation_p99_ms"]
    assert figures["subscribe_cpu_ms_per_subscription"] > 0
    assert figures["setup"]["server_subscriptions"] == 5000
    assert figures["rss_bytes_per_subscription_at_n"] > 0
    assert figures["restart_to_serving_s_at_n"] > 0
    assert figures["renew_storm_publish_p99_ratio_at_n"] > 0
    assert figures["renew_storm_renews"] == 500 and figures["publications_during_storm"] > 0
    assert "restart_to_serving_s_1m" not in figures  # named for the size it was measured at
