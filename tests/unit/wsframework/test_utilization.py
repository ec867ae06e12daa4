"""The utilization meter (wsframework.utilization) on a fake clock: no threads needed to check the
arithmetic, one threaded test for the locking."""
import threading
import time

import pytest

from wsframework.utilization import BusyMeter


class Clock:
    def __init__(self):
        self.now = 50.0

    def __call__(self):
        return self.now


def test_one_request_counts_its_duration_including_the_period_in_progress():
    clock = Clock()
    meter = BusyMeter(clock)
    clock.now += 3.0  # idle: not counted
    with meter.busy():
        clock.now += 1.5
        assert meter.seconds() == pytest.approx(1.5) and meter.active == 1
        clock.now += 0.5
    clock.now += 10.0
    assert meter.seconds() == pytest.approx(2.0) and meter.active == 0


def test_overlapping_requests_count_the_union_of_their_time_once():
    clock = Clock()
    meter = BusyMeter(clock)
    first = meter.busy()
    first.__enter__()
    clock.now += 1.0
    with meter.busy():  # a second request while the first is in hand
        clock.now += 1.0
    clock.now += 1.0
    first.__exit__(None, None, None)
    assert meter.seconds() == pytest.approx(3.0)  # not 4: time with >= 1 request in hand


def test_idle_inside_a_request_is_not_counted_unless_another_request_is_in_hand():
    clock = Clock()
    meter = BusyMeter(clock)
    with meter.busy():
        clock.now += 1.0
        with meter.idle():  # held back, waiting on the outgoing link
            clock.now += 5.0
        clock.now += 1.0
    assert meter.seconds() == pytest.approx(2.0)
    with meter.busy():
        other = meter.busy()
        other.__enter__()
        with meter.idle():  # this request waits, the other is being worked on
            clock.now += 4.0
        other.__exit__(None, None, None)
    assert meter.seconds() == pytest.approx(6.0)


def test_a_request_that_raises_still_ends_its_busy_period():
    clock = Clock()
    meter = BusyMeter(clock)
    with pytest.raises(RuntimeError):
        with meter.busy():
            clock.now += 1.0
            raise RuntimeError("handler failed")
    clock.now += 1.0
    assert meter.active == 0 and meter.seconds() == pytest.approx(1.0)


def test_concurrent_requests_never_count_more_than_wall_time():
    meter = BusyMeter()
    start = threading.Event()

    def work():
        start.wait()
        for _ in range(2000):
            with meter.busy():
                pass

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    begun = time.monotonic()
    start.set()
    for t in threads:
        t.join()
    wall = time.monotonic() - begun
    assert meter.active == 0
    assert 0.0 < meter.seconds() <= wall
