"""Chart 3 of Gryphon's link-matching paper (Banavar et al., ICDCS 1999, section 4.1) on the
parallel search tree: matching steps per event, link matching summed over the brokers on the
path against centralized matching::

    from benchmarks.reproductions.pst import chart3_figures
    chart3_figures(quick=True)   # {"subscriptions": [...], "centralized_steps": [...], ...}

**Workload** (:func:`simulation.make_workload`, the simulator's): 10 attributes x 3
values, attribute i tested with probability P x D^i (P = 0.98, D = 0.82), Zipf values favoured
by region, subscribers spread over the 39 brokers' clients; events published by the three
publishers of ``edn bench brokers`` (P1, P2, P3: a grandchild in each region), 1,000 in all.
Both algorithms use the same tree options: 3 factoring attributes (the paper's), delayed
branching off unless asked.

**Centralized**: one :class:`~matchers.pst.ParallelSearchTree` over every subscription; the
steps of one search per event.

**Link matching**: every broker holds every subscription; for publisher ``p`` a broker's links
are its neighbours in ``p``'s shortest-path spanning tree (its parent, its children) and one
link per local client; a subscription is on the link towards its subscriber. The
initialization mask is M on the children and the clients, N on the parent. The brokers share
one prepared tree (:meth:`~matchers.pst.LinkMatcher.over`), each with its own annotation.
A **path of h hops** goes from the publishing broker to a subscribing client through h
brokers (h - 1 broker links and the link to the client): "LM 1 hop" is a subscriber of the
publishing broker itself. Its steps are the link-matching steps of those h brokers summed
(each decides its children and its own clients); a figure is the mean over every (event,
broker holding a subscription the event matches) at that distance: the paths events really
take. Every broker's decision is checked against the oracle (a link is Y iff a matching
subscription is behind it): ``exact``.

The paper leaves open whether clients are links of Chart 3's brokers (its section 3 says a
broker's links go to "brokers or clients"). ``client_links=False`` is the other reading: a
broker's links are its tree neighbours only, local delivery is decided apart (as in
:mod:`simulation`, the same in every mode) and not counted, and a path of h hops is
h broker links, summed over the h brokers that forward the event (the subscriber's broker
does no link matching for it). On the Gryphon topology with P1..P3 this gives paths of 1 to
6 hops, the paper's six lines; with client links paths run from 1 to 7 hops (the lateral links
make a few spanning-tree paths 6 broker links long).

:func:`chart3_steps` (centralized only, on the region-free workload of
:func:`chart3_workload`) is kept for its callers.
"""
from __future__ import annotations

import math

import numpy as np

from matchers.pst import LinkMatcher, ParallelSearchTree
from matchers.pst.trits import initialization_mask

ATTRIBUTES = [f"a{i}" for i in range(10)]
FULL_SIZES = tuple(range(1000, 10001, 1000))
QUICK_SIZES = (300, 1000)


def chart3_workload(n: int, events: int = 1000, *, values: int = 3, p: float = 0.98,
                    d: float = 0.82, seed: int = 1):
    """Region-free: attribute i tested with probability P x D^i, values Zipf (1/rank) over
    the 3 values for subscriptions and events alike."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, values + 1)
    weights /= weights.sum()
    subscriptions = []
    for _ in range(n):
        tests = {a: int(rng.choice(values, p=weights)) for i, a in enumerate(ATTRIBUTES)
                 if rng.random() < p * d ** i}
        subscriptions.append(tests)
    published = [{a: int(v) for a, v in zip(ATTRIBUTES, rng.choice(values, size=len(ATTRIBUTES),
                                                                   p=weights))}
                 for _ in range(events)]
    return subscriptions, published


def chart3_steps(sizes=(1000, 2000, 5000, 10000), events: int = 1000, *,
                 factoring=(), delayed_branching=0) -> dict:
    """Centralized steps per event on :func:`chart3_workload` (no factoring by default)."""
    out = {}
    for n in sizes:
        subscriptions, published = chart3_workload(n, events)
        tree = ParallelSearchTree(ATTRIBUTES, factoring=factoring,
                                  delayed_branching=delayed_branching)
        for k, tests in enumerate(subscriptions):
            tree.add(k, tests)
        steps = matched = 0
        for event in published:
            found, visited = tree.match_counting(event)
            steps += visited
            matched += len(found)
        out[str(n)] = {"steps": steps / events, "match_share": matched / (events * n)}
    return out


def chart3_figures(quick: bool = False, *, sizes=None, events: int | None = None,
                   factoring: int = 3, delayed_branching: int = 0, client_links: bool = True,
                   d: float = 0.82, seed: int = 0) -> dict:
    """Chart 3's figures by name (see the module docstring); ``quick``: two small sizes and
    90 events, a second or so. ``client_links=False``: the other reading (see the module
    docstring). ``d``: the degradation factor D (the matching share falls as it grows)."""
    from benchmarks.reproductions.brokers import PUBLISHERS     # not at import: brokers imports this module
    from simulation import gryphon_topology, make_workload

    sizes = tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    events = events or (90 if quick else 1000)
    per_publisher = math.ceil(events / len(PUBLISHERS))
    topology = gryphon_topology()
    trees = {p: topology.spanning_tree(p) for p in PUBLISHERS}
    figures: dict = {"subscriptions": list(sizes), "events": per_publisher * len(PUBLISHERS),
                     "publishers": list(PUBLISHERS), "factoring": factoring,
                     "delayed_branching": delayed_branching, "client_links": client_links, "d": d,
                     "centralized_steps": [],
                     "centralized_steps_without_factoring": [], "link_steps_per_broker": [],
                     "matching_share": [], "exact": True}
    paths = []   # per size: hops -> (summed steps, paths)
    for n in sizes:
        workload = make_workload(topology, list(PUBLISHERS), subscriptions=n,
                                 events=per_publisher, attributes=len(ATTRIBUTES), values=3,
                                 factoring=factoring, p=0.98, d=d, seed=seed)
        run = _Chart3Run(topology, trees, workload, delayed_branching, client_links)
        figures["centralized_steps"].append(run.centralized(run.tree))
        figures["centralized_steps_without_factoring"].append(run.centralized(
            run.new_tree(factoring=0)))
        figures["matching_share"].append(run.matching_share)
        by_hops, per_broker = run.link_matching()
        paths.append(by_hops)
        figures["link_steps_per_broker"].append(per_broker)
        figures["exact"] = figures["exact"] and run.exact
    hops = sorted({h for by_hops in paths for h in by_hops})
    figures["link_steps_by_hops"] = {
        str(h): [by_hops[h][0] / by_hops[h][1] if h in by_hops else None for by_hops in paths]
        for h in hops}
    figures["paths_by_hops"] = {str(h): [by_hops.get(h, (0, 0))[1] for by_hops in paths]
                                for h in hops}
    figures["largest_subscriptions"] = sizes[-1]
    # at the largest size, the most hops h for which link matching over 1..h hops takes no
    # more steps than centralized matching (the paper: 4 at 10,000 subscriptions)
    within = 0
    for h, column in figures["link_steps_by_hops"].items():
        if column[-1] is None or column[-1] > figures["centralized_steps"][-1]:
            break
        within = int(h)
    figures["crossover_hops_at_largest"] = within
    return figures


class _Chart3Run:
    """One size of Chart 3: the workload's events, their oracle, the shared tree."""

    def __init__(self, topology, trees: dict, workload, delayed_branching: int,
                 client_links: bool) -> None:
        self.topology, self.trees, self.workload = topology, trees, workload
        self.delayed_branching, self.client_links = delayed_branching, client_links
        self.tree = self.new_tree(factoring=workload.factoring)
        self.events = {p: [dict(zip(workload.names, map(int, row))) for row in rows]
                       for p, rows in workload.events.items()}
        self.owner = [workload.broker_of(s) for s in range(len(workload.subscriptions))]
        # the oracle: per publisher and event, the matching subscriptions
        self.matches = {p: [workload.matching(row) for row in rows]
                        for p, rows in workload.events.items()}
        count = sum(len(m) for found in self.matches.values() for m in found)
        published = sum(map(len, self.matches.values()))
        self.matching_share = count / (len(workload.subscriptions) * published)
        self.exact = True

    def new_tree(self, factoring: int) -> ParallelSearchTree:
        tree = ParallelSearchTree(self.workload.names, factoring=factoring,
                                  delayed_branching=self.delayed_branching)
        for s in range(len(self.workload.subscriptions)):
            tree.add(s, self.workload.tests(s))
        return tree

    def centralized(self, tree: ParallelSearchTree) -> float:
        steps = visits = 0
        for publisher, events in self.events.items():
            for event, expected in zip(events, self.matches[publisher]):
                found, visited = tree.match_counting(event)
                self.exact = self.exact and sorted(found) == expected.tolist()
                steps += visited
                visits += 1
        return steps / visits

    def link_matching(self) -> tuple[dict, float]:
        """hops -> (summed steps, paths), and the mean steps of one broker's search."""
        by_hops: dict = {}
        broker_steps = broker_visits = 0
        clients = self.topology.clients_per_broker
        for publisher, spanning in self.trees.items():
            below = {b: {d: c for c in spanning.children[b] for d in spanning.subtree(c)}
                     for b in self.topology.brokers}
            destinations = [{self.owner[s] for s in found} for found in self.matches[publisher]]
            steps: dict = {}   # (broker, event) -> steps of that broker's search
            for broker in self.topology.brokers:
                # the events that reach the broker and need its link matching
                reached = {e for e, wanted in enumerate(destinations)
                           if wanted & below[broker].keys()
                           or (self.client_links and broker in wanted)}
                if not reached:
                    continue
                matcher, mask = self._matcher(publisher, spanning, broker, below[broker])
                for e in reached:
                    sent, steps[(broker, e)] = matcher.link_match(self.events[publisher][e], mask)
                    expected = {below[broker][d] for d in destinations[e] if d in below[broker]}
                    if self.client_links:
                        expected |= {f"client{self.workload.subscriber[s] % clients}"
                                     for s in self.matches[publisher][e]
                                     if self.owner[s] == broker}
                    self.exact = self.exact and sent == expected
                broker_steps += sum(steps[(broker, e)] for e in reached)
                broker_visits += len(reached)
            for e, wanted in enumerate(destinations):
                for destination in wanted:
                    path = []   # the brokers that match for this delivery
                    if self.client_links:
                        path.append(destination)
                    broker = destination
                    while broker != publisher:
                        broker = spanning.parent[broker]
                        path.append(broker)
                    if path:    # (without client links, a local subscriber takes no hop)
                        total, count = by_hops.get(len(path), (0, 0))
                        by_hops[len(path)] = (total + sum(steps[(b, e)] for b in path),
                                              count + 1)
        return by_hops, broker_steps / max(broker_visits, 1)

    def _matcher(self, publisher: str, spanning, broker: str, below: dict):
        clients = self.topology.clients_per_broker
        up = [] if broker == publisher else [spanning.parent[broker]]
        local = [f"client{k}" for k in range(clients)] if self.client_links else ["local"]
        links = [*up, *spanning.children[broker], *local]
        link_of = {}
        for s, owner in enumerate(self.owner):
            if owner == broker:
                link_of[s] = local[self.workload.subscriber[s] % len(local)]
            else:
                link_of[s] = below.get(owner) or up[0]
        # M downstream; without client links local delivery is not link matching's: N
        closed = {*up, *([] if self.client_links else local)}
        mask = initialization_mask(links, set(links) - closed)
        return LinkMatcher.over(self.tree, links, link_of), mask


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(chart3_figures(quick="--quick" in sys.argv), indent=1))
