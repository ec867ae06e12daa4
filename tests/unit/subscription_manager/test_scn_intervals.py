"""The S-CN interval set (seed section 5.3.3) and its durable store: Figure 24's vector, the
strict semantics of 5.2 against a per-subscription oracle, the relaxed semantics of 5.4."""
from __future__ import annotations

import json
import math
import sqlite3

import pytest
from hypothesis import given, settings, strategies as st
from lxml import etree

from matchers import FilterSpec, RTreeMatchingEngine, RTreeRouteSet, Schema
from matchers.ranges import RANGES_DIALECT
from subscription_manager.stateful.interval_publisher import (IntervalPublisher, message_event,
                                                            read_message_event,
                                                            subscription_filter, topic_schema)
from subscription_manager.stateful.interval_store import (IntervalStore, StoredMessage,
                                                        StoreMismatch)
from wsframework.transport import TransportError
from subscription_manager.stateful.intervals import (Interval, IntervalMessage, IntervalSet,
                                                   InvalidIntervalState)

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True)


def messages_for(values, limit, tolerance=None):
    """Per value, the messages the interval set sends."""
    intervals = IntervalSet(limit, tolerance)
    return [intervals.update(v) for v in values]


def received(per_value, values, bound):
    """The values a subscription with ``bound`` takes from the messages (at most one message
    of a value may reach it)."""
    out = []
    for value, messages in zip(values, per_value):
        reaching = [m for m in messages if m.reaches(bound)]
        assert len(reaching) <= 1, f"{bound} reached twice by {messages}"
        out.extend(m.update for m in reaching)
    return out


def strict(values, bound):
    """Section 5.2 directly: the first value, then each value at least ``bound`` from the last
    one notified."""
    last, out = values[0], [values[0]]
    for v in values[1:]:
        if abs(v - last) >= bound:
            out.append(v)
            last = v
    return out


# -- Figure 24 and the worked cases ----------------------------------------------------------

def test_figure_24_vector():
    intervals = IntervalSet(10)
    assert intervals.update(100) == [IntervalMessage(0, 10, 100)]
    assert intervals.update(105) == [IntervalMessage(0, 5, 105)]
    assert set(intervals.intervals) == {Interval(100, 5, 10), Interval(105, 0, 5)}
    assert intervals.update(108) == [IntervalMessage(0, 3, 108), IntervalMessage(5, 8, 108)]
    assert set(intervals.intervals) == {Interval(100, 8, 10), Interval(105, 3, 5),
                                        Interval(108, 0, 3), Interval(108, 5, 8)}


def test_an_ignorable_update_sends_nothing_and_changes_nothing():
    intervals = IntervalSet(10)
    intervals.update(100)
    intervals.update(105)
    before = intervals.intervals
    assert intervals.update(105) == []
    assert intervals.intervals == before


def test_wholly_affected_neighbours_merge_into_one_interval_and_one_message():
    intervals = IntervalSet(10)
    for v in (100, 105, 108):
        intervals.update(v)
    # 120 is at least B_high from every LNV: all four intervals are wholly affected
    assert intervals.update(120) == [IntervalMessage(0, 10, 120)]
    assert intervals.intervals == (Interval(120, 0, 10),)


def test_an_update_twice_the_limit_away_collapses_everything():
    intervals = IntervalSet(10)
    for v in (100, 103, 97, 104, 99.5, 101):
        intervals.update(v)
    assert len(intervals.intervals) > 1
    assert intervals.update(101 - 20) == [IntervalMessage(0, 10, 81)]
    assert intervals.intervals == (Interval(81, 0, 10),)


def test_the_seeds_large_update_rule_would_break_strict_semantics():
    """|v' - v| >= δ_limit does not affect every interval: after 100 -> 95 the bounds in
    (5, 10] still hold L = 100, and 105 is only 5 from it (δ = 7 must not hear of it)."""
    values = [100, 95, 105]
    per_value = messages_for(values, 10)
    assert per_value[2] == [IntervalMessage(0, 5, 105)]
    assert received(per_value, values, 7) == strict(values, 7) == [100]
    assert IntervalSet(10).last_notified(7) is None
    intervals = IntervalSet(10)
    for v in values:
        intervals.update(v)
    assert intervals.last_notified(7) == 100 and intervals.last_notified(3) == 105


def test_a_bound_equal_to_the_change_is_notified():
    """|v - L| >= δ (not >): the message's HIGH is the distance itself, and HIGH >= δ."""
    values = [100, 105]
    assert received(messages_for(values, 10), values, 5) == [100, 105]
    assert received(messages_for(values, 10), values, 5.000001) == [100]


# -- strict semantics against the oracle -------------------------------------------------------

# dyadic values (multiples of 1/4): every difference is exact, so the oracle and the interval
# set compare the same numbers
quarters = st.integers(-40, 40).map(lambda k: k / 4)
limits = st.integers(1, 48).map(lambda k: k / 4)


@PROPERTY
@given(values=st.lists(quarters, min_size=1, max_size=40), limit=limits,
       bound_steps=st.lists(st.integers(1, 48), min_size=1, max_size=12))
def test_every_bound_receives_exactly_the_strict_notifications(values, limit, bound_steps):
    per_value = messages_for(values, limit)
    for step in bound_steps:
        bound = min(step / 4, limit)
        assert received(per_value, values, bound) == strict(values, bound)


@PROPERTY
@given(values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=30),
       limit=st.floats(0.01, 100), bounds=st.lists(st.floats(1e-6, 1.0),
                                                   min_size=1, max_size=8))
def test_strict_semantics_hold_for_arbitrary_floats(values, limit, bounds):
    per_value = messages_for(values, limit)
    for share in bounds:
        bound = share * limit
        assert received(per_value, values, bound) == strict(values, bound)


@PROPERTY
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1,
                       max_size=20),
       limit=st.floats(1e-3, 1e6), share=st.sampled_from([None, 0.01, 0.3, 1.0]),
       bounds=st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=6))
def test_any_finite_floats_keep_must_and_may(values, limit, share, bounds):
    """The whole float range (changes that overflow to inf included): strict semantics
    without a tolerance, must and may with one."""
    tolerance = None if share is None else limit * share
    per_value = messages_for(values, limit, tolerance)
    for fraction in bounds:
        bound = fraction * limit
        if tolerance is None:
            assert received(per_value, values, bound) == strict(values, bound)
        else:
            check_relaxed(values, per_value, bound, tolerance)


@PROPERTY
@given(values=st.lists(quarters, min_size=2, max_size=40), limit=limits)
def test_the_intervals_partition_the_bounds_and_hold_the_last_update(values, limit):
    intervals = IntervalSet(limit)
    for v in values:
        intervals.update(v)
        edges = [(i.low, i.high) for i in intervals.intervals]
        assert edges[0][0] == 0 and edges[-1][1] == limit
        assert all(a[1] == b[0] for a, b in zip(edges, edges[1:]))
        # an interval not affected since its LNV has seen every later value within B_low
        assert all(abs(v - i.lnv) <= i.low for i in intervals.intervals)
        IntervalSet.restore(limit, None, intervals.last, intervals.intervals)  # invariants hold


# -- tolerance (section 5.4) ---------------------------------------------------------------

def check_relaxed(values, per_value, bound, tolerance):
    """Every "must" received, nothing outside "may", L following what was received."""
    last = None
    for value, messages in zip(values, per_value):
        got = any(m.reaches(bound) for m in messages)
        if last is None:
            assert got, "the first value reaches every bound"
        else:
            if abs(value - last) >= bound:
                assert got, f"must: {value} from {last} with bound {bound}"
            if got:
                assert abs(value - last) >= bound - tolerance, \
                    f"may: {value} from {last} with bound {bound}, tolerance {tolerance}"
        if got:
            last = value


@PROPERTY
@given(values=st.lists(quarters, min_size=1, max_size=40), limit_steps=st.integers(1, 48),
       tolerance_steps=st.integers(1, 48),
       bound_steps=st.lists(st.integers(1, 48), min_size=1, max_size=12))
def test_with_tolerance_every_must_is_received_and_nothing_beyond_may(
        values, limit_steps, tolerance_steps, bound_steps):
    limit, tolerance = limit_steps / 4, min(tolerance_steps, limit_steps) / 4
    intervals = IntervalSet(limit, tolerance)
    per_value = []
    for v in values:
        per_value.append(intervals.update(v))
        assert len(intervals.intervals) <= math.ceil(limit / tolerance)
        for interval in intervals.intervals:  # edges only on the grid (or at the limit)
            assert interval.high == limit or (interval.high / tolerance).is_integer()
    for step in bound_steps:
        check_relaxed(values, per_value, min(step / 4, limit), tolerance)


def test_tolerance_breaks_at_the_next_multiple_above_the_change():
    intervals = IntervalSet(10, tolerance=2)
    intervals.update(100)
    assert intervals.update(103) == [IntervalMessage(0, 4, 103)]   # 3 -> the edge 4
    assert intervals.intervals == (Interval(103, 0, 4), Interval(100, 4, 10))
    assert intervals.update(101) == [IntervalMessage(0, 2, 101)]   # exactly 2: edge 2
    assert IntervalSet(10, tolerance=3).max_intervals() == 4


def test_tolerance_bounds_the_intervals_where_strict_grows():
    walk = [100 + (k % 7) * 0.37 - (k % 5) * 0.29 + (k % 11) * 0.13 for k in range(300)]
    strict_set, relaxed = IntervalSet(5), IntervalSet(5, tolerance=1)
    for v in walk:
        strict_set.update(v)
        relaxed.update(v)
    assert len(relaxed.intervals) <= 5 < len(strict_set.intervals)


# -- refusals ----------------------------------------------------------------------------

@pytest.mark.parametrize("limit, tolerance", [(0, None), (-1, None), (math.inf, None),
                                              (math.nan, None), ("ten", None), (10, 11),
                                              (10, -1), (10, math.inf), (10, 5e-324),
                                              (10, 1e-300), (1e6, 0.5)])
def test_bad_parameters_are_refused(limit, tolerance):
    with pytest.raises(InvalidIntervalState):
        IntervalSet(limit, tolerance)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "x", None])
def test_a_value_that_is_no_finite_number_is_refused_and_changes_nothing(value):
    intervals = IntervalSet(10)
    intervals.update(100)
    with pytest.raises(InvalidIntervalState):
        intervals.update(value)
    assert intervals.last == 100 and intervals.intervals == (Interval(100, 0, 10),)


@pytest.mark.parametrize("stored", [
    [Interval(100, 0, 4)],                                   # does not reach the limit
    [Interval(100, 0, 4), Interval(101, 5, 10)],             # a gap
    [Interval(100, 0, 6), Interval(101, 5, 10)],             # an overlap
    [Interval(100, 0, 4), Interval(100, 4, 10)],             # unmerged neighbours
    [Interval(100, 1, 10)],                                  # does not start at 0
])
def test_a_corrupt_stored_set_is_refused(stored):
    with pytest.raises(InvalidIntervalState):
        IntervalSet.restore(10, None, 100, stored)


def test_a_stored_edge_off_the_tolerance_grid_is_refused():
    with pytest.raises(InvalidIntervalState):
        IntervalSet.restore(10, 2, 100, [Interval(100, 0, 3), Interval(99, 3, 10)])


@pytest.mark.parametrize("tolerance", [None, 1])
def test_a_change_beyond_the_largest_float_reaches_every_bound(tolerance):
    intervals = IntervalSet(10, tolerance)
    intervals.update(-1e308)
    assert intervals.update(1e308) == [IntervalMessage(0, 10, 1e308)]  # |v' - LNV| is inf
    assert intervals.intervals == (Interval(1e308, 0, 10),)


def test_bad_messages_and_intervals_are_refused():
    with pytest.raises(InvalidIntervalState):
        IntervalMessage(5, 5, 100)
    with pytest.raises(InvalidIntervalState):
        Interval(100, -1, 3)


# -- the durable store -----------------------------------------------------------------------

def test_a_reopened_store_continues_the_same_intervals(tmp_path):
    path = tmp_path / "scn.db"
    store = IntervalStore(path, limit=10)
    assert [s.message for s in store.apply(100)] == [IntervalMessage(0, 10, 100)]
    store.apply(105)
    store.close()
    reopened = IntervalStore.open_existing(path)
    assert [(s.seq, s.part, s.message) for s in reopened.apply(108)] == [
        (3, 0, IntervalMessage(0, 3, 108)), (3, 1, IntervalMessage(5, 8, 108))]
    memory = IntervalSet(10)
    for v in (100, 105, 108):
        memory.update(v)
    assert reopened.interval_set().intervals == memory.intervals


def test_the_outbox_keeps_messages_until_sent_in_order(tmp_path):
    store = IntervalStore(tmp_path / "scn.db", limit=10)
    for v in (100, 105, 108):
        store.apply(v)
    pending = store.pending()
    assert [(s.seq, s.part) for s in pending] == [(1, 0), (2, 0), (3, 0), (3, 1)]
    store.sent(pending[:1])
    store.close()
    again = IntervalStore(tmp_path / "scn.db", limit=10)
    assert again.pending() == pending[1:]
    assert again.apply(108) == [] and again.seq() == 3   # ignorable: no seq, no row


def test_a_value_that_fails_leaves_the_store_unchanged(tmp_path):
    store = IntervalStore(tmp_path / "scn.db", limit=10)
    store.apply(100)
    with pytest.raises(InvalidIntervalState):
        store.apply(math.nan)
    assert store.seq() == 1 and len(store.pending()) == 1
    assert store.interval_set().intervals == (Interval(100, 0, 10),)


def test_a_store_opened_with_other_parameters_is_refused(tmp_path):
    IntervalStore(tmp_path / "scn.db", limit=10, tolerance=1).close()
    with pytest.raises(StoreMismatch):
        IntervalStore(tmp_path / "scn.db", limit=10)
    with pytest.raises(StoreMismatch):
        IntervalStore(tmp_path / "scn.db", limit=12, tolerance=1)
    assert IntervalStore.open_existing(tmp_path / "scn.db").tolerance == 1


@pytest.mark.sqlite_only("the store file is edited with sqlite3")
def test_a_store_edited_into_nonsense_is_refused(tmp_path):
    store = IntervalStore(tmp_path / "scn.db", limit=10)
    store.apply(100)
    store.apply(105)
    with sqlite3.connect(tmp_path / "scn.db") as conn:
        conn.execute("UPDATE scn_intervals SET high = 4 WHERE low = 0")
    with pytest.raises(InvalidIntervalState):
        store.apply(108)


# -- the messages as events of a topic, matched by the range dialect ---------------------------

def test_an_event_carries_the_message_exactly():
    stored = StoredMessage(3, 1, IntervalMessage(0.1 + 0.2, 8.0, 108.07))
    assert read_message_event(message_event(stored)) == stored


@pytest.mark.parametrize("attributes", [
    {"seq": "x", "part": "0", "low": "0", "high": "1", "update": "1"},
    {"seq": "1", "part": "0", "low": "0", "high": "nan", "update": "1"},
    {"seq": "0", "part": "0", "low": "0", "high": "1", "update": "1"},
    {"seq": "1", "part": "0", "low": "2", "high": "1", "update": "1"},
    {"seq": "1", "part": "0", "high": "1", "update": "1"},
])
def test_a_malformed_message_event_is_refused(attributes):
    event = message_event(StoredMessage(1, 0, IntervalMessage(0, 1, 1)))
    event.attrib.clear()
    event.attrib.update(attributes)
    with pytest.raises(InvalidIntervalState):
        read_message_event(event)


@pytest.mark.parametrize("bound", [0, -1, 10.5, math.nan, math.inf])
def test_a_bound_outside_the_stream_is_refused(bound):
    with pytest.raises(InvalidIntervalState):
        subscription_filter(bound, 10)


def test_the_range_engine_and_a_route_set_deliver_exactly_the_strict_notifications():
    """The subscriptions as range filters in the server's engine, the events through the
    engine and through a dispatcher's route set built from its summary: each bound gets what
    section 5.2 says (bounds on message edges included: the open and closed ends)."""
    limit = 10.0
    values = [100, 105, 108, 103, 103, 99.5, 100.25, 112, 111, 95, 96.5, 104]
    bounds = [0.25, 1, 2.5, 3, 3.5, 5, 7, 8, 9.75, 10]
    schema = Schema.from_element(topic_schema(limit, 0, 1000))
    engine = RTreeMatchingEngine(schema)
    for bound in bounds:
        engine.add_filter(f"b{bound}", FilterSpec(RANGES_DIALECT, subscription_filter(bound, limit)))
    routes = RTreeRouteSet(schema)
    routes.set_summary("server", engine.summary(1.0))
    intervals = IntervalSet(limit)
    got = {bound: [] for bound in bounds}
    for seq, value in enumerate(values, 1):
        for part, message in enumerate(intervals.update(value)):
            event = message_event(StoredMessage(seq, part, message))
            assert routes.match(event) == (["server"] if engine.match(event) else [])
            for filter_id in engine.match(event):
                got[float(filter_id[1:])].append(value)
    for bound in bounds:
        assert got[bound] == strict(values, bound), bound


class RecordingPublisher:
    """Stands in for :class:`wsframework.publisher.Publisher`; fails while ``down``."""

    def __init__(self):
        self.events, self.down = [], False

    def publish(self, topic, event):
        self.send_batch(topic, [event])

    def send_batch(self, topic, events):
        if self.down:
            raise TransportError("connection refused", unsent=True)
        self.events.extend(read_message_event(e) for e in events)


def test_the_publisher_sends_in_order_and_keeps_what_the_network_did_not_take(tmp_path):
    store = IntervalStore(tmp_path / "scn.db", limit=10)
    network = RecordingPublisher()
    publisher = IntervalPublisher(store, network, "quotes", batch_max=2)
    publisher.publish(100)
    network.down = True
    with pytest.raises(TransportError):
        publisher.publish(105)
    assert [s.seq for s in store.pending()] == [2]       # applied, waiting to be sent
    network.down = False
    # a restarted publisher sends the outbox first, then the new value's messages
    again = IntervalPublisher(IntervalStore.open_existing(tmp_path / "scn.db"), network, "quotes")
    again.publish(108)
    assert [(s.seq, s.part, s.message) for s in network.events] == [
        (1, 0, IntervalMessage(0, 10, 100)), (2, 0, IntervalMessage(0, 5, 105)),
        (3, 0, IntervalMessage(0, 3, 108)), (3, 1, IntervalMessage(5, 8, 108))]
    assert store.pending() == [] and again.flush() == 0


# -- the figures' own checks (benchmarks.richer_intervals at a small size) -------------------

def test_the_interval_figures_check_themselves_against_direct_simulation():
    from benchmarks.reproductions.richer_subscriptions.intervals import _figures
    figures = _figures(300, (2.0,), (None, 0.25), (1000, 5000))
    assert figures["checked_against_direct"] and figures["tolerance_semantics_hold"]
    strict_set, relaxed = figures["interval_sets"]
    assert relaxed["intervals_max"] <= relaxed["intervals_bound"] == 4
    for row in figures["unicast"]:
        if row["tolerance"] is None:  # strict: the messages reach exactly the unicast set
            assert row["scn_deliveries_per_update"] == row["unicast_per_update"] > 0
        else:
            assert row["extra_deliveries_share"] >= 0
    assert strict_set["messages_per_update"] < figures["unicast"][0]["unicast_per_update"]


# -- edn intervals (the parts that need no network) ------------------------------------------

def test_edn_intervals_schema_and_show(tmp_path, capsys):
    from edn.cli import main
    assert main(["intervals", "schema", "--limit", "10", "--min", "0", "--max", "500"]) == 0
    schema = Schema.from_element(etree.fromstring(capsys.readouterr().out.encode()))
    assert list(schema.dims) == ["low", "high", "update"]
    store = IntervalStore(tmp_path / "intervals.db", limit=10)
    for v in (100, 105, 108):
        store.apply(v)
    store.close()
    assert main(["intervals", "show", "--data", str(tmp_path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["last"], shown["seq"], shown["unsent"]) == (108, 3, 4)
    assert [(i["low"], i["high"], i["lnv"]) for i in shown["intervals"]] == [
        (0, 3, 108), (3, 5, 105), (5, 8, 108), (8, 10, 100)]


@pytest.mark.parametrize("argv", [["schema", "--limit", "-1"],
                                  ["schema", "--limit", "5", "--min", "3", "--max", "2"],
                                  ["show", "--data", "{missing}"]])
def test_edn_intervals_refuses_bad_arguments(tmp_path, capsys, argv):
    from edn.cli import main
    argv = [a.format(missing=tmp_path / "none") for a in argv]
    assert main(["intervals", *argv]) == 4
    assert "edn intervals:" in capsys.readouterr().err
