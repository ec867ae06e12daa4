"""Hypercube events (eCube): events as boxes, subscriptions as boxes or points, matched by
intersection, in the R-tree engine and the brute-force oracle alike."""

import numpy as np
import pytest
from lxml import etree

from matchers import BruteForceMatcher, FilterSpec, RTreeMatchingEngine, RTreeRouteSet, Schema
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute

SCHEMA = Schema((Attribute("time", "number", "/r/time", (), 0, 24),
                 Attribute("place", "number", "/r/place", (), 0, 100)))


def reading(time, place):
    def field(name, value):
        if isinstance(value, tuple):
            return f'<{name} min="{value[0]}" max="{value[1]}"/>'
        return f"<{name}>{value}</{name}>"
    return etree.fromstring(f"<r>{field('time', time)}{field('place', place)}</r>")


@pytest.fixture(params=[RTreeMatchingEngine, BruteForceMatcher])
def engine(request):
    matcher = request.param(SCHEMA)
    matcher.add_filter("morning-north", FilterSpec(RANGES_DIALECT, "time in [6, 12) and place < 50"))
    matcher.add_filter("noon", FilterSpec(RANGES_DIALECT, "time = 12"))  # a point subscription
    matcher.add_filter("anywhere-late", FilterSpec(RANGES_DIALECT, "time >= 20"))
    return matcher


def test_subscriptions_cover_point_events(engine):
    assert engine.match(reading(8, 10)) == ["morning-north"]
    assert engine.match(reading(12, 10)) == ["noon"]


def test_event_boxes_intersect_subscription_boxes(engine):
    assert engine.match(reading((11, 13), 10)) == ["morning-north", "noon"]
    assert engine.match(reading((11, 13), (60, 70))) == ["noon"]
    assert engine.match(reading((12.5, 19), 10)) == []
    assert engine.match(reading((12.5, 24), (0, 100))) == ["anywhere-late"]


def test_event_boxes_contain_point_subscriptions():
    # The symmetric case: subscribers are points (say, where they are), events are ranges.
    rng = np.random.default_rng(0)
    points = np.column_stack([rng.uniform(0, 24, 300), rng.uniform(0, 100, 300)])
    ids = [f"p{i}" for i in range(300)]
    engine, brute = RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA)
    engine.bulk_load(ids, points, points)
    brute.bulk_load(ids, points, points)
    event = reading((6, 9), (20, 60))
    expected = [ids[i] for i in np.flatnonzero((points[:, 0] >= 6) & (points[:, 0] <= 9)
                                               & (points[:, 1] >= 20) & (points[:, 1] <= 60))]
    assert expected and engine.match(event) == brute.match(event) == expected
    assert engine.match_box([6, 20], [9, 60]) == expected


def test_half_open_event_ranges():
    engine = RTreeMatchingEngine(SCHEMA)
    engine.add_filter("late", FilterSpec(RANGES_DIALECT, "time > 22"))
    event = etree.fromstring('<r><time min="21"/></r>')  # from 21 on, no end given
    assert engine.match(event) == ["late"]


def test_dispatcher_routes_event_boxes():
    engine = RTreeMatchingEngine(SCHEMA)
    engine.add_filter("noon", FilterSpec(RANGES_DIALECT, "time = 12"))
    routes = RTreeRouteSet(SCHEMA)
    routes.set_summary("server", engine.summary(1.0))
    assert routes.match(reading((11, 13), 5)) == ["server"]
    assert routes.match(reading((13, 14), 5)) == []
