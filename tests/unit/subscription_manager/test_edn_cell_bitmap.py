"""A topic bound to the cell-bitmap engine (urn:wsframework:matchers:cell-bitmap) on an
in-process EDN network: servers match with it and report its summaries, and events reach
exactly the subscribers whose ranges hold them, as with the R-tree engine."""
from __future__ import annotations

import numpy as np
import pytest

from matchers.cell_bitmap import CellBitmapEngine
from tests.support.edn import (
    TOPIC,
    Network,
    random_boxes,
    random_points,
    schema_element,
)
from matchers.vocabulary import MATCHER_CELL_BITMAP


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, ("rtree", "rtree"))
    network.admin.create_topic(TOPIC, MATCHER_CELL_BITMAP, schema_element(network.d))
    yield network
    network.close()


def test_a_cell_bitmap_topic_delivers_exactly_what_the_ranges_hold(net):
    lo, hi = random_boxes(12, net.d, seed=4, width=9.0)
    for i in range(len(lo)):
        net.subscribe(i % 2, lo[i].tolist(), hi[i].tolist(), i)
    net.step(3)
    for manager in net.managers:
        engine = manager.matcher_for(manager.topics.get(TOPIC))
        assert isinstance(engine, CellBitmapEngine)  # the topic's own engine, summaries too
    held = sum(len(m.matcher_for(m.topics.get(TOPIC))) for m in net.managers)
    assert held == len(lo)
    points = random_points(40, net.d, seed=5)
    net.publish(points.tolist())
    net.drain()
    wanted = sorted((f"/n/{i}", str(k)) for k, point in enumerate(points) for i in range(len(lo))
                    if np.all(lo[i] <= point) and np.all(point <= hi[i]))
    assert wanted, "the workload must match something"
    assert net.received() == wanted


def test_its_summary_covers_its_subscriptions(net):
    lo, hi = random_boxes(6, net.d, seed=7)
    for i in range(len(lo)):
        net.subscribe(0, lo[i].tolist(), hi[i].tolist(), i)
    manager = net.manager(0)
    engine = manager.matcher_for(manager.topics.get(TOPIC))
    _, mins, maxs = engine._live_boxes()
    boxes = list(zip(mins, maxs))
    summary = engine.summary(0.5)
    assert 0 < len(summary.mins) < len(boxes)
    for a, b in boxes:
        assert any(np.all(s_lo <= a) and np.all(b <= s_hi)
                   for s_lo, s_hi in zip(summary.mins, summary.maxs))
