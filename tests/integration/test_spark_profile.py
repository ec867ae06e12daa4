"""The profile job in real Spark local mode (local[2], one session for the module: ~10 s to
start, ~30 s for the module).

What must hold: the distributed profile's hit ratios (and box counts) equal the single-process
twin's on the same inputs exactly; ``edn profile`` writes the profile (CSV, Parquet), the
recommendation and the plot.
"""
from __future__ import annotations

import contextlib
import json

import pytest

from route_manager.precision_profile import initial_precision_from
from spark_jobs import inputs, profile
from spark_jobs.job import run_profile
from spark_jobs.session import spark_session


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    with spark_session("local[2]", app_name="edn-tests",
                       log_dir=tmp_path_factory.mktemp("spark-logs")) as session:
        yield session


def test_session_is_loopback_only_and_quiet(spark):
    conf = dict(spark.sparkContext.getConf().getAll())
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    with pytest.raises(RuntimeError):  # one session per run
        with spark_session("local[1]"):
            pass


def test_distributed_profile_equals_single_process(spark):
    data = inputs.from_workload("uniform", 1500, d=6, servers=3, events=500, seed=11)
    options = profile.ProfileOptions(precisions=(0.1, 0.3, 0.6, 1.0, None), chunk_size=200)
    local = profile.profile_local(data, options)
    distributed = run_profile(spark, data, options)
    assert distributed.hit_ratios() == local.hit_ratios()
    assert [(r.precision_label, r.server, r.forwarded, r.summary_boxes, r.tasks)
            for r in distributed.rows] == \
        [(r.precision_label, r.server, r.forwarded, r.summary_boxes, r.tasks) for r in local.rows]
    assert distributed.meta["exact_hit_ratio_sample"] == local.meta["exact_hit_ratio_sample"]
    assert distributed.meta["engine"] == "spark" and local.meta["engine"] == "local"
    assert distributed.hit_ratios()["none"] == 1.0


def test_edn_profile_command(spark, tmp_path, monkeypatch, capsys):
    from spark_jobs import session as session_module
    from edn import cli

    @contextlib.contextmanager
    def same_session(*args, **kwargs):  # the module's session stands in for a new one
        yield spark

    spark.edn_start_seconds = 0.0
    monkeypatch.setattr(session_module, "spark_session", same_session)
    out = tmp_path / "prof"
    code = cli.main(["profile", "--subscriptions", "800", "--d", "4", "--servers", "2",
                     "--events", "300", "--chunk-size", "150", "--precisions", "0.2", "0.5", "1",
                     "none", "--params", "paper", "--out", str(out), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    for name in ("profile.csv", "recommendation.json", "throughput.png"):
        assert (out / name).stat().st_size > 0
    assert list((out / "profile.parquet").glob("part-*.parquet"))
    rows = spark.read.parquet(str(out / "profile.parquet")).collect()
    assert len(rows) == 4 * 3
    data = inputs.from_workload("uniform", 800, 4, 2, events=300, seed=1)
    local = profile.profile_local(data, profile.ProfileOptions(
        precisions=(0.2, 0.5, 1.0, None), chunk_size=150))
    from_parquet = {r["precision_label"]: r["hit_ratio"] for r in rows if r["server"] == "*"}
    assert from_parquet == local.hit_ratios()
    assert initial_precision_from(out / "recommendation.json") == printed["initial_precision"]
    assert printed["parameters"]["t_f"] == pytest.approx(1.6e-3)
