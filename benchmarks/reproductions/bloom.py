"""Box summaries against Bloom-filter summaries on a symbol-heavy workload.

Workload: ``symbols`` ticker symbols (distinct 4-letter strings) with Zipf popularity
(alpha = 1, ranks shuffled over the alphabet so that popular symbols are not neighbours);
each subscription is ``symbol = S and low <= price <= low + width`` (S by popularity, price
in [0, 100], width uniform in [1, 20]); subscriptions are spread over the servers at random
(the figures without prefix) or by symbol (``by_symbol_*``: every subscription to a symbol
on one server, as a partitioner clustering on the symbol would place them); events draw
their symbol from the same popularity and their price uniformly.  Full size: 10 servers x
10,000 subscriptions, 5,000 symbols, 5,000 events; ``quick``: 4 x 1,000, 500 symbols, 1,000
events.

Each server is the real engine (:class:`~matchers.RTreeMatchingEngine`, bulk-loaded) under
a schema with ``summary="bloom"`` on the symbol and under the same schema without it; the
dispatcher is the real route set (:class:`~matchers.RTreeRouteSet`) holding every server's
precise summary, switched to each precision with ``set_precision`` as the self-tuning
dispatcher does.  Figures (``{boxes,bloom}_p{1,0.1,0.01}_*``):

* ``hit_ratio``: routed (event, server) pairs / (events x servers), the paper's average
  per-server hit ratio; ``exact_hit_ratio`` is the same for the servers that really hold a
  matching subscription (a brute-force oracle), the floor any summary can reach;
* ``route_us_per_event``: ``match_many`` over batches of :data:`BATCH` XML events (reading
  the events included), best of three, after the table's calibration;
* ``summary_bytes``: every server's summary at that precision as its ``edn:Summary`` wire
  form (no schema), summed; ``summary_boxes``: their boxes, summed;
* ``bloom_false_positive_rate``: the largest estimated rate among the servers' filters.

Why Bloom summaries do not reach the exact hit ratio under random placement: a Bloom summary
is a product, (symbol in the server's set) x (price in the union of the server's price
ranges over all its symbols), so it loses which price ranges go with which symbol; with
popular symbols on every server it routes an event to most servers holding its symbol.
Placed by symbol, the product loses little.
"""

from __future__ import annotations

import time

import numpy as np
from lxml import etree

from matchers import RTreeMatchingEngine, RTreeRouteSet, Schema
from matchers.schema import Attribute
from matchers.schema.codecs import string_coordinate

__all__ = ["bloom_comparison", "BATCH"]

BATCH = 1000  # events per match_many call
PRECISIONS = {"1": 1.0, "0.1": 0.1, "0.01": 0.01}
_PRICE = Attribute("price", "number", "price", (), 0, 100)


def _schema(bloom: bool) -> Schema:
    return Schema((_PRICE, Attribute("symbol", "string", "symbol",
                                     summary="bloom" if bloom else None)))


def _symbols(count: int, rng) -> tuple[list[str], np.ndarray]:
    """``count`` distinct 4-letter symbols in popularity order, and their popularity."""
    codes = rng.choice(26 ** 4, size=count, replace=False)
    names = ["".join(chr(65 + (int(c) // 26 ** i) % 26) for i in range(4)) for c in codes]
    weights = 1.0 / np.arange(1, count + 1)
    return names, weights / weights.sum()


class _Workload:
    def __init__(self, quick: bool, by_symbol: bool = False, seed: int = 15) -> None:
        rng = np.random.default_rng(seed)
        self.servers = 4 if quick else 10
        per_server = 1_000 if quick else 10_000
        self.symbol_count = 500 if quick else 5_000
        n_events = 1_000 if quick else 5_000
        names, popularity = _symbols(self.symbol_count, rng)
        self.names = names
        coordinates = np.array([string_coordinate(s) for s in names])
        total = self.servers * per_server
        self.sub_symbol = rng.choice(self.symbol_count, size=total, p=popularity)
        width = rng.uniform(1, 20, total)
        self.sub_low = rng.uniform(0, 100 - width)
        self.sub_high = self.sub_low + width
        self.sub_server = rng.permutation(np.arange(total) % self.servers)
        if by_symbol:  # symbols are in random order, so this spreads popularity evenly
            self.sub_server = self.sub_symbol % self.servers
        self.mins = np.column_stack([self.sub_low, coordinates[self.sub_symbol]])
        self.maxs = np.column_stack([self.sub_high, coordinates[self.sub_symbol]])
        self.event_symbol = rng.choice(self.symbol_count, size=n_events, p=popularity)
        self.event_price = np.round(rng.uniform(0, 100, n_events), 3)
        self.events = [etree.fromstring(f"<q><price>{p!r}</price><symbol>{names[s]}</symbol></q>")
                       for s, p in zip(self.event_symbol.tolist(), self.event_price.tolist())]

    def engines(self, bloom: bool) -> list[RTreeMatchingEngine]:
        schema = _schema(bloom)
        engines = []
        for server in range(self.servers):
            rows = np.flatnonzero(self.sub_server == server)
            engine = RTreeMatchingEngine(schema)
            engine.bulk_load([f"s{row}" for row in rows.tolist()], self.mins[rows], self.maxs[rows])
            engines.append(engine)
        return engines

    def exact_hit_ratio(self) -> float:
        """The oracle: servers holding a subscription that matches each event."""
        hits = 0
        for server in range(self.servers):
            rows = np.flatnonzero(self.sub_server == server)
            symbols, lows, highs = self.sub_symbol[rows], self.sub_low[rows], self.sub_high[rows]
            for start in range(0, len(self.events), 500):
                symbol = self.event_symbol[start:start + 500, None]
                price = self.event_price[start:start + 500, None]
                matched = (symbols == symbol) & (lows <= price) & (highs >= price)
                hits += int(matched.any(axis=1).sum())
        return hits / (len(self.events) * self.servers)


def _route_timing(routes: RTreeRouteSet, events: list) -> tuple[float, float]:
    """(hit ratio, microseconds per event) of ``match_many`` over batches of events."""
    batches = [events[i:i + BATCH] for i in range(0, len(events), BATCH)]
    answers = [answer for batch in batches for answer in routes.match_many(batch)]  # calibrates
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for batch in batches:
            routes.match_many(batch)
        best = min(best, time.perf_counter() - start)
    hit_ratio = sum(len(a) for a in answers) / (len(events) * len(routes))
    return hit_ratio, best / len(events) * 1e6


def bloom_comparison(quick: bool = False) -> dict[str, float]:
    """Box summaries vs Bloom summaries at precisions 1, 0.1 and 0.01 (see the module
    docstring)."""
    workload = _Workload(quick)
    figures: dict[str, float] = {
        "servers": workload.servers,
        "subscriptions_per_server": len(workload.sub_symbol) // workload.servers,
        "symbols": workload.symbol_count,
        "events": len(workload.events),
    }
    figures.update(_compare(workload))
    figures.update({f"by_symbol_{key}": value
                    for key, value in _compare(_Workload(quick, by_symbol=True)).items()})
    return figures


def _compare(workload: _Workload) -> dict[str, float]:
    """The figures of one placement of the workload (see the module docstring)."""
    figures = {"exact_hit_ratio": round(workload.exact_hit_ratio(), 4)}
    for mode, bloom in (("boxes", False), ("bloom", True)):
        engines = workload.engines(bloom)
        routes = RTreeRouteSet(_schema(bloom))
        for server, engine in enumerate(engines):
            routes.set_summary(f"server-{server}", engine.summary(1.0),
                               rectangles=engine.rectangle_count)
        for tag, precision in PRECISIONS.items():
            summaries = [engine.summary(precision) for engine in engines]
            routes.set_precision(precision)
            hit_ratio, micros = _route_timing(routes, workload.events)
            key = f"{mode}_p{tag}"
            figures[f"{key}_hit_ratio"] = round(hit_ratio, 4)
            figures[f"{key}_route_us_per_event"] = round(micros, 2)
            figures[f"{key}_summary_boxes"] = sum(len(s) for s in summaries)
            figures[f"{key}_summary_bytes"] = sum(
                len(etree.tostring(s.to_element(with_schema=False))) for s in summaries)
        if bloom:
            rate = routes.describe()["bloom_false_positive_rate"]
            figures["bloom_false_positive_rate"] = round(rate, 5) if rate is not None else -1.0
    return figures
