"""``edn bench brokers --quick --json`` end to end (issue 16): the table on Chart 3's workload
has every mode exact, link matching sending what precise summaries send; chart 2 has a rate
for flooding, summaries at precision 1 and link matching at each D; chart 3 comes from
benchmarks.pst when it is there; the PNGs are written."""
from __future__ import annotations

import json
import subprocess
import sys


def test_bench_brokers_quick(tmp_path):
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "brokers", "--quick",
                             "--json", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    rows = {row["mode"]: row for row in figures["table"]}
    assert {"flooding", "linkmatching", "summaries@1", "summaries@0.1", "kyra"} <= set(rows)
    assert all(row["exact"] for row in rows.values())
    assert rows["linkmatching"]["useless_links"] == 0
    assert (rows["linkmatching"]["link_messages_per_event"]
            == rows["summaries@1"]["link_messages_per_event"]
            < rows["flooding"]["link_messages_per_event"])
    for point in figures["chart2"]:
        assert all(point[mode] > 0 for mode in ("flooding", "summaries@1", "linkmatching"))
    if "missing" not in figures["chart3"]:
        assert str(tmp_path / "brokers-chart3.png") in figures["plots"]
