"""The throughput model against the paper's worked values (sections IV-A, V-B, appendix)."""
import math

import pytest

from route_manager.models.throughput import (OperatingPoint, SystemParameters, optimal, predict,
                                      relative_throughput, rtp_none_link, rtp_none_servers,
                                      rtp_precise_link, rtp_precise_servers, tp_dispatcher,
                                      tp_outgoing)


def test_link_time_of_the_simulation_study():
    # "100Mbps or roughly 10MBps ... 1KB ... T_l = 1K/10M = 100 microseconds"
    params = SystemParameters(n_servers=10, bandwidth=10e6, message_size=1e3)
    assert params.t_l == pytest.approx(100e-6)


def test_relative_throughput_against_no_summary_is_the_inverse_hit_ratio():
    # Fig. 7: RTP_n^o drops from 1.37 to 1.03; Fig. 8: +67% = 1/0.60 - 1
    assert rtp_none_link(0.60) - 1 == pytest.approx(0.67, abs=0.01)
    assert rtp_none_link(1 / 1.37) == pytest.approx(1.37)
    # Eq. (1) at the intersection equals the ratio of dispatcher throughputs
    t_l, t_dp, r_o = 100e-6, 155e-6, 1.0
    assert rtp_precise_link(t_dp, r_o, t_l) == pytest.approx(1.55)


def test_eq1_is_the_ratio_of_the_optimum_to_the_precise_point():
    # At the optimum TP_D = TP_OL, i.e. T_do = R_o T_l; precise is dispatcher-bound.
    params = SystemParameters(n_servers=10, bandwidth=10e6, message_size=1e3)
    r_o, t_dp = 0.5, 400e-6
    optimum = OperatingPoint(0.5, t_d=r_o * params.t_l, hit_ratio=r_o)
    precise = OperatingPoint(1.0, t_d=t_dp, hit_ratio=0.3)
    tp_o, tp_p = predict(params, optimum).throughput, predict(params, precise).throughput
    assert predict(params, precise).bottleneck == "dispatcher"
    assert tp_o / tp_p == pytest.approx(rtp_precise_link(t_dp, r_o, params.t_l))


def test_server_bound_relative_throughputs():
    assert rtp_precise_servers(2e-3, 1e-3) == 2
    assert rtp_none_servers(1e-3, 0.5, 1e-3) == 2


def test_paper_implementation_parameters_and_equation_3():
    params = SystemParameters.paper_implementation()
    assert params.bandwidth == 10e6 and params.message_size == 3072
    # No summary: T_d = 0, R = 1 -> TP_D = 1/T_f = 625/s, TP_OL = B/(S_m N_s) = 325.5/s
    none = OperatingPoint(None, t_d=0.0, hit_ratio=1.0)
    assert tp_dispatcher(params, none) == pytest.approx(625.0)
    assert tp_outgoing(params, none) == pytest.approx(1e7 / 30720)
    assert predict(params, none).bottleneck == "outgoing-link"
    # 438 events/s at the optimum (Fig. 12) needs T_f + T_d N_s = 1/438 s on the CPU side,
    # and R_o <= B / (438 S_m N_s) = 0.743 on the link side.
    r_limit = params.bandwidth / (438 * params.message_size * params.n_servers)
    assert r_limit == pytest.approx(0.743, abs=0.001)
    t_d = (1 / 438 - params.t_f) / params.n_servers
    point = OperatingPoint(0.5, t_d=t_d, hit_ratio=r_limit)
    assert predict(params, point).throughput == pytest.approx(438, rel=1e-6)


def test_per_copy_overhead_enters_with_the_hit_ratio():
    params = SystemParameters(n_servers=10, t_f=1e-3, t_c=1e-4)
    point = OperatingPoint(1.0, t_d=1e-5, hit_ratio=0.5)
    assert tp_dispatcher(params, point) == pytest.approx(1 / (1e-3 + 1e-4 + 1e-4 * 0.5 * 10))


def test_optimum_lies_at_the_crossing_of_the_two_curves():
    # Link-bound without summaries (333/s < 1000/s), CPU-bound when precise (333/s < 833/s).
    params = SystemParameters(n_servers=10, t_f=1e-3, bandwidth=10e6, message_size=3e3)
    # Routing time grows and hit ratio falls with precision, as in Fig. 7.
    points = [OperatingPoint(None, 0.0, 1.0)] + [
        OperatingPoint(p / 10, t_d=2e-5 * (p / 10) ** 2 * 10, hit_ratio=1 - 0.6 * p / 10)
        for p in range(1, 11)]
    best = optimal(params, points)
    curve = [predict(params, pt) for pt in points]
    assert best.throughput == max(c.throughput for c in curve)
    assert 0 < best.point.precision < 1
    figures = relative_throughput(curve)
    assert figures["rtp_vs_precise"] > 1 and figures["rtp_vs_none"] > 1


def test_unbounded_components_and_validation():
    params = SystemParameters(n_servers=3)
    point = OperatingPoint(1.0, t_d=0.0, hit_ratio=0.0)
    assert math.isinf(predict(params, point).throughput)
    with pytest.raises(ValueError):
        SystemParameters(n_servers=0)
    with pytest.raises(ValueError):
        SystemParameters(n_servers=2, bandwidth=1e6)
    with pytest.raises(ValueError):
        OperatingPoint(0.5, t_d=1e-6, hit_ratio=1.5)
