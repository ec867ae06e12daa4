"""Smoke test of ``edn bench storage --quick --json``: real processes at ``--durable-sync
normal`` and ``full`` and, where PostgreSQL is installed, on a local PostgreSQL with and
without a synchronous standby; every figure present and consistent (the quick sizes' values
mean little; the figures are in docs/performance.md). As root, the loss of the database's
host is checked too (a source on PostgreSQL with a synchronous standby on another lab host;
the primary's host is cut off, its database killed, the standby promoted) and must lose
nothing acknowledged."""
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
    if "postgresql" in figures["modes"]:
        for key in ("subscribe_per_s", "publish_per_s", "live_events_per_s"):
            for mode in ("postgresql", "postgresql_standby"):
                assert min(figures[f"{key}_{mode}"]) > 0, (key, mode)
                assert figures[f"{key}_{mode}_vs_full"] == round(
                    figures[f"{key}_{mode}"][0] / figures[f"{key}_full"][0], 3)
        one, two = (figures[f"dispatcher_events_per_s_workers_{n}"] for n in (1, 2))
        assert min(one + two) > 0
        assert figures["dispatcher_workers_2_vs_1"] == round(two[0] / one[0], 3)
    else:
        assert figures["postgresql_not_measured"]
    # the loss of the database's host (benchmarks.lab.host_loss, quick: 20 subscriptions,
    # 3 s before and after the cut): needs root (network namespaces), iptables and PostgreSQL
    loss = figures["host_loss"]
    if "not_measured" not in loss:
        assert loss["subscriptions_acknowledged"] >= 20 and loss["events_acknowledged"] > 0
        assert loss["notifications_expected"] > 0
        assert loss["cut_to_first_ack_s"] is not None  # the role works again on the standby
        assert loss["notifications_lost"] == loss["subscriptions_lost"] == 0, loss
