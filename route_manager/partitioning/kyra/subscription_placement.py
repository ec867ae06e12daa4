"""Kyra's cliques and zones as a placement of real subscriptions: one server per subscription.

Kyra (III) makes each server the proxy of every subscription *of its clique that overlaps its
zone*, so a subscription overlapping several zones has several proxies, each answering the
events of its own zone. The EDN keeps one durable copy of a subscription, at one server, and
delivers each notification once; so here a subscription gets exactly one proxy:

* its clique is the clique of the server holding it now (where it entered, or was last moved);
* among the zones of that clique it overlaps, it goes to the one holding **the largest share
  of its volume** (a server's subscriptions then hug its zone, which keeps its routing summary
  small); on a tie the server holding it now wins (no move), then the lowest server index.

The share is measured dimension by dimension: the fraction of the subscription's extent inside
the zone, where a dimension in which the subscription is a single value (an equality) counts 1
when the value lies in the zone, else 0. Zones are closed boxes tiling the domain, so every
subscription inside the domain overlaps at least one zone of its clique.

:class:`KyraPlacement` follows the estimator conventions (:mod:`route_manager.partitioning`):
parameters in ``__init__``, ``fit`` does the work and returns ``self``, learned state ends in
``_``. :func:`clique_zones` is shared with :class:`~route_manager.partitioning.kyra.KyraNetwork`.
"""
from __future__ import annotations

import numpy as np

from .cliques import check_latency, cliques as cluster_cliques
from .zones import median_zones, overlaps

__all__ = ["KyraPlacement", "clique_zones", "zone_shares"]


def clique_zones(groups, n_servers: int, centres: np.ndarray, sub_clique: np.ndarray, lo, hi):
    """Per server, its zone (``(mins, maxs)``, shape ``(n_servers, d)``): each clique's
    domain ``[lo, hi]`` cut into one median zone per member, over the centres of the clique's
    subscriptions (``sub_clique``: the clique index of each centre's subscription). Members get
    their clique's zones in server order."""
    d = len(np.asarray(lo))
    zone_mins = np.empty((n_servers, d))
    zone_maxs = np.empty((n_servers, d))
    for c, members in enumerate(groups):
        z_lo, z_hi = median_zones(centres[sub_clique == c], lo, hi, len(members))
        zone_mins[members], zone_maxs[members] = z_lo, z_hi
    return zone_mins, zone_maxs


def zone_shares(mins: np.ndarray, maxs: np.ndarray, zone_mins: np.ndarray,
                zone_maxs: np.ndarray) -> np.ndarray:
    """``(m, z)``: the share of each subscription box's volume inside each zone (see the
    module docstring for boxes that are flat in some dimension)."""
    mins, maxs = mins[:, None, :], maxs[:, None, :]
    inside = np.minimum(maxs, zone_maxs[None]) - np.maximum(mins, zone_mins[None])
    width = maxs - mins
    flat = width <= 0
    fraction = np.where(flat, (inside >= 0).astype(np.float64),
                        np.clip(inside, 0.0, None) / np.where(flat, 1.0, width))
    return np.prod(fraction, axis=2)


class KyraPlacement:
    """Cliques, zones and one proxy per subscription (module docstring).

    ``fit(latency, mins, maxs, holder, domain)``: ``latency`` (n, n) ms between the servers,
    subscription boxes ``mins``/``maxs`` (m, d) inside ``domain = (lo, hi)``, ``holder`` (m,)
    the server index holding each now. Learned: ``cliques_`` (sorted server lists),
    ``clique_of_`` (n,), ``zone_mins_``/``zone_maxs_`` (n, d), ``labels_`` (m,) the proxy of
    each subscription, ``zones_overlapped_`` (m,) how many zones of its clique it overlaps
    (more than one: Kyra would give it that many proxies)."""

    def __init__(self, max_distance: float, max_servers: int):
        self.max_distance = max_distance
        self.max_servers = max_servers

    def fit(self, latency, mins, maxs, holder, domain) -> "KyraPlacement":
        latency = check_latency(latency)
        n = len(latency)
        lo, hi = (np.asarray(x, dtype=np.float64) for x in domain)
        mins = np.asarray(mins, dtype=np.float64).reshape(-1, len(lo))
        maxs = np.asarray(maxs, dtype=np.float64).reshape(-1, len(lo))
        holder = np.asarray(holder, dtype=np.int64)
        if not len(mins) == len(maxs) == len(holder):
            raise ValueError("mins, maxs and holder must have one row per subscription")
        if len(holder) and (holder.min() < 0 or holder.max() >= n):
            raise ValueError("a holder is outside the latency matrix")
        self.cliques_ = cluster_cliques(latency, self.max_distance, self.max_servers)
        self.clique_of_ = np.empty(n, dtype=np.int64)
        for c, members in enumerate(self.cliques_):
            self.clique_of_[members] = c
        sub_clique = self.clique_of_[holder]
        self.zone_mins_, self.zone_maxs_ = clique_zones(
            self.cliques_, n, (mins + maxs) / 2, sub_clique, lo, hi)
        self.labels_ = holder.copy()
        self.zones_overlapped_ = np.zeros(len(holder), dtype=np.int64)
        for c, members in enumerate(self.cliques_):
            rows = np.flatnonzero(sub_clique == c)
            if rows.size:
                self._place(rows, np.asarray(members), mins, maxs, holder)
        return self

    def _place(self, rows, members, mins, maxs, holder) -> None:
        z_lo, z_hi = self.zone_mins_[members], self.zone_maxs_[members]
        touching = overlaps(mins[rows, None, :], maxs[rows, None, :], z_lo[None], z_hi[None])
        self.zones_overlapped_[rows] = touching.sum(axis=1)
        # Shares of zones the box does not touch are 0; -1 keeps them below a touched zone's 0
        # (a box meeting a zone only at a face).
        score = np.where(touching, zone_shares(mins[rows], maxs[rows], z_lo, z_hi), -1.0)
        best = score.max(axis=1, keepdims=True)
        at_best = score >= best - 1e-12
        stays = at_best & (members[None, :] == holder[rows, None])
        choice = np.where(stays.any(axis=1), np.argmax(stays, axis=1), np.argmax(at_best, axis=1))
        self.labels_[rows] = members[choice]
