"""Gryphon's Chart 3 on the parallel search tree: the figures are counted, not assumed
(matches equal a brute-force count, paths equal the oracle's deliveries, every broker's link
decision equals the oracle's), and steps grow less than linearly."""
import pytest

from benchmarks.reproductions.brokers import PUBLISHERS
from benchmarks.reproductions.pst import chart3_figures, chart3_steps, chart3_workload
from simulation import gryphon_topology, make_workload


def test_chart3_counts_match_brute_force_and_grow_sublinearly():
    subscriptions, events = chart3_workload(300, 50)
    expected = sum(all(e[a] == v for a, v in s.items()) for e in events for s in subscriptions)
    figures = chart3_steps([300, 3000], events=50)
    assert abs(figures["300"]["match_share"] - expected / (50 * 300)) < 1e-12
    assert 0 < figures["300"]["steps"] < figures["3000"]["steps"] < 10 * figures["300"]["steps"]


def _deliveries(n: int, events_per_publisher: int) -> int:
    """(event, broker with a matching subscriber) pairs, from the workload's own oracle."""
    topology = gryphon_topology()
    workload = make_workload(topology, list(PUBLISHERS), subscriptions=n,
                             events=events_per_publisher, factoring=3)
    return sum(len({workload.broker_of(s) for s in workload.matching(row)})
               for rows in workload.events.values() for row in rows)


@pytest.mark.parametrize("client_links", [True, False])
def test_chart3_figures_follow_every_delivery_and_decide_exactly(client_links):
    figures = chart3_figures(sizes=(150, 300), events=30, client_links=client_links)
    assert figures["exact"] and figures["events"] == 30
    assert {"subscriptions", "centralized_steps", "link_steps_by_hops", "matching_share",
            "crossover_hops_at_largest", "largest_subscriptions"} <= set(figures)
    assert figures["largest_subscriptions"] == 300
    assert 0.005 < figures["matching_share"][-1] < 0.05   # the seed: about 1.3%
    assert len(figures["centralized_steps"]) == len(figures["matching_share"]) == 2
    paths = [sum(column[k] for column in figures["paths_by_hops"].values()) for k in (0, 1)]
    deliveries = [_deliveries(150, 10), _deliveries(300, 10)]
    if client_links:   # every delivery is a path
        assert paths == deliveries
    else:              # a delivery to the publishing broker's own client takes no hop
        assert all(0 < p <= d for p, d in zip(paths, deliveries))
    # factoring saves the centralized search steps; one broker's search is cheaper still
    assert all(f < plain for f, plain in zip(figures["centralized_steps"],
                                             figures["centralized_steps_without_factoring"]))
    assert all(b < c for b, c in zip(figures["link_steps_per_broker"],
                                     figures["centralized_steps"]))
    assert set(figures["link_steps_by_hops"]) <= {str(h) for h in range(1, 8)}
    assert 0 <= figures["crossover_hops_at_largest"] <= 7

