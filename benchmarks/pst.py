"""Gryphon's Chart 3 workload on the parallel search tree (gryphon-link-matching.txt 4.1):
matching steps per event of centralized matching, in process::

    from benchmarks.pst import chart3_workload, chart3_steps
    chart3_steps([1000, 10000])   # {"1000": {"steps": ..., "match_share": ...}, ...}

Workload: 10 attributes x 3 values; attribute i is tested (not ``*``) with probability
P x D^i (P = 0.98, D = 0.82); values Zipf (1/rank) over the 3 values; events draw every
attribute from the same Zipf. The seed's 3 factoring attributes are not modelled (the tree
here has no factoring), so its step counts are not expected to equal the seed's.
"""
from __future__ import annotations

import numpy as np

from matchers.pst import ParallelSearchTree

ATTRIBUTES = [f"a{i}" for i in range(10)]


def chart3_workload(n: int, events: int = 1000, *, values: int = 3, p: float = 0.98,
                    d: float = 0.82, seed: int = 1):
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


def chart3_steps(sizes=(1000, 2000, 5000, 10000), events: int = 1000) -> dict:
    out = {}
    for n in sizes:
        subscriptions, published = chart3_workload(n, events)
        tree = ParallelSearchTree(ATTRIBUTES)
        for k, tests in enumerate(subscriptions):
            tree.add(k, tests)
        steps = matched = 0
        for event in published:
            found, visited = tree.match_counting(event)
            steps += visited
            matched += len(found)
        out[str(n)] = {"steps": steps / events, "match_share": matched / (events * n)}
    return out


if __name__ == "__main__":
    import json
    print(json.dumps(chart3_steps(), indent=1))
