"""Smoke tests of ``edn bench throughput --quick`` and ``edn bench selftuning --quick``: real
processes, JSON on stdout, JSON and PNG files in ``--out`` (each well under a minute)."""
from __future__ import annotations

import json
import subprocess
import sys


def bench(name: str, out) -> dict:
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", name, "--quick",
                             "--json", "--out", str(out)], capture_output=True, text=True,
                            timeout=170)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert (out / f"{name}.png").stat().st_size > 1000
    assert json.loads((out / f"{name}.json").read_text())["benchmark"] == name
    return report


def test_bench_throughput_quick(tmp_path):
    report = bench("throughput", tmp_path)
    labels = [p["label"] for p in report["points"]]
    assert labels[0] == "none" and labels[-1] == "precise"
    for point in report["points"]:
        assert point["tp_measured"] > 0 and point["tp_predicted"] > 0
        assert {"cpu_dispatcher", "cpu_servers", "cpu_bench", "t_d_us", "hit_ratio"} <= set(point)
    ratios = [p["hit_ratio"] for p in report["points"]]
    assert ratios[0] > 0.99 and ratios[-1] < ratios[0]
    assert report["optimum_vs_precise"] >= 1 and report["optimum_vs_none"] >= 1


def test_bench_selftuning_quick(tmp_path):
    report = bench("selftuning", tmp_path)
    # from 10% the first step cannot be clamped, so the direction check below runs
    assert report["trace_from_10pct"][0]["precision"] != 0.1
    for name in ("trace_from_10pct", "trace_from_100pct", "trace_fig17"):
        trace = report[name]
        assert len(trace) >= 4
        assert {"step", "precision", "events_per_s", "cpu", "busy", "backlog", "signal",
                "interval"} <= set(trace[0])
        for s in trace:  # down when the dispatcher was the bottleneck, up when not
            if s["precision"] != s["previous"]:
                assert (s["precision"] < s["previous"]) == s["cpu_bound"]
            assert s["cpu_bound"] == (s["signal"] in ("cpu", "busy", "cpu+busy"))
        assert all(0.0 <= s["busy"] <= 1.0 for s in trace)
    assert report["threshold"] == 0.85 and report["busy_threshold"] == 0.97  # the defaults
    steps = sum(len(report[n]) for n in ("trace_from_10pct", "trace_from_100pct", "trace_fig17"))
    assert sum(report["decided_by"].values()) == steps
    assert all(0.0 <= r["busy"] <= 1.0 for r in report["sweep_uniform"])
