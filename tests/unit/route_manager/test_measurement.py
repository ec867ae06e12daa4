"""The measurement math: counters to T_f, T_d, T_c, R, S_m, CPU load; the sliding window;
the model parameters and operating points built from measurements."""
import threading

import pytest

from edn.localnet.network import wait_until
from route_manager.models.measurement import Counters, SlidingWindow, between, thread_cpu_seconds
from route_manager.models.throughput import (OperatingPoint, SystemParameters, operating_points,
                                      predict, tp_dispatcher)


def test_between_decomposes_cpu_into_the_model_parameters():
    # 2 s, 1,000 events to 10 servers, 3,000 copies queued, 2,800 sent (600 KB)
    a = Counters(time=10.0, cpu=5.0, route_cpu=1.0, forward_cpu=0.5, events=500, copies=100,
                 sent=90, bytes_out=1000, servers=10)
    b = Counters(time=12.0, cpu=6.9, route_cpu=1.6, forward_cpu=0.78, events=1500, copies=3100,
                 sent=2890, bytes_out=601_000, servers=10)
    m = between(a, b)
    assert m.seconds == 2.0 and m.events == 1000
    assert m.events_per_s == pytest.approx(500.0)
    assert m.cpu == pytest.approx(0.95)                     # 1.9 CPU seconds in 2 s
    assert m.t_d == pytest.approx(0.6 / 1000 / 10)          # per server per event
    assert m.hit_ratio == pytest.approx(3000 / (1000 * 10))
    assert m.t_c == pytest.approx(0.28 / 2800)              # per copy sent
    assert m.t_f == pytest.approx((1.9 - 0.6 - 0.28) / 1000)
    assert m.message_size == pytest.approx(600_000 / 2800)
    assert m.bytes_out_per_s == pytest.approx(300_000)
    # the decomposition is exact: eq. (3)'s per-event cost times events/s is the CPU load
    # (up to the difference between copies queued and copies sent)
    per_event = m.t_f + m.servers * (m.t_d + m.t_c * m.hit_ratio)
    assert per_event * m.events_per_s == pytest.approx(m.cpu, rel=0.02)
    assert m.tp_d == pytest.approx(1 / per_event)


def test_between_without_events_or_copies_is_all_zero_not_an_error():
    a = Counters(time=1.0, cpu=1.0, servers=3)
    b = Counters(time=2.0, cpu=1.2, servers=3)
    m = between(a, b)
    assert m.events_per_s == 0 and m.t_f == 0 and m.t_d == 0 and m.t_c == 0 and m.hit_ratio == 0
    assert m.cpu == pytest.approx(0.2)


def test_sliding_window_spans_the_last_seconds():
    window = SlidingWindow(span=5.0)
    assert window.measurement() is None
    for t in range(0, 21):
        window.add(Counters(time=float(t), cpu=0.5 * t, events=100 * t, servers=2))
    m = window.measurement()
    assert m.seconds == 5.0 and m.events_per_s == pytest.approx(100) and m.cpu == pytest.approx(0.5)
    assert window.measurement(span=2.0).seconds == 2.0
    assert len(window._readings) <= 7  # old readings are dropped


def test_measurement_builds_the_model_inputs():
    m = between(Counters(time=0, servers=10),
                Counters(time=1, cpu=0.9, route_cpu=0.4, forward_cpu=0.1, events=400,
                         copies=2000, sent=2000, bytes_out=800_000, servers=10))
    point = m.operating_point(0.5)
    assert point == OperatingPoint(0.5, m.t_d, m.hit_ratio)
    params = m.system_parameters(bandwidth=1_000_000)
    assert params.n_servers == 10 and params.message_size == pytest.approx(400)
    assert tp_dispatcher(params, point) == pytest.approx(m.tp_d)


def test_operating_points_average_samples_per_precision():
    samples = [(0.5, 10e-6, 0.4), (0.5, 30e-6, 0.6), (1.0, 50e-6, 0.2), (None, 0.0, 1.0)]
    points = operating_points(samples)
    assert [p.precision for p in points] == [None, 0.5, 1.0]
    assert points[1].t_d == pytest.approx(20e-6) and points[1].hit_ratio == pytest.approx(0.5)
    params = SystemParameters(n_servers=10, t_f=100e-6, bandwidth=1e6, message_size=500)
    assert predict(params, points[0]).bottleneck == "outgoing-link"


def test_thread_cpu_seconds_of_a_busy_thread_grows():
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        first = thread_cpu_seconds(thread)
        wait_until(lambda: thread_cpu_seconds(thread) > first, timeout=5, poll=0.01,
                   what="the spinning thread's CPU time to grow")
    finally:
        stop.set()
        thread.join()
    assert thread_cpu_seconds(thread) == 0.0  # gone
