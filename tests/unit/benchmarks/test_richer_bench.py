"""`edn bench richer --quick`: registered, serialisable, each part present, and the figures
say what issue 17's experiments exist to show."""
import json

from benchmarks import BENCHMARKS, run_benchmark


def test_quick_richer_benchmark_has_every_part_and_the_expected_shape():
    assert "richer" in BENCHMARKS
    figures = run_benchmark("richer", quick=True)
    json.dumps(figures)
    aggregate = figures["aggregate"]
    scn = [v for k, v in aggregate.items() if k.endswith("_scn")]
    unicast = [v for k, v in aggregate.items() if k.endswith("_unicast")]
    assert scn and len(scn) == len(unicast)
    assert all(1.0 <= s < u for s, u in zip(scn, unicast))  # S-CN sends fewer messages
    intervals = figures["intervals"]
    assert intervals["checked_against_direct"] and intervals["tolerance_semantics_hold"]
    notify = figures["notify"]
    saved = {(row["delta"], row["tolerance"]): row["saved_share"] for row in notify["saved"]}
    assert 0 < saved[(0.5, 0.0)] < saved[(5.0, 0.0)] < 1  # a wider bound saves more
    assert saved[(1.0, 0.5)] < saved[(1.0, 0.0)]          # tolerance trades some back
