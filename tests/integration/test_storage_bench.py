"""Smoke test of ``edn bench storage --quick --json``: real processes at ``--durable-sync
normal`` and ``full``, every figure present and consistent (the quick sizes' values mean
little; the figures are in docs/performance.md)."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_storage_quick_reports_every_figure():
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "storage", "--quick",
                             "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert 0 < figures["fdatasync_p50_ms"] <= figures["fdatasync_p99_ms"]
    for key in ("subscribe_per_s", "publish_per_s", "live_events_per_s"):
        normal, full = figures[f"{key}_normal"], figures[f"{key}_full"]
        assert len(normal) == len(full) >= 1 and min(normal + full) > 0, key
        assert figures[f"{key}_full_vs_normal"] == round(full[0] / normal[0], 3), key
    # group commit: the 16 clients' commits share syncs (at least one commit a sync)
    assert all(shared >= 1 for shared in figures["commits_per_sync_full"])
