"""The per-host in-flight limit (AIMD) as a pure state machine: readings in, limit out; no
threads, no clock, no sockets."""
from __future__ import annotations

import pytest

from subscription_manager.host_concurrency import AdaptiveLimit


def feed(limit: AdaptiveLimit, seconds: float, answers: int, *, in_flight=None) -> int:
    for _ in range(answers):
        limit.observe(seconds, in_flight=limit.limit if in_flight is None else in_flight)
    return limit.limit


def test_a_far_host_whose_answers_hold_their_time_grows_to_the_ceiling():
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    seen = [limit.limit]
    for _ in range(6):
        seen.append(feed(limit, 0.040, limit.limit))  # one window: limit answers of 40 ms
    assert seen[:5] == [8, 16, 32, 64, 96]  # slow start: doubles each window, capped
    assert limit.limit == 96 and limit.baseline == pytest.approx(0.040)


def test_an_idle_host_keeps_its_limit():
    """Answers while fewer than the limit were in flight say nothing of what it can take."""
    limit = AdaptiveLimit(8, ceiling=96)
    assert feed(limit, 0.040, 200, in_flight=3) == 8


def test_answers_slowing_down_shrink_the_limit_but_never_below_the_floor():
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    for _ in range(3):
        feed(limit, 0.002, limit.limit)
    assert limit.limit == 64
    assert feed(limit, 0.050, 64) == 48  # 25x the baseline and 48 ms over it: x0.75
    assert feed(limit, 0.050, 48) == 36
    seen = [feed(limit, 0.050, max(limit.limit, 8)) for _ in range(6)]
    assert seen == [27, 20, 15, 11, 8, 8]  # down to the floor, never below


def test_after_congestion_growth_is_additive():
    limit = AdaptiveLimit(8, floor=4, ceiling=96)
    feed(limit, 0.010, 8 + 16)  # 32
    assert feed(limit, 0.040, 32) == 24  # 4x slower, 30 ms more: congestion
    assert feed(limit, 0.010, 24) == 25
    assert feed(limit, 0.010, 25) == 26


def test_no_answer_keeps_the_limit_for_when_the_host_answers_again():
    limit = AdaptiveLimit(8, floor=4, ceiling=96)
    feed(limit, 0.010, 8 + 16 + 32)  # 64
    assert limit.observe(0.0, answered=False) == 64  # an outage, or a timeout
    # the first window after it opens new connections: slower, and not congestion
    assert feed(limit, 0.025, 64) == 96
    assert feed(limit, 0.010, 96) == 96


def test_no_answer_keeps_what_congestion_taught():
    limit = AdaptiveLimit(8, floor=4, ceiling=96)
    feed(limit, 0.010, 8 + 16)  # 32
    assert feed(limit, 0.040, 32) == 24  # congestion: the threshold is 24
    assert limit.observe(0.0, answered=False) == 24
    seen = [feed(limit, 0.010, max(limit.limit, 8)) for _ in range(3)]
    assert seen == [25, 26, 27]  # additive above the threshold, as before the outage


def test_slow_answers_after_the_first_window_past_an_outage_are_congestion_again():
    limit = AdaptiveLimit(8, floor=4, ceiling=96)
    feed(limit, 0.010, 8 + 16 + 32)  # 64
    limit.observe(0.0, answered=False)
    feed(limit, 0.025, 64)  # reconnecting: grows
    assert feed(limit, 0.040, 96) == 72


def test_a_small_slowdown_within_tolerance_is_not_congestion():
    """Three times the baseline but only 1 ms over it (below ``min_excess``): jitter."""
    limit = AdaptiveLimit(8, ceiling=32)
    feed(limit, 0.0025, 8)
    assert feed(limit, 0.0035, 16) == 32


def test_a_host_that_answers_fast_keeps_its_limit():
    """Answers under ``grow_above`` (loopback): the floor carries thousands a second."""
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    assert feed(limit, 0.0005, 400) == 8


def test_a_sink_that_queues_settles_where_its_answers_stay_within_tolerance():
    """A sink serving one request per 0.2 ms: an answer takes in_flight x 0.2 ms. The limit
    stops growing once answers take over 2x the fastest and 5 ms more, i.e. near 26 in
    flight, and stays there instead of growing to the ceiling."""
    limit = AdaptiveLimit(8, floor=8, ceiling=256)
    for _ in range(200):
        feed(limit, limit.limit * 0.0002, max(limit.limit, 8))
    assert 8 <= limit.limit <= 40


def test_a_path_that_got_slower_becomes_the_baseline_once_the_limit_is_at_its_floor():
    limit = AdaptiveLimit(8, floor=8, ceiling=64)
    feed(limit, 0.003, 8 + 16)  # 32
    assert limit.baseline == pytest.approx(0.003)
    feed(limit, 0.030, 32)  # slower: congestion, 24
    assert (limit.limit, limit.baseline) == (24, pytest.approx(0.003))
    while limit.limit > 8:
        feed(limit, 0.030, limit.limit)
    feed(limit, 0.030, 8)  # still slow at the floor: the path is slower now
    assert limit.baseline == pytest.approx(0.030)
    # and the limit grows from there again, in slow start: the new path's room is unknown
    assert [feed(limit, 0.030, limit.limit) for _ in range(3)] == [16, 32, 64]


@pytest.mark.parametrize("kwargs", [
    {"initial": 0}, {"initial": 8, "floor": 9}, {"initial": 8, "ceiling": 4},
    {"initial": 8, "tolerance": 1.0}, {"initial": 8, "decrease": 1.0},
    {"initial": 8, "min_window": 0}, {"initial": 8, "min_excess": -1},
])
def test_bad_parameters_are_refused(kwargs):
    initial = kwargs.pop("initial")
    with pytest.raises(ValueError):
        AdaptiveLimit(initial, **kwargs)


def test_failures_at_the_floor_are_an_outage_and_keep_slow_start_to_the_ceiling():
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    for _ in range(20):  # a sink down from the start: every probe fails
        limit.observe(0.0, answered=False)
    assert [feed(limit, 0.010, limit.limit) for _ in range(4)] == [16, 32, 64, 96]


def lossy_window(limit: AdaptiveLimit, fast: float, retransmitted: float, answers: int) -> int:
    """A window over a lossy link: two answers in three wait out a retransmission."""
    for i in range(answers):
        limit.observe(retransmitted if i % 3 else fast, in_flight=limit.limit)
    return limit.limit


def test_loss_that_slows_some_answers_is_not_congestion_and_holds_the_limit():
    """30% packet loss: most answers wait 200 ms+ for a retransmission, the rest take the
    round trip. The mean is slow, the fastest is not: the limit neither shrinks (the host
    is not queueing) nor grows (the window was not clean)."""
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    feed(limit, 0.080, 8 + 16)  # 32
    seen = [lossy_window(limit, 0.080, 0.400, limit.limit) for _ in range(10)]
    assert seen == [32] * 10
    assert feed(limit, 0.080, 32) == 64  # healed: slow start goes on where it was


def test_a_queue_slows_every_answer_and_is_congestion_even_if_one_is_fast():
    limit = AdaptiveLimit(8, floor=8, ceiling=96)
    feed(limit, 0.080, 8 + 16)  # 32, baseline 80 ms
    answers = [0.170] * 31 + [0.400]  # every answer waits behind others
    for seconds in answers:
        limit.observe(seconds, in_flight=limit.limit)
    assert limit.limit == 24
