"""``edn bench worstfilters --quick``: the worst accepted filters beside normal ones on a real
source: issue 12's reproducers are refused, normal subscribers get exactly their
notifications, nothing fails and the source lives."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_worstfilters_quick():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "worstfilters", "--quick",
                             "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert figures["refused_at_subscribe"] == "4/4"
    assert figures["worst_filters_accepted"] == figures["worst_filters_offered"]
    assert figures["normal_delivery_exact"] is True
    assert figures["normal_health_failed"] == figures["worst_health_failed"] == 0
    assert figures["normal_publish_faults"] == figures["worst_publish_faults"] == 0
    assert figures["source_alive"] is True
