"""Matching engines side by side: R-tree engine, brute force, per-filter XPath; the route set;
summary cuts; the eCube study.

Workload: subscriptions are uniform boxes in [0, 10]^4 whose
side (10 x 0.01^(1/4) = 3.16) makes ~1% of them match a uniform event; events are XML
documents read through an event schema, so every events/s figure includes reading the event.

* ``*_events_per_s_{N}``: full ``match(event)`` calls.  At 10k the R-tree engine holds the
  subscriptions as range-dialect filters (``add_filters``), and again as XPath filters
  (``rtree_xpath_filters_*``: extracted ranges + lxml on the candidates); the XPath matcher
  evaluates one compiled XPath per filter.  At 1M both box engines are bulk-loaded from
  arrays; per-filter XPath is measured on a 10k-filter sample and scaled by N / 10k, as
  the figure name says.
* ``route_*``: ``RTreeRouteSet`` with 10 servers x 1,000 summary rectangles, per event, for
  single ``route()`` calls and one ``route_batch()`` call; ``wide`` summaries are each
  server's 10k subscriptions cut at precision 0.1, ``precise`` ones 1,000 subscriptions'
  maximal rectangles; both strategies are timed, and the one the set picked is named.
* ``summary_*``: cutting summaries at several precisions from 10k subscriptions.
* ``ecube_*``: range (hypercube) queries over point entries, d = 1, 3, 6, 100 to 40,000
  entries, R-tree engine vs brute force, microseconds per query (~1% selectivity).
"""
from __future__ import annotations

import gc
import math
import time

import numpy as np
from lxml import etree

from matchers import (
    BruteForceMatcher,
    FilterSpec,
    RTreeMatchingEngine,
    RTreeRouteSet,
    Schema,
    XPathFilterMatcher,
)
from matchers.ranges import RANGES_DIALECT
from matchers.route_set import routing
from matchers.schema import Attribute

D = 4
NS = "urn:bench:event"
XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"


def _schema(d: int) -> Schema:
    return Schema(tuple(Attribute(f"x{i}", "number", f"/e:event/e:x{i}", (("e", NS),), 0, 10)
                        for i in range(d)))


def _boxes(rng, n: int, d: int, selectivity: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    side = 10 * selectivity ** (1 / d)
    lo = rng.uniform(0, 10 - side, (n, d))
    return lo, lo + side


def _events(points: np.ndarray) -> list:
    return [etree.fromstring(f'<e:event xmlns:e="{NS}">'
                             + "".join(f"<e:x{i}>{float(v)!r}</e:x{i}>" for i, v in enumerate(p))
                             + "</e:event>") for p in points]


def _rate(call, items) -> float:
    """Items per second of ``call`` over ``items`` (best of two passes: shared machines)."""
    best = math.inf
    for _ in range(2):
        start = time.perf_counter()
        for item in items:
            call(item)
        best = min(best, time.perf_counter() - start)
    return len(items) / best


def _label(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def _range_text(lo: np.ndarray, hi: np.ndarray) -> str:
    return " and ".join(f"x{i} in [{a!r}, {b!r}]" for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())))


def _xpath_text(lo: np.ndarray, hi: np.ndarray) -> str:
    tests = " and ".join(f"e:x{i} >= {a!r} and e:x{i} <= {b!r}"
                         for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())))
    return f"/e:event[{tests}]"


def _engines_small(figures: dict, n: int, n_events: int, rng) -> None:
    label = _label(n)
    schema = _schema(D)
    lo, hi = _boxes(rng, n, D)
    events = _events(rng.uniform(0, 10, (n_events, D)))
    ranges = [(f"s{i}", FilterSpec(RANGES_DIALECT, _range_text(lo[i], hi[i]))) for i in range(n)]
    xpaths = [(f"s{i}", FilterSpec(XPATH10, _xpath_text(lo[i], hi[i]), (("e", NS),))) for i in range(n)]

    engine = RTreeMatchingEngine(schema)
    start = time.perf_counter()
    engine.add_filters(ranges)
    figures[f"rtree_add_filters_s_{label}"] = round(time.perf_counter() - start, 3)
    grown = RTreeMatchingEngine(schema)
    start = time.perf_counter()
    for filter_id, spec in ranges[: min(n, 5000)]:
        grown.add_filter(filter_id, spec)
    figures["rtree_add_filter_us_each"] = round((time.perf_counter() - start) / min(n, 5000) * 1e6, 1)
    xpath_engine = RTreeMatchingEngine(schema)
    xpath_engine.add_filters(xpaths)
    brute = BruteForceMatcher(schema)
    for filter_id, spec in ranges:
        brute.add_filter(filter_id, spec)
    per_filter = XPathFilterMatcher()
    for filter_id, spec in xpaths:
        per_filter.add_filter(filter_id, spec)

    sample = events[:20]
    assert all(engine.match(e) == brute.match(e) == per_filter.match(e) == xpath_engine.match(e)
               for e in sample[:5])
    figures[f"matches_per_event_{label}"] = round(float(np.mean([len(engine.match(e)) for e in events])), 1)
    figures[f"rtree_events_per_s_{label}"] = round(_rate(engine.match, events))
    figures[f"rtree_xpath_filters_events_per_s_{label}"] = round(_rate(xpath_engine.match, events[:500]))
    figures[f"bruteforce_events_per_s_{label}"] = round(_rate(brute.match, events[:500]))
    figures[f"xpath_per_filter_events_per_s_{label}"] = round(_rate(per_filter.match, sample), 1)
    figures[f"speedup_rtree_vs_xpath_per_filter_{label}"] = round(
        figures[f"rtree_events_per_s_{label}"] / figures[f"xpath_per_filter_events_per_s_{label}"], 1)

    start = time.perf_counter()
    for precision in (1.0, 0.5, 0.1, 0.01):
        engine.forget_summaries()
        start = time.perf_counter()
        cut = engine.summary(precision)
        figures[f"summary_ms_{label}_p{precision}"] = round((time.perf_counter() - start) * 1e3, 2)
        figures[f"summary_boxes_{label}_p{precision}"] = len(cut)
    figures[f"maximal_rectangles_{label}"] = engine.maximal_count
    start = time.perf_counter()
    engine.add_filter("extra", FilterSpec(RANGES_DIALECT, "x0 in [1, 2]"))
    engine.summary(0.1)
    figures[f"summary_update_ms_{label}"] = round((time.perf_counter() - start) * 1e3, 2)


def _engines_large(figures: dict, n: int, n_events: int, rng) -> None:
    label = _label(n)
    schema = _schema(D)
    lo, hi = _boxes(rng, n, D)
    ids = [f"s{i}" for i in range(n)]
    events = _events(rng.uniform(0, 10, (n_events, D)))
    gc.collect()
    engine = RTreeMatchingEngine(schema)
    start = time.perf_counter()
    engine.bulk_load(ids, lo, hi)
    figures[f"rtree_bulk_load_s_{label}"] = round(time.perf_counter() - start, 2)
    figures[f"matches_per_event_{label}"] = round(float(np.mean([len(engine.match(e)) for e in events[:50]])), 1)
    figures[f"rtree_events_per_s_{label}"] = round(_rate(engine.match, events), 1)
    brute = BruteForceMatcher(schema)
    brute.bulk_load(ids, lo, hi)
    assert engine.match(events[0]) == brute.match(events[0])
    figures[f"bruteforce_events_per_s_{label}"] = round(_rate(brute.match, events[:20]), 1)
    del brute
    start = time.perf_counter()
    engine.summary(0.01)
    figures[f"summary_ms_{label}_p0.01"] = round((time.perf_counter() - start) * 1e3, 1)
    del engine
    gc.collect()
    sample_size = min(n, 10_000)
    per_filter = XPathFilterMatcher()
    for i in range(sample_size):
        per_filter.add_filter(ids[i], FilterSpec(XPATH10, _xpath_text(lo[i], hi[i]), (("e", NS),)))
    sample_rate = _rate(per_filter.match, events[:10])
    figures[f"xpath_per_filter_events_per_s_{label}_scaled_from_{_label(sample_size)}_sample"] = round(
        sample_rate * sample_size / n, 3)


def _route_set(figures: dict, servers: int, boxes: int, n_events: int, rng) -> None:
    schema = _schema(D)
    points = rng.uniform(0, 10, (n_events, D))
    for kind in ("wide", "precise"):
        routes = RTreeRouteSet(schema)
        build = 0.0
        for s in range(servers):
            engine = RTreeMatchingEngine(schema)
            if kind == "wide":  # 10x the subscriptions, cut at precision 0.1
                lo, hi = _boxes(rng, boxes * 10, D)
                engine.bulk_load([f"{s}-{i}" for i in range(boxes * 10)], lo, hi)
                summary = engine.summary(0.1)
            else:  # the maximal rectangles of `boxes` subscriptions
                lo, hi = _boxes(rng, boxes, D)
                engine.bulk_load([f"{s}-{i}" for i in range(boxes)], lo, hi)
                summary = engine.summary(1.0)
            start = time.perf_counter()
            routes.set_summary(f"server-{s}", summary)
            build += time.perf_counter() - start
        tag = f"{servers}x{boxes}_{kind}"
        figures[f"route_summary_boxes_{tag}"] = int(len(routes.routing_table.owner))
        figures[f"route_replace_summary_ms_{tag}"] = round(build / servers * 1e3, 2)
        batch = routes.route_batch(points)  # first batch: calibration
        figures[f"route_batch_strategy_{tag}"] = routes.routing_table.choice["batch"]
        figures[f"route_hit_ratio_{tag}"] = round(float(np.mean([len(b) for b in batch])) / servers, 3)
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            routes.route_batch(points)
            best = min(best, time.perf_counter() - start)
        figures[f"route_us_per_event_batch_{tag}"] = round(best / len(points) * 1e6, 2)
        table = routes.routing_table
        for name, method in (("scan", routing.by_scan), ("rtree", routing.by_rtree),
                             ("bitmap", routing.by_bitmaps)):
            start = time.perf_counter()
            method(table, points, points)
            figures[f"route_us_per_event_batch_{name}_{tag}"] = round(
                (time.perf_counter() - start) / len(points) * 1e6, 2)
        single = points[:2000]
        figures[f"route_us_per_event_single_{tag}"] = round(1e6 / _rate(routes.route, single), 2)
        figures[f"route_single_strategy_{tag}"] = routes.routing_table.choice["single"]
        events = _events(points[:1000])
        figures[f"route_match_xml_us_per_event_{tag}"] = round(1e6 / _rate(routes.match, events), 2)


def _ecube(figures: dict, sizes: list[int], dims: list[int], rng) -> None:
    for d in dims:
        schema = _schema(d)
        side = 10 * 0.01 ** (1 / d)
        for n in sizes:
            entries = rng.uniform(0, 10, (n, d))  # point data, zero-size boxes
            ids = [f"p{i}" for i in range(n)]
            engine, brute = RTreeMatchingEngine(schema), BruteForceMatcher(schema)
            engine.bulk_load(ids, entries, entries)
            brute.bulk_load(ids, entries, entries)
            low = rng.uniform(0, 10 - side, (200, d))
            queries = list(zip(low, low + side))
            assert engine.match_box(*queries[0]) == brute.match_box(*queries[0])
            for name, matcher in (("rtree", engine), ("bruteforce", brute)):
                rate = _rate(lambda q: matcher.match_box(q[0], q[1]), queries)
                figures[f"ecube_{name}_us_per_query_d{d}_n{n}"] = round(1e6 / rate, 2)


def run(quick: bool = False) -> dict:
    rng = np.random.default_rng(20240601)
    figures: dict = {"dims": D, "target_match_fraction": 0.01}
    started = time.perf_counter()
    small, large = (1_000, 20_000) if quick else (10_000, 1_000_000)
    _engines_small(figures, small, 300 if quick else 2000, rng)
    _engines_large(figures, large, 30 if quick else 300, rng)
    if quick:
        _route_set(figures, 3, 100, 1000, rng)
        _ecube(figures, [100, 1000], [1, 3], rng)
    else:
        _route_set(figures, 10, 1000, 20_000, rng)
        _ecube(figures, [100, 1000, 5000, 10_000, 40_000], [1, 3, 6], rng)
    small_label, large_label = _label(small), _label(large)
    figures["aim_rtree_50x_per_filter_xpath_at_" + small_label] = bool(
        figures[f"speedup_rtree_vs_xpath_per_filter_{small_label}"] >= 50)
    figures["aim_rtree_500_events_per_s_at_" + large_label] = bool(
        figures[f"rtree_events_per_s_{large_label}"] >= 500)
    batch = [v for k, v in figures.items() if k.startswith("route_us_per_event_batch_")
             and not any(f"_{way}_" in k for way in ("scan", "rtree", "bitmap"))]
    figures["aim_route_batch_le_20us"] = bool(batch and max(batch) <= 20)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return figures
