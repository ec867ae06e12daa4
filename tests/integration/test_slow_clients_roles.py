"""``edn bench slowclients`` over every role: with idle, slowloris and slow-body connections
open against it, each role (source, server, dispatcher; their default worker classes) still
answers every normal request of its kind, and stays up."""
from __future__ import annotations

import pytest

from benchmarks.robustness import slowclients


@pytest.fixture(scope="module")
def figures():
    return slowclients.run(quick=True)


@pytest.mark.parametrize("role", slowclients.ROLES)
def test_every_role_keeps_serving_under_slow_clients(figures, role):
    row = figures["roles"][role]
    assert row["idle_connections"] == 200 and row["slowloris"] == 20 and row["slow_bodies"] == 5
    assert row["server_alive"], row
    assert row["failed"] == 0 and row["baseline_failed"] == 0, row
    assert row["answered"] == row["probes"] == 40, row
    assert row["p95_ms"] is not None and row["p95_ms"] < 1000, row


def test_the_top_level_is_the_worst_role(figures):
    rows = figures["roles"].values()
    assert set(figures["roles"]) == set(slowclients.ROLES)
    assert figures["failed"] == sum(r["failed"] for r in rows)
    assert figures["p95_ms"] == max((r["p95_ms"] for r in rows if r["p95_ms"] is not None),
                                    default=None)
    assert figures["server_alive"] == all(r["server_alive"] for r in rows)
    assert figures["worst_role"] in slowclients.ROLES


def test_a_dispatcher_probe_is_routed_and_forwarded():
    # The dispatcher's probe publishes events to a topic with a subscription that takes
    # every event: the probes are real publications (routed, then forwarded), not faults.
    result = slowclients.measure(idle=5, slowloris=1, slow_bodies=1, probes=6,
                                 roles=("dispatcher",), probe_budget_s=20.0)
    row = result["roles"]["dispatcher"]
    assert row["failed"] == 0 and row["answered"] == 6, row
    assert row["events_forwarded"] >= 3, row
