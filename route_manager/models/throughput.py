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

Dispatch trees (:func:`tree_throughput`, ``docs/tree-throughput.md``): every node is eq. (3)
over its own fan-out, applied to the share of published events its parent forwards to it; the
network's throughput is min over nodes of TP_node / share_node.

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
    dispatcher's :class:`~route_manager.models.measurement.Measurement` at each precision it ran
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


# -- dispatch trees (docs/tree-throughput.md) ------------------------------------------------
#
# A node of a dispatch tree (a dispatcher at any level, or a leaf server) is eq. (3) applied to
# the events it sees: a child sees only the share of published events its parent forwards to
# it, routes them over its own fan-out with its own T_f, T_d, T_c and hit ratio, and its
# outgoing link carries R N copies per event it sees (eq. 4). Expressed per *published*
# event, every cost is multiplied by that share; the network's throughput is the minimum over
# nodes and links. A leaf server is a node with no fan-out whose T_f is its cost per copy
# received (T_s F of the appendix).


@dataclass(frozen=True)
class TreeNode:
    """One node of a dispatch tree with its measured parameters.

    ``share``: the events this node sees per event published at the root (1 at the root;
    for a child, the copies its parent forwarded to it / events published). ``hit_ratio``:
    copies this node forwards / (events it sees x ``fan_out``). Times in seconds per event it
    sees (``t_d`` per event per node below, as the paper's T_d); ``bandwidth`` (bytes/s) and
    ``message_size`` (bytes per copy), both or neither, bound its outgoing link.
    """

    name: str
    level: int                 # 0: the root; 1: its children; ...
    fan_out: int               # nodes directly below (0: a leaf server)
    t_f: float = 0.0
    t_d: float = 0.0
    t_c: float = 0.0
    hit_ratio: float = 0.0
    share: float = 1.0
    bandwidth: float | None = None
    message_size: float | None = None

    def __post_init__(self):
        if self.level < 0 or self.fan_out < 0:
            raise ValueError("level and fan-out cannot be negative")
        if min(self.t_f, self.t_d, self.t_c) < 0:
            raise ValueError("times must be non-negative")
        if not 0 <= self.hit_ratio <= 1 or not 0 <= self.share <= 1:
            raise ValueError("a hit ratio and a share lie in [0, 1]")
        if (self.bandwidth is None) != (self.message_size is None):
            raise ValueError("give both bandwidth and message size, or neither")

    @property
    def cost(self) -> float:
        """CPU seconds per event this node sees: eq. (3)'s denominator over its fan-out."""
        n = self.fan_out
        return self.t_f + self.t_d * n + self.t_c * self.hit_ratio * n

    @property
    def copies(self) -> float:
        """Copies sent down per event this node sees, R N."""
        return self.hit_ratio * self.fan_out

    @property
    def tp_cpu(self) -> float:
        """Events per second *this node sees* that its CPU allows, 1 / cost (eq. 3)."""
        return _inverse(self.cost)

    @property
    def tp_link(self) -> float:
        """Events per second this node sees that its outgoing link allows, B / (R S_m N)."""
        if not self.bandwidth:
            return INF
        return _inverse(self.copies * self.message_size / self.bandwidth)


@dataclass(frozen=True)
class TreePrediction:
    """Per-node bounds in *published* events per second, the network's throughput and the
    node (and resource) that bounds it."""

    nodes: tuple[TreeNode, ...]
    cpu: dict[str, float]        # name -> published events/s its CPU allows
    link: dict[str, float]       # name -> published events/s its outgoing link allows
    pool: float = INF            # the shared-machine bound (see tree_throughput's ``cores``)

    @property
    def throughput(self) -> float:
        return min(self.pool, *self.cpu.values(), *self.link.values())

    @property
    def bottleneck(self) -> str:
        """``"NAME cpu"``, ``"NAME link"`` or ``"shared cpu"``; ties go to the higher level
        (the root first: it is what the tree is there to relieve)."""
        bounds = [(tp, node.level, f"{node.name} {kind}") for node in self.nodes
                  for kind, tp in (("cpu", self.cpu[node.name]), ("link", self.link[node.name]))]
        if self.pool < INF:
            bounds.append((self.pool, -1, "shared cpu"))
        return min(bounds, key=lambda b: (b[0], b[1]))[2]

    def cpu_per_event(self) -> dict[str, float]:
        """Each node's CPU seconds per published event (share x cost)."""
        return {node.name: node.share * node.cost for node in self.nodes}


def _scaled(tp: float, share: float) -> float:
    """A node's bound in events it sees, as published events per second."""
    if share <= 0:
        return INF
    return tp / share


def tree_throughput(nodes: Iterable[TreeNode], *, cores: float | None = None,
                    other_cpu_per_event: float = 0.0) -> TreePrediction:
    """The throughput model of a dispatch tree: every node's CPU (eq. 3 over its own fan-out)
    and outgoing link (eq. 4) as a bound on published events per second, TP_n / share_n, and
    the network's throughput, the minimum of them.

    ``cores``: when every process shares one machine of that many cores (as on a test box),
    also bound the whole by cores / (sum of share_n x cost_n + ``other_cpu_per_event``, e.g.
    the publishers' CPU per event): the dedicated-CPU bounds alone overestimate a CPU-starved
    machine. A flat network is a single root node with ``fan_out = N_s``: eq. (3) and (4).
    """
    nodes = tuple(nodes)
    if not nodes:
        raise ValueError("a tree has at least one node")
    names = [node.name for node in nodes]
    if len(set(names)) != len(names):
        raise ValueError("node names must be unique")
    cpu = {node.name: _scaled(node.tp_cpu, node.share) for node in nodes}
    link = {node.name: _scaled(node.tp_link, node.share) for node in nodes}
    pool = INF
    if cores is not None:
        if cores <= 0:
            raise ValueError("cores must be positive")
        pool = _inverse((sum(node.share * node.cost for node in nodes) + other_cpu_per_event)
                        / cores)
    return TreePrediction(nodes, cpu, link, pool)


def tree_level_hit_ratios(nodes: Iterable[TreeNode]) -> list[float]:
    """The hit ratio of each level of dispatchers, the root's first: copies forwarded at
    level l / (events published x nodes at level l + 1), i.e. the sum over the level's nodes
    of share x R x N, divided by the fan-out of the whole level. Leaves (fan-out 0) have no
    level of their own."""
    levels: dict[int, list[TreeNode]] = {}
    for node in nodes:
        if node.fan_out:
            levels.setdefault(node.level, []).append(node)
    out = []
    for level in sorted(levels):
        below = sum(node.fan_out for node in levels[level])
        out.append(sum(node.share * node.copies for node in levels[level]) / below)
    return out
