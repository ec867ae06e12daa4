"""A Kyra network built from a latency matrix and the subscriptions (Kyra III): cliques, zones,
proxies, routing trees, and the route an event takes."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .cliques import check_latency, cliques as cluster_cliques
from .subscription_placement import clique_zones
from .zones import median_zones, overlaps, zone_of

__all__ = ["KyraNetwork", "Route", "minimum_spanning_tree", "proxy_assignment"]


class Route(NamedTuple):
    """How one event travels: ``links`` (from, to) in the order sent, the ``delivering``
    servers (those holding a matching proxy subscription), and ``matching_work``: how many
    servers matched the event against a routing table (the clique owner and every tree server
    the event reached)."""

    links: list[tuple[int, int]]
    delivering: list[int]
    matching_work: int


def minimum_spanning_tree(latency: np.ndarray, nodes: Sequence[int]) -> list[tuple[int, int]]:
    """Prim's MST over ``nodes`` with edge weights ``max(latency[u, v], latency[v, u])``;
    edges as (parent, child) server pairs, ties to the lowest index."""
    nodes = list(nodes)
    if len(nodes) <= 1:
        return []
    weights = np.maximum(latency, latency.T)[np.ix_(nodes, nodes)]
    in_tree = np.zeros(len(nodes), dtype=bool)
    in_tree[0] = True
    best = weights[0].copy()
    parent = np.zeros(len(nodes), dtype=np.int64)
    edges = []
    for _ in range(len(nodes) - 1):
        candidate = np.where(in_tree, np.inf, best)
        child = int(np.argmin(candidate))
        in_tree[child] = True
        edges.append((nodes[int(parent[child])], nodes[child]))
        closer = ~in_tree & (weights[child] < best)
        best[closer] = weights[child][closer]
        parent[closer] = child
    return edges


class KyraNetwork:
    """Kyra over ``n`` servers.

    Parameters: ``latency`` (n, n) milliseconds; subscriptions as boxes ``mins``/``maxs``
    (m, d) with ``entry`` (m,) the server each arrived at; the content ``domain`` ``(lo, hi)``;
    ``max_distance`` / ``max_servers`` of a clique (Fig. 5); ``n_trees`` (default: the largest
    clique's size, the paper's T ~ max k_i).

    Built state: ``cliques_`` (lists of servers), ``clique_of_`` (n,), per server its zone
    ``zone_mins_``/``zone_maxs_`` (the median-cut zones of its clique, over the centres of the
    clique's subscriptions), ``tree_mins_``/``tree_maxs_`` (T global zones, over all
    subscription centres), ``trees_`` (per tree zone: its servers and MST edges), and
    ``proxies_`` (per server: indices of the subscriptions it proxies: those of its clique that
    overlap its zone).

    Routing (:meth:`route`): the publisher hands the event to the server of its clique whose
    zone holds it; that server is on the tree whose zone holds the event and routes it there as
    Siena does on an acyclic network: over a tree edge only when the far side holds a server
    whose routing entries match. A server's entry on a tree is each proxy subscription clipped
    to its own zone, so the event reaches, in every clique with a matching subscription,
    exactly the server owning the event's point there (it proxies all the clique's matching
    subscriptions); other proxies of those subscriptions, whose zones do not hold the event,
    are not bothered.
    """

    def __init__(self, latency, mins, maxs, entry, domain, *, max_distance: float,
                 max_servers: int, n_trees: int | None = None):
        self.latency = check_latency(latency)
        n = len(self.latency)
        self.mins = np.asarray(mins, dtype=np.float64)
        self.maxs = np.asarray(maxs, dtype=np.float64)
        self.entry = np.asarray(entry, dtype=np.int64)
        lo, hi = (np.asarray(x, dtype=np.float64) for x in domain)
        d = len(lo)
        self.mins = self.mins.reshape(-1, d)
        self.maxs = self.maxs.reshape(-1, d)
        if not (len(self.mins) == len(self.maxs) == len(self.entry)):
            raise ValueError("mins, maxs and entry must have one row per subscription")
        if len(self.entry) and (self.entry.min() < 0 or self.entry.max() >= n):
            raise ValueError("an entry server is outside the latency matrix")
        self.domain = (lo, hi)
        self.cliques_ = cluster_cliques(self.latency, max_distance, max_servers)
        self.clique_of_ = np.empty(n, dtype=np.int64)
        for c, members in enumerate(self.cliques_):
            self.clique_of_[members] = c
        centres = (self.mins + self.maxs) / 2
        sub_clique = self.clique_of_[self.entry]
        self.zone_mins_, self.zone_maxs_ = clique_zones(self.cliques_, n, centres, sub_clique,
                                                        lo, hi)
        t = max(len(m) for m in self.cliques_) if n_trees is None else int(n_trees)
        self.tree_mins_, self.tree_maxs_ = median_zones(centres, lo, hi, t)
        self.proxies_ = []
        for server in range(n):
            same = sub_clique == self.clique_of_[server]
            hit = overlaps(self.mins, self.maxs, self.zone_mins_[server], self.zone_maxs_[server])
            self.proxies_.append(np.flatnonzero(same & hit))
        self.trees_ = []
        for z in range(t):
            members = np.flatnonzero(overlaps(self.zone_mins_, self.zone_maxs_,
                                              self.tree_mins_[z], self.tree_maxs_[z]))
            self.trees_.append((members.tolist(),
                                minimum_spanning_tree(self.latency, members.tolist())))

    @property
    def n_servers(self) -> int:
        return len(self.latency)

    def owner(self, point, server: int) -> int:
        """The server of ``server``'s clique whose zone holds ``point``."""
        members = self.cliques_[self.clique_of_[server]]
        return members[zone_of(point, self.zone_mins_[members], self.zone_maxs_[members])]

    def matching_proxies(self, point, server: int) -> np.ndarray:
        """The subscriptions ``server`` proxies that match ``point``, counted only when the point
        is in its zone (its routing entries are clipped to the zone; a point on a face between
        zones counts for the first of them only)."""
        point = np.asarray(point, dtype=np.float64)
        if self.owner(point, server) != server:  # a point on a face has one owner only
            return np.empty(0, dtype=np.int64)
        ids = self.proxies_[server]
        inside = np.all((self.mins[ids] <= point) & (point <= self.maxs[ids]), axis=1)
        return ids[inside]

    def route(self, event_point, publisher_server: int) -> Route:
        """The route of an event published at ``publisher_server`` (see the class docstring)."""
        point = np.asarray(event_point, dtype=np.float64)
        if not 0 <= int(publisher_server) < self.n_servers:
            raise ValueError(f"unknown publisher server {publisher_server}")
        start = self.owner(point, int(publisher_server))
        links: list[tuple[int, int]] = []
        if start != publisher_server:
            links.append((int(publisher_server), start))
        members, edges = self.trees_[zone_of(point, self.tree_mins_, self.tree_maxs_)]
        wants = {s: self.matching_proxies(point, s).size > 0 for s in members}
        neighbours: dict[int, list[int]] = {s: [] for s in members}
        for u, v in edges:
            neighbours[u].append(v)
            neighbours[v].append(u)
        delivering: list[int] = []
        visited = 0
        stack = [(start, -1)]
        while stack:  # depth-first from the entry, forwarding only toward matching entries
            server, came_from = stack.pop()
            visited += 1
            if wants[server]:
                delivering.append(server)
            for nxt in neighbours[server]:
                if nxt != came_from and self._subtree_wants(nxt, server, neighbours, wants):
                    links.append((server, nxt))
                    stack.append((nxt, server))
        return Route(links, sorted(delivering), visited)

    @staticmethod
    def _subtree_wants(node, parent, neighbours, wants) -> bool:
        stack = [(node, parent)]
        while stack:
            current, came_from = stack.pop()
            if wants[current]:
                return True
            stack.extend((n, current) for n in neighbours[current] if n != came_from)
        return False


def proxy_assignment(network: KyraNetwork, ids: Sequence[str]) -> dict[int, list[str]]:
    """Per server index, the ids of the subscriptions it must hold as proxy (``ids[i]`` names
    subscription ``i`` of ``network``). A subscription overlapping several zones of its clique
    is listed under each of them. The form matches :mod:`route_manager.repartition`'s
    (source, destination) moves: a subscription whose ``entry`` server is not among its proxies
    moves from there to its first proxy; the other proxies need copies."""
    if len(ids) != len(network.entry):
        raise ValueError("one id per subscription")
    return {server: [ids[i] for i in network.proxies_[server]]
            for server in range(network.n_servers)}
