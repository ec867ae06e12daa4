"""The lab's pure parts: link settings refused when out of bounds, the tc arguments and
iptables rules derived from the lab's state, and the delay line's protocol and control
lines. No namespace, no socket."""
from __future__ import annotations

import io
import random
import socket
import struct

import pytest

from benchmarks.lab import Lab, Link
from benchmarks.lab import delayer
from benchmarks.lab.links import Cuts, delay_rules, filter_rules, netem_args, queue_number, tbf_args

PORTS = {"a": "p1", "b": "p2", "c": "p3"}
INDEXES = {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize("settings,message", [
    ({"delay_ms": -1}, "delay_ms"),
    ({"delay_ms": 1e9}, "delay_ms"),
    ({"delay_ms": float("nan")}, "finite"),
    ({"delay_ms": True}, "finite"),
    ({"delay_ms": "20"}, "finite"),
    ({"delay_ms": 10, "jitter_ms": 11}, "jitter_ms"),
    ({"loss": 1.5}, "probability"),
    ({"loss": -0.1}, "probability"),
    ({"reorder": 0.2}, "needs a delay"),
    ({"rate_mbit": 0}, "rate_mbit"),
    ({"rate_mbit": float("inf")}, "rate_mbit"),
])
def test_link_refuses_settings_out_of_bounds(settings, message):
    with pytest.raises(ValueError, match=message):
        Link(**settings)


def test_changed_validates_and_names_unknown_settings():
    link = Link(delay_ms=20, jitter_ms=5)
    assert link.changed(loss=0.05) == Link(delay_ms=20, jitter_ms=5, loss=0.05)
    with pytest.raises(TypeError, match="latency"):
        link.changed(latency=3)
    with pytest.raises(ValueError, match="jitter_ms"):
        link.changed(delay_ms=1)


def test_netem_arguments_carry_every_setting():
    args = netem_args(Link(delay_ms=20, jitter_ms=5, loss=0.05, reorder=0.1, rate_mbit=10))
    assert args == ["netem", "limit", "100000", "delay", "20ms", "5ms", "loss", "5%",
                    "reorder", "10%", "rate", "10000kbit"]
    assert netem_args(Link(loss=0.3)) == ["netem", "limit", "100000", "loss", "30%"]


def test_tbf_burst_is_ten_milliseconds_of_rate_but_at_least_three_frames():
    assert tbf_args(100)[4] == str(125_000)
    assert int(tbf_args(0.01)[4]) == 3 * 1514


def test_cuts_drop_by_port_and_direction():
    cuts = Cuts(pairs=frozenset({("a", "b")}), isolated=frozenset({"c"}))
    got = filter_rules(PORTS, cuts, {}, loss=True, hashlimit=False)
    assert ["-m", "physdev", "--physdev-in", "p1", "--physdev-out", "p2", "-j", "DROP"] in got
    assert ["-m", "physdev", "--physdev-in", "p2", "--physdev-out", "p1", "-j", "DROP"] not in got
    assert ["-m", "physdev", "--physdev-in", "p3", "-j", "DROP"] in got
    assert ["-m", "physdev", "--physdev-out", "p3", "-j", "DROP"] in got


def test_loss_rules_only_when_iptables_does_the_loss():
    links = {("a", "up"): Link(loss=0.25), ("a", "down"): Link(), ("b", "down"): Link(rate_mbit=8)}
    with_loss = filter_rules(PORTS, Cuts(), links, loss=True, hashlimit=True)
    assert with_loss == [
        ["-m", "physdev", "--physdev-in", "p1", "-m", "statistic", "--mode", "random",
         "--probability", "0.250000", "-j", "DROP"],
        ["-m", "physdev", "--physdev-out", "p2", "-m", "hashlimit", "--hashlimit-above", "1000kb/s",
         "--hashlimit-burst", "16kb", "--hashlimit-name", "p2down", "-j", "DROP"]]
    assert filter_rules(PORTS, Cuts(), links, loss=False, hashlimit=False) == []


def test_only_delaying_directions_go_to_their_queue():
    links = {("a", "up"): Link(delay_ms=20), ("a", "down"): Link(loss=0.1),
             ("b", "down"): Link(delay_ms=5, reorder=0.5)}
    chains = delay_rules(PORTS, INDEXES, links)
    assert chains["LAB_DELAY_UP"] == [["-m", "physdev", "--physdev-in", "p1", "-j", "NFQUEUE",
                                       "--queue-num", str(queue_number(1, "up")), "--queue-bypass"]]
    assert [r[3] for r in chains["LAB_DELAY_DOWN"]] == ["p2"]
    assert len({queue_number(i, d) for i in (1, 2, 3) for d in ("up", "down")}) == 6


@pytest.mark.parametrize("hosts,subnet,mechanism,message", [
    (2, "8.8.8.0/24", "auto", "private IPv4"),
    (2, "fd00::/64", "auto", "private IPv4"),
    (300, "10.77.0.0/16", "auto", "hosts"),
    (3, "10.77.0.0/30", "auto", "hosts"),
    (["a", "a"], "10.77.0.0/24", "auto", "distinct"),
    (["a b"], "10.77.0.0/24", "auto", "distinct"),
    (2, "10.77.0.0/24", "tc", "mechanism"),
])
def test_lab_refuses_a_bad_plan_before_touching_the_machine(hosts, subnet, mechanism, message):
    with pytest.raises(ValueError, match=message):
        Lab(hosts, subnet=subnet, mechanism=mechanism)


def test_lab_addresses_hosts_in_order_from_its_subnet():
    lab = Lab(["dispatcher", "server"], subnet="10.99.1.0/24")
    assert [h.address for h in lab.hosts.values()] == ["10.99.1.1", "10.99.1.2"]
    assert lab.host("server").port == "p2"
    with pytest.raises(KeyError, match="dispatcher, server"):
        lab.host("nobody")


# -- the delay line ------------------------------------------------------------------------------
def test_delay_hold_stays_within_jitter_and_reorder_skips_the_delay():
    rng = random.Random(1)
    link = delayer.LinkDelay(20, 5)
    holds = [link.hold(rng) for _ in range(2000)]
    assert 0.015 <= min(holds) and max(holds) <= 0.025
    assert abs(sum(holds) / len(holds) - 0.020) < 0.0005
    eager = delayer.LinkDelay(20, 0, reorder=0.3)
    share = sum(eager.hold(rng) == 0.0 for _ in range(2000)) / 2000
    assert 0.25 < share < 0.35


def packet_message(queue: int, packet_id: int) -> bytes:
    attribute = struct.pack("=HH", 4 + 7, delayer.NFQA_PACKET_HDR) + struct.pack("!IHB", packet_id, 0x0800, 0) + b"\0"
    body = struct.pack("=BBH", socket.AF_INET, 0, socket.htons(queue)) + attribute
    return struct.pack("=IHHII", 16 + len(body), (3 << 8) | 0, 0, 0, 0) + body


def test_packets_parsed_from_one_read_with_their_queue():
    data = packet_message(4, 17) + packet_message(7, 18)
    assert list(delayer.parse_packets(data)) == [(4, 17), (7, 18)]


def test_an_error_answer_raises():
    error = struct.pack("=IHHII", 36, delayer.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1) + b"\0" * 16
    with pytest.raises(OSError):
        list(delayer.parse_packets(error))


def test_verdict_accepts_the_packet_on_its_queue():
    message = delayer.verdict_message(5, 99)
    length, kind = struct.unpack_from("=IH", message)
    assert length == len(message) and kind == (3 << 8) | delayer.NFQNL_MSG_VERDICT
    assert struct.unpack_from("!II", message, 16 + 4 + 4) == (delayer.NF_ACCEPT, 99)
    assert socket.ntohs(struct.unpack_from("=BBH", message, 16)[2]) == 5


@pytest.mark.parametrize("line", [b"not json", b"[1]", b'{"queue": 9, "delay_ms": 1}',
                                  b'{"queue": 4, "delay_ms": -5}', b'{"queue": 4, "loss": 1, "jitter_ms": 3}',
                                  b'{"delay_ms": 3}'])
def test_a_bad_control_line_is_answered_and_changes_nothing(line):
    links = {4: delayer.LinkDelay(20)}
    out = io.StringIO()
    delayer._apply(line, links, out, {})
    assert out.getvalue().startswith("error ")
    assert links[4].delay == 0.020


def test_a_control_line_changes_its_queue():
    links = {4: delayer.LinkDelay()}
    out = io.StringIO()
    delayer._apply(b'{"queue": 4, "delay_ms": 50, "jitter_ms": 10, "reorder": 0.1}', links, out, {})
    assert out.getvalue() == "ok 4\n"
    assert (links[4].delay, links[4].jitter, links[4].reorder) == (0.05, 0.01, 0.1)


@pytest.mark.parametrize("change,error", [
    (lambda lab: lab.damage("h1", direction="sideways", loss=0.1), ValueError),
    (lambda lab: lab.damage("h1", loss=2), ValueError),
    (lambda lab: lab.damage("h1", latency=5), TypeError),
    (lambda lab: lab.damage("h9", loss=0.1), KeyError),
    (lambda lab: lab.cut("h1", "h1"), ValueError),
])
def test_a_bad_change_is_refused_before_the_lab_is_touched(change, error):
    lab = Lab(2)  # never started: a refusal must come before any command runs
    with pytest.raises(error):
        change(lab)
    assert lab.links[("h1", "up")] == Link() and not lab.cuts.pairs
