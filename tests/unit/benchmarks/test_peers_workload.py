"""The peers bench's oracle and judge, and its STOMP frames (no sockets)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.performance.peers import mqtt
from benchmarks.performance.peers.activemq import selector
from benchmarks.performance.peers.grid import BUCKETS, cell, cells, topic, topic_filters
from benchmarks.performance.peers.stomp import StompConnection, _unescape, frame
from benchmarks.performance.peers.workload import Workload, judge


def delivered(work: Workload):
    pairs = [(int(s), k) for k, subs in enumerate(work.matches) for s in subs]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def test_the_oracle_is_the_brute_force():
    work = Workload.make(200, 50)
    for k, point in enumerate(work.points):
        inside = [i for i in range(work.n) if all(work.lo[i] <= point) and all(point <= work.hi[i])]
        assert list(work.matches[k]) == inside
    assert work.expected() == sum(len(x) for x in work.matches) > 0


def test_judge_finds_lost_extra_and_duplicated_deliveries():
    work = Workload.make(200, 50)
    subs, events = delivered(work)
    sent = np.zeros(work.m)
    exact = judge(work, subs, events, np.full(len(subs), 0.002), sent, seconds=1, cpu_seconds=0.5)
    assert exact.exact and exact.latency_p50_ms == 2.0
    # one lost, one delivered twice, one that no filter wanted
    wrong_sub = next(i for i in range(work.n) if i not in set(work.matches[0]))
    subs2 = np.concatenate([subs[1:], subs[-1:], [wrong_sub]])
    events2 = np.concatenate([events[1:], events[-1:], [0]])
    outcome = judge(work, subs2, events2, np.zeros(len(subs2)), sent, seconds=1, cpu_seconds=0.5)
    assert (outcome.lost, outcome.duplicates, outcome.extra) == (1, 1, 1)
    assert not outcome.exact


def test_a_selector_writes_every_bound_with_a_decimal_point():
    assert selector(np.array([1.0, 2.25]), np.array([3.0, 4.5])) == (
        "x0 >= 1.000 AND x0 <= 3.000 AND x1 >= 2.250 AND x1 <= 4.500")


class Chunks:
    """A socket that hands out the given chunks, one per ``recv``."""

    def __init__(self, chunks):
        self.chunks = list(chunks)

    def recv(self, _size):
        return self.chunks.pop(0) if self.chunks else b""


class Unconnected(StompConnection):
    def __init__(self, chunks):  # the reading side alone, over chunks given here
        self.sock = Chunks(chunks)
        self._buffer, self._at = b"", 0


def test_frames_round_trip_with_escapes_and_bodies():
    data = (frame("MESSAGE", {"subscription": "s1", "odd:key": "a\nb\\c"}, b"body\0with nul")
            .replace(b"\n\n", b"\ncontent-length:13\n\n", 1)
            + frame("RECEIPT", {"receipt-id": "7"}))
    reader = Unconnected([b"\n" + data[:20], data[20:]])
    assert reader._fill() and reader._take_frame() is None  # cut short: waits for the rest
    assert reader._fill()
    command, headers, body = reader._take_frame()
    assert command == "MESSAGE" and headers["subscription"] == "s1"
    assert headers["odd:key"] == "a\nb\\c" and body == b"body\0with nul"
    assert reader._take_frame() == ("RECEIPT", {"receipt-id": "7"}, b"")
    assert reader._take_frame() is None and not reader._fill()  # all read; then closed
    assert _unescape("x\\cy") == "x:y"


def test_a_box_is_bound_on_every_cell_that_holds_one_of_its_points():
    work = Workload.make(300, 400)
    for k, point in enumerate(work.points):
        home = tuple(cell(v) for v in point)
        for i in work.matches[k]:  # every match is routed: its event's cell is one of the box's
            assert home in set(cells(work.lo[i], work.hi[i]))
    assert cell(0.0) == 0 and cell(10.0) == BUCKETS - 1
    assert list(cells(np.array([0.0, 9.9]), np.array([0.1, 10.0]))) == [(0, BUCKETS - 1)]


def _covers(topic_filter: str, name: str) -> bool:
    return all(f in ("+", t) for f, t in zip(topic_filter.split("/"), name.split("/")))


def test_a_box_subscribes_to_exactly_one_filter_that_covers_each_of_its_points_topic():
    work = Workload.make(300, 400)
    for k, point in enumerate(work.points):
        name = topic(point)
        for i in work.matches[k]:  # once: a second covering filter would deliver it twice
            assert sum(_covers(f, name) for f in topic_filters(work.lo[i], work.hi[i])) == 1
    # a box over every bucket of an attribute asks for it with one wildcard, not three cells
    assert topic_filters(np.array([0.0, 0.0]), np.array([10.0, 1.0])) == ["g/+/0"]
    assert topic_filters(np.array([3.0, 0.0]), np.array([5.0, 1.0])) == ["g/0/0", "g/1/0"]


@pytest.mark.parametrize("n, encoded", [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"),
                                        (16_383, b"\xff\x7f"), (16_384, b"\x80\x80\x01"),
                                        (268_435_455, b"\xff\xff\xff\x7f")])
def test_mqtt_remaining_length_is_seven_bits_a_byte(n, encoded):
    assert mqtt._length(n) == encoded
    first = mqtt.packet(mqtt.PUBACK, 0, b"\x00" * min(n, 20_000))
    if n <= 20_000:
        assert mqtt.PacketReader().feed(first) == [(mqtt.PUBACK, 0, b"\x00" * n)]


def test_mqtt_packets_are_read_whole_however_the_stream_is_cut():
    stream = (mqtt.publish_packet("g/1/2", b"7 1.000 2.000", qos=1, packet_id=513)
              + mqtt.puback_packet(9) + mqtt.publish_packet("g/+", b"x" * 300))
    for cut in range(1, len(stream)):
        reader = mqtt.PacketReader()
        packets = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert [kind for kind, _, _ in packets] == [mqtt.PUBLISH, mqtt.PUBACK, mqtt.PUBLISH]
    (kind, flags, body), _, (_, flags2, body2) = packets
    assert mqtt.parse_publish(flags, body) == ("g/1/2", 513, b"7 1.000 2.000")
    assert mqtt.parse_publish(flags2, body2) == ("g/+", 0, b"x" * 300)


def test_mqtt_connect_and_subscribe_packets_follow_the_3_1_1_layout():
    connect = mqtt.connect_packet("s7")
    assert connect == b"\x10\x0e\x00\x04MQTT\x04\x02\x00\x00\x00\x02s7"
    subscribe = mqtt.subscribe_packet(1, ["g/+", "g/1"], 1)
    assert subscribe == b"\x82\x0e\x00\x01\x00\x03g/+\x01\x00\x03g/1\x01"


def test_an_mqtt_length_past_four_bytes_is_refused():
    with pytest.raises(mqtt.MqttError):
        mqtt.PacketReader().feed(b"\x30\xff\xff\xff\xff\x01")
