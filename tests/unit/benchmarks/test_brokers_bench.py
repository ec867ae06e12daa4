"""edn bench brokers at a tiny size: every mode exact, bisection bounded by the overload."""

from benchmarks import BENCHMARKS, WRITES_FILES, brokers
from route_manager.wansim import gryphon_topology, make_workload
from route_manager.wansim.routing import make_router


def test_registered_and_writes_files():
    assert BENCHMARKS["brokers"][0] == "benchmarks.brokers:run" and "brokers" in WRITES_FILES


def test_table_rows_are_exact_and_summaries_save_links():
    rows = {row["mode"]: row for row in brokers.table(subscriptions=300, events=5)}
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
