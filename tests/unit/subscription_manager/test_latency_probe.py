"""MeasureLatency (subscription_manager.server.latency_probe) and the matrix ``edn latency
measure`` builds from its answers (edn.latency_commands.measure_matrix): socket-free, the
connections timed by a scripted ``connect``, a network of servers in process."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from edn.latency_commands import LatencyMeasureError, measure_matrix
from route_manager import protocol
from route_manager.latency_matrix import format_latency, parse_latency
from subscription_manager.server.latency_probe import LatencyProbe
from tests.support.edn import Network
from tests.support.eventing import TOKEN
from wsframework.admin import AdminClient
from wsframework.admin.contracts import FAULT_ACCESS_DENIED, FAULT_INVALID_REQUEST
from wsframework.exceptions import SENDER, SoapFault

PEERS = {"s1": "http://10.77.0.3:8081", "s2": "http://s2.lab:8082"}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def probe(times=None, *, fail=None, budget=30.0, clock=None):
    """A probe of server s0 whose connections to host H take ``times[H]`` seconds each (in
    turn), or raise ``fail[H]``; records every (host, port) resolved and connected."""
    seen = {"resolved": [], "connected": []}
    series = {host: list(values) for host, values in (times or {}).items()}

    def resolve(host, port):
        seen["resolved"].append((host, port))
        return socket.AF_INET, (host, port)

    def connect(family, sockaddr, timeout):
        seen["connected"].append(sockaddr)
        if clock is not None:
            clock.now += 1.0
        if fail and sockaddr[0] in fail:
            raise fail[sockaddr[0]]
        return series[sockaddr[0]].pop(0)

    return LatencyProbe("s0", PEERS.get, resolve=resolve, connect=connect,
                        clock=clock or Clock(), budget=budget), seen


def figures(answer):
    return {item.Target: (item.Ms, item.Error) for item in answer.Latency}


def test_the_median_connect_time_to_each_named_peer_at_its_listed_address():
    p, seen = probe({"10.77.0.3": [0.020, 0.022, 0.500], "s2.lab": [0.001] * 3})
    answer = p.answer(protocol.MeasureLatency(Target=["s1", "s2", "s0"], Probes=3))
    assert figures(answer) == {"s1": ("22.000", None), "s2": ("1.000", None), "s0": ("0", None)}
    assert seen["resolved"] == [("10.77.0.3", 8081), ("s2.lab", 8082)]  # once per peer
    assert len(seen["connected"]) == 6


def test_five_probes_by_default_and_a_repeated_target_once():
    p, seen = probe({"10.77.0.3": [0.01] * 5})
    answer = p.answer(protocol.MeasureLatency(Target=["s1", "s1"]))
    assert [item.Target for item in answer.Latency] == ["s1"] and len(seen["connected"]) == 5


def test_an_unknown_target_is_refused_before_anything_is_probed():
    p, seen = probe({"10.77.0.3": [0.01]})
    with pytest.raises(SoapFault) as caught:
        p.answer(protocol.MeasureLatency(Target=["s1", "http://169.254.169.254/"], Probes=1))
    assert caught.value.code == SENDER and caught.value.subcode == protocol.FAULT_UNKNOWN_SERVER
    assert "no peer of 's0'" in caught.value.reason and seen["connected"] == []


@pytest.mark.parametrize("targets, probes, reason", [
    ([], None, "names no Target"),
    ([f"s{k}" for k in range(protocol.MAX_LATENCY_TARGETS + 1)], None, "at most 64"),
    (["s1"], 0, "Probes"), (["s1"], protocol.MAX_LATENCY_PROBES + 1, "Probes")])
def test_too_many_or_no_targets_and_bad_probe_counts_are_refused(targets, probes, reason):
    p, seen = probe()
    with pytest.raises(SoapFault) as caught:
        p.answer(protocol.MeasureLatency(Target=targets, Probes=probes))
    assert caught.value.subcode == FAULT_INVALID_REQUEST and reason in caught.value.reason
    assert seen["connected"] == []


def test_an_unreachable_peer_is_an_error_in_the_answer_and_the_others_are_measured():
    p, _ = probe({"s2.lab": [0.002] * 2},
                 fail={"10.77.0.3": ConnectionRefusedError(111, "Connection refused")})
    answer = figures(p.answer(protocol.MeasureLatency(Target=["s1", "s2"], Probes=2)))
    assert answer["s1"] == (None, "http://10.77.0.3:8081: Connection refused")
    assert answer["s2"] == ("2.000", None)
    p, _ = probe(fail={"10.77.0.3": socket.timeout("timed out")})
    answer = figures(p.answer(protocol.MeasureLatency(Target=["s1"], Probes=2)))
    assert answer["s1"] == (None, "http://10.77.0.3:8081: timed out")


def test_one_lost_probe_still_gives_a_figure_from_the_others():
    outcomes = [OSError(113, "No route to host"), 0.030]

    def connect(family, sockaddr, timeout):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    p = LatencyProbe("s0", PEERS.get, resolve=lambda h, port: (socket.AF_INET, (h, port)),
                     connect=connect)
    assert figures(p.answer(protocol.MeasureLatency(Target=["s1"], Probes=2))) == {
        "s1": ("30.000", None)}


def test_the_request_budget_bounds_the_time_and_names_the_peers_left_out():
    clock = Clock()
    p, seen = probe({"10.77.0.3": [0.01] * 3, "s2.lab": [0.01] * 3}, budget=2.0, clock=clock)
    answer = figures(p.answer(protocol.MeasureLatency(Target=["s1", "s2"], Probes=3)))
    assert answer["s1"] == ("10.000", None)  # two probes fit in the budget
    assert answer["s2"][0] is None and "ran out" in answer["s2"][1]
    assert len(seen["connected"]) == 2


# -- over the wire, in process: the admin endpoint, the credential and the CLI's matrix -------

@pytest.fixture
def network(tmp_path):
    net = Network(tmp_path, ("rtree", "rtree", "rtree"))
    for manager in net.managers:
        manager.network._refresh_peers()  # every server knows every other
    rtt = {"s0.test": 0.001, "s1.test": 0.002, "s2.test": 0.040}
    for manager in net.managers:
        admin = manager.server_admin
        admin.latency = LatencyProbe(
            admin.latency.name, admin.latency.address_of,
            resolve=lambda host, port: (socket.AF_INET, (host, port)),
            connect=lambda family, sockaddr, timeout: rtt[sockaddr[0]])
    yield net
    net.close()


def servers_of(net):
    listed = net.admin.call(protocol.ListServers()).Server
    return [(info.Name, info.Address) for info in listed]


def test_the_matrix_is_measured_server_to_server_and_written_as_the_file_format(network):
    def call(address, request):
        return AdminClient(address, TOKEN, transport=network.transport).call(request)
    matrix = measure_matrix(servers_of(network), call, probes=2)
    assert matrix.names == ("s0", "s1", "s2")
    assert np.allclose(matrix.ms, [[0, 2, 40], [1, 0, 40], [1, 2, 0]])
    for fmt in ("json", "csv"):
        again = parse_latency(format_latency(matrix, fmt), fmt)
        assert again.names == matrix.names and np.allclose(again.ms, matrix.ms)


def test_measure_latency_needs_the_admin_credential(network):
    with pytest.raises(SoapFault) as caught:
        AdminClient("http://s0.test", "not-the-token", transport=network.transport).call(
            protocol.MeasureLatency(Target=["s1"]))
    assert caught.value.subcode == FAULT_ACCESS_DENIED


def test_a_pair_that_was_not_measured_fails_the_whole_matrix_naming_it(network):
    def call(address, request):
        answer = AdminClient(address, TOKEN, transport=network.transport).call(request)
        if address.endswith("s1.test"):
            answer.Latency[0].Ms, answer.Latency[0].Error = None, "Connection refused"
        if address.endswith("s2.test"):
            raise SoapFault(SENDER, "server 's0' is no peer of 's2'")
        return answer
    with pytest.raises(LatencyMeasureError) as caught:
        measure_matrix(servers_of(network), call)
    failures = {(a, b): why for a, b, why in caught.value.failures}
    assert failures[("s1", "s0")] == "Connection refused"
    assert "no peer" in failures[("s2", "s0")] and ("s2", "s1") in failures
    assert len(failures) == 3


def test_figures_a_server_should_not_give_are_not_taken():
    class Answer:
        def __init__(self, items):
            self.Latency = items

    def call(address, request):
        return Answer([protocol.LatencyInfo(Target="b", Ms="nan"),
                       protocol.LatencyInfo(Target="zzz", Ms="1")])
    with pytest.raises(LatencyMeasureError) as caught:
        measure_matrix([("a", "http://a"), ("b", "http://b")], call)
    assert [(a, b) for a, b, _ in caught.value.failures] == [("a", "b"), ("b", "a")]
    with pytest.raises(LatencyMeasureError, match="lists no server"):
        measure_matrix([], call)
