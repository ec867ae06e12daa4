"""edn bench brokers at a tiny size: every mode exact, link matching sending what precise
summaries send, bisection bounded by the overload and near the bottleneck estimate, chart 3
wired to benchmarks.reproductions.pst when it is there, the PNGs."""

import pytest

from benchmarks import BENCHMARKS, WRITES_FILES
from benchmarks.reproductions import brokers
from simulation import gryphon_topology, make_workload
from simulation.routing import FloodingRouter, make_router


def test_registered_and_writes_files():
    assert BENCHMARKS["brokers"][0] == "benchmarks.reproductions.brokers:run" and "brokers" in WRITES_FILES


@pytest.fixture(scope="module")
def rows():
    return {row["mode"]: row for row in brokers.table(subscriptions=200, events=3)}


def test_table_rows_are_exact_and_summaries_save_links(rows):
    assert rows["flooding"]["link_messages_per_event"] == 38.0
    assert rows["summaries@1"]["link_messages_per_event"] < 38.0
    assert rows["summaries@1"]["useless_links"] == 0
    assert all(row["exact"] for row in rows.values() if "missing" not in row)


def test_max_rate_bisection_brackets_the_overload():
    topology = gryphon_topology()
    trees = {p: topology.spanning_tree(p) for p in brokers.PUBLISHERS}
    workload = make_workload(topology, list(brokers.PUBLISHERS), subscriptions=100, events=5)
    router = make_router("flooding", topology, trees, workload)
    rate = brokers.max_rate(router, duration_s=0.5, high=3000.0, tolerance=50.0)
    # one CPU per broker serves every flooded event of the 3 publishers
    service_s = brokers.PER_MESSAGE_S
    assert 0 < rate < 3000.0
    assert rate < 1.5 / (3 * service_s)


def test_table_link_matching_is_exact_and_sends_what_precise_summaries_send(rows):
    link, summaries = rows["linkmatching"], rows["summaries@1"]
    assert link["exact"] and link["useless_links"] == 0 and link["steps_per_event"] > 0
    assert link["link_messages_per_event"] == summaries["link_messages_per_event"]
    # the same spanning trees: every tree-routed mode delivers at the same distances
    assert link["delivery_hops_mean"] == rows["flooding"]["delivery_hops_mean"] > 0
    # the modelled CPU adds the steps to the per-message cost of the messages handled
    assert link["broker_cpu_ms_per_event"] > link["steps_per_event"] * brokers.STEP_S * 1e3
    assert rows["kyra"]["exact"] and rows["kyra"]["median_latency_ms"] > 2.0


def test_bottleneck_rate_is_what_the_simulation_finds_give_or_take_queueing():
    topology = gryphon_topology()
    trees = {p: topology.spanning_tree(p) for p in brokers.PUBLISHERS}
    workload = make_workload(topology, list(brokers.PUBLISHERS), subscriptions=100, events=5)

    class Unmeasured(FloodingRouter):
        """Local delivery's measured CPU left out: the test must not depend on the load of
        the machine it runs on."""

        def _local_clients(self, broker, publisher):
            return super()._local_clients(broker, publisher)[0], 0.0

    router = Unmeasured(topology, trees, workload)
    found = brokers.bottleneck(router)
    # flooding: every broker handles every event of the three publishers
    assert found["cpu_ms_per_round"] == pytest.approx(3 * brokers.PER_MESSAGE_S * 1e3)
    assert found["rate"] == pytest.approx(1e3 / found["cpu_ms_per_round"])
    assert found["messages_per_round"] == 3 and found["steps_per_message"] == 0
    simulated = brokers.max_rate(router, duration_s=0.2, high=1500.0, tolerance=50.0)
    assert 0.8 * found["rate"] < simulated < 1.5 * found["rate"]


def test_chart3_calls_the_pst_figures_when_they_exist(monkeypatch):
    import benchmarks.reproductions.pst

    calls = []
    figures = {"subscriptions": [1000, 2000], "centralized_steps": [50.0, 90.0],
               "link_steps_by_hops": {"1": [20.0, 30.0], "2": [35.0, 55.0]}}
    monkeypatch.setattr(benchmarks.reproductions.pst, "chart3_figures",
                        lambda quick=False: calls.append(quick) or figures, raising=False)
    assert brokers.chart3(quick=True) is figures and calls == [True]
    monkeypatch.delattr(benchmarks.reproductions.pst, "chart3_figures")
    assert "missing" in brokers.chart3(quick=False)


def test_plots_chart2_and_chart3(tmp_path):
    pytest.importorskip("matplotlib")
    result = {"chart2": [{"matching_share": 0.01, "flooding": 600.0, "linkmatching": 900.0},
                         {"matching_share": 0.1, "flooding": 600.0, "linkmatching": 650.0}],
              "chart3": {"subscriptions": [1000, 2000], "centralized_steps": [50.0, 90.0],
                         "link_steps_by_hops": {"1": [20.0, 30.0]}}}
    written = brokers._plot(tmp_path, result)
    assert sorted(written) == [str(tmp_path / "brokers-chart2.png"),
                               str(tmp_path / "brokers-chart3.png")]
    assert all((tmp_path / name).read_bytes()[:4] == b"\x89PNG"
               for name in ("brokers-chart2.png", "brokers-chart3.png"))
    # chart 3 missing: no PNG for it
    assert brokers._plot(tmp_path / ".", {**result, "chart3": {"missing": "x"}}) == [
        str(tmp_path / "brokers-chart2.png")]
