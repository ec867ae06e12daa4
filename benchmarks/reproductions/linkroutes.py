"""Link matching's route set (:class:`matchers.pst.links_route_set.LinkRouteSet`): routing
CPU per event with the PST's link matcher beside the vectorized scan of every link's
predicates it replaced, and what a replaced report costs::

    from benchmarks.reproductions.linkroutes import link_routes
    link_routes(sizes=(1000, 10000))   # {"1000x4": {...named figures...}, ...}

Workload: Gryphon's Chart 3 subscriptions and events (:func:`benchmarks.reproductions.pst.chart3_workload`:
10 attributes x 3 values, P = 0.98, D = 0.82, Zipf values) spread round robin over 4 links (a
dispatcher's children) and over 64 (about 1.3% of subscriptions match an event, so with 4
links nearly every link is Y at the root; 64 makes the search go deeper), each link
reporting its distinct conjunctions as the wire would.
Events are XML elements read through the topic schema, as a dispatcher's batches are; both
sides answer the same batches and their answers are checked equal.

The baseline is the same route set with ``build_cost = math.inf`` (no tree is ever built:
every link is the per-link matrix scan). Times are wall-clock, best of ``repeats``, on
a shared machine: read the ratio, measured side by side in one run.
"""
from __future__ import annotations

import math
import time

from lxml import etree

import numpy as np

from matchers.pst.links_route_set import LinkReport, LinkRouteSet
from matchers.schema import Attribute, Schema

from .pst import ATTRIBUTES, chart3_workload

EV = "urn:edn:bench:linkroutes"
SCHEMA = Schema(tuple(Attribute(a, "number", f"/e:event/e:{a}", (("e", EV),), 0, 2)
                      for a in ATTRIBUTES))


def reports(subscriptions: list[dict], links: int) -> dict[str, dict]:
    """Per link its distinct conjunctions (what ``predicates_element`` sends), round robin."""
    out: dict[str, dict] = {f"link{k}": {} for k in range(links)}
    for i, tests in enumerate(subscriptions):
        conjunction = tuple(sorted((a, float(v)) for a, v in tests.items()))
        link = out[f"link{i % links}"]
        if conjunction not in link.values():
            link[f"p{len(link)}"] = conjunction
    return out


def event_element(values: dict) -> etree._Element:
    element = etree.Element(f"{{{EV}}}event", nsmap={"e": EV})
    for attribute, value in values.items():
        etree.SubElement(element, f"{{{EV}}}{attribute}").text = str(value)
    return element


def route_set(links: dict[str, dict], *, tree: bool) -> LinkRouteSet:
    routes = LinkRouteSet(SCHEMA)
    for name, predicates in links.items():
        routes.set_predicates(name, predicates)
    if tree:
        routes.rebuild()
    else:
        routes.build_cost = math.inf
    return routes


def seconds_per_event(routes: LinkRouteSet, events: list, batch: int, repeats: int
                      ) -> tuple[float, list]:
    best, answers = math.inf, []
    for _ in range(repeats):
        started = time.perf_counter()
        answers = []
        for start in range(0, len(events), batch):
            answers.extend(routes.match_many(events[start:start + batch]))
        best = min(best, time.perf_counter() - started)
    return best / len(events), answers


def events_until_rebuild(routes: LinkRouteSet, link: str, predicates: dict, events: list,
                         batch: int) -> tuple[int, float, float]:
    """Replace ``link``'s report: the seconds it took, the events routed until a batch
    rebuilt the tree, and that rebuild's seconds (the batch that did it)."""
    builds = routes.builds
    started = time.perf_counter()
    routes.set_predicates(link, dict(predicates))  # a new report object: the link is changed
    replaced = time.perf_counter() - started
    routed, last_batch = 0, 0.0
    while routes.builds == builds and routed < 1_000_000:
        started = time.perf_counter()
        routes.match_many(events[:batch])
        last_batch = time.perf_counter() - started
        routed += batch
    return routed, replaced, last_batch


def row_scan_seconds(rows: int = 10_000, events: int = 50, repeats: int = 5) -> float:
    """One predicate row scanned for one event (the unit of the route set's rebuild debt)."""
    report = LinkReport({f"p{i}": (("a0", float(i % 3)), ("a1", 1.0)) for i in range(rows)},
                        SCHEMA)
    lo = np.zeros((events, SCHEMA.d))
    report.scan(lo, lo)  # its matrix made
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        report.scan(lo, lo)
        best = min(best, time.perf_counter() - started)
    return best / (rows * events)


def link_routes(sizes=(1000, 10000), link_counts=(4, 64), events: int = 500,
                batches=(1, 50), repeats: int = 2) -> dict:
    """Named figures per ``"{subscriptions}x{links}"``, and ``row_scan_ns``."""
    out = {"row_scan_ns": round(row_scan_seconds() * 1e9, 1)}
    for n, count in ((n, count) for n in sizes for count in link_counts):
        subscriptions, published = chart3_workload(n, events)
        links = reports(subscriptions, count)
        elements = [event_element(values) for values in published]
        scan = route_set(links, tree=False)
        started = time.perf_counter()
        pst = route_set(links, tree=True)
        build = time.perf_counter() - started
        rows = sum(len(p) for p in links.values())
        figures = {"distinct_predicates": rows, "pst_build_ms": round(build * 1e3, 2),
                   "build_cost_in_row_scans": round(build / rows / (out["row_scan_ns"] * 1e-9))}
        for batch in batches:
            steps = pst.search_steps
            pst_s, pst_answers = seconds_per_event(pst, elements, batch, repeats)
            scan_s, scan_answers = seconds_per_event(scan, elements, batch, repeats)
            if pst_answers != scan_answers:
                raise AssertionError(f"the PST and the scan disagree at {n} subscriptions")
            figures[f"pst_us_per_event_batch{batch}"] = round(pst_s * 1e6, 1)
            figures[f"scan_us_per_event_batch{batch}"] = round(scan_s * 1e6, 1)
            figures[f"scan_over_pst_batch{batch}"] = round(scan_s / pst_s, 2)
            figures["pst_steps_per_event"] = round((pst.search_steps - steps)
                                                   / (repeats * len(elements)), 1)
        figures["y_links_per_event"] = round(sum(map(len, pst_answers)) / len(elements), 2)
        # one link's report replaced: at once, then lazily rebuilt
        routed, replaced, rebuilding_batch = events_until_rebuild(
            pst, "link0", links["link0"], elements, batches[-1])
        figures["replace_report_ms"] = round(replaced * 1e3, 3)
        figures["events_until_rebuild"] = routed
        figures["rebuilding_batch_ms"] = round(rebuilding_batch * 1e3, 2)
        out[f"{n}x{count}"] = figures
    return out


def run(quick: bool = False) -> dict:
    """``edn bench linkroutes``: the PST link matcher beside the scan it replaced."""
    if quick:
        return link_routes(sizes=(300,), link_counts=(4,), events=60, repeats=1)
    return link_routes()


if __name__ == "__main__":
    import json
    print(json.dumps(run(), indent=1))
