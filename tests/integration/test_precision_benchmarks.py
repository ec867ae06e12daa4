"""Smoke tests of ``edn bench throughput --quick`` and ``edn bench selftuning --quick``: real
processes, JSON on stdout, JSON and PNG files in ``--out`` (a minute or three each)."""
from __future__ import annotations

import json
import subprocess
import sys

from route_manager.precision import format_precision


def bench(name: str, out, pngs=None) -> dict:
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", name, "--quick",
                             "--json", "--out", str(out)], capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    for png in pngs or [f"{name}.png"]:
        assert (out / png).stat().st_size > 1000
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
    report = bench("selftuning", tmp_path, ["selftuning-6.4Mbps.png"])
    assert report["rule"] == "compare"  # the dispatcher's default
    fractions = report["settled_fraction_of_optimum"]
    assert set(fractions) == {f"{run}@6.4Mbps" for run in (
        "fig16_from_10pct", "fig16_from_100pct", "fig17_after_change")}
    assert all(0.0 < f <= 1.0 for f in fractions.values())  # levels against the best of them
    assert set(report["taken_fraction_of_optimum"]) == set(fractions)
    assert report["min_settled_fraction_of_optimum"] == min(fractions.values())
    for link in report["links"].values():
        for name in ("trace_from_10pct", "trace_from_100pct", "trace_fig17"):
            trace = link[name]
            assert len(trace) >= 10
            assert {"step", "precision", "events_per_s", "sustained", "decision", "cpu",
                    "busy", "backlog", "signal", "interval"} <= set(trace[0])
            for s in trace:  # a move is a probe, a climb or the way back from a probe
                moved = s["precision"] != s["previous"]
                if s["decision"] in ("probe", "climb", "revert"):
                    assert moved
                elif s["decision"] in ("hold", "kept", "settle"):
                    assert not moved
                else:
                    assert s["decision"] == "changed"
                assert abs(round(s["precision"] * 10) - s["precision"] * 10) < 1e-6  # a step
                assert 0.0 <= s["busy"] <= 1.0 and s["sustained"] >= 0
        # the first run starts from 10% knowing nothing: its first interval follows the
        # move to 10% (not judged), its second ends in a probe
        assert [s["decision"] for s in link["trace_from_10pct"][:2]] == ["settle", "probe"]
        assert sum(link["decisions"].values()) == sum(link["decided_by"].values())
        # the sweep's best two and the precisions the Fig. 16 tails ran at, side by side
        optimum = link["optimum_measured_uniform"]
        assert 2 <= len(optimum) and link["optimum_uniform_tp"] == max(
            r["events_per_s"] for r in optimum)
        spent = {p for run in ("fig16_from_10pct", "fig16_from_100pct")
                 for p in link["settled_tail_seconds"][run]}
        assert spent <= {format_precision(r["precision"]) for r in optimum}
