"""The profile job's kernels, its single-process twin and the precision choice (no Spark)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from matchers.rtree_engine import RTreeMatchingEngine
from route_manager.models import hit_ratio as hr
from route_manager import workloads
from route_manager.precision_profile import (InvalidPrecisionProfile, initial_precision_from,
                                             parse_initial_precision)
from spark_jobs import inputs, profile, profile_tasks, selection
from route_manager.models.throughput import SystemParameters


@pytest.fixture(scope="module")
def small():
    return inputs.from_workload("uniform", 1200, d=4, servers=3, events=400, seed=5)


@pytest.fixture(scope="module")
def small_profile(small):
    options = profile.ProfileOptions(precisions=(0.1, 0.5, 1.0, None), chunk_size=150)
    return profile.profile_local(small, options)


def test_cut_summary_is_the_engines_own_summary(small):
    schema = profile_tasks.schema_from_xml(small.schema_xml)
    mins, maxs = small.rectangles[0]
    engine = RTreeMatchingEngine(schema)
    engine.bulk_load([f"r{i}" for i in range(len(mins))], mins, maxs)
    precise = engine.summary(1.0)
    for precision in (0.05, 0.1, 0.37, 0.5, 0.99, 1.0):
        cut = profile_tasks.cut_summary(precise.mins, precise.maxs, len(mins), precision)
        expected = engine.summary(precision)
        assert np.array_equal(cut[0], expected.mins) and np.array_equal(cut[1], expected.maxs)


def test_precise_hit_ratio_is_exact(small, small_profile):
    """At precision 1.0 an event goes to a server iff one of its rectangles holds it."""
    exact = hr.hit_ratio(small.events, [r for r in small.rectangles])
    assert small_profile.hit_ratios()["1"] == pytest.approx(exact, abs=0)
    assert small_profile.meta["exact_hit_ratio_sample"] == pytest.approx(exact, abs=0)
    assert small_profile.hit_ratios()["none"] == 1.0


def test_lower_precision_never_withholds_an_event(small):
    servers = small.servers
    parts = [profile_tasks.server_kernel(name, small.schema_xml, mins, maxs, small.events[:0])
             for name, (mins, maxs) in zip(servers, small.rectangles)]
    triples = profile.server_parts_for_routing(parts)
    precise, _ = profile_tasks.build_route_set(small.schema_xml, servers, triples, 1.0)
    coarse, boxes = profile_tasks.build_route_set(small.schema_xml, servers, triples, 0.2)
    nothing, none_boxes = profile_tasks.build_route_set(small.schema_xml, servers, triples, None)
    assert none_boxes == [0, 0, 0]
    assert boxes == [profile_tasks.summary_target(0.2, len(m)) for m, _ in small.rectangles]
    for point in small.events[:100]:
        assert precise.route(point) <= coarse.route(point) <= nothing.route(point)
        assert nothing.route(point) == frozenset(servers)


def test_rows_and_counts(small, small_profile):
    rows = small_profile.rows
    assert len(rows) == 4 * (len(small.servers) + 1)
    aggregate = small_profile.aggregate()
    assert [r.precision_label for r in aggregate] == ["0.1", "0.5", "1", "none"]
    for row in aggregate:
        per_server = [r for r in rows if r.precision_label == row.precision_label
                      and r.server != "*"]
        assert row.forwarded == sum(r.forwarded for r in per_server)
        assert row.summary_boxes == sum(r.summary_boxes for r in per_server)
        assert row.rectangles == 1200 and row.events == 400 and row.tasks == 3
        assert row.t_d > 0 and row.t_route == pytest.approx(row.t_d * 3)
        assert row.t_s is not None and row.t_s > 0
    assert aggregate[0].summary_boxes < aggregate[1].summary_boxes < aggregate[2].summary_boxes
    points = small_profile.operating_points()
    assert [p.precision for p in points] == [0.1, 0.5, 1.0, None]


def test_hit_ratios_do_not_depend_on_chunking(small, small_profile):
    other = profile.profile_local(small, profile.ProfileOptions(
        precisions=(0.1, 0.5, 1.0, None), chunk_size=400, mode="batch", match_sample=50,
        clock="cpu"))
    assert other.hit_ratios() == small_profile.hit_ratios()


def test_assemble_refuses_missing_chunks(small):
    options = profile.ProfileOptions(precisions=(1.0,), chunk_size=100)
    parts = [profile_tasks.server_kernel(n, small.schema_xml, a, b, small.events[:10])
             for n, (a, b) in zip(small.servers, small.rectangles)]
    context = profile.RoutingContext(small.schema_xml, small.servers,
                                     profile.server_parts_for_routing(parts), small.events, options)
    results = [context.run(*task) for task in context.tasks()]
    with pytest.raises(ValueError):
        profile.assemble(small, options, parts, results[:-1])


def test_precisions_parse():
    assert profile.parse_precisions(["0.5", "none", "precise", "0.5"]) == (0.5, None, 1.0)
    with pytest.raises(ValueError):
        profile.parse_precisions(["1.5"])
    with pytest.raises(ValueError):
        profile.parse_precisions(["0"])


# -- the choice ---------------------------------------------------------------------------------

def _synthetic(points):
    rows = []
    for precision, t_d, r in points:
        label = profile.precision_label(precision)
        rows.append(profile.ProfileRow(precision, label, "*", 1000, 0, 100, int(r * 1000), r,
                                       t_d, t_d * 10, None, 1))
        for server in range(10):
            rows.append(profile.ProfileRow(precision, label, f"s{server}", 100, 0, 100, 0, r,
                                           t_d, t_d * 10, None, 1))
    return profile.Profile(rows, {})


def test_recommend_picks_the_crossing():
    # T_d grows and R falls with precision: TP_D and TP_OL cross between 0.4 and 0.6
    curve = [(0.2, 20e-6, 0.9), (0.4, 40e-6, 0.7), (0.6, 80e-6, 0.5), (0.8, 160e-6, 0.4),
             (1.0, 320e-6, 0.3), (None, 1e-6, 1.0)]
    params = \
        selection.system_parameters(3, preset="fig7")  # T_l = 100 us, T_f = 0
    result = selection.recommend(_synthetic(curve), params)
    assert result["parameters"]["n_servers"] == 10  # N_s follows the profile
    # per event: TP_D = 1/(10 T_d), TP_OL = 1/(10 R T_l)
    # at 0.4: min(2500, 1429) = 1429; at 0.6: min(1250, 2000) = 1250
    assert result["initial_precision"] == 0.4
    assert result["rtp_vs_precise"] == pytest.approx((1 / 700e-6) / (1 / 3200e-6))
    cross = result["crossing"]
    assert 0.4 < cross["precision"] < 0.6
    assert cross["t_d"] == pytest.approx(cross["hit_ratio"] * 100e-6)  # TP_D = TP_OL there
    assert cross["rtp_eq5"] == pytest.approx(cross["rtp_vs_precise"])
    assert [c["precision"] for c in result["curve"]] == ["0.2", "0.4", "0.6", "0.8", "1", "none"]


def test_recommend_none_when_routing_is_too_dear():
    curve = [(0.5, 1e-3, 0.9), (1.0, 2e-3, 0.8), (None, 0.0, 1.0)]
    result = selection.recommend(_synthetic(curve), selection.PRESETS["paper"])
    assert result["initial_precision"] == "none"


def test_parameters_from_files_and_status(tmp_path):
    status = {"precision": "precise", "link_mbps": 40, "measure.t_f_us": 1600.0,
              "measure.t_c_us": 12.0, "measure.message_bytes": 3072, "measure.t_d_us": 5.0}
    path = tmp_path / "status.json"
    path.write_text(json.dumps(status))
    params = selection.system_parameters(10, file=path)
    assert params.t_f == pytest.approx(1.6e-3) and params.t_c == pytest.approx(12e-6)
    assert params.bandwidth == pytest.approx(5e6) and params.message_size == 3072
    nested = selection.parameters_from_mapping({"throughput": {"T_f_ms": 2, "B_mbps": 80,
                                                               "S_m": 1000}})
    assert nested == {"t_f": pytest.approx(2e-3), "bandwidth": pytest.approx(1e7),
                      "message_size": 1000.0}
    paper = selection.system_parameters(10, preset="paper")
    assert paper == SystemParameters.paper_implementation()
    assert selection.PRESETS["fig7"].t_l == pytest.approx(100e-6)
    given = selection.system_parameters(4, preset="paper", t_f=0.0)
    assert given.t_f == 0.0 and given.n_servers == 4 and given.bandwidth == 1e7
    with pytest.raises(ValueError):
        selection.parameters_from_mapping({"t_f": "fast"})


def test_outputs_and_the_dispatchers_reader(small_profile, tmp_path):
    recommendation = selection.write_outputs(small_profile, selection.PRESETS["paper"], tmp_path)
    for name in ("profile.csv", "recommendation.json", "throughput.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (tmp_path / "profile.csv").read_text().splitlines()
    assert lines[0].startswith("precision,precision_label,server") and len(lines) == 1 + 16
    stored = json.loads((tmp_path / "recommendation.json").read_text())
    assert stored["initial_precision"] == recommendation["initial_precision"]
    assert initial_precision_from(tmp_path / "recommendation.json") == \
        recommendation["initial_precision"]
    assert initial_precision_from(tmp_path) == recommendation["initial_precision"]


def test_initial_precision_reader(tmp_path):
    path = tmp_path / "r.json"
    for value, expected in ((0.3, 0.3), ("none", "none"), ("precise", 1.0), (1, 1.0),
                            ("0.25", 0.25)):
        path.write_text(json.dumps({"initial_precision": value}))
        assert initial_precision_from(path) == expected
    for bad in (0, 1.5, "fast", True, None, float("nan")):
        with pytest.raises(InvalidPrecisionProfile):
            parse_initial_precision(bad)
    path.write_text("{not json")
    with pytest.raises(InvalidPrecisionProfile):
        initial_precision_from(path)
    path.write_text("{}")
    with pytest.raises(InvalidPrecisionProfile):
        initial_precision_from(path)
    with pytest.raises(InvalidPrecisionProfile):
        initial_precision_from(tmp_path / "missing.json")


def test_serve_dispatcher_flag_reads_the_recommendation(tmp_path):
    from edn import cli

    path = tmp_path / "recommendation.json"
    path.write_text(json.dumps({"initial_precision": 0.4}))
    args = cli.build_parser().parse_args(["serve", "dispatcher", "--precision-profile", str(path)])
    assert cli._initial_precision(args) == 0.4
    args = cli.build_parser().parse_args(["serve", "server", "--precision-profile", str(path)])
    with pytest.raises(SystemExit):
        cli._initial_precision(args)
    path.write_text("[]")
    args = cli.build_parser().parse_args(["serve", "dispatcher", "--precision-profile", str(path)])
    with pytest.raises(SystemExit):
        cli._initial_precision(args)


# -- inputs ---------------------------------------------------------------------------------------

def test_events_from_files(tmp_path):
    points = workloads.uniform_events(5, 3, seed=1)
    np.save(tmp_path / "e.npy", points)
    assert np.array_equal(inputs.load_events(tmp_path / "e.npy", 3), points)
    text = "x0,x1,x2\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in points) + "\n"
    (tmp_path / "e.csv").write_text(text)
    assert np.array_equal(inputs.load_events(tmp_path / "e.csv"), points)
    with pytest.raises(ValueError):
        inputs.load_events(tmp_path / "e.csv", 4)


@pytest.mark.sqlite_only("edn profile --stores reads SQLite files")
def test_from_stores_reads_a_servers_sqlite_file(tmp_path):
    from lxml import etree

    from matchers import FilterSpec
    from matchers.ranges import RANGES_DIALECT
    from route_manager.workloads.grid_xml import range_filter, schema_element
    from subscription_manager.store import Subscription, SubscriptionStore
    from subscription_manager.versions import VERSIONS
    from wsframework.addressing import EndpointReference
    from wsframework.namespace import Namespace
    from wsframework.store import Store

    version = next(iter(VERSIONS.values()))
    boxes = workloads.uniform_rectangles(6, 2, seed=3)
    for server in ("s1", "s2"):
        store = Store(tmp_path / server / "edn.db")
        topics = Namespace("topics", store)
        entry = topics.create("grid", None, schema_element(2))
        subs = SubscriptionStore(store)
        for i, (lo, hi) in enumerate(zip(*boxes)):
            if server == "s2" and i >= 2:
                break
            spec = FilterSpec(RANGES_DIALECT, range_filter(lo, hi))
            subs.insert(Subscription(
                id=f"{server}-{i}", topic="grid", topic_uid=entry.uid, version=version,
                soap_version="1.2", filter=spec,
                notify_to=EndpointReference("http://127.0.0.1:9/sink"), end_to=None,
                format="unwrap", expires=None, expires_kind="none"))
    data = inputs.from_stores([tmp_path / "s1", tmp_path / "s2" / "edn.db"], "grid", events=50)
    assert data.servers == ("s1", "s2")
    assert [len(m) for m, _ in data.rectangles] == [6, 2]
    mins, maxs = data.rectangles[0]
    assert np.allclose(mins, boxes[0]) and np.allclose(maxs, boxes[1])
    assert data.events.shape == (50, 2)
    assert etree.fromstring(data.schema_xml).tag.endswith("Schema")
    with pytest.raises(LookupError):
        inputs.from_stores([tmp_path / "s1"], "other")
    result = profile.profile_local(data, profile.ProfileOptions(precisions=(1.0,), chunk_size=20))
    assert result.hit_ratios()["1"] == hr.hit_ratio(data.events, list(data.rectangles))


# -- the partitioning study's kernel -----------------------------------------------------------------

def test_study_local_equals_the_single_process_hit_ratio():
    from spark_jobs import study

    plan = study.plan_study(workload="zipf", servers=(3,), per_server=300, d=3,
                            partitioners=("random", "offline_rtree"), alphas=(1.0,), events=500,
                            chunk_size=200)
    result = study.study_local(plan)
    assert len(result.rows) == 4  # 2 partitioners x (uniform, zipf) events
    for row in result.rows:
        config = next(c for c in plan.configs if c.key == row["config"])
        mins, maxs = config.rectangles()
        labels, _ = study.partition_labels(plan, config)
        events = plan.events_for(config, row["events_kind"])
        expected = hr.hit_ratio(events, hr.precise_summaries(mins, maxs, labels, 3))
        assert row["hit_ratio"] == expected
        assert row["figure"] == ("fig5" if row["events_kind"] == "uniform" else "fig6")


def test_profile_csv_round_trip(small_profile, tmp_path):
    selection.write_csv(small_profile, tmp_path / "p.csv")
    again = selection.read_csv(tmp_path / "p.csv")
    assert again.hit_ratios() == small_profile.hit_ratios()
    assert [r.as_dict() for r in again.rows] == [r.as_dict() for r in small_profile.rows]
    params = selection.PRESETS["paper"]
    assert selection.recommend(again, params)["curve"] == \
        selection.recommend(small_profile, params)["curve"]
