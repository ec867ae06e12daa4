"""Link matching's route set (Gryphon, section 3): a dispatcher's route whose filters are its
links' **predicate reports** and whose answer is the links whose trit ends Y.

In ``--routing linkmatching`` every node reports, per topic, the equality tests of the
subscriptions below it (an ``edn:Predicates`` element) instead of a summary; a child
dispatcher reports the union of its children's. The report, in the summary dialect's
``content`` (the dispatcher installs every report through the same ``UpdateSummary``)::

    <edn:Predicates>                           every subscription below is an equality
      <edn:P id="sub-1" price="10" sym="3.5"/>   one per distinct conjunction: attribute =
    </edn:Predicates>                            coordinate (the topic schema's)
    <edn:Predicates everything="true"/>        some subscription below is not one: the
                                               link's trit is Y for every event

Tests compare the schema's *coordinates* of the event and of the subscription's value, so a
string attribute (whose coordinate keeps a prefix) may give a Y for an event whose string only
shares it: a false positive the subscription server then drops, never a missed event. The
report is bounded (:data:`MAX_PREDICATES`, :data:`MAX_ID`); anything else in it is refused
with :class:`~wsframework.matching.errors.InvalidFilter` (a Sender fault at the dispatcher).

**Matching** (section 3.3). Each link of the dispatcher (a child dispatcher or a server it
routes to) is one trit position of a :class:`~matchers.pst.LinkMatcher`, whose parallel search
tree holds every link's predicates, annotated per link. An event's initialization mask is M on
the links downstream of where it arrived: in a dispatch tree events only flow down and the
parent is no link of the route, so every link is downstream, for the root's own publications
and for a parent's batches alike (:meth:`LinkRouteSet.route` takes another ``downstream``);
the search refines it and the event goes out on the Y links only.

**Reports replaced** (a link's report is the unit of change). A report is applied at once to
that link alone: it is answered by a scan of its own predicates (a matrix, row per predicate)
and the tree, still holding the old report, no longer decides that link (its trit starts N
in the mask, so the search never refines it). The tree is rebuilt lazily, ski-rental style:
each batch adds the scan work spent on changed links (rows x events, plus a per-call cost) and
the stale rows the tree still walks to a *debt*; when the debt reaches what a rebuild costs
(:data:`BUILD_COST_IN_ROW_SCANS` per predicate) the batch rebuilds the tree. So a burst of
changes costs one rebuild, a report costs O(its predicates) when it arrives, and the work
spent serving changed links between two builds is at most about one rebuild's.

**Range events** (an eCube event, or several values of an attribute: a box that is no point)
follow more than one value branch at a node, which the tree's search does not: they are
answered by the scan of every link (exact, slower; each link's matrix is made when first
needed).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from lxml import etree

from wsframework import ns
from matchers.vocabulary import EDN, EXAMPLE_QUOTES
from wsframework.matching.base import FilterSpec, Matcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter

from ..schema import Schema
from ..summary import SUMMARY_DIALECT
from .trits import LinkMatcher, M, N

__all__ = ["LinkRouteSet", "PREDICATES", "PREDICATE", "MATCHER_PST_LINKS", "MAX_PREDICATES",
           "MAX_ID", "EVERYTHING", "BUILD_COST_IN_ROW_SCANS", "LinkReport",
           "predicates_element", "read_predicates", "union_predicates"]

MATCHER_PST_LINKS = "urn:wsframework:matchers:pst-links"
PREDICATES = ns.qname(EDN, "Predicates")
PREDICATE = ns.qname(EDN, "P")
SCHEMA = ns.qname(EDN, "Schema")
MAX_PREDICATES = 50_000  # predicates in one report (a larger set is reported as everything)
MAX_ID = 256             # characters of a predicate's id
EVERYTHING = None        # a report that matches every event

Tests = tuple[tuple[str, float], ...]  # (attribute, coordinate), sorted by attribute

log = logging.getLogger(__name__)


def predicates_element(predicates: Mapping[str, Tests] | None,
                       schema: Schema | None = None) -> etree._Element:
    """The report of ``predicates`` (id -> tests; None: everything). Identical conjunctions
    are sent once, renumbered; more than :data:`MAX_PREDICATES` distinct ones, or an
    attribute name that is no XML name, make it everything."""
    element = etree.Element(PREDICATES, nsmap={"edn": EDN})
    if schema is not None:  # for a route set created without one (as summaries carry it)
        element.append(schema.to_element())
    if predicates is None:
        element.set("everything", "true")
        return element
    distinct = {tuple(sorted(tests)) for tests in predicates.values()}
    try:
        if len(distinct) > MAX_PREDICATES:
            raise ValueError("too many predicates")
        for n, tests in enumerate(sorted(distinct)):
            child = etree.SubElement(element, PREDICATE)
            child.set("id", f"p{n}")  # the receiver's ids: short, unique, bounded
            for attribute, value in tests:
                child.set(attribute, repr(float(value)))
    except ValueError:  # too many, or an attribute name XML cannot carry: still correct
        return predicates_element(None, schema)
    return element


def read_predicates(element: Any, schema: Schema | None) -> dict[str, Tests] | None:
    """The predicates of a report (None: everything), validated against ``schema`` (every
    attribute one of its dimensions, every value a finite number, ids unique)."""
    if not isinstance(getattr(element, "tag", None), str) or element.tag != PREDICATES:
        raise InvalidFilter("link matching needs an edn:Predicates report")
    if element.get("everything") == "true":
        return EVERYTHING
    if element.get("everything") not in (None, "false"):
        raise InvalidFilter("edn:Predicates/@everything must be true or false")
    out: dict[str, Tests] = {}
    for i, child in enumerate(element):
        if not isinstance(child.tag, str) or (i == 0 and child.tag == SCHEMA):
            continue
        if i >= MAX_PREDICATES:
            raise InvalidFilter(f"edn:Predicates holds more than {MAX_PREDICATES} predicates")
        if child.tag != PREDICATE:
            raise InvalidFilter(f"unexpected {child.tag} in edn:Predicates")
        pid = child.get("id")
        if not pid or len(pid) > MAX_ID or pid in out:
            raise InvalidFilter(f"edn:P/@id must be unique, 1 to {MAX_ID} characters")
        tests = []
        for attribute, text in child.attrib.items():
            if attribute == "id":
                continue
            if schema is not None and attribute not in schema:
                raise InvalidFilter(f"edn:P tests {attribute[:64]!r}, not in the topic schema")
            try:
                value = float(text) if len(text) <= 64 else math.nan
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise InvalidFilter(f"edn:P/@{attribute[:64]} must be a finite number")
            tests.append((attribute, value))
        out[pid] = tuple(sorted(tests))
    return out


def union_predicates(reports: Iterable[tuple[str, Mapping[str, Tests] | None]]
                     ) -> dict[str, Tests] | None:
    """What a child dispatcher reports upward: the union of its children's predicates
    ((child, predicates) pairs), ids made unique by the child's name; None when any child
    reports everything."""
    out: dict[str, Tests] = {}
    for child, predicates in reports:
        if predicates is EVERYTHING:
            return EVERYTHING
        for pid, tests in predicates.items():
            out[f"{child}/{pid}"[:MAX_ID]] = tests
    return out


#: a rebuild's cost per predicate, in scans of one predicate row for one event (measured by
#: benchmarks.reproductions.linkroutes, build_cost_in_row_scans: 300 to 650 over three runs
#: on a shared machine, Gryphon's workload at 1k and 10k predicates over 4 and 64 links)
BUILD_COST_IN_ROW_SCANS = 400
#: the fixed cost of one scan call (numpy's overhead, about 3.5 us against 25 ns a row scan),
#: in row scans
SCAN_CALL_IN_ROW_SCANS = 150


class LinkReport:
    """One link's report: its predicates (None: everything) and, made when first needed, the
    matrix its scan reads (row per predicate, column per dimension, NaN: not tested)."""

    __slots__ = ("predicates", "everything", "_schema", "_values")

    def __init__(self, predicates: Mapping[str, Tests] | None, schema: Schema | None):
        self.predicates = predicates
        # a report read before the route had a schema was not validated: Y for every event
        self.everything = predicates is EVERYTHING or schema is None
        self._schema = schema
        self._values: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return 0 if self.everything else len(self.predicates)

    def scan(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per event (rows of ``lo``/``hi``): True where one of the predicates matches."""
        if self.everything:
            return np.ones(len(lo), dtype=bool)
        values = self._values
        if values is None:  # two readers may both make it: the same matrix either way
            values = np.full((len(self.predicates), self._schema.d), np.nan)
            for r, tests in enumerate(self.predicates.values()):
                for attribute, value in tests:
                    values[r, self._schema.dim(attribute)] = value
            self._values = values
        if not len(values):
            return np.zeros(len(lo), dtype=bool)
        v = values[None, :, :]
        ok = np.isnan(v) | ((v >= lo[:, None, :]) & (v <= hi[:, None, :]))
        return ok.all(axis=2).any(axis=1)


class _Tree:
    """The link matcher built from some links' reports (the :class:`LinkReport` objects it
    holds are how a later state tells which links changed since)."""

    def __init__(self, links: Mapping[str, LinkReport], schema: Schema):
        self.reports = {name: link for name, link in links.items() if not link.everything}
        self.rows = sum(link.rows for link in self.reports.values())
        self.dims = schema.dims
        self.matcher = LinkMatcher(schema.dims, links=tuple(self.reports))
        for name, link in self.reports.items():
            for pid, tests in link.predicates.items():
                self.matcher.add((name, pid), dict(tests), name)
        # prepared and annotated now, by a first search: readers never build (not thread-safe)
        self.matcher.link_match({}, M * len(self.reports))

    def holds(self, name: str, link: LinkReport) -> bool:
        return self.reports.get(name) is link


class _Routes:
    """One consistent state of the route set: the current reports (in registration order) and
    the tree of an earlier or the same state; replaced whole, never changed in place."""

    def __init__(self, links: dict[str, LinkReport], tree: _Tree | None):
        self.links = links
        self.tree = tree
        #: links the tree decides: their report is the one it was built from
        self.searched = frozenset(() if tree is None else
                                  (n for n, link in links.items() if tree.holds(n, link)))
        #: links with predicates the tree does not decide: changed since the build, or new
        self.scanned = tuple(n for n, link in links.items()
                             if not link.everything and n not in self.searched)
        self.scanned_rows = sum(links[n].rows for n in self.scanned)
        #: rows the tree still holds for reports replaced or removed since (walked for nothing)
        self.stale_rows = 0 if tree is None else tree.rows - sum(links[n].rows
                                                                 for n in self.searched)
        self.rows = sum(link.rows for link in links.values())
        self.every_link_mask = self._mask_deciding(self.searched)

    def debt_of(self, events: int) -> int:
        """The work (in row scans) a batch of ``events`` costs for lack of a rebuild."""
        return (events * (self.scanned_rows + self.stale_rows)
                + SCAN_CALL_IN_ROW_SCANS * len(self.scanned))

    def mask(self, downstream: set[str] | None) -> str:
        """The initialization mask over the tree's links: M on the links it decides (and
        downstream), N on the others (replaced, removed, upstream)."""
        if downstream is None:
            return self.every_link_mask
        return self._mask_deciding(self.searched & downstream)

    def _mask_deciding(self, decided: frozenset) -> str:
        if self.tree is None:
            return ""
        return "".join(M if n in decided else N for n in self.tree.matcher.links)

    def answer(self, schema: Schema | None, events: Sequence[Any],
               downstream: set[str] | None) -> tuple[list[list[str]], int]:
        """Per event the links whose trit ends Y, in registration order; and the search steps."""
        names = [n for n in self.links if downstream is None or n in downstream]
        if not events or not names:
            return [[] for _ in events], 0
        if schema is None:  # nothing to read the events with: every link with a report
            return [list(names) for _ in events], 0
        boxes = schema.extract_many(events)  # read in place, each event as its own root
        yes = np.zeros((len(events), len(names)), dtype=bool)
        points = np.all(boxes.lo == boxes.hi, axis=1)
        for k, name in enumerate(names):
            link = self.links[name]
            if name in self.searched:  # the tree decides the points; ranges need the scan
                if not points.all():
                    yes[~points, k] = link.scan(boxes.lo[~points], boxes.hi[~points])
            else:
                yes[:, k] = link.scan(boxes.lo, boxes.hi)
        steps = 0
        mask = self.mask(downstream)
        if M in mask:
            column = {name: k for k, name in enumerate(names)}
            dims = self.tree.dims
            for i in np.flatnonzero(points).tolist():
                sent, used = self.tree.matcher.link_match(dict(zip(dims, boxes.lo[i].tolist())),
                                                          mask)
                steps += used
                for name in sent:
                    yes[i, column[name]] = True
        return [[n for n, hit in zip(names, row) if hit] for row in yes.tolist()], steps


class LinkRouteSet(Matcher):
    """Links' predicate reports; :meth:`match` gives the links whose trit ends Y.

    ``config``: the topic's event schema (as for the engines); without one, the schema the
    first report carries (an ``edn:Schema`` first in it) is adopted, and until then every
    link with a report is Y (correct, unselective).

    Reads are lock-free (each batch takes one :class:`_Routes` state); writers replace the
    state under a lock; one batch at a time rebuilds the tree, while others keep answering
    from the state they took."""

    uri = MATCHER_PST_LINKS
    dialects = frozenset({SUMMARY_DIALECT})

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        configured = isinstance(config, Schema) or isinstance(getattr(config, "tag", None), str)
        self.schema: Schema | None = Schema.from_config(config) if configured else None
        self._write = threading.Lock()
        self._building = threading.Lock()
        self._routes = _Routes({}, None)
        self._debt = 0           # row scans spent for lack of a rebuild since the last one
        #: a rebuild's cost per predicate in row scans (math.inf: never rebuild by itself,
        #: every link scanned without a tree: the benchmarks' baseline)
        self.build_cost: float = BUILD_COST_IN_ROW_SCANS
        self.builds = 0          # trees built (figures and tests)
        self.search_steps = 0    # tree nodes visited by searches (approximate under threads)

    # -- reports ---------------------------------------------------------------------------
    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        element = _report_of(spec)
        if self.schema is None:  # adopt the schema the first report carries
            shipped = element.find(SCHEMA)
            if shipped is not None:
                try:
                    self.schema = Schema.from_element(shipped)
                except Exception as exc:
                    raise InvalidFilter(f"edn:Predicates carries an unusable schema: {exc}")
        self.set_predicates(filter_id, read_predicates(element, self.schema))

    def set_predicates(self, link: str, predicates: Mapping[str, Tests] | None) -> None:
        """Install (or replace) ``link``'s report: O(its predicates); the tree is not touched."""
        record = LinkReport(predicates, self.schema)
        with self._write:
            links = dict(self._routes.links)
            links[link] = record
            self._routes = _Routes(links, self._routes.tree)

    def remove_filter(self, filter_id: str) -> None:
        with self._write:
            if filter_id not in self._routes.links:
                raise UnknownFilter(filter_id)
            links = dict(self._routes.links)
            del links[filter_id]
            self._routes = _Routes(links, self._routes.tree)

    def predicates_of(self, link: str) -> dict[str, Tests] | None:
        """The predicates ``link`` reported (None: everything)."""
        return self._routes.links[link].predicates

    def filter_ids(self) -> list[str]:
        return list(self._routes.links)

    def __len__(self) -> int:
        return len(self._routes.links)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._routes.links

    # -- the tree --------------------------------------------------------------------------
    def rebuild(self) -> None:
        """Build the tree from the current reports now (the batches do it when it pays)."""
        with self._building:
            self._rebuild_locked()

    def _rebuild_locked(self) -> None:
        schema = self.schema
        if schema is None:
            return
        taken = self._routes
        started = time.perf_counter()
        tree = _Tree(taken.links, schema)  # outside the write lock: reports keep arriving
        log.info("link matching: tree built over %d predicates of %d links in %.1f ms",
                 tree.rows, len(tree.reports), (time.perf_counter() - started) * 1e3)
        with self._write:  # reports that arrived during the build stay scanned
            self._routes = _Routes(self._routes.links, tree)
            self._debt = 0
            self.builds += 1

    def pending_rows(self) -> int:
        """Predicates answered by a scan for want of a rebuild (replaced or new reports)."""
        return self._routes.scanned_rows

    def _pay(self, routes: _Routes, events: int) -> None:
        """Add a batch's cost to the debt; rebuild (in this batch's thread) once it reaches
        what a rebuild costs."""
        if not routes.scanned_rows and not routes.stale_rows:
            return
        self._debt += routes.debt_of(events)
        due = self._debt >= self.build_cost * max(routes.rows, 1)
        if due and self._building.acquire(blocking=False):
            try:
                self._rebuild_locked()
            finally:
                self._building.release()

    # -- routing ---------------------------------------------------------------------------
    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        return self.match_many([event])[0]

    def _match(self, event, variables, failures):  # the base's reporting path
        return self.match(event)

    def match_many(self, events: Sequence[Any], *,
                   variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        """Per event the links whose trit ends Y, every link downstream (a dispatch tree)."""
        return self.route(events)

    def route(self, events: Sequence[Any], downstream: set[str] | None = None
              ) -> list[list[str]]:
        """Per event the Y links, the initialization mask being M on ``downstream`` only
        (None: every link; a link not downstream never gets the event)."""
        routes = self._routes  # one consistent state for the batch
        answers, steps = routes.answer(self.schema, events, downstream)
        self.search_steps += steps
        if events:
            self._pay(routes, len(events))
        return answers

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        from ..schema import Attribute

        schema = Schema((Attribute("price", "number", "/q:quote/q:price",
                                   (("q", EXAMPLE_QUOTES),), 0, 100),))
        quote = etree.fromstring(f'<q:quote xmlns:q="{EXAMPLE_QUOTES}">'
                                 f'<q:price>42</q:price></q:quote>')

        def report(price: float) -> str:
            return etree.tostring(predicates_element({"a": (("price", price),)}, schema),
                                  encoding="unicode")
        return [(FilterSpec(SUMMARY_DIALECT, report(42.0)), quote, True),
                (FilterSpec(SUMMARY_DIALECT, report(10.0)), quote, False)]


def _report_of(spec: FilterSpec) -> etree._Element:
    """The ``edn:Predicates`` element of a filter: its content, or its expression's text."""
    if isinstance(getattr(spec.content, "tag", None), str):
        return spec.content
    if not spec.expression.strip():
        raise InvalidFilter("an empty predicate report")
    from wsframework.xmlparse import parse_xml
    try:
        return parse_xml(spec.expression.encode())
    except Exception as exc:
        raise InvalidFilter(f"a predicate report that is no XML: {exc}") from None
