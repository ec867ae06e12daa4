"""Random subscription routing (paper III-A): oblivious to similarity, a uniformly random
server among those below the load threshold."""
from __future__ import annotations

import numpy as np

from .base import Partitioner, as_generator

__all__ = ["RandomPartitioner"]


class RandomPartitioner(Partitioner):
    """Each subscription, in order, goes to a uniformly random server below the threshold.

    ``fit`` draws every label at once and then moves, per overflowing server, the subscriptions
    that arrived after it filled up to random servers with room (vectorised; routing one by one
    differs only in which servers had room at the moment of each move).
    """

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None,
                 random_state=None):
        self.load_factor = load_factor
        self.capacity = capacity
        self.random_state = random_state

    def _fit(self, mins, maxs):
        self._rng = as_generator(self.random_state)
        k, cap = self.n_servers_, self.capacity_
        labels = self._rng.integers(0, k, size=len(mins))
        while True:
            loads = np.bincount(labels, minlength=k)
            if (loads <= cap).all():
                break
            overflow = []
            for server in np.flatnonzero(loads > cap):
                overflow.append(np.flatnonzero(labels == server)[cap:])
            overflow = np.concatenate(overflow)
            room = np.flatnonzero(loads < cap)
            labels[overflow] = room[self._rng.integers(0, len(room), size=len(overflow))]
        self.labels_ = labels

    def _assign_one(self, lo, hi) -> int:
        eligible = np.flatnonzero(self._eligible())
        return int(eligible[self._rng.integers(0, len(eligible))])
