"""Offline profiles and studies on Spark (paper IV-A, V-B, III-C).

::

    edn profile --workload uniform --subscriptions 100000 --d 8 --servers 10 \\
        --events 10000 --params paper --out profile-out
    edn serve dispatcher --precision-profile profile-out/recommendation.json ...
    edn study partitioning --servers 10 20 50 100 --per-server 10000

From Python::

    from spark_jobs import inputs, profile
    data = inputs.from_workload("uniform", 10_000, d=8, servers=10, events=2_000)
    local = profile.profile_local(data)                    # no Spark: the same kernels
    from spark_jobs.job import run_profile
    from spark_jobs.session import spark_session
    with spark_session("local[2]") as spark:
        result = run_profile(spark, data)                  # distributed
    assert result.hit_ratios() == local.hit_ratios()

Timing: T_d (and T_s) are measured per task with ``time.perf_counter`` by default
(``--clock cpu``: the task thread's CPU time, steadier when other processes share the
cores).  Tasks run concurrently on the executors' cores; ``--master local[1]`` times each
task alone.  Hit ratios and box counts are exact and do not depend on either.

Modules: :mod:`.profile_tasks` (the per-task kernels, no Spark), :mod:`.inputs` (workload specs,
server stores, event files), :mod:`.profile` (task plan, result, single-process twin),
:mod:`.selection` (equations (3) and (4): the precision to run at; outputs and plot),
:mod:`.session` (one quiet, loopback-only SparkSession per run), :mod:`.job` (the Spark
profile job), :mod:`.study` (the partitioning study at scale, K-means on Spark ML),
:mod:`.cluster` (a standalone master and workers, pyspark's own launch classes),
:mod:`.event_log` (where a run's time went, from Spark's event log),
:mod:`.commands` (the ``edn profile`` / ``edn study`` / ``edn spark-cluster`` commands).
Only :mod:`.session`, :mod:`.job`, :mod:`.study`, :mod:`.cluster` and :mod:`.commands`
import pyspark, and only when run: pyspark
is the optional extra ``spark`` (``pip install .[spark]``).  This package stands above
:mod:`route_manager` (its models, workloads and partitioners) and knows nothing of the
subscription manager nor of the simulator (import-linter holds both).
"""
