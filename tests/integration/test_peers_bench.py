"""``edn bench peers --quick --json`` end to end: the EDN, ActiveMQ, RabbitMQ and Mosquitto
(real brokers, from Debian's packages) each take the same subscriptions and events, paced and in a
burst, and each delivers exactly what the oracle says. Skipped, with the bench's reason,
where a peer is not installed and cannot be."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.performance.peers import activemq, mosquitto, rabbitmq


def test_bench_peers_quick():
    for peer in (activemq, rabbitmq, mosquitto):
        if peer.missing():
            pytest.skip(peer.missing())
    result = subprocess.run([sys.executable, "-m", "edn.cli", "bench", "peers", "--quick",
                             "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout)
    assert figures["oracle_deliveries_300"] > 100
    for system in ("edn", "activemq_persistent", "activemq_nonpersistent", "rabbitmq_persistent",
                   "rabbitmq_nonpersistent", "mosquitto_nonpersistent"):
        for mode in ("paced", "burst"):
            prefix = f"{system}_{mode}_300_"
            assert figures[prefix + "exact"], {k: v for k, v in figures.items() if k.startswith(prefix)}
            assert figures[prefix + "deliveries_per_s"] > 0
            assert 0 < figures[prefix + "latency_p50_ms"] <= figures[prefix + "latency_p99_ms"]
            assert figures[prefix + "cpu_ms_per_event"] > 0
    assert figures["edn_over_activemq_persistent_burst_300"] > 0
    assert figures["edn_over_mosquitto_nonpersistent_paced_300"] > 0
    # the grid-routing brokers hand their consumers more than the boxes hold (the client
    # filters the rest); the exact filters of the EDN and ActiveMQ report no such figure
    for system in ("rabbitmq_persistent", "mosquitto_nonpersistent"):
        assert (figures[f"{system}_paced_300_routed_per_event"]
                > figures["oracle_deliveries_300"] / 200)
    assert "edn_paced_300_routed_per_event" not in figures
