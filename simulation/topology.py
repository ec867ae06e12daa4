"""Gryphon's simulated topology (section 4.1, Figure 5) and shortest-path spanning trees.

Three regional subtrees of 13 brokers (a root, 3 children, 9 grandchildren); the roots are
linked pairwise (one-way 50, 65 and 75 ms), 25 ms from a root to its children, 10 ms from a
child to its grandchildren, a few lateral 50 ms links between non-root brokers of different
regions, 10 clients per broker at 1 ms.  Brokers are named ``"r.i"``: region r, index i
(0 the root, 1-3 its children, 4-12 the grandchildren, child k's being 3k+1 .. 3k+3)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

__all__ = ["Topology", "SpanningTree", "gryphon_topology", "ROOT_DELAYS_MS", "LATERAL_LINKS"]

ROOT_DELAYS_MS = {(0, 1): 50.0, (1, 2): 65.0, (0, 2): 75.0}
CHILD_DELAY_MS = 25.0
GRANDCHILD_DELAY_MS = 10.0
CLIENT_DELAY_MS = 1.0
LATERAL_DELAY_MS = 50.0
#: non-root brokers of different regions, so that some publishers' events take another path
LATERAL_LINKS = (("0.2", "1.5"), ("1.3", "2.9"), ("2.2", "0.12"))


@dataclass(frozen=True)
class SpanningTree:
    """The shortest-path tree from ``root``: each broker's parent and children."""

    root: str
    parent: dict
    children: dict
    distance_ms: dict

    def hops(self, broker: str) -> int:
        count = 0
        while broker != self.root:
            broker = self.parent[broker]
            count += 1
        return count

    def subtree(self, broker: str) -> list[str]:
        """``broker`` and every broker below it."""
        found, stack = [], [broker]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(self.children[node])
        return found


@dataclass
class Topology:
    """Brokers, undirected links with one-way delays (ms), clients per broker."""

    delays: dict = field(default_factory=dict)  # broker -> {neighbour: ms}
    clients_per_broker: int = 10
    client_delay_ms: float = CLIENT_DELAY_MS

    def link(self, a: str, b: str, ms: float) -> None:
        if a == b or ms <= 0:
            raise ValueError(f"bad link {a}-{b} ({ms} ms)")
        self.delays.setdefault(a, {})[b] = ms
        self.delays.setdefault(b, {})[a] = ms

    @property
    def brokers(self) -> list[str]:
        return sorted(self.delays, key=_order)

    def neighbours(self, broker: str) -> list[str]:
        return sorted(self.delays[broker], key=_order)

    def spanning_tree(self, root: str) -> SpanningTree:
        """Dijkstra from ``root``; ties go to the smaller broker name, so every broker
        computes the same tree."""
        distance = {root: 0.0}
        parent: dict = {}
        heap = [(0.0, _order(root), root)]
        done = set()
        while heap:
            dist, _, node = heapq.heappop(heap)
            if node in done:
                continue
            done.add(node)
            for other, ms in self.delays[node].items():
                candidate = dist + ms
                if other not in distance or candidate < distance[other] - 1e-9:
                    distance[other], parent[other] = candidate, node
                    heapq.heappush(heap, (candidate, _order(other), other))
        children: dict = {b: [] for b in self.delays}
        for node, up in parent.items():
            children[up].append(node)
        for kids in children.values():
            kids.sort(key=_order)
        return SpanningTree(root, parent, children, distance)


def _order(name: str) -> tuple:
    return tuple(int(part) for part in name.split("."))


def region_of(broker: str) -> int:
    return int(broker.split(".")[0])


def gryphon_topology(lateral: tuple = LATERAL_LINKS, clients_per_broker: int = 10) -> Topology:
    topology = Topology(clients_per_broker=clients_per_broker)
    for region in range(3):
        for child in range(1, 4):
            topology.link(f"{region}.0", f"{region}.{child}", CHILD_DELAY_MS)
            for grandchild in range(3 * child + 1, 3 * child + 4):
                topology.link(f"{region}.{child}", f"{region}.{grandchild}", GRANDCHILD_DELAY_MS)
    for (a, b), ms in ROOT_DELAYS_MS.items():
        topology.link(f"{a}.0", f"{b}.0", ms)
    for a, b in lateral:
        if a.endswith(".0") or b.endswith(".0") or region_of(a) == region_of(b):
            raise ValueError(f"a lateral link joins non-root brokers of two regions, not {a}-{b}")
        topology.link(a, b, LATERAL_DELAY_MS)
    return topology
