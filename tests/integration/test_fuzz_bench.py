"""``edn bench fuzz --quick``: fuzzed messages and malformed HTTP against a source, a
subscription server and a dispatcher (real processes) get no HTML page and no unprescribed
HTTP 500, and every process is alive and answering at the end, its memory grown by at most
what the subscriptions the fuzz made cost plus 50 MB."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_fuzz_quick():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "fuzz", "--quick", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["messages"] > 0
    assert figures["total"]["html"] == 0, figures["examples"]
    assert figures["total"]["http_500_malformed"] == 0, figures["examples"]
    assert figures["all_alive"], figures
    processes = [k for k, v in figures.items() if isinstance(v, dict) and "role" in v]
    assert {figures[p]["role"] for p in processes} == {"source", "server", "dispatcher"}
    for name in processes:
        entry = figures[name]
        assert entry["sent"] > 0 and entry["alive"] and entry["answers_after"], (name, entry)
        assert entry["rss_mb_before"] > 0 and entry["rss_mb_after"] > 0
        if entry["role"] != "dispatcher":  # what each still owed, from its /metrics
            assert entry["deliveries_pending_at_end"] is not None, (name, entry)
            assert entry["deliveries_pending_after"] is not None, (name, entry)
        assert entry["memory_bounded"], (name, entry)
    assert figures["memory_bounded"]
    assert 0 <= figures["settle_s"] <= 15  # the quick run waits at most 10 s for deliveries
    assert "bench_errors" not in figures, figures["examples"]
