"""RTreeMatchingEngine: the subscription server's filtering engine and summary manager.

::

    from matchers import FilterSpec, RTreeMatchingEngine
    from matchers.ranges import RANGES_DIALECT
    from wsframework.ns import XPATH10_DIALECT_2011 as XPATH10

    engine = RTreeMatchingEngine(schema_element)        # an edn:Schema (the topic's Options)
    engine.add_filter("s1", FilterSpec(RANGES_DIALECT, "price >= 30 and symbol = 'GE'"))
    engine.add_filter("s2", FilterSpec(XPATH10, "/q:quote[q:price < 10]", (("q", "urn:quotes"),)))
    engine.match(event)                 # -> ids, insertion order
    engine.match_many(events)           # -> one id list per event: a batch, one index pass
    engine.summary(0.5)                 # -> Summary: ~half as many boxes as rectangles
    engine.bulk_load(ids, mins, maxs)   # many box filters at once, from numpy arrays

Two R-trees, as in the paper:

* the **filtering engine** indexes every rectangle of every filter (a range filter has one
  per ``or`` alternative; an XPath 1.0 filter the boxes :mod:`matchers.xpath_ranges`
  extracts; an XPath 2.0 filter one box spanning the space).  An event is read into a box by
  the schema (a point, or a hypercube for eCube events) and the R-tree returns the
  rectangles intersecting it.  Those are the answer for filters whose rectangles are exact
  (closed numeric ranges, bulk-loaded boxes); every other candidate (strings, open bounds,
  XPath, or a value clamped into the domain) gets its exact check: the range predicates,
  or the XPath evaluated by lxml/elementpath.  Nothing is ever missed: the boxes cover
  their filters.  Bulk-loaded rectangles sit in numpy pages under the R-tree
  (:class:`~matchers.paged_index.PagedBoxIndex`, ~3x faster at a million wide rectangles);
  rectangles added one by one are plain R-tree entries until the next repack.
* the **summary manager** (:class:`~matchers.summary.MaximalRectangles`) keeps the maximal
  rectangles in a second R-tree; :meth:`RTreeMatchingEngine.summary` cuts a summary at any
  precision from them.

Both trees follow every insertion and removal.  :meth:`bulk_load` and :meth:`add_filters`
load large sets from arrays in one go (both trees rebuilt from arrays when the batch is at
least as large as what is held), and the filtering index is repacked, from arrays, once
single entries outnumber paged ones (or pass a 1/16 of them), an amortized cost.

A batch (:meth:`~wsframework.matching.base.Matcher.match_many`) is read at once
(:meth:`~matchers.schema.Schema.extract_many`: simple schema paths in place, no copy) and
meets the index once: every event box against every page's bounding box and then the boxes
of the pages it meets, in numpy (:meth:`~matchers.paged_index.PagedBoxIndex.intersecting_batch`);
exact checks run only on the candidates that need one, each such event copied into a
document of its own once.  :meth:`match_box` answers boxes given as coordinates (the eCube
study, partitioning jobs).

Thread safety follows the :class:`~wsframework.matching.base.Matcher` contract: callers serialize
mutations; concurrent ``match`` calls only read (each index holds its own lock around
libspatialindex).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from lxml import etree

from matchers.vocabulary import EXAMPLE_QUOTES, MATCHER_RTREE_ENGINE
from wsframework.matching.base import FilterFailures, FilterSpec, Pacer, ReportingMatcher
from wsframework.matching.errors import UnknownFilter
from wsframework.matching.packed_forms import PackedForms

from . import packed_boxes
from .box_filters import box_dialects, compile_filter
from .ranges import RANGES_DIALECT
from .compiled_filter import CompiledFilter
from .filter_table import ALWAYS, BOX, IF_UNCLEAN, FilterTable
from .paged_index import PagedBoxIndex
from .schema import Schema
from .schema.extraction import standalone
from .summary import MaximalRectangles, Summary, summary_target
from .summary.equality import bloom_parts
from .xpath import XPATH10_DIALECTS

__all__ = ["RTreeMatchingEngine"]

log = logging.getLogger(__name__)

class RTreeMatchingEngine(ReportingMatcher):
    """R-tree filtering engine plus summary manager for range and XPath 1.0 filters.

    ``config``: the topic's event schema, as an ``edn:Schema`` element (or an element
    holding one, such as ``adm:Options``) or a :class:`~matchers.schema.Schema`.  Without a
    schema there are no dimensions: range filters are refused and XPath filters are all
    evaluated (correct, but no faster than the XPath matcher).
    """

    uri = MATCHER_RTREE_ENGINE
    dialects = box_dialects()

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.schema = Schema.from_config(config)
        d = self.schema.d
        self._table = FilterTable(d)
        self._index = PagedBoxIndex(d)
        self._maximal = MaximalRectangles(d, boxes=self._table)  # its boxes are the table's
        self._summaries: dict[tuple[int, int], Summary] = {}
        self._bloom_parts: tuple[int, Any] = (-1, None)  # (generation, bloom_parts(...))
        self._index_changes = 0  # bumped by every insertion into / removal from the index
        self._singles_cache: tuple | None = None
        self._packed_prefix = packed_boxes.prefix_for(self.schema)

    # -- the Matcher interface ---------------------------------------------------------------
    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        compiled = compile_filter(spec, self.schema)  # validates before anything changes
        table = self._table
        seq = table.seq_of.get(filter_id)
        if seq is None:
            seq = int(table.new_seqs([filter_id])[0])
        else:
            self._unindex(seq)
        self._store(seq, compiled, spec)
        rows = table.rows(seq)
        for row in rows.tolist():
            self._index.insert(row, table.mins[row], table.maxs[row])
            self._maximal.add(row, table.mins[row], table.maxs[row])
        self._index_changes += 1
        self._maybe_repack()

    def remove_filter(self, filter_id: str) -> None:
        table = self._table
        seq = table.seq_of.pop(filter_id, None)
        if seq is None:
            raise UnknownFilter(filter_id)
        self._unindex(seq)
        table.ids[seq] = None
        self._maybe_repack()

    def _match(self, event: Any, variables: Mapping[str, Any] | None,
               failures: FilterFailures | None) -> list[str]:
        table = self._table
        if not table.seq_of:
            return []
        event = standalone(event)  # absolute and relative paths start at one element
        box = self.schema.extract(event)
        rows = self._index.intersecting(box.lo, box.hi)
        if not len(rows):
            return []
        seqs = table.owner[rows]
        seqs = np.unique(seqs) if table.multi else np.sort(seqs)
        need = table.kind[seqs] >= (IF_UNCLEAN if not box.clean else ALWAYS)
        if not need.any():
            return table.ids[seqs].tolist()
        passed = []
        pacer = Pacer()
        for seq in seqs[need].tolist():
            pacer.tick()
            if self._confirm(seq, event, box, variables, failures):
                passed.append(seq)
        if not passed:
            return table.ids[seqs[~need]].tolist()
        hits = np.sort(np.concatenate([seqs[~need], np.array(passed, dtype=np.int64)]))
        return table.ids[hits].tolist()

    def _match_many(self, events: Sequence[Any], variables: Mapping[str, Any] | None,
                    failures: Sequence[FilterFailures] | None) -> list[list[str]]:
        """:meth:`_match` for a batch: the events' boxes read at once (no copies for simple
        schema paths), one index pass for all of them, exact checks only on the candidates
        that need one (each such event copied into a document of its own once)."""
        table = self._table
        m = len(events)
        if not m:
            return []
        if not table.seq_of:
            return [[] for _ in range(m)]
        if not self.schema.d:  # no dimensions: every filter is a candidate of every event
            return super()._match_many(events, variables, failures)
        boxes = self.schema.extract_many(events)
        rows, counts = self._intersecting_batch(boxes.lo, boxes.hi)
        if not len(rows):
            return [[] for _ in range(m)]
        owner = np.repeat(np.arange(m, dtype=np.int64), counts)
        # (event, seq) pairs in event order, each event's in insertion order, de-duplicated
        # for filters of several rectangles
        keys = owner * np.int64(max(table.next_seq, 1)) + table.owner[rows]
        keys = np.unique(keys) if table.multi else np.sort(keys)
        owner, seqs = np.divmod(keys, np.int64(max(table.next_seq, 1)))
        threshold = np.where(boxes.clean[owner], ALWAYS, IF_UNCLEAN)
        keep = table.kind[seqs] < threshold
        need = np.flatnonzero(~keep)
        if len(need):
            pacer = Pacer()
            documents: dict[int, Any] = {}
            for position, event_index, seq in zip(need.tolist(), owner[need].tolist(),
                                                   seqs[need].tolist()):
                pacer.tick()
                document = documents.get(event_index)
                if document is None:
                    # absolute and relative paths start at one element
                    document = documents[event_index] = standalone(events[event_index])
                keep[position] = self._confirm(
                    seq, document, boxes.box(event_index), variables,
                    failures[event_index] if failures is not None else None)
        ids = table.ids[seqs[keep]].tolist()
        ends = np.searchsorted(owner[keep], np.arange(1, m + 1, dtype=np.int64)).tolist()
        answers = []
        start = 0
        for end in ends:
            answers.append(ids[start:end])
            start = end
        return answers

    def _single_rows(self, index: PagedBoxIndex) -> tuple | None:
        """The paged index's single (unpaged) entries: (rows, lows (d, s), highs (d, s)),
        kept until the index changes; None when there are more than a scan should test."""
        if not index.single_count or index.single_count > index.SCAN_SINGLES:
            return None
        cached = self._singles_cache
        if cached is not None and cached[0] is index and cached[1] == self._index_changes:
            return cached[2]
        table = self._table
        single = index.unpaged(table.live_rows())
        found = (single, np.ascontiguousarray(table.mins[single].T),
                 np.ascontiguousarray(table.maxs[single].T))
        self._singles_cache = (index, self._index_changes, found)
        return found

    def _intersecting_batch(self, mins: np.ndarray, maxs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``m`` query boxes: their hit rows concatenated query by query and the hits
        of each (``(rows, counts)``). An index with its own batch query answers; the paged
        R-tree gets its single entries from here (:meth:`_single_rows`)."""
        index = self._index
        if isinstance(index, PagedBoxIndex):
            return index.intersecting_batch(mins, maxs, self._single_rows(index))
        batch = getattr(index, "intersecting_batch", None)
        if batch is not None:
            return batch(mins, maxs)
        found = [index.intersecting(lo, hi) for lo, hi in zip(mins, maxs)]
        counts = np.array([len(f) for f in found], dtype=np.int64)
        return (np.concatenate(found) if found else np.empty(0, dtype=np.int64)), counts

    def filter_ids(self) -> list[str]:
        return list(self._table.seq_of)

    def bounding_box(self, filter_id: str) -> tuple[np.ndarray, np.ndarray] | None:
        """The bounding box of the rectangles ``filter_id`` compiled to (copies); None for
        a filter not held here or one of no rectangle."""
        table = self._table
        seq = table.seq_of.get(filter_id)
        if seq is None:
            return None
        row = int(table.row_of[seq])
        if row >= 0:  # one rectangle, nearly every filter
            return table.mins[row].copy(), table.maxs[row].copy()
        rows = table.rows(seq)
        if not len(rows):
            return None
        return table.mins[rows].min(axis=0), table.maxs[rows].max(axis=0)

    def centre_total(self) -> tuple[np.ndarray, int]:
        """The sum of the centres of the filters' bounding boxes, and how many filters it
        counts (every filter with a rectangle): a centroid in O(1), kept as filters come
        and go (K-means placement)."""
        return self._table.centre_sum.copy(), self._table.centred

    def __len__(self) -> int:
        return len(self._table.seq_of)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._table.seq_of

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "dims": list(self.schema.dims),
                "rectangles": self._table.boxes, "maximal": self._maximal.maximal_count}

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        # No config in the conformance test, so no schema: XPath filters, evaluated exactly.
        dialect = sorted(XPATH10_DIALECTS)[0]
        q = (("q", EXAMPLE_QUOTES),)
        quote = etree.fromstring(f'<q:quote xmlns:q="{EXAMPLE_QUOTES}"><q:symbol>GE</q:symbol>'
                                 '<q:price>42</q:price></q:quote>')
        return [
            (FilterSpec(dialect, "/q:quote[q:price > 30 and q:symbol = 'GE']", q), quote, True),
            (FilterSpec(dialect, "/q:quote[q:price < 10]", q), quote, False),
        ]

    def pack(self) -> None:
        """Pack the filtering index now if it holds single entries or blanked slots (after
        a bulk change made filter by filter, an import say): batches then scan no single
        entries. A mutation: callers serialize it as they do add/remove."""
        index = self._index
        if isinstance(index, PagedBoxIndex):
            if index.single_count or index.blanked_count:
                self._repack()
        elif index.needs_repack():
            self._repack()

    # -- bulk loading ------------------------------------------------------------------------
    def bulk_load(self, ids: Sequence[str], mins: np.ndarray, maxs: np.ndarray) -> None:
        """Add ``n`` box filters from arrays: ``ids`` (n,) new filter ids, ``mins``/``maxs``
        (n, d) coordinates inside the space (``schema.null`` .. ``schema.domain_hi``).

        A box filter *is* its box: it matches events whose box meets it.  On number
        attributes that is the closed range ``min <= x <= max`` (a side spanning from NULL
        to the top also accepts events without the attribute).  Both trees are rebuilt from
        arrays (numpy bulk loading) when the batch is at least as large as what is held.
        """
        ids = list(ids)
        n, d = len(ids), self.schema.d
        mins = np.asarray(mins, dtype=np.float64).reshape(n, d)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(n, d)
        self._validate_boxes(ids, mins, maxs)
        table = self._table
        rows = table.take_rows(n)
        seqs = table.new_seqs(ids)
        table.kind[seqs] = BOX
        table.set_single_rows(seqs, rows, mins, maxs)
        self._index_new_rows(rows)

    def add_filters(self, items: Iterable[tuple[str, FilterSpec]]) -> None:
        """Add many filters at once; all are validated before any is stored.  New ids only
        (use :meth:`add_filter` to replace one)."""
        self.add_packed_filters((filter_id, spec, None) for filter_id, spec in items)

    def packed_filter(self, filter_id: str) -> bytes | None:
        """The rectangles of an exact range filter, packed (:mod:`matchers.packed_boxes`);
        None for other filters, whose compiled form is more than their rectangles."""
        table = self._table
        seq = table.seq_of.get(filter_id)
        if seq is None or table.kind[seq] != IF_UNCLEAN or \
                not isinstance(table.compiled[seq], FilterSpec):
            return None
        rows = table.rows(seq)
        return packed_boxes.pack(self._packed_prefix, table.mins[rows], table.maxs[rows])

    def add_packed_filters(self, items: Iterable[tuple[str, FilterSpec, bytes | None]]) -> None:
        """:meth:`add_filters`, taking an exact range filter's rectangles from its packed
        form where the form is usable (same schema, intact) instead of compiling its text;
        the others are compiled. All are validated before any is stored."""
        ids: list[str] = []
        specs: list[FilterSpec] = []
        forms = PackedForms()  # read once: each form copied as it comes, none kept apiece
        for filter_id, spec, packed in items:
            ids.append(filter_id)
            specs.append(spec)
            forms.append(packed)
        self.add_packed_forms(ids, specs, forms)

    def add_packed_forms(self, ids: Sequence[str], specs: Sequence[FilterSpec],
                         forms: PackedForms) -> None:
        """:meth:`add_packed_filters` with the forms in one buffer, read in numpy (a start
        hands over a million)."""
        if not len(ids) == len(specs) == len(forms):
            raise ValueError("add_packed_forms takes an id, a spec and a form per filter")
        ranged = np.fromiter((spec.dialect == RANGES_DIALECT for spec in specs), dtype=bool,
                             count=len(specs))
        unpacked = packed_boxes.unpack(self._packed_prefix, forms, self.schema.d, ranged)
        distinct = set(ids)
        if len(distinct) != len(ids) or not self._table.seq_of.isdisjoint(distinct):
            seen: set[str] = set()
            for filter_id in ids:
                if filter_id in self._table.seq_of or filter_id in seen:
                    raise ValueError(f"add_filters takes new ids only; {filter_id!r} is taken")
                seen.add(filter_id)
        for spec in {spec.dialect: spec for spec in specs}.values():  # one per dialect
            self.check_dialect(spec)
        taken = np.zeros(len(ids), dtype=bool)
        taken[unpacked.single] = True
        compiled = {position: compile_filter(specs[position], self.schema)
                    for position in np.flatnonzero(~taken).tolist()
                    if position not in unpacked.several}
        table = self._table
        seqs = table.new_seqs(ids)
        added = [self._store_single_exact(seqs[unpacked.single],
                                          [specs[p] for p in unpacked.single.tolist()],
                                          unpacked.mins, unpacked.maxs)]
        for position, (mins, maxs) in unpacked.several.items():
            seq = int(seqs[position])
            self._store_exact_range(seq, specs[position], mins, maxs)
            added.append(table.rows(seq))
        for position, filter_ in compiled.items():
            seq = int(seqs[position])
            self._store(seq, filter_, specs[position])
            added.append(table.rows(seq))
        rows = np.concatenate(added)
        if len(rows):
            self._index_new_rows(np.sort(rows))

    def _validate_boxes(self, ids: list[str], mins: np.ndarray, maxs: np.ndarray) -> None:
        seq_of = self._table.seq_of
        if len(set(ids)) != len(ids) or not seq_of.isdisjoint(ids):
            raise ValueError("bulk_load takes new, distinct filter ids")
        if not set(map(type, ids)) <= {str}:
            raise TypeError("filter ids are strings")
        if not (np.all(np.isfinite(mins)) and np.all(np.isfinite(maxs)) and np.all(mins <= maxs)):
            raise ValueError("boxes need finite coordinates with mins <= maxs")
        if np.any(mins < self.schema.null) or np.any(maxs > self.schema.domain_hi):
            raise ValueError("boxes must lie inside the schema's space "
                             "(schema.null .. schema.domain_hi on every dimension)")

    # A batch of new boxes at least this fraction of all rebuilds both trees from arrays
    # rather than inserting each: per box, ~5 us rebuilt against ~200 us inserted into the
    # maximal rectangles of uniform boxes (measured at 50,000).
    REBUILD_FRACTION = 1 / 8

    def _index_new_rows(self, rows: np.ndarray) -> None:
        table = self._table
        if len(rows) >= table.boxes * self.REBUILD_FRACTION:
            live = self._repack()
            self._maximal.load(live, table.mins[live], table.maxs[live])
        else:
            for row in rows.tolist():
                self._index.insert(row, table.mins[row], table.maxs[row])
            if len(rows) == 1:
                self._maximal.add(int(rows[0]), table.mins[rows[0]], table.maxs[rows[0]])
            else:
                ordered = np.sort(rows)
                self._maximal.add_many(ordered, table.mins[ordered], table.maxs[ordered])
            self._index_changes += 1
            self._maybe_repack()

    # Single entries beyond this many (and a 1/16 of the paged ones) are packed: a batch
    # scans every single entry against every event (~4 us per event and 1,000 singles in
    # d = 8, measured), and a repack costs ~1 us per rectangle, ~16 us per insertion
    # amortized.
    REPACK_SINGLES = 256

    def _maybe_repack(self) -> None:
        """Pack the filtering index again once single entries (or blanked page slots)
        outnumber the packed ones, or single entries pass a 1/16 of them: amortized over
        the changes that caused it."""
        index = self._index
        if index.needs_repack() or (isinstance(index, PagedBoxIndex) and index.single_count > max(
                self.REPACK_SINGLES, len(index) // 16)):
            self._repack()

    def _repack(self) -> np.ndarray:
        """Bulk-load the filtering index from every live row; the rows."""
        table = self._table
        live = table.live_rows()
        self._index = PagedBoxIndex.bulk(live, table.mins[live], table.maxs[live],
                                         dims=self.schema.d)
        return live

    # -- internals ---------------------------------------------------------------------------
    def _store(self, seq: int, compiled: CompiledFilter, spec: FilterSpec) -> None:
        # An exact range filter is checked only against an unclean event's values: it keeps
        # its spec, compiled again (through compile_filter's cache) when one comes, instead
        # of its compiled form (~1.4 KB a filter, most of a subscription's memory).
        if compiled.box_exact and spec.dialect == RANGES_DIALECT:
            self._store_exact_range(seq, spec, compiled.mins, compiled.maxs)
            return
        table = self._table
        table.compiled[seq] = compiled
        table.kind[seq] = IF_UNCLEAN if compiled.box_exact else ALWAYS
        table.set_rows(seq, table.take_rows(len(compiled.mins)), compiled.mins, compiled.maxs)

    def _store_exact_range(self, seq: int, spec: FilterSpec, mins: np.ndarray,
                           maxs: np.ndarray) -> None:
        table = self._table
        # without the request's element, which would keep its whole document alive
        table.compiled[seq] = spec.without_content()
        table.kind[seq] = IF_UNCLEAN
        table.set_rows(seq, table.take_rows(len(mins)), mins, maxs)

    def _store_single_exact(self, seqs: np.ndarray, specs: list[FilterSpec], mins: np.ndarray,
                            maxs: np.ndarray) -> np.ndarray:
        """:meth:`_store_exact_range` for many filters of one rectangle each, at once; their
        rows."""
        table = self._table
        rows = table.take_rows(len(seqs))
        table.compiled[seqs] = [s.without_content() for s in specs]
        table.kind[seqs] = IF_UNCLEAN
        table.set_single_rows(seqs, rows, mins, maxs)
        return rows

    def _unindex(self, seq: int) -> None:
        table = self._table
        rows = table.rows(seq)
        for row in rows.tolist():
            self._index.delete(row, table.mins[row], table.maxs[row])
            self._maximal.remove(row)
        self._index_changes += 1
        table.drop_rows(seq)
        table.compiled[seq] = None

    def _confirm(self, seq: int, event: Any, box: Any, variables: Any,
                 failures: FilterFailures | None = None) -> bool:
        budget = failures.budget if failures is not None else None
        started = time.perf_counter() if budget else 0.0
        try:
            held = self._table.compiled[seq]
            compiled = (held if isinstance(held, CompiledFilter)
                        else compile_filter(held, self.schema))
            accepted = bool(compiled.check(event, box, variables))
        except Exception as exc:  # one filter failing on one event must not fail the match
            log.debug("filter %r failed on an event: %s", self._table.ids[seq], exc)
            if failures is not None:
                failures.add(str(self._table.ids[seq]),
                             f"evaluation failed: {type(exc).__name__}: {exc}")
            return False
        if budget and time.perf_counter() - started > budget:
            failures.add(str(self._table.ids[seq]), f"evaluation took over the {budget:g} s budget")
        return accepted

    # -- coordinates -------------------------------------------------------------------------
    def match_box(self, lo: Any, hi: Any | None = None) -> list[str]:
        """Ids of the filters with a rectangle meeting [lo, hi] (a point if ``hi`` is None):
        the exact answer for box filters, the candidates for the others."""
        lo = np.asarray(lo, dtype=np.float64)
        hi = lo if hi is None else np.asarray(hi, dtype=np.float64)
        rows = self._index.intersecting(lo, hi)
        table = self._table
        return table.ids[np.unique(table.owner[rows])].tolist()

    @property
    def filtering_index(self) -> Any:
        """The index the rectangles are matched in now (a :class:`PagedBoxIndex`, or the
        index a subclass chose); replaced by every repack, so read it, do not keep it."""
        return self._index

    # -- summaries ---------------------------------------------------------------------------
    def forget_summaries(self) -> None:
        """Drop the cached summaries: the next :meth:`summary` at each precision cuts anew
        (to time a cut)."""
        self._summaries.clear()

    @property
    def summary_generation(self) -> int:
        """Changes whenever the maximal rectangles (and so every summary) change."""
        return self._maximal.generation

    @property
    def rectangle_count(self) -> int:
        return self._table.boxes

    @property
    def maximal_count(self) -> int:
        return self._maximal.maximal_count

    def summary(self, precision: float = 1.0) -> Summary:
        """A summary with about ``ceil(precision x rectangles)`` boxes covering every filter.

        ``precision`` in (0, 1] is the paper's: summary boxes / subscription rectangles.
        1.0 gives the maximal rectangles (precise); fewer wanted boxes than maximal
        rectangles gives bounding boxes of STR groups of neighbouring maximal rectangles
        (:func:`~matchers.summary.str_groups`).  Summaries are cached per (generation, size).

        Attributes the schema marks ``summary="bloom"`` that every rectangle tests by
        equality (:mod:`matchers.summary.equality`) are summarized by a Bloom filter of
        their values; the boxes are then cut from the maximal rectangles of the rectangles
        widened to the attribute's whole range there, and the filter is the same at every
        precision (its false-positive rate is that attribute's share of the imprecision).
        One rectangle testing such an attribute otherwise (a range, or not at all) makes
        the summary plain boxes there until it is removed.
        """
        target = summary_target(precision, self._table.boxes)
        key = (self._maximal.generation, target)
        cached = self._summaries.get(key)
        if cached is None:
            parts = self._current_bloom_parts()
            if parts is None:
                mins, maxs = self._maximal.boxes_at(target)
                cached = Summary(self.schema.dims, mins, maxs, self.schema)
            else:
                mins, maxs = parts.boxes_at(target)
                cached = Summary(self.schema.dims, mins, maxs, self.schema, parts.blooms)
            if len(self._summaries) > 16:
                self._summaries.clear()
            self._summaries[key] = cached
        return cached

    def _current_bloom_parts(self):
        """:func:`~matchers.summary.equality.bloom_parts` of the maximal rectangles, kept
        until they change (every precision is cut from the same widened rectangles)."""
        generation = self._maximal.generation
        if self._bloom_parts[0] != generation:
            parts = None
            if any(attribute.summary for attribute in self.schema.attributes):
                parts = bloom_parts(self.schema, *self._maximal.maximal_boxes())
            self._bloom_parts = (generation, parts)
        return self._bloom_parts[1]
