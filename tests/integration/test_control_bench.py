"""``edn bench control --quick --json`` end to end: the control path's figures come from real
processes (every Subscribe acknowledged, every probe delivered, the bulk file made whole),
and the figures not measured yet say so instead of printing a number."""
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
    assert 0 < figures["summary_propagation_p50_ms"] <= figures["summary_propagation_p99_ms"]
    assert figures["subscribe_cpu_ms_per_subscription"] > 0
    for key in figures["not_measured"]:
        assert figures[key] is None
