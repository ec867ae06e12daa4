"""BruteForceMatcher: every rectangle checked against every event with numpy.

The baseline the R-tree engines are measured against, and the oracle their tests compare
with.  Same dialects, schema and meaning as :class:`~matchers.rtree_engine.RTreeMatchingEngine`
(it compiles filters with the same :func:`~matchers.box_filters.compile_filter`), but no index:
rectangles live in column-major arrays, and an event's box is intersected with all of them
(``mins <= event.hi and maxs >= event.lo`` on every dimension: containment for point events,
intersection for eCube boxes), before the same exact checks run on the candidates.

Removal only marks rectangles dead; the arrays are compacted when half of them are.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

import numpy as np
from lxml import etree

from wsframework import ns
from matchers.vocabulary import EXAMPLE_QUOTES, MATCHER_BRUTE_FORCE
from wsframework.matching.base import FilterFailures, FilterSpec, ReportingMatcher
from wsframework.matching.errors import UnknownFilter

from .box_filters import box_dialects, compile_filter
from .compiled_filter import CompiledFilter
from .schema import Schema
from .schema.extraction import standalone

__all__ = ["BRUTE_FORCE_MATCHER_URI", "BruteForceMatcher"]

log = logging.getLogger(__name__)

BRUTE_FORCE_MATCHER_URI = MATCHER_BRUTE_FORCE


class BruteForceMatcher(ReportingMatcher):
    """Linear-scan box matcher (numpy), with the R-tree engine's semantics.

    ``config`` is the event schema, as for the R-tree engine.
    """

    uri = BRUTE_FORCE_MATCHER_URI
    dialects = box_dialects()

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.schema = Schema.from_config(config)
        d = self.schema.d
        self._order: dict[str, int] = {}          # id -> insertion number (dict keeps order)
        self._filters: dict[int, CompiledFilter | None] = {}  # None: a bulk box filter
        self._id_of: dict[int, str] = {}
        self._next = 0
        self._mins = np.zeros((d, 0))  # column-major: one contiguous row per dimension
        self._maxs = np.zeros((d, 0))
        self._owner = np.zeros(0, dtype=np.int64)  # insertion number, -1 when dead
        self._size = 0
        self._dead = 0

    # -- storage -----------------------------------------------------------------------------
    def _append(self, number: int, mins: np.ndarray, maxs: np.ndarray) -> None:
        count = mins.shape[0]
        if self._size + count > self._owner.shape[0]:
            capacity = max(16, 2 * (self._size + count))
            d = self.schema.d
            new_mins, new_maxs = np.zeros((d, capacity)), np.zeros((d, capacity))
            new_owner = np.full(capacity, -1, dtype=np.int64)
            new_mins[:, :self._size] = self._mins[:, :self._size]
            new_maxs[:, :self._size] = self._maxs[:, :self._size]
            new_owner[:self._size] = self._owner[:self._size]
            self._mins, self._maxs, self._owner = new_mins, new_maxs, new_owner
        end = self._size + count
        self._mins[:, self._size:end] = mins.T
        self._maxs[:, self._size:end] = maxs.T
        self._owner[self._size:end] = number
        self._size = end

    def _kill(self, number: int) -> None:
        dead = self._owner[:self._size] == number
        self._owner[:self._size][dead] = -1
        self._dead += int(dead.sum())
        if self._dead * 2 > self._size:
            live = self._owner[:self._size] >= 0
            self._mins = self._mins[:, :self._size][:, live].copy()
            self._maxs = self._maxs[:, :self._size][:, live].copy()
            self._owner = self._owner[:self._size][live].copy()
            self._size = self._owner.shape[0]
            self._dead = 0

    # -- the Matcher interface ---------------------------------------------------------------
    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        compiled = compile_filter(spec, self.schema)
        number = self._order.get(filter_id)
        if number is None:
            number = self._next
            self._next += 1
            self._order[filter_id] = number
            self._id_of[number] = filter_id
        else:
            self._kill(number)
        self._filters[number] = compiled
        self._append(number, compiled.mins, compiled.maxs)

    def remove_filter(self, filter_id: str) -> None:
        number = self._order.pop(filter_id, None)
        if number is None:
            raise UnknownFilter(filter_id)
        self._kill(number)
        del self._filters[number]
        del self._id_of[number]

    def bulk_load(self, ids: Sequence[str], mins: np.ndarray, maxs: np.ndarray) -> None:
        """Add box filters from arrays (same contract as the R-tree engine's)."""
        ids = list(ids)
        n, d = len(ids), self.schema.d
        mins = np.asarray(mins, dtype=np.float64).reshape(n, d)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(n, d)
        if len(set(ids)) != n or any(i in self._order for i in ids):
            raise ValueError("bulk_load takes new, distinct filter ids")
        if not (np.all(np.isfinite(mins)) and np.all(np.isfinite(maxs)) and np.all(mins <= maxs)):
            raise ValueError("boxes need finite coordinates with mins <= maxs")
        if np.any(mins < self.schema.null) or np.any(maxs > self.schema.domain_hi):
            raise ValueError("boxes must lie inside the schema's space")
        first = self._next
        numbers = np.arange(first, first + n, dtype=np.int64)
        self._next += n
        for filter_id, number in zip(ids, numbers.tolist()):
            self._order[filter_id] = number
            self._id_of[number] = filter_id
            self._filters[number] = None
        self._append(first, mins, maxs)
        self._owner[self._size - n:self._size] = numbers

    def _candidates(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        size = self._size
        if not size:
            return np.zeros(0, dtype=np.int64)
        hit = np.ones(size, dtype=bool)
        for j in range(self.schema.d):
            hit &= self._mins[j, :size] <= hi[j]
            hit &= self._maxs[j, :size] >= lo[j]
        hit &= self._owner[:size] >= 0
        return np.unique(self._owner[:size][hit])

    def _match(self, event: Any, variables: Mapping[str, Any] | None,
               failures: FilterFailures | None) -> list[str]:
        budget = failures.budget if failures is not None else None
        if not self._order:
            return []
        event = standalone(event)  # absolute and relative paths start at one element
        box = self.schema.extract(event)
        hits = []
        for number in self._candidates(box.lo, box.hi).tolist():
            compiled = self._filters[number]
            if compiled is None or (compiled.box_exact and box.clean):
                hits.append(self._id_of[number])
                continue
            started = time.perf_counter() if budget else 0.0
            try:
                accepted = compiled.check(event, box, variables)
            except Exception as exc:
                log.debug("filter %r failed on an event: %s", self._id_of[number], exc)
                if failures is not None:
                    failures.add(self._id_of[number],
                                 f"evaluation failed: {type(exc).__name__}: {exc}")
                accepted = False
            else:
                if budget and time.perf_counter() - started > budget:
                    failures.add(self._id_of[number],
                                 f"evaluation took over the {budget:g} s budget")
            if accepted:
                hits.append(self._id_of[number])
        return hits

    def match_box(self, lo: Any, hi: Any | None = None) -> list[str]:
        """Ids of the filters with a rectangle meeting [lo, hi] (see the R-tree engine)."""
        lo = np.asarray(lo, dtype=np.float64)
        hi = lo if hi is None else np.asarray(hi, dtype=np.float64)
        return [self._id_of[n] for n in self._candidates(lo, hi).tolist()]

    def filter_ids(self) -> list[str]:
        return list(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._order

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        dialect = ns.XPATH10_DIALECT_2011  # the event is the context node
        q = (("q", EXAMPLE_QUOTES),)
        quote = etree.fromstring(f'<q:quote xmlns:q="{EXAMPLE_QUOTES}"><q:price>42</q:price></q:quote>')
        return [
            (FilterSpec(dialect, "/q:quote[q:price >= 42]", q), quote, True),
            (FilterSpec(dialect, "/q:quote[q:price > 42]", q), quote, False),
        ]


