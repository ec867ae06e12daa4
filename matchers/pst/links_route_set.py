"""Link matching's route set (Gryphon, section 3): a dispatcher's route whose filters are its
children's **predicate reports** and whose answer is the children on Y links.

In ``--routing linkmatching`` every node reports, per topic, the equality tests of the
subscriptions below it (an ``edn:Predicates`` element) instead of a summary; a child
dispatcher reports the union of its children's. In a dispatch tree every child is
downstream of its parent, so the initialization mask is all-M for the children, and a
child's trit for an event is Y when one of its predicates matches the event, N otherwise.

The report, in the summary dialect's ``content`` (the dispatcher installs every report
through the same ``UpdateSummary``)::

    <edn:Predicates>                           every subscription below is an equality
      <edn:P id="sub-1" price="10" sym="3.5"/>   one per distinct conjunction: attribute =
    </edn:Predicates>                            coordinate (the topic schema's)
    <edn:Predicates everything="true"/>        some subscription below is not one: the
                                               child's trit is Y for every event

Tests compare the schema's *coordinates* of the event and of the subscription's value, so a
string attribute (whose coordinate keeps a prefix) may give a Y for an event whose string only
shares it: a false positive the subscription server then drops, never a missed event. The
report is bounded (:data:`MAX_PREDICATES`, :data:`MAX_ID`); anything else in it is refused
with :class:`~wsframework.matching.errors.InvalidFilter` (a Sender fault at the dispatcher).

Matching here is a vectorized scan of each child's predicates; the PST of
:mod:`matchers.pst` (``LinkMatcher``) is the structure that makes it sublinear.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from lxml import etree

from wsframework import ns
from wsframework.matching.base import FilterSpec, Matcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter

from ..schema import Schema
from ..summary import SUMMARY_DIALECT

__all__ = ["LinkRouteSet", "PREDICATES", "PREDICATE", "MATCHER_PST_LINKS", "MAX_PREDICATES",
           "MAX_ID", "EVERYTHING", "predicates_element", "read_predicates", "union_predicates"]

MATCHER_PST_LINKS = "urn:wsframework:matchers:pst-links"
PREDICATES = ns.qname(ns.EDN, "Predicates")
PREDICATE = ns.qname(ns.EDN, "P")
SCHEMA = ns.qname(ns.EDN, "Schema")
MAX_PREDICATES = 50_000  # predicates in one report (a larger set is reported as everything)
MAX_ID = 256             # characters of a predicate's id
EVERYTHING = None        # a report that matches every event

Tests = tuple[tuple[str, float], ...]  # (attribute, coordinate), sorted by attribute


def predicates_element(predicates: Mapping[str, Tests] | None,
                       schema: Schema | None = None) -> etree._Element:
    """The report of ``predicates`` (id -> tests; None: everything). Identical conjunctions
    are sent once, renumbered; more than :data:`MAX_PREDICATES` distinct ones, or an
    attribute name that is no XML name, make it everything."""
    element = etree.Element(PREDICATES, nsmap={"edn": ns.EDN})
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


class _ChildTable:
    """One child's predicates as a matrix: row per predicate, column per dimension, NaN where
    the predicate does not test that dimension."""

    def __init__(self, predicates: Mapping[str, Tests] | None, schema: Schema | None):
        self.predicates = predicates
        self.everything = predicates is EVERYTHING or schema is None
        rows = [] if self.everything else list(predicates.values())
        d = schema.d if schema is not None else 0
        self.values = np.full((len(rows), d), np.nan)
        for r, tests in enumerate(rows):
            for attribute, value in tests:
                self.values[r, schema.dim(attribute)] = value

    def trits(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per event (rows of ``lo``/``hi``): True where some predicate matches (Y)."""
        if self.everything:
            return np.ones(len(lo), dtype=bool)
        if not len(self.values):
            return np.zeros(len(lo), dtype=bool)
        v = self.values[None, :, :]
        ok = np.isnan(v) | ((v >= lo[:, None, :]) & (v <= hi[:, None, :]))
        return ok.all(axis=2).any(axis=1)


class LinkRouteSet(Matcher):
    """Children's predicate reports; :meth:`match` gives the children on Y links.

    ``config``: the topic's event schema (as for the engines); without one, the schema the
    first report carries (an ``edn:Schema`` first in it) is adopted, and until then every
    child with a report is Y (correct, unselective)."""

    uri = MATCHER_PST_LINKS
    dialects = frozenset({SUMMARY_DIALECT})

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        configured = isinstance(config, Schema) or isinstance(getattr(config, "tag", None), str)
        self.schema: Schema | None = Schema.from_config(config) if configured else None
        self._write = threading.Lock()
        self._children: dict[str, _ChildTable] = {}  # replaced whole, never changed in place

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

    def set_predicates(self, child: str, predicates: Mapping[str, Tests] | None) -> None:
        table = _ChildTable(predicates, self.schema)
        with self._write:
            children = dict(self._children)
            children[child] = table
            self._children = children

    def remove_filter(self, filter_id: str) -> None:
        with self._write:
            if filter_id not in self._children:
                raise UnknownFilter(filter_id)
            children = dict(self._children)
            del children[filter_id]
            self._children = children

    def predicates_of(self, child: str) -> dict[str, Tests] | None:
        """The predicates ``child`` reported (None: everything)."""
        return self._children[child].predicates

    def filter_ids(self) -> list[str]:
        return list(self._children)

    def __len__(self) -> int:
        return len(self._children)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._children

    # -- routing ---------------------------------------------------------------------------
    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        return self.match_many([event])[0]

    def _match(self, event, variables, failures):  # the base's reporting path
        return self.match(event)

    def match_many(self, events: Sequence[Any], *,
                   variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        children = self._children  # one consistent set for the batch
        if not len(events):
            return []
        if not children:
            return [[] for _ in events]
        if self.schema is None:
            every = list(children)
            return [every for _ in events]
        boxes = self.schema.extract_many(events)  # read in place, each event as its own root
        names = list(children)
        trits = np.stack([children[n].trits(boxes.lo, boxes.hi) for n in names], axis=1)
        return [[n for n, yes in zip(names, row) if yes] for row in trits.tolist()]

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        from ..schema import Attribute

        schema = Schema((Attribute("price", "number", "/q:quote/q:price",
                                   (("q", ns.EXAMPLE_QUOTES),), 0, 100),))
        quote = etree.fromstring(f'<q:quote xmlns:q="{ns.EXAMPLE_QUOTES}">'
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
