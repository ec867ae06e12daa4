"""The throughput model of the paper (section IV-A, V-B and the appendix), as functions of
measured or simulated parameters.

Components (events per second)::

    TP_IL = 1 / max(T_p, T_l)                              incoming link
    TP_D  = 1 / (T_f + T_d N_s + T_c R N_s)                dispatcher CPU, eq. (3)
                                                           (T_f = T_c = 0: the basic 1/(T_d N_s))
    TP_OL = B / (R S_m N_s) = 1 / (R T_l N_s)              outgoing link, eq. (4), T_l = S_m / B
    TP_S  = 1 / (R T_s F)                                  servers
    TP    = min(TP_IL, TP_D, TP_OL, TP_S)

Relative throughput at the optimum ``o`` against precise (``p``) and no-summary (``n``)
operating points when the outgoing link is the downstream bottleneck, eqs. (1)/(5) and
(2)/(6): RTP_p^o = T_dp / (R_o T_l), RTP_n^o = 1 / R_o; when the servers are:
RTP_p^s = T_dp / T_do, RTP_n^s = T_sn / (R_o T_so).

Units: seconds, bytes, bytes per second. ``T_d`` is per server per event, as in the paper
(the router's per-event time divided by N_s). Missing components (no T_s, no B) are
treated as unbounded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

INF = math.inf


@dataclass(frozen=True)
class SystemParameters:
    n_servers: int
    t_f: float = 0.0               # per-event fixed overhead at the dispatcher (receive + send)
    t_c: float = 0.0               # per-copy sending overhead
    bandwidth: float | None = None  # B, outgoing bytes per second (None: unbounded)
    message_size: float | None = None  # S_m, bytes per event message
    t_p: float = 0.0               # publisher inter-arrival time (0: as fast as possible)
    load_factor: float = 1.0       # F, the servers' load expansion factor

    def __post_init__(self):
        if self.n_servers < 1:
            raise ValueError("at least one server")
        if min(self.t_f, self.t_c, self.t_p) < 0 or self.load_factor <= 0:
            raise ValueError("times must be non-negative and F positive")
        if (self.bandwidth is None) != (self.message_size is None):
            raise ValueError("give both bandwidth and message size, or neither")

    @property
    def t_l(self) -> float:
        """Per-message transmission time on a link, S_m / B."""
        return self.message_size / self.bandwidth if self.bandwidth else 0.0

    @classmethod
    def paper_implementation(cls) -> "SystemParameters":
        """Section V-B's baseline: T_f 1.6 ms, T_c 0, S_m 3 KB, B 80 Mbps, 10 servers."""
        return cls(n_servers=10, t_f=1.6e-3, t_c=0.0, bandwidth=80e6 / 8, message_size=3 * 1024)


@dataclass(frozen=True)
class OperatingPoint:
    """One summary precision with its routing time and hit ratio (and server time)."""

    precision: float | None   # None: no summary (forward to all)
    t_d: float                # per server per event routing time, seconds
    hit_ratio: float          # R
    t_s: float | None = None  # per-event filtering time at a server

    def __post_init__(self):
        if not 0 <= self.hit_ratio <= 1:
            raise ValueError("a hit ratio lies in [0, 1]")
        if self.t_d < 0:
            raise ValueError("routing time cannot be negative")


@dataclass(frozen=True)
class Prediction:
    point: OperatingPoint
    tp_il: float
    tp_d: float
    tp_ol: float
    tp_s: float

    @property
    def throughput(self) -> float:
        return min(self.tp_il, self.tp_d, self.tp_ol, self.tp_s)

    @property
    def bottleneck(self) -> str:
        parts = {"incoming-link": self.tp_il, "dispatcher": self.tp_d,
                 "outgoing-link": self.tp_ol, "servers": self.tp_s}
        return min(parts, key=parts.get)


def _inverse(x: float) -> float:
    return 1.0 / x if x > 0 else INF


def tp_incoming(p: SystemParameters) -> float:
    return _inverse(max(p.t_p, p.t_l))


def tp_dispatcher(p: SystemParameters, point: OperatingPoint) -> float:
    """Eq. (3): 1 / (T_f + T_d N_s + T_c R N_s)."""
    n = p.n_servers
    return _inverse(p.t_f + point.t_d * n + p.t_c * point.hit_ratio * n)


def tp_outgoing(p: SystemParameters, point: OperatingPoint) -> float:
    """Eq. (4): B / (R S_m N_s)."""
    if not p.bandwidth:
        return INF
    return _inverse(point.hit_ratio * p.message_size * p.n_servers / p.bandwidth)


def tp_servers(p: SystemParameters, point: OperatingPoint) -> float:
    if point.t_s is None:
        return INF
    return _inverse(point.hit_ratio * point.t_s * p.load_factor)


def predict(p: SystemParameters, point: OperatingPoint) -> Prediction:
    return Prediction(point, tp_incoming(p), tp_dispatcher(p, point), tp_outgoing(p, point),
                      tp_servers(p, point))


def predict_curve(p: SystemParameters, points: Iterable[OperatingPoint]) -> list[Prediction]:
    return [predict(p, point) for point in points]


def optimal(p: SystemParameters, points: Sequence[OperatingPoint]) -> Prediction:
    """The operating point with the highest predicted throughput (ties: higher precision,
    which sends less traffic)."""
    if not points:
        raise ValueError("no operating points")
    return max(predict_curve(p, points),
               key=lambda pr: (pr.throughput, -1 if pr.point.precision is None else pr.point.precision))


def rtp_precise_link(t_dp: float, r_o: float, t_l: float) -> float:
    """Eq. (1)/(5): RTP_p^o = T_dp / (R_o T_l)."""
    return t_dp / (r_o * t_l)


def rtp_none_link(r_o: float) -> float:
    """Eq. (2)/(6): RTP_n^o = 1 / R_o."""
    return 1.0 / r_o


def rtp_precise_servers(t_dp: float, t_do: float) -> float:
    return t_dp / t_do


def rtp_none_servers(t_sn: float, r_o: float, t_so: float) -> float:
    return t_sn / (r_o * t_so)


def relative_throughput(curve: Sequence[Prediction]) -> dict[str, float]:
    """Measured-style relative throughput of a predicted curve: optimum over the precise
    point (precision 1.0) and over the no-summary point (precision None)."""
    best = max(curve, key=lambda pr: pr.throughput)
    precise = [pr for pr in curve if pr.point.precision == 1.0]
    none = [pr for pr in curve if pr.point.precision is None]
    out = {"optimal_precision": best.point.precision, "optimal_throughput": best.throughput}
    if precise:
        out["rtp_vs_precise"] = best.throughput / precise[0].throughput
    if none:
        out["rtp_vs_none"] = best.throughput / none[0].throughput
    return out


def operating_points(samples: Iterable[tuple[float | None, float, float]]) -> list[OperatingPoint]:
    """Operating points from measured ``(precision, T_d, R)`` samples (e.g. the live
    dispatcher's :class:`~route_manager.measurement.Measurement` at each precision it ran
    at): the mean T_d and R per precision, ordered none first, then by precision. A
    precision of 0 counts as "no summary" (None)."""
    groups: dict[float | None, list[tuple[float, float]]] = {}
    for precision, t_d, hit_ratio in samples:
        key = None if not precision else float(precision)
        groups.setdefault(key, []).append((t_d, hit_ratio))
    points = []
    for key in sorted(groups, key=lambda k: -1.0 if k is None else k):
        values = groups[key]
        points.append(OperatingPoint(key, sum(v[0] for v in values) / len(values),
                                     min(1.0, sum(v[1] for v in values) / len(values))))
    return points
