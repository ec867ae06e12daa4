"""Reading where a Spark application's time went from its event log: stages with their
wall time and task sums, a rolling log's parts in order, and a compressed log refused."""
import json

import pytest

from spark_jobs.event_log import application_seconds, by_call_site, stage_times


def _stage(stage_id, name, submitted, completed, run_ms, cpu_ns, gc_ms=0):
    return {"Event": "SparkListenerStageCompleted", "Stage Info": {
        "Stage ID": stage_id, "Stage Name": name, "Number of Tasks": 4,
        "Submission Time": submitted, "Completion Time": completed,
        "Accumulables": [
            {"ID": 1, "Name": "internal.metrics.executorRunTime", "Value": run_ms},
            {"ID": 2, "Name": "internal.metrics.executorCpuTime", "Value": cpu_ns},
            {"ID": 3, "Name": "internal.metrics.jvmGCTime", "Value": gc_ms},
            {"ID": 4, "Name": "number of output rows", "Value": "12"}]}}


def _write(path, events):
    path.write_text("".join(json.dumps(event) + "\n" for event in events))


def test_stages_give_their_wall_time_and_their_tasks_sums(tmp_path):
    log = tmp_path / "app-1"
    _write(log, [{"Event": "SparkListenerApplicationStart", "Timestamp": 1_000},
                 {"Event": "SparkListenerJobStart", "Job ID": 0},
                 _stage(1, "collect at job.py:103", 5_000, 5_700, 951, 36_700_000),
                 _stage(0, "collect at job.py:82", 1_500, 4_000, 15_250, 348_400_000, 46),
                 {"Event": "SparkListenerApplicationEnd", "Timestamp": 9_500}])
    stages = stage_times(log)
    assert [s["stage"] for s in stages] == [0, 1]
    assert stages[0] == {"stage": 0, "name": "collect at job.py:82", "tasks": 4,
                         "submitted_ms": 1_500, "completed_ms": 4_000,
                         "wall_ms": 2_500, "task_run_ms": 15_250.0, "task_cpu_ms": 348.4,
                         "task_deserialize_ms": 0.0, "task_gc_ms": 46.0}
    assert application_seconds(log) == 8.5


def test_a_rolling_log_is_read_part_by_part_in_order(tmp_path):
    log = tmp_path / "eventlog_v2_app-2"
    log.mkdir()
    (log / "appstatus_app-2").write_text("")
    _write(log / "events_2_app-2", [_stage(7, "b", 10, 30, 5, 0)])
    _write(log / "events_10_app-2", [{"Event": "SparkListenerApplicationEnd",
                                      "Timestamp": 40}])
    _write(log / "events_1_app-2", [{"Event": "SparkListenerApplicationStart",
                                     "Timestamp": 0}, _stage(3, "a", 0, 10, 5, 0)])
    assert [s["name"] for s in stage_times(log)] == ["a", "b"]
    assert application_seconds(log) == 0.04


def test_an_application_that_did_not_end_has_no_duration(tmp_path):
    log = tmp_path / "app-3"
    _write(log, [{"Event": "SparkListenerApplicationStart", "Timestamp": 0}])
    assert application_seconds(log) is None and stage_times(log) == []


def test_a_compressed_log_is_refused_with_the_setting_to_use(tmp_path):
    log = tmp_path / "eventlog_v2_app-4"
    log.mkdir()
    (log / "events_1_app-4.zstd").write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(ValueError, match="spark.eventLog.compress=false"):
        stage_times(log)


def test_concurrent_stages_of_one_call_site_group_into_one_span(tmp_path):
    log = tmp_path / "app-5"
    _write(log, [_stage(0, "build at job.py:82", 0, 4_000, 7_000, 0),
                 _stage(1, "collect at PythonRDD", 4_000, 9_000, 1_000, 0),
                 _stage(2, "collect at PythonRDD", 4_100, 8_000, 2_000, 0, gc_ms=5),
                 _stage(3, "collect at PythonRDD", 4_200, 10_000, 3_000, 0)])
    groups = by_call_site(stage_times(log))
    assert [g["name"] for g in groups] == ["build at job.py:82", "collect at PythonRDD"]
    routing = groups[1]
    assert routing["stages"] == 3 and routing["tasks"] == 12
    assert routing["span_ms"] == 6_000 and routing["task_run_ms"] == 6_000.0
    assert routing["task_gc_ms"] == 5.0
