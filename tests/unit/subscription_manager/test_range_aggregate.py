"""Mar, Hull, EMar and the S-CN reformulation (subscription_manager.stateful.range_min_table):
Figure 1's vectors, our definitions where the seed is loose (ties, insert, delete, MAX), and
the property that every subscription's matching messages replay exactly its result changes."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subscription_manager.stateful.range_min_table import (
    INF, AggregateMessage, OrderedMinima, RangeMinTable, Update, matches, recompute)

# Figure 1 is a drawing; the seed's text gives no coordinates. This reconstruction satisfies
# every statement the text makes about it: Mar of t5's update is (20, 100), t4 -> 4 gives
# <4, 40, 40, 20, 100>, t5 -> 9 exposes t3 and t6 (three messages), t7 is ignorable because
# of t6, t2 protects s2 (and s1) from t4's update, s2's range contains s3's.
FIGURE_1 = {"t1": (100, 3), "t2": (20, 2), "t3": (30, 8), "t4": (40, 12), "t5": (50, 5),
            "t6": (70, 6), "t7": (70, 11)}
SUBSCRIPTIONS = {"s1": (10, 95), "s2": (20, 65), "s3": (25, 60), "s4": (35, 90), "s5": (60, 95)}


def figure_1(sign=1) -> RangeMinTable:
    table = RangeMinTable(sign)
    for key, (x, y) in FIGURE_1.items():
        table.update(key, x, sign * y)
    return table


def affected(messages, subscriptions=SUBSCRIPTIONS):
    return {name: [m.new for m in messages if matches(m, *bounds)]
            for name, bounds in subscriptions.items() if any(matches(m, *bounds) for m in messages)}


def test_good_update_of_t4():
    kind, messages = figure_1().update("t4", 40, 4)
    assert kind is Update.GOOD
    assert [m.as_tuple() for m in messages] == [(4, 40, 40, 20, 100)]
    assert affected(messages) == {"s3": [4], "s4": [4]}   # not s1, s2 (t2), nor s5


def test_bad_update_of_t5_exposes_t3_and_t6():
    kind, messages = figure_1().update("t5", 50, 9)
    assert kind is Update.BAD
    assert [m.as_tuple() for m in messages] == [
        (9, 50, 50, 30, 70), (8, 30, 50, 20, 70), (6, 50, 70, 20, 100)]
    assert affected(messages) == {"s3": [8], "s4": [6]}


def test_update_of_t7_is_ignorable_because_of_t6():
    assert figure_1().update("t7", 70, 13) == (Update.IGNORABLE, [])
    assert figure_1().update("t4", 40, 12) == (Update.IGNORABLE, [])  # no change at all


def test_max_is_min_on_negated_values():
    kind, messages = figure_1(sign=-1).update("t5", 50, -9)
    assert kind is Update.BAD
    assert [m.as_tuple() for m in messages] == [
        (-9, 50, 50, 30, 70), (-8, 30, 50, 20, 70), (-6, 50, 70, 20, 100)]
    table = RangeMinTable(sign=-1)
    table.update("a", 1, 5)
    table.update("b", 2, 9)
    assert table.result(0, 3) == 9 and table.result(0, 1) == 5


def test_insert_is_an_update_from_infinity():
    table = figure_1()
    kind, messages = table.update("t8", 60, 1)
    assert kind is Update.GOOD   # <1, 60, 60, Mar(60, 1)>: no tuple at or below 1
    assert [m.as_tuple() for m in messages] == [(1, 60, 60, -INF, INF)]
    # Into a gap with no tuple at all: subscriptions there go from None to the value.
    table = RangeMinTable()
    table.update("a", 10, 5)
    assert [m.as_tuple() for m in table.update("b", 20, 7)[1]] == [(7, 20, 20, 10, INF)]


def test_delete_is_an_update_to_infinity():
    table = RangeMinTable()
    table.update("a", 10, 5)
    table.update("b", 20, 7)
    kind, messages = table.update("b", 20, None)   # [x1, x2] with 10 < x1 <= 20 <= x2: empty
    assert kind is Update.GOOD and [m.as_tuple() for m in messages] == [(None, 20, 20, 10, INF)]
    kind, messages = table.update("a", 10, None)
    assert [m.as_tuple() for m in messages] == [(None, 10, 10, -INF, INF)]
    assert len(table) == 0 and table.result(-INF, INF) is None
    assert table.update("ghost", 3, None) == (Update.IGNORABLE, [])


def test_delete_exposing_the_column_below():
    table = RangeMinTable()
    for key, x, y in (("a", 10, 1), ("b", 10, 4), ("c", 20, 2)):
        table.update(key, x, y)
    kind, messages = table.update("a", 10, None)
    assert kind is Update.BAD   # the peak is b's 4; c at 20 is exposed to the right
    assert [m.as_tuple() for m in messages] == [(4, 10, 10, -INF, 20), (2, 10, 20, -INF, INF)]


def test_equal_values_leftmost_point_claims_the_range():
    # t rises from 1 to 9 and exposes two points of value 8, left and right of it: a range
    # holding both gets exactly one message (from the left one), a range holding one of them
    # gets that one's.
    table = RangeMinTable()
    for key, x, y in (("l", 0, 0), ("a", 30, 8), ("t", 50, 1), ("b", 70, 8), ("r", 100, 0)):
        table.update(key, x, y)
    kind, messages = table.update("t", 50, 9)
    assert kind is Update.BAD
    assert [m.as_tuple() for m in messages] == [
        (9, 50, 50, 30, 70), (8, 30, 50, 0, 100), (8, 50, 70, 30, 100)]
    subscriptions = {"both": (25, 75), "left": (25, 60), "right": (40, 75), "peak": (40, 60)}
    assert affected(messages, subscriptions) == {
        "both": [8], "left": [8], "right": [8], "peak": [9]}


def test_equal_values_on_one_side_both_on_the_hull():
    table = RangeMinTable()
    for key, x, y in (("l", 0, 0), ("a", 25, 8), ("b", 30, 8), ("t", 50, 1)):
        table.update(key, x, y)
    messages = table.update("t", 50, 9)[1]
    assert [m.as_tuple() for m in messages] == [
        (9, 50, 50, 30, INF), (8, 30, 50, 25, INF), (8, 25, 50, 0, INF)]
    assert affected(messages, {"wide": (20, 60), "narrow": (28, 60)}) == {
        "wide": [8], "narrow": [8]}


def test_a_tie_with_the_new_value_blocks_a_good_update():
    table = RangeMinTable()
    for key, x, y in (("p", 10, 4), ("t", 20, 9)):
        table.update(key, x, y)
    assert [m.as_tuple() for m in table.update("t", 20, 4)[1]] == [(4, 20, 20, 10, INF)]


def test_moving_a_tuple_or_non_finite_values_are_refused():
    table = figure_1()
    with pytest.raises(ValueError):
        table.update("t4", 41, 4)
    with pytest.raises(ValueError):
        table.update("t9", float("nan"), 4)
    with pytest.raises(ValueError):
        table.update("t9", 4, float("inf"))
    with pytest.raises(ValueError):
        RangeMinTable(sign=2)


def test_ordered_minima_against_a_scan():
    rng = random.Random(7)
    tree, plain = OrderedMinima(), {}
    for _ in range(2000):
        key = rng.randrange(60)
        if rng.random() < 0.25:
            tree.discard(key)
            plain.pop(key, None)
        else:
            plain[key] = rng.randrange(20)
            tree.set(key, plain[key])
        x, bound, strict = rng.randrange(-1, 61) + 0.5 * rng.randrange(2), rng.randrange(21), \
            rng.random() < 0.5

        def ok(v):
            return v < bound if strict else v <= bound
        left = [(k, v) for k, v in sorted(plain.items()) if k < x and ok(v)]
        right = [(k, v) for k, v in sorted(plain.items()) if k > x and ok(v)]
        assert tree.nearest_left(x, bound, strict) == (left[-1] if left else None)
        assert tree.nearest_right(x, bound, strict) == (right[0] if right else None)
        lo, hi = sorted((rng.randrange(-2, 62), rng.randrange(-2, 62)))
        inside = [v for k, v in plain.items() if lo <= k <= hi]
        assert tree.range_min(lo, hi) == (min(inside) if inside else INF)
        assert len(tree) == len(plain) and list(tree.items()) == sorted(plain.items())


def test_message_predicate_bounds():
    message = AggregateMessage(4, 40, 40, 20, 100)
    assert matches(message, 20.5, 99.5) and matches(message, 40, 40)
    assert not matches(message, 20, 50)       # OUTER_L is open
    assert not matches(message, 30, 100)      # OUTER_R is open
    assert not matches(message, 41, 50) and not matches(message, 30, 39)


operations = st.lists(st.tuples(st.integers(0, 11), st.integers(0, 6),
                                st.one_of(st.none(), st.integers(0, 9))), min_size=1, max_size=60)
ranges = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=25)


@settings(max_examples=400, deadline=None)
@given(operations, ranges, st.sampled_from([1, -1]))
def test_notifications_replay_every_change_and_nothing_else(ops, raw_ranges, sign):
    """Random tables (small domains so ties and shared columns are frequent), inserts,
    updates and deletes: after every update, each subscription's matching messages (at most
    one) carry exactly its new result when it changed, and there is none when it did not."""
    subscriptions = [(min(a, b), max(a, b)) for a, b in raw_ranges]
    table, tuples = RangeMinTable(sign), {}
    results = [None] * len(subscriptions)
    for key_number, x_wanted, y in ops:
        key = f"k{key_number}"
        x = tuples[key][0] if key in tuples else x_wanted
        kind, messages = table.update(key, x, y)
        if y is None:
            tuples.pop(key, None)
        else:
            tuples[key] = (x, y)
        for i, (x1, x2) in enumerate(subscriptions):
            now = recompute(tuples, x1, x2, sign)
            got = [m.new for m in messages if matches(m, x1, x2)]
            assert got == ([] if now == results[i] else [now]), (key, x, y, x1, x2)
            results[i] = now
            assert table.result(x1, x2) == now
        assert kind is Update.IGNORABLE or messages
