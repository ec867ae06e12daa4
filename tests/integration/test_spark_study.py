"""The partitioning study in real Spark local mode (local[2], its own session: ~30 s for the
module): hit ratios distributed over event chunks equal the single-process ones, and K-means
runs on Spark ML under the load threshold."""
from __future__ import annotations

import numpy as np
import pytest

from spark_jobs import inputs, study
from spark_jobs.session import spark_session


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    with spark_session("local[2]", app_name="edn-tests-study",
                       log_dir=tmp_path_factory.mktemp("spark-logs")) as session:
        yield session


def test_partitioning_study_on_spark(spark):
    plan = study.plan_study(workload="uniform", servers=(4,), per_server=400, d=4,
                            partitioners=("random", "offline_rtree", "kmeans"), events=600,
                            chunk_size=300, kmeans_init="random", kmeans_max_iter=8)
    result = study.run_study(spark, plan)
    local = study.study_local(study.StudyPlan(
        tuple(c for c in plan.configs if c.partitioner != "kmeans"), plan.events,
        plan.chunk_size, plan.seed, plan.load_factor))  # numpy K-means differs: left out
    ratios = result.hit_ratios()
    for key, value in local.hit_ratios().items():
        assert ratios[key] == value
    kmeans = [r for r in result.rows if r["partitioner"] == "kmeans"]
    assert len(kmeans) == 1 and 0 < kmeans[0]["hit_ratio"] <= 1
    # Spark ML's K-means clusters better than random placement
    by = {r["partitioner"]: r["hit_ratio"] for r in result.rows}
    assert by["kmeans"] < by["random"]


def test_spark_kmeans_respects_the_load_threshold(spark):
    mins, maxs = inputs.workload_rectangles("uniform", 2000, 3, seed=4)
    model = study.SparkKMeansPartitioner(spark, capacity=600, random_state=3, max_iter=5,
                                         init_mode="random").fit(mins, maxs, 4)
    assert model.labels_.shape == (2000,) and model.loads_.max() <= 600
    assert np.isfinite(model.cluster_centers_).all()
