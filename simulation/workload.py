"""Section 4.1's workloads: ``attributes`` x ``values``, subscriptions testing attribute i
for equality with probability P * D**i (else ``*``), values drawn from a Zipf law whose
favoured values depend on the region (subscribers and publishers of a region like the same
values: locality of interest), the first ``factoring`` attributes used by the PST for
factoring.  A subscription is a row of value indices, -1 for ``*``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .topology import Topology, region_of

__all__ = ["Workload", "make_workload", "DONT_CARE"]

DONT_CARE = -1


@dataclass(frozen=True)
class Workload:
    attributes: int
    values: int
    factoring: int
    subscriptions: np.ndarray      # (n, attributes) value indices, DONT_CARE for *
    subscriber: np.ndarray         # (n,) index of the client (broker index * clients + k)
    brokers: tuple                 # broker names, in client index order
    clients_per_broker: int
    events: dict                   # publisher broker -> (m, attributes) event values

    @property
    def names(self) -> tuple:
        return tuple(f"a{i}" for i in range(self.attributes))

    def broker_of(self, sub: int) -> str:
        return self.brokers[int(self.subscriber[sub]) // self.clients_per_broker]

    def tests(self, sub: int) -> dict:
        """Subscription ``sub`` as attribute -> value (the ``*`` attributes left out)."""
        return {f"a{i}": int(v) for i, v in enumerate(self.subscriptions[sub]) if v != DONT_CARE}

    def matching(self, event: np.ndarray, subs: np.ndarray | None = None) -> np.ndarray:
        """Indices of the subscriptions (of ``subs``, default all) ``event`` matches: the
        exactness oracle, not a router."""
        rows = self.subscriptions if subs is None else self.subscriptions[subs]
        hit = np.all((rows == DONT_CARE) | (rows == event), axis=1)
        found = np.flatnonzero(hit)
        return found if subs is None else np.asarray(subs)[found]

    def matching_share(self) -> float:
        """Mean share of subscriptions an event matches, over every event."""
        shares = [len(self.matching(e)) / len(self.subscriptions)
                  for events in self.events.values() for e in events]
        return float(np.mean(shares)) if shares else 0.0


def _zipf_values(rng, count: int, values: int, region: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, values + 1) ** exponent
    ranks = rng.choice(values, size=count, p=weights / weights.sum())
    return (ranks + region) % values      # region r favours value r, then r+1, ...


def make_workload(topology: Topology, publishers: list, *, subscriptions: int,
                  events: int, attributes: int = 10, values: int = 3, factoring: int = 3,
                  p: float = 0.98, d: float = 0.82, zipf: float = 1.0,
                  seed: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    brokers = tuple(topology.brokers)
    clients = len(brokers) * topology.clients_per_broker
    subscriber = rng.integers(0, clients, size=subscriptions)
    regions = np.array([region_of(brokers[c // topology.clients_per_broker]) for c in subscriber],
                       dtype=np.int64)
    care = rng.random((subscriptions, attributes)) < p * d ** np.arange(attributes)
    rows = np.full((subscriptions, attributes), DONT_CARE, dtype=np.int64)
    for region in range(3):
        mine = regions == region
        drawn = _zipf_values(rng, int(mine.sum()) * attributes, values, region, zipf)
        rows[mine] = np.where(care[mine], drawn.reshape(-1, attributes), DONT_CARE)
    published = {}
    for broker in publishers:
        drawn = _zipf_values(rng, events * attributes, values, region_of(broker), zipf)
        published[broker] = drawn.reshape(events, attributes)
    return Workload(attributes, values, factoring, rows, subscriber, brokers,
                    topology.clients_per_broker, published)
