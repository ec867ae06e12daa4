"""Gryphon's link matching (Banavar et al., "An Efficient Multicast Protocol for Content-Based
Publish-Subscribe Systems", ICDCS 1999, section 3) as a simulator router, deciding
with the real :class:`matchers.pst.LinkMatcher`, never a copy of it.

Each broker holds every subscription in one LinkMatcher whose trit positions are the broker's
links; the matcher's steps (nodes visited) are charged at ``step_s`` each by the simulator.
The tree factors on the workload's first ``factoring`` attributes (the paper's section 2.1:
1 in Chart 2, 3 in Chart 3); delayed branching is off (the paper's runs do not say).
For an event of publisher ``p`` the initialization mask has M on the links leading to the
broker's children in ``p``'s spanning tree, N elsewhere; the event goes out on the Y links of
the refined mask.  Local delivery is the same in every mode
(:class:`~simulation.routing.Router`), so the broker's own subscribers sit under a
``clients`` position that is always N: link matching decides broker links only.

Virtual links (the paper's footnote 2).  With lateral links the publishers' shortest-path trees
disagree with a broker's own shortest paths: broker 1.1 reaches 0.9 through 1.5 (the lateral
1.5 - 0.2), a child of 1.1 on 1.7's tree, while 1.7's tree reaches 0.9 through 1.0 and 0.0.
Filing 0.9's subscriptions under the physical link 1.5 would send 1.7's events down 1.5 for a
subscriber that is not below it there: a useless link.  So, as the paper says, a physical link
is split: a broker groups the other brokers by the child that leads to them on each
publisher's tree (or none, when they are not below it there); each group is one trit
position, and a subscription is filed under its subscriber's broker's group.  The mask for
publisher ``p`` has M on the groups below the broker on ``p``'s tree, and the Y groups go out
on their physical link for ``p``, coalesced (one copy per physical link).  On a tree-shaped
network the groups are the neighbours.

The subscriptions are the same at every broker, so the tree is built once and shared
(:meth:`LinkMatcher.over`); a broker's matcher annotates it on the first event the broker sees,
is asked about every pooled event of every publisher at once (decisions are pure functions of
broker, publisher and event), and is dropped: 39 annotations need not live together, and a
simulation at many rates matches each event once.
"""

from __future__ import annotations

import numpy as np

from matchers.pst import LinkMatcher, ParallelSearchTree
from matchers.pst.trits import initialization_mask

from .routing import Router
from .topology import SpanningTree, Topology
from .workload import Workload

__all__ = ["LinkMatchingRouter", "CLIENTS_LINK", "VirtualLinks", "virtual_links"]

CLIENTS_LINK = "clients"
NOT_BELOW = "-"


class VirtualLinks:
    """A broker's trit positions: ``links`` (names), ``of`` (destination broker -> its
    position's name), ``physical`` (name -> {publisher: neighbour}, only for the publishers
    whose tree has that group below the broker)."""

    def __init__(self, links: list, of: dict, physical: dict) -> None:
        self.links, self.of, self.physical = links, of, physical

    def mask(self, publisher: str) -> str:
        return initialization_mask(self.links, {link for link, hops in self.physical.items()
                                                if publisher in hops})


def virtual_links(topology: Topology, broker: str, trees: dict) -> VirtualLinks:
    """Group the other brokers by the child of ``broker`` that leads to them on each
    publisher's tree (or none).  A group is named by its physical links (``-``: below on no
    tree), ``#2``, ``#3``... telling apart the groups that split one link."""
    publishers = sorted(trees)
    hops_of: dict = {b: [] for b in topology.brokers if b != broker}
    for publisher in publishers:
        tree = trees[publisher]
        below = {d: child for child in tree.children[broker] for d in tree.subtree(child)}
        for destination, hops in hops_of.items():
            hops.append(below.get(destination, NOT_BELOW))
    names: dict = {}      # hops per publisher -> the group's name
    of, physical = {}, {}
    for destination, hops in hops_of.items():
        key = tuple(hops)
        if key not in names:
            base = "|".join(sorted(set(hops) - {NOT_BELOW})) or NOT_BELOW
            taken = sum(name.split("#")[0] == base for name in names.values())
            names[key] = base if not taken else f"{base}#{taken + 1}"
            physical[names[key]] = {p: hop for p, hop in zip(publishers, hops)
                                    if hop != NOT_BELOW}
        of[destination] = names[key]
    links = sorted(physical) + [CLIENTS_LINK]
    physical[CLIENTS_LINK] = {}
    return VirtualLinks(links, of, physical)


class LinkMatchingRouter(Router):
    name = "linkmatching"
    exact_links = True

    def __init__(self, topology: Topology, trees: dict, workload: Workload) -> None:
        super().__init__(topology, trees, workload)
        self._events = {p: [dict(zip(workload.names, map(int, row))) for row in rows]
                        for p, rows in workload.events.items()}
        self._tests = [workload.tests(s) for s in range(len(workload.subscriptions))]
        self._owner = [workload.broker_of(s) for s in range(len(workload.subscriptions))]
        self._shared: ParallelSearchTree | None = None
        self._decided: dict = {}   # broker -> {(publisher, event): (forward, steps)}
        #: the number of nodes of the shared PST (its size, for the table)
        self.pst_nodes: int | None = None
        #: per broker, its trit positions (virtual links and ``clients``)
        self.positions: dict = {}

    def route(self, broker: str, tree: SpanningTree, publisher: str, event: int):
        if broker not in self._decided:
            self._decided[broker] = self._decide_all(broker)
        return self._decided[broker][(publisher, event)]

    def _matcher(self, broker: str) -> tuple[LinkMatcher, VirtualLinks]:
        positions = virtual_links(self.topology, broker, self.trees)
        link_of = {sub: CLIENTS_LINK if owner == broker else positions.of[owner]
                   for sub, owner in enumerate(self._owner)}
        return LinkMatcher.over(self.shared_tree(), positions.links, link_of), positions

    def shared_tree(self) -> ParallelSearchTree:
        """Every broker's PST holds every subscription, the same tree: built once, shared
        (each broker annotates it with its own links)."""
        if self._shared is None:
            self._shared = ParallelSearchTree(self.workload.names,
                                              factoring=self.workload.factoring)
            for sub, tests in enumerate(self._tests):
                self._shared.add(sub, tests)
        return self._shared

    def _decide_all(self, broker: str) -> dict:
        matcher, positions = self._matcher(broker)
        if self.pst_nodes is None:      # the same tree at every broker: count it once
            self.pst_nodes = len(matcher.annotate())
        self.positions[broker] = len(positions.links)
        decided = {}
        for publisher in self.trees:
            mask = positions.mask(publisher)
            if "M" not in mask:     # a leaf of the publisher's tree: nothing to decide
                decided.update(((publisher, event), ((), 0))
                               for event in range(len(self._events[publisher])))
                continue
            for event, values in enumerate(self._events[publisher]):
                sent, steps = matcher.link_match(values, mask)
                physical = {positions.physical[link][publisher] for link in sent}
                decided[(publisher, event)] = (tuple(sorted(physical)), steps)
        return decided

    def downstream_matches(self, broker: str, publisher: str, event: int) -> set[str]:
        """The oracle's answer for comparison in tests: the children of ``broker`` on the
        publisher's tree with a matching subscription somewhere below them."""
        tree = self.trees[publisher]
        values = self.workload.events[publisher][event]
        return {child for child in tree.children[broker]
                if len(self.workload.matching(values, np.concatenate(
                    [self.subs_at[b] for b in tree.subtree(child)])))}
