"""Smoke test of ``edn bench tls --quick --json``: real processes, TLS beside plain HTTP,
every figure present and consistent (the quick sizes' values mean little)."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_tls_quick_reports_every_figure():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "tls", "--quick", "--json"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("live_events_per_s_plain", "live_events_per_s_tls", "notifications_per_s_plain",
                "notifications_per_s_https"):
        assert figures[key] > 0, key
    assert figures["live_tls_ratio"] == round(figures["live_events_per_s_tls"]
                                              / figures["live_events_per_s_plain"], 3)
    # connections are reused: far fewer handshakes than notifications
    assert 0 < figures["handshakes_per_10k_notifications"] < 1_000
    assert 0 < figures["tcp_connect_p50_ms"] <= figures["handshake_p50_ms"]
    for role in ("source", "dispatcher"):
        slow = figures["slow_handshakes"][role]
        assert slow["alive"] and slow["stalled"] == 200 and slow["p95_ms"] > 0
