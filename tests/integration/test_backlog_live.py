"""A backlog built while the sink's host is down, larger than the delivery queue, drains
fully and exactly once from a real ``edn serve source`` (gunicorn, one gevent worker) to the
fast sink started afterwards on the same port: every accepted notification arrives once,
with the MessageID its outbox row was given at acceptance; one POST per round trip, and
pipelined (opt-in)."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from benchmarks.performance.backlog import _Source
from wsframework.ports import free_port
from edn.sink import FastSink
from wsframework import ns

SUBSCRIPTIONS = 20
EVENTS = 100  # 2,000 notifications against a queue of 300: most wait in the outbox


def stored_message_ids(data_dir: str) -> set[str]:
    with sqlite3.connect(Path(data_dir) / "edn.db") as db:
        return {r[0] for r in db.execute("SELECT message_id FROM eventing_outbox")}


@pytest.mark.parametrize("pipeline", ["1", "8"])  # one POST per round trip; pipelined
def test_a_backlog_past_the_queue_drains_fully_and_exactly_once(pipeline):
    port = free_port()
    source = _Source(f"http://127.0.0.1:{port}", SUBSCRIPTIONS,
                     {"delivery_queue_size": "300", "sweep_interval": "0.2",
                      "delivery_pipeline": pipeline})
    sink = None
    try:
        source.publish(EVENTS)  # nothing listens on the sink's port yet
        expected = SUBSCRIPTIONS * EVENTS
        stored = stored_message_ids(source.data_dir)
        assert len(stored) == expected  # accepted: durable rows, before any delivery
        assert source.counters()["spilled"] >= expected - 300 - SUBSCRIPTIONS  # on disk
        sink = FastSink(port=port, record=True).start()
        assert sink.wait_count(expected, timeout=120), sink.count
        deadline = time.monotonic() + 30  # then nothing more is in flight or waiting
        while source.counters().get("queue_depth", 0) or stored_message_ids(source.data_dir):
            assert time.monotonic() < deadline, source.counters()
            time.sleep(0.1)  # polling another process's store: no condition to wait on
        received = [m.envelope.header(ns.qname(ns.WSA10, "MessageID")).text
                    for m in sink.messages]
        assert len(received) == expected, len(received)
        assert set(received) == stored  # each notification once, with its MessageID
    finally:
        source.stop()
        if sink is not None:
            sink.stop()
