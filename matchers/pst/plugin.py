"""``urn:wsframework:matchers:pst``: a topic matched by Gryphon's parallel search tree
(:class:`~.search_tree.ParallelSearchTree`).

It takes subscriptions whose predicates are **equalities over the topic schema's attributes**,
in the range dialect (``symbol = 'GE' and price = 5``, or ``x in [5, 5]``) or as the
equivalent XPath 1.0 conjunction (``/q:quote[q:symbol = 'GE' and q:price = 5]``), compiled
by the box engines' compiler (:func:`matchers.box_filters.compile_filter`): a filter is
taken when it is one box whose every dimension is either a single coordinate (an equality)
or the whole space (a don't-care). A range or an ``or`` is refused with
:class:`InvalidFilter` naming why, which the subscription manager answers with the spec's
fault. An XPath is then evaluated on the tree's candidates (its other predicates, if any,
are checked there: exact, if slower).

Events are read through the schema; the PST is searched with each attribute's coordinate.
An event the schema reads as a box rather than a point (a multi-valued attribute) is checked
by intersection and the filter's exact check instead, as the box engines do.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from lxml import etree

from wsframework import ns
from matchers.vocabulary import EXAMPLE_QUOTES, MATCHER_PST
from wsframework.matching.base import FilterSpec, Matcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter

from ..box_filters import compile_filter
from ..ranges import RANGES_DIALECT
from ..schema import Schema
from ..schema.extraction import standalone
from ..xpath import XPATH10_DIALECTS
from .search_tree import ParallelSearchTree

__all__ = ["PSTMatcher"]

_XPATH_SLACK = 1e-9  # relative width below which an XPath interval is an equality


def _check(compiled, event, box, variables) -> bool:
    """The filter's exact check; one that fails on an event does not match it (as the box
    engines treat it)."""
    try:
        return bool(compiled.check(event, box, variables))
    except Exception:
        return False


class PSTMatcher(Matcher):
    uri = MATCHER_PST
    dialects = frozenset({RANGES_DIALECT}) | XPATH10_DIALECTS

    def __init__(self, config: Any = None, *, factoring: Sequence[str] | int = (),
                 delayed_branching: int | bool = 0) -> None:
        """``factoring``, ``delayed_branching``: the tree's section 2.1 options (off when the
        matcher is made by URI; see :class:`~.search_tree.ParallelSearchTree`)."""
        super().__init__(config)
        self.schema = Schema.from_config(config)
        self._everything = self.schema.everything()
        self._tree = ParallelSearchTree(self.schema.dims, factoring=factoring,
                                        delayed_branching=delayed_branching)
        self._compiled: dict[str, Any] = {}  # id -> CompiledFilter, in insertion order

    def _tests_of(self, spec: FilterSpec) -> tuple[dict, Any]:
        compiled = compile_filter(spec, self.schema)
        if compiled.mins.shape[0] != 1:
            raise InvalidFilter("the PST matcher takes one conjunction of equality tests over "
                                "the schema's attributes (no 'or')")
        lo, hi = compiled.mins[0], compiled.maxs[0]
        every_lo, every_hi = self._everything
        tests = {}
        for j, name in enumerate(self.schema.dims):
            if lo[j] == hi[j]:
                tests[name] = float(lo[j])
            elif not compiled.box_exact and hi[j] - lo[j] <= _XPATH_SLACK * max(1.0, abs(lo[j])):
                # XPath's ranges widen an equality by a hair (matchers.xpath_ranges); its
                # value is the middle, and the exact check runs on every candidate anyway
                tests[name] = float((lo[j] + hi[j]) / 2)
            elif not (lo[j] <= every_lo[j] and hi[j] >= every_hi[j]):
                raise InvalidFilter(f"the PST matcher takes equality tests only: {name!r} is "
                                    f"tested by a range")
        return tests, compiled

    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        tests, compiled = self._tests_of(spec)  # validated before anything changes
        if filter_id in self._compiled:
            self._tree.remove(filter_id)
            del self._compiled[filter_id]
        self._tree.add(filter_id, tests)
        self._compiled[filter_id] = compiled

    def remove_filter(self, filter_id: str) -> None:
        if filter_id not in self._compiled:
            raise UnknownFilter(filter_id)
        self._tree.remove(filter_id)
        del self._compiled[filter_id]

    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        if not self._compiled:
            return []
        event = standalone(event)
        box = self.schema.extract(event)
        if box.clean and np.array_equal(box.lo, box.hi):
            compiled = self._compiled
            # the tree's answer is exact for range-dialect filters (box_exact); an XPath is
            # evaluated on the candidates, as the box engines do
            found = {fid for fid in self._tree.match(dict(zip(self.schema.dims, box.lo.tolist())))
                     if compiled[fid].box_exact or _check(compiled[fid], event, box, variables)}
        else:  # a box event: intersection, then the exact check
            found = {fid for fid, c in self._compiled.items()
                     if np.all(c.mins[0] <= box.hi) and np.all(c.maxs[0] >= box.lo)
                     and _check(c, event, box, variables)}
        return [fid for fid in self._compiled if fid in found]

    def filter_ids(self) -> list[str]:
        return list(self._compiled)

    def __len__(self) -> int:
        return len(self._compiled)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._compiled

    def steps(self, event: Any) -> int:
        """Nodes of the PST one event's search visits (Gryphon's matching steps)."""
        box = self.schema.extract(standalone(event))
        return self._tree.match_counting(dict(zip(self.schema.dims, box.lo.tolist())))[1]

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        q = (("q", EXAMPLE_QUOTES),)
        quote = etree.fromstring(f'<q:quote xmlns:q="{EXAMPLE_QUOTES}"><q:price>42</q:price>'
                                 f'</q:quote>')
        return [(FilterSpec(ns.XPATH10_DIALECT_2011, "/q:quote[q:price = 42]", q), quote, True),
                (FilterSpec(ns.XPATH10_DIALECT_2011, "/q:quote[q:price = 41]", q), quote, False)]
