"""A real Spark standalone cluster on loopback: a master and two workers started with
pyspark's own launch classes (:mod:`spark_jobs.cluster`), ``edn profile`` and ``edn study``
run on it as their users run them, and their answers equal ``local[*]``'s; then
``edn spark-cluster`` itself (one worker), stopped with Ctrl-C, leaves no process behind.
About two minutes: each run starts its own Spark driver."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
from spark_jobs.cluster import StandaloneCluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EDN = [sys.executable, "-m", "edn.cli"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(workers=2, cores=1, memory="1g",
                           directory=tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _edn(*arguments: str, timeout: float = 300) -> str:
    done = subprocess.run([*EDN, *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _profile(master: str, out: Path) -> dict:
    # a link this slow is the bottleneck at every precision, so the recommendation follows
    # from the hit ratios alone and not from route times measured on a shared machine
    printed = _edn("profile", "--master", master, "--subscriptions", "3000", "--d", "4",
                   "--servers", "3", "--events", "1200", "--chunk-size", "200",
                   "--precisions", "0.1", "0.3", "0.6", "1", "none", "--params", "paper",
                   "--bandwidth-mbps", "0.05", "--out", str(out), "--json")
    with open(out / "profile.csv", newline="") as rows:
        table = sorted((r["precision"], r["server"], r["forwarded"], r["summary_boxes"])
                       for r in csv.DictReader(rows))
    return {"recommendation": json.loads(printed), "table": table}


def test_a_profile_on_the_cluster_runs_on_its_executors_and_equals_local(cluster, tmp_path):
    on_cluster = _profile(cluster.master_url, tmp_path / "cluster")
    local = _profile("local[2]", tmp_path / "local")
    assert on_cluster["table"] == local["table"] and len(local["table"]) == 5 * 4
    ours, theirs = on_cluster["recommendation"], local["recommendation"]
    assert [p["hit_ratio"] for p in ours["curve"]] == [p["hit_ratio"] for p in theirs["curve"]]
    assert ours["initial_precision"] == theirs["initial_precision"]
    # it ran on the cluster: the master completed the application, each worker ran an
    # executor of it (an application directory with the executor's log)
    status = cluster.status()
    assert "edn-profile" in [app["name"] for app in status["completedapps"]]
    for k in range(cluster.workers):
        assert list((cluster.directory / f"worker-{k}").glob("app-*/*/stderr")), k


def test_a_partitioning_study_on_the_cluster_equals_local(cluster, tmp_path):
    def study(master: str, out: Path) -> list:
        printed = json.loads(_edn(
            "study", "partitioning", "--master", master, "--servers", "2", "4",
            "--subscriptions", "2000", "--d", "3", "--partitioners", "random",
            "offline_rtree", "kmeans", "--events", "1000", "--chunk-size", "250",
            "--out", str(out), "--json"))
        return sorted((r["figure"], r["config"], r["events_kind"], r["hit_ratio"])
                      for r in printed["rows"])

    on_cluster = study(cluster.master_url, tmp_path / "cluster")
    assert on_cluster == study("local[2]", tmp_path / "local")
    # every partitioner at both sizes, K-means among them (Spark ML, on the executors)
    assert {row[1] for row in on_cluster} == {f"uniform/servers={n}/{name}" for n in (2, 4)
                                              for name in ("random", "offline_rtree", "kmeans")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_edn_spark_cluster_runs_until_ctrl_c_and_leaves_nothing(tmp_path):
    command = subprocess.Popen([*EDN, "spark-cluster", "--workers", "1", "--dir",
                                str(tmp_path / "c")], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        for line in command.stdout:
            lines.append(line)
            if "Ctrl-C stops the cluster" in line:
                break
        text = "".join(lines)
        master = re.search(r"master: (spark://127\.0\.0\.1:\d+)", text)
        ui = re.search(r"master web UI: (http://127\.0\.0\.1:\d+)", text)
        assert master and ui, text
        import urllib.request
        with urllib.request.urlopen(f"{ui.group(1)}/json/", timeout=10) as answer:
            status = json.loads(answer.read())
        assert status["url"] == master.group(1) and status["aliveworkers"] == 1
        daemons = [int(pid) for pid in subprocess.run(
            ["pgrep", "-f", str(tmp_path / "c")], capture_output=True, text=True
        ).stdout.split()]
        assert len(daemons) >= 2  # the master's and the worker's JVMs
        command.send_signal(signal.SIGINT)
        rest = command.stdout.read()
        assert command.wait(60) == 0, rest
        assert "stopped" in rest
        assert not [pid for pid in daemons if _alive(pid)]
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
