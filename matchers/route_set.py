"""RTreeRouteSet: the dispatcher's routing table, one summary per subscription server.

::

    routes = RTreeRouteSet(schema_element)            # or no config: schema from summaries
    routes.set_summary("server-1", engine.summary(0.5))
    routes.add_filter("server-2", FilterSpec(SUMMARY_DIALECT, summary.to_text()))
    routes.match(event)                 # -> ["server-1", ...]: servers whose summary holds it
    routes.route(point)                 # -> frozenset of server ids
    routes.route_batch(points)          # (m, d) -> list of m frozensets, one call
    routes.set_summary("server-3", None)  # no summary: every event goes to server-3
    routes.set_summary("server-1", precise, rectangles=10_000)  # for precision cuts
    routes.set_precision(0.3)           # route with every summary cut to 30%
    routes.set_precision(0.0)           # "no summary": every event to every server

Filter ids are server ids; a "filter" is the server's routing summary (dialect
:data:`~matchers.summary.SUMMARY_DIALECT`: an ``edn:Summary`` as the filter's element
content or as its text).  Adding a filter for a known server replaces its summary.

Structure (measured; ``edn bench matchers``)
    Every change builds a new immutable :class:`_Routes` (all boxes of all servers in one
    array, grouped by server, each server's boxes largest first) and swaps one reference.
    Readers take the reference once and never see a half-updated table; writers are
    serialized by a lock.  Replacing one server's summary re-sorts only that server's boxes.

    Which servers' boxes hold a point is answered one of three ways:

    * **bitmap** (batches): per server and dimension, bitmaps over its boxes indexed by rank
      (:class:`_RankBitmaps`); a point costs two binary searches and two bitmap rows per
      dimension and server, independent of how many boxes contain it or how wide they are.
      Needs 2d (K+1) K / 8 bytes per server of K boxes, so only up to
      :data:`MAX_BITMAP_BOXES` boxes per server.
    * **scan** (numpy; batches) / **columns** (single events): for a batch, per server, its
      boxes are tested largest first, in chunks, against the points not yet known to be
      routed there; a point leaves a server's work list at its first hit (imprecise
      summaries settle most points on their largest boxes).  A single event is tested
      against all boxes at once, one contiguous column per dimension.
    * **rtree**: one R-tree over all boxes (libspatialindex; a batch is one
      ``Index_Intersects_id_v`` call), box hits mapped to servers.  Wins when boxes are
      many and small and few contain a point: misses are pruned near the root.

    Measured with 10 servers x 1,000 boxes in d = 4 (``edn bench matchers``), per event in
    batches: bitmap ~7 us, scan 10-35 us, R-tree 60-130 us; single events: columns ~32 us,
    R-tree 80-130 us; with precise small summaries and a low hit ratio the R-tree overtakes
    the scans.  So the table decides by measurement: after each change, the first batch of
    at least :data:`CALIBRATION_POINTS` events is routed every way on its first points, and
    the first :data:`CALIBRATION_POINTS` single events are kept and then routed every way;
    the fastest serves until the next change.  All give the same answer.  One global index
    beat one index per server (10 ctypes calls per event) in every measurement.

Precision (paper IV, V-B)
    Servers send precise summaries (their maximal rectangles) and say how many subscription
    rectangles they hold (the ``rectangles`` attribute of the ``edn:Summary`` element, or
    ``set_summary(..., rectangles=N)``; absent, the summary's own box count is used).
    :meth:`RTreeRouteSet.set_precision` routes with every summary cut to ``precision`` =
    summary boxes / that server's rectangles (:func:`~matchers.summary.summary_target`
    boxes, STR groups of the maximal rectangles, :func:`~matchers.summary.str_groups`);
    1.0 is precise (the maximal rectangles themselves) and 0.0 is "no summary": every event
    goes to every server without being read.  Cuts are cached per server and box count, and
    whole tables per precision, until that server's (any server's) summary changes, so
    switching back to a precision already used is one reference swap; the first switch to
    a new precision cuts each server once (~50-100 ms per 10,000 boxes in d = 8).
    Every cut covers the precise boxes (a group's bounding box covers its members), so no
    event a precise summary routes to a server is ever withheld at a lower precision.  The
    hit ratio usually falls as precision rises, but STR cuts at different sizes are not
    nested, so that is a tendency on a given workload, not a guarantee; what is guaranteed
    is hits(precise) <= hits(any cut) <= hits(no summary) for every event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from lxml import etree

from wsframework.ns import MATCHER_RTREE_ROUTE_SET

from ._rtree import BoxIndex
from wsframework.matching.base import FilterSpec, Matcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter
from .schema import EDN_NS, Schema, standalone
from .summary import SUMMARY_DIALECT, Summary, str_groups, summary_target

__all__ = ["RTreeRouteSet", "CALIBRATION_POINTS", "NO_SUMMARY", "PRECISE"]

NO_SUMMARY = 0.0  # precision of "no summary": every event to every server
PRECISE = 1.0     # precision of the precise summaries (the maximal rectangles)
_MAX_TABLES = 16  # routing tables kept per route set (one per precision used)

CALIBRATION_POINTS = 64
_FIRST_CHUNK = 16
_MAX_CHUNK = 256


MAX_BITMAP_BOXES = 2048  # per server: 2d x (K+1) x K bits, ~4 MB at K = 2048, d = 4
_BITMAP_CHUNK = 8192      # points per pass (bounds the (points, words) work arrays)


class _RankBitmaps:
    """Per-dimension rank bitmaps of one server's boxes.

    For dimension j, ``lo_bits[j][r]`` is the set (a bitmap over the server's boxes) of the
    boxes whose ``lo_j`` is among the ``r`` smallest, and ``hi_bits[j][r]`` of those whose
    ``hi_j`` is not among the ``r`` smallest.  The boxes meeting the query box [a, b] are

        AND over j of  lo_bits[j][#{lo_j <= b_j}]  &  hi_bits[j][#{hi_j < a_j}]

    (two binary searches and two bitmap rows per dimension), so a point costs 2d rows of K
    bits however many boxes contain it or how wide they are: the structure wins exactly
    where scanning (many misses) and the R-tree (many overlapping hits) lose.  Memory is
    2d (K+1) K / 8 bytes, hence :data:`MAX_BITMAP_BOXES`; building it costs a few ms per
    server, paid on the first batch after that server's summary changed.
    """

    def __init__(self, mins: np.ndarray, maxs: np.ndarray) -> None:
        k, d = mins.shape
        self.k = k
        words = max(1, -(-k // 64))
        limits = np.arange(k + 1)[:, None]
        self.sorted_lo, self.sorted_hi, self.lo_bits, self.hi_bits = [], [], [], []
        for j in range(d):
            for column, sorted_list, bits_list, below in (
                    (mins[:, j], self.sorted_lo, self.lo_bits, True),
                    (maxs[:, j], self.sorted_hi, self.hi_bits, False)):
                order = np.argsort(column, kind="stable")
                rank = np.empty(k, dtype=np.int64)
                rank[order] = np.arange(k)
                member = rank[None, :] < limits if below else rank[None, :] >= limits
                packed = np.packbits(member, axis=1, bitorder="little")
                padded = np.zeros((k + 1, words * 8), dtype=np.uint8)
                padded[:, :packed.shape[1]] = packed
                sorted_list.append(column[order])
                bits_list.append(padded.view(np.uint64))

    def any_hit(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """(m,) bool: does each query box [lo[i], hi[i]] meet one of the boxes?"""
        m, d = lo.shape
        if self.k == 0 or not self.sorted_lo:
            return np.full(m, self.k > 0)
        result = np.empty(m, dtype=bool)
        for start in range(0, m, _BITMAP_CHUNK):
            part_lo, part_hi = lo[start:start + _BITMAP_CHUNK], hi[start:start + _BITMAP_CHUNK]
            acc = None
            for j in range(d):
                rows = np.searchsorted(self.sorted_lo[j], part_hi[:, j], side="right")
                acc = self.lo_bits[j][rows] if acc is None else acc & self.lo_bits[j][rows]
                rows = np.searchsorted(self.sorted_hi[j], part_lo[:, j], side="left")
                acc &= self.hi_bits[j][rows]
            result[start:start + _BITMAP_CHUNK] = acc.any(axis=1)
        return result


class _LazyBitmaps:
    """A server's :class:`_RankBitmaps`, built on first use (only batches use them, and
    summaries may change far more often than batches arrive) and then kept, across table
    rebuilds, until that server's summary changes."""

    def __init__(self, mins: np.ndarray | None, maxs: np.ndarray | None) -> None:
        self._boxes = (mins, maxs)
        self._built: _RankBitmaps | None = None
        self._lock = threading.Lock()

    @property
    def value(self) -> _RankBitmaps:
        if self._built is None:
            with self._lock:
                if self._built is None:
                    mins, maxs = self._boxes
                    self._built = _RankBitmaps(mins, maxs)
        return self._built


def _no_boxes() -> _LazyBitmaps:
    """Bitmaps of a server without a summary (it is in ``always`` instead)."""
    return _LazyBitmaps(np.zeros((0, 0)), np.zeros((0, 0)))


@dataclass(frozen=True, eq=False)
class _Routes:
    """One immutable routing table (see the module docstring).

    Only the lazily built R-tree, the measured strategy choices, the calibration sample and
    the frozenset cache change after construction, each under ``_lock`` or idempotently.
    """

    servers: tuple[str, ...]
    summaries: Mapping[str, Summary | None]      # None: no summary, route everything there
    mins: np.ndarray                             # (K, d), grouped by server, largest first
    maxs: np.ndarray
    owner: np.ndarray                            # (K,) server position
    starts: np.ndarray                           # (S + 1,) box offsets per server
    always: np.ndarray                           # (S,) bool: servers without a summary
    bitmaps: tuple                               # per server: _LazyBitmaps, or None if too big
    precision: float = PRECISE                   # the cut every summary was taken at
    columns_lo: np.ndarray = field(init=False)   # (d, K): contiguous per dimension
    columns_hi: np.ndarray = field(init=False)
    choice: dict = field(default_factory=lambda: {"batch": None, "single": None})
    recent: list = field(default_factory=list)   # single events seen before calibrating
    _index: list = field(default_factory=lambda: [None])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sets: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns_lo", np.ascontiguousarray(self.mins.T))
        object.__setattr__(self, "columns_hi", np.ascontiguousarray(self.maxs.T))

    @property
    def index(self) -> BoxIndex:
        with self._lock:
            if self._index[0] is None:
                self._index[0] = BoxIndex.bulk(np.arange(len(self.owner)), self.mins, self.maxs,
                                               dims=self.mins.shape[1])
            return self._index[0]

    def frozen(self, mask_row: np.ndarray) -> frozenset:
        positions = np.flatnonzero(mask_row)
        return frozenset(self.servers[i] for i in positions.tolist())

    def sets(self, hit: np.ndarray) -> list[frozenset]:
        """(m, S) bool -> m frozensets of server ids (cached per distinct row)."""
        hit = hit | self.always
        if hit.shape[1] <= 62:
            codes = hit @ (np.int64(1) << np.arange(hit.shape[1], dtype=np.int64))
            cache = self._sets
            out = []
            for row, code in enumerate(codes.tolist()):
                found = cache.get(code)
                if found is None:
                    found = cache[code] = self.frozen(hit[row])
                out.append(found)
            return out
        return [self.frozen(row) for row in hit]


class RTreeRouteSet(Matcher):
    """Routing summaries per server; answers which servers an event must go to.

    ``config``: the event schema (as for the engines) used to read events in :meth:`match`;
    without one, the schema shipped inside the first summary that carries one is adopted.
    Summaries must all have the same dimensions (and schema, when both carry one).
    """

    uri = MATCHER_RTREE_ROUTE_SET
    dialects = frozenset({SUMMARY_DIALECT})

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        configured = isinstance(config, Schema) or isinstance(getattr(config, "tag", None), str)
        self.schema: Schema | None = Schema.from_config(config) if configured else None
        self.dims: tuple[str, ...] | None = self.schema.dims if self.schema is not None else None
        self._write = threading.Lock()
        self._precision = PRECISE
        self._rectangles: dict[str, int | None] = {}
        # server -> boxes wanted -> (mins, maxs largest first, bitmaps or None)
        self._cuts: dict[str, dict[int, tuple[np.ndarray, np.ndarray, _LazyBitmaps | None]]] = {}
        self._tables: dict[float, _Routes] = {}  # precision -> table of the current summaries
        self._routes = self._build((), {})

    # -- changing the table ------------------------------------------------------------------
    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        self.set_summary(filter_id, _summary_of(spec), rectangles=_rectangles_of(spec))

    def set_summary(self, server_id: str, summary: Summary | None, *,
                    rectangles: int | None = None) -> None:
        """Install (or atomically replace) ``server_id``'s summary; None means no summary:
        every event is routed to that server.  ``rectangles``: how many subscription
        rectangles the summary covers (the denominator of precision)."""
        with self._write:
            if summary is not None:
                self._check_compatible(summary)
            routes = self._routes
            servers = routes.servers if server_id in routes.summaries else routes.servers + (server_id,)
            summaries = dict(routes.summaries)
            summaries[server_id] = summary
            self._cuts.pop(server_id, None)
            self._rectangles[server_id] = rectangles if summary is not None else None
            self._swap(servers, summaries)

    def remove_filter(self, filter_id: str) -> None:
        with self._write:
            routes = self._routes
            if filter_id not in routes.summaries:
                raise UnknownFilter(filter_id)
            summaries = dict(routes.summaries)
            del summaries[filter_id]
            self._cuts.pop(filter_id, None)
            self._rectangles.pop(filter_id, None)
            self._swap(tuple(s for s in routes.servers if s != filter_id), summaries)

    def _swap(self, servers: tuple[str, ...], summaries: dict) -> None:
        """The summaries changed: every cached table is stale; build the current one."""
        self._tables.clear()
        table = self._build(servers, summaries, self._precision)
        self._tables[self._precision] = table
        self._routes = table

    # -- precision ---------------------------------------------------------------------------
    @property
    def precision(self) -> float:
        """The precision routing uses now: 0.0 no summary, 1.0 precise, else a cut."""
        return self._routes.precision

    def set_precision(self, precision: float) -> None:
        """Route with every summary cut to ``precision`` (0.0: no summary, 1.0: precise).

        The new table is built (or taken from the cache) first and then swapped in with one
        reference assignment: an event is routed either by the old table or by the new one,
        never by a mixture."""
        precision = float(precision)
        if not 0.0 <= precision <= 1.0:
            raise ValueError(f"precision must be in [0, 1], got {precision!r}")
        with self._write:
            self._precision = precision
            table = self._tables.get(precision)
            if table is None:
                routes = self._routes
                table = self._build(routes.servers, dict(routes.summaries), precision)
                if len(self._tables) >= _MAX_TABLES:
                    self._tables.clear()
                self._tables[precision] = table
            self._routes = table

    def rectangles_of(self, server_id: str) -> int | None:
        """The subscription rectangles ``server_id`` said its summary covers (None: unsaid)."""
        return self._rectangles.get(server_id)

    def _target(self, server_id: str, summary: Summary, precision: float) -> int:
        """Boxes of ``server_id``'s summary at ``precision`` (never more than it has)."""
        rectangles = self._rectangles.get(server_id)
        if precision >= PRECISE or not len(summary):
            return len(summary)
        wanted = summary_target(precision, rectangles if rectangles else len(summary))
        return min(wanted, len(summary))

    def _cut(self, server_id: str, summary: Summary, precision: float):
        """(mins, maxs, bitmaps) of ``server_id``'s summary at ``precision``, largest box
        first; cached per box count until the server's summary changes."""
        target = self._target(server_id, summary, precision)
        cuts = self._cuts.setdefault(server_id, {})
        found = cuts.get(target)
        if found is None:
            if target >= len(summary):
                mins, maxs = summary.mins, summary.maxs
            else:
                mins, maxs = str_groups(summary.mins, summary.maxs, target)
            volume = np.sum(np.log1p(maxs - mins), axis=1)
            order = np.argsort(-volume, kind="stable")
            mins, maxs = mins[order], maxs[order]
            bitmaps = _LazyBitmaps(mins, maxs) if len(mins) <= MAX_BITMAP_BOXES else None
            found = cuts[target] = (mins, maxs, bitmaps)
        return found

    def _check_compatible(self, summary: Summary) -> None:
        if self.dims is None:
            self.dims = summary.dims
        elif summary.dims != self.dims:
            raise InvalidFilter(f"summary dimensions {summary.dims} differ from the route "
                                f"set's {self.dims}")
        if summary.schema is not None:
            if self.schema is None:
                self.schema = summary.schema
            elif summary.schema != self.schema:
                raise InvalidFilter("the summary's schema differs from the route set's")

    def _build(self, servers: tuple[str, ...], summaries: dict,
               precision: float = PRECISE) -> _Routes:
        d = len(self.dims) if self.dims is not None else 0
        parts_min, parts_max, owners, starts, bitmaps = [], [], [], [0], []
        everything = precision <= NO_SUMMARY
        for position, server in enumerate(servers):
            summary = summaries[server]
            if summary is None or everything:
                mins, maxs, lazy = np.zeros((0, d)), np.zeros((0, d)), _no_boxes()
            else:
                mins, maxs, lazy = self._cut(server, summary, precision)
            parts_min.append(mins)
            parts_max.append(maxs)
            owners.append(np.full(len(mins), position, dtype=np.int64))
            starts.append(starts[-1] + len(mins))
            bitmaps.append(lazy)
        mins = np.vstack(parts_min) if parts_min else np.zeros((0, d))
        maxs = np.vstack(parts_max) if parts_max else np.zeros((0, d))
        owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
        always = np.array([everything or summaries[s] is None for s in servers], dtype=bool)
        return _Routes(servers, summaries, mins, maxs, owner, np.array(starts, dtype=np.int64),
                       always, tuple(bitmaps), precision)

    # -- routing -----------------------------------------------------------------------------
    def route(self, point: Any) -> frozenset:
        """Servers with a box containing ``point`` (d coordinates)."""
        point = np.asarray(point, dtype=np.float64)
        return self.route_box(point, point)

    def route_box(self, lo: Any, hi: Any) -> frozenset:
        """Servers with a box meeting [lo, hi] (an eCube event; a point when lo == hi)."""
        routes = self._routes
        lo = np.asarray(lo, dtype=np.float64).reshape(1, -1)
        hi = np.asarray(hi, dtype=np.float64).reshape(1, -1)
        return self._route(routes, lo, hi)[0]

    def route_batch(self, points: Any, highs: Any = None) -> list[frozenset]:
        """One frozenset of server ids per row of ``points`` (m, d); with ``highs``, rows are
        eCube boxes [points[i], highs[i]]."""
        routes = self._routes
        lo = np.asarray(points, dtype=np.float64)
        if lo.ndim != 2:
            raise ValueError("points must be an (m, d) array")
        hi = lo if highs is None else np.asarray(highs, dtype=np.float64)
        return self._route(routes, lo, hi)

    def _route(self, routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> list[frozenset]:
        m = lo.shape[0]
        if not routes.servers or m == 0:
            return [frozenset()] * m
        if lo.shape[1] != routes.mins.shape[1]:
            raise ValueError(f"points have {lo.shape[1]} coordinates; summaries {routes.mins.shape[1]}")
        if len(routes.owner) == 0:
            return routes.sets(np.zeros((m, len(routes.servers)), dtype=bool))
        if m == 1:
            strategy = routes.choice["single"]
            if strategy is None:
                strategy = self._calibrate_single(routes, lo, hi)
        else:
            strategy = routes.choice["batch"]
            if strategy is None and m >= CALIBRATION_POINTS:
                strategy = self._calibrate_batch(routes, lo[:CALIBRATION_POINTS],
                                                 hi[:CALIBRATION_POINTS])
        method = self._methods(m == 1).get(strategy or ("columns" if m == 1 else "scan"))
        return routes.sets(method(routes, lo, hi))

    def _methods(self, single: bool) -> dict:
        if single:
            # (bitmaps cost a numpy pass per server and dimension: ~10x slower for one event)
            return {"columns": self._by_columns, "rtree": self._by_rtree}
        return {"scan": self._by_scan, "rtree": self._by_rtree, "bitmap": self._by_bitmaps}

    def _candidates(self, routes: _Routes, single: bool) -> dict:
        methods = self._methods(single)
        if "bitmap" in methods and any(bitmap is None for bitmap in routes.bitmaps):
            del methods["bitmap"]  # some server has too many boxes for bitmaps
        routes.index  # build the tree outside the timing
        return methods

    def _calibrate_batch(self, routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> str:
        methods = self._candidates(routes, single=False)
        if "bitmap" in methods:
            for bitmaps in routes.bitmaps:
                bitmaps.value  # build them outside the timing
        choice = _fastest({name: (lambda method=method: method(routes, lo, hi))
                           for name, method in methods.items()})
        routes.choice["batch"] = choice
        return choice

    def _calibrate_single(self, routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> str | None:
        """Until CALIBRATION_POINTS single events were seen, use the numpy way and keep them;
        then time every way on them and keep the fastest."""
        recent = routes.recent
        if len(recent) < CALIBRATION_POINTS:
            recent.append((lo, hi))
            return None
        sample = list(recent[:CALIBRATION_POINTS])
        methods = self._candidates(routes, single=True)
        choice = _fastest({name: (lambda method=method: [method(routes, a, b) for a, b in sample])
                           for name, method in methods.items()})
        routes.choice["single"] = choice
        recent.clear()
        return choice

    @staticmethod
    def _by_bitmaps(routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        hit = np.zeros((lo.shape[0], len(routes.servers)), dtype=bool)
        for position, bitmaps in enumerate(routes.bitmaps):
            if bitmaps is not None:
                hit[:, position] = bitmaps.value.any_hit(lo, hi)
        return hit

    @staticmethod
    def _by_rtree(routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        hit = np.zeros((lo.shape[0], len(routes.servers)), dtype=bool)
        if lo.shape[0] == 1:
            hit[0, routes.owner[routes.index.intersecting(lo[0], hi[0])]] = True
            return hit
        ids, counts = routes.index.intersecting_batch(lo, hi)
        hit[np.repeat(np.arange(lo.shape[0]), counts), routes.owner[ids]] = True
        return hit

    @staticmethod
    def _by_scan(routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        m, d = lo.shape
        hit = np.zeros((m, len(routes.servers)), dtype=bool)
        mins, maxs, starts = routes.mins, routes.maxs, routes.starts
        everyone = np.arange(m)
        for position in range(len(routes.servers)):
            begin, end = int(starts[position]), int(starts[position + 1])
            waiting = everyone
            chunk = _FIRST_CHUNK
            while begin < end and len(waiting):
                stop = min(begin + chunk, end)
                inside = np.ones((len(waiting), stop - begin), dtype=bool)
                for j in range(d):
                    inside &= mins[begin:stop, j] <= hi[waiting, j, None]
                    inside &= maxs[begin:stop, j] >= lo[waiting, j, None]
                found = inside.any(axis=1)
                hit[waiting[found], position] = True
                waiting = waiting[~found]
                begin = stop
                chunk = min(chunk * 2, _MAX_CHUNK)
        return hit

    @staticmethod
    def _by_columns(routes: _Routes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """One event against every box at once, a contiguous column per dimension (measured
        faster for one event than any early-exit loop: numpy's per-call cost dominates)."""
        low, high = lo[0].tolist(), hi[0].tolist()
        columns_lo, columns_hi = routes.columns_lo, routes.columns_hi
        inside = columns_lo[0] <= high[0]
        inside &= columns_hi[0] >= low[0]
        for j in range(1, len(low)):
            inside &= columns_lo[j] <= high[j]
            inside &= columns_hi[j] >= low[j]
        hit = np.zeros((1, len(routes.servers)), dtype=bool)
        hit[0, routes.owner[inside]] = True
        return hit

    # -- the Matcher interface ---------------------------------------------------------------
    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        routes = self._routes
        if not routes.servers:
            return []
        if routes.precision <= NO_SUMMARY:
            return list(routes.servers)  # no summary: nothing to read, every server
        schema = self.schema
        if schema is None or (self.dims is not None and schema.dims != self.dims):
            # Cannot read events without a schema: forwarding everything is the safe answer.
            chosen = {s for s in routes.servers
                      if routes.summaries[s] is None or len(routes.summaries[s])}
        else:
            event = standalone(event)  # absolute and relative paths start at one element
            box = schema.extract(event)
            chosen = self._route(routes, box.lo[None, :], box.hi[None, :])[0]
        return [server for server in routes.servers if server in chosen]

    def filter_ids(self) -> list[str]:
        return list(self._routes.servers)

    def __len__(self) -> int:
        return len(self._routes.servers)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._routes.summaries

    def summary_of(self, server_id: str) -> Summary | None:
        routes = self._routes
        if server_id not in routes.summaries:
            raise UnknownFilter(server_id)
        return routes.summaries[server_id]

    def describe(self) -> dict[str, Any]:
        routes = self._routes
        return {**super().describe(), "boxes": int(len(routes.owner)),
                "precision": routes.precision,
                "batch_strategy": routes.choice["batch"] or "undecided",
                "single_strategy": routes.choice["single"] or "undecided",
                "without_summary": [s for s in routes.servers if routes.summaries[s] is None]}

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        from .schema import Attribute

        schema = Schema((Attribute("price", "number", "/q:quote/q:price", (("q", "urn:quotes"),),
                                   0, 100),))
        around_40 = Summary(schema.dims, [[30.0]], [[50.0]], schema)
        below_10 = Summary(schema.dims, [[0.0]], [[10.0]], schema)
        quote = etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>')
        return [
            (FilterSpec(SUMMARY_DIALECT, around_40.to_text()), quote, True),
            (FilterSpec(SUMMARY_DIALECT, below_10.to_text()), quote, False),
        ]


def _fastest(candidates: dict, rounds: int = 3) -> str:
    """The name of the candidate that ran fastest (best of ``rounds`` runs each, the
    candidates taking turns: on a busy machine a burst of preemption then hits one run of
    each rather than every run of one)."""
    timings = {name: float("inf") for name in candidates}
    for _ in range(rounds):
        for name, run in candidates.items():
            start = time.perf_counter()
            run()
            timings[name] = min(timings[name], time.perf_counter() - start)
    return min(timings, key=timings.get)


def _summary_element(spec: FilterSpec):
    content = spec.content
    if content is not None and isinstance(getattr(content, "tag", None), str):
        if content.tag == f"{{{EDN_NS}}}Summary":
            return content
        return content.find(f"{{{EDN_NS}}}Summary")
    return None


def _rectangles_of(spec: FilterSpec) -> int | None:
    """The ``rectangles`` attribute of the summary element (None when absent or unusable)."""
    element = _summary_element(spec)
    if element is None and spec.expression.strip():
        try:
            from wsframework.xmlparse import parse_xml
            element = parse_xml(spec.expression.encode())
        except Exception:
            return None
    text = element.get("rectangles") if element is not None else None
    try:
        value = int(text) if text is not None else None
    except ValueError:
        raise InvalidFilter("summary: 'rectangles' must be an integer") from None
    if value is not None and value < 0:
        raise InvalidFilter("summary: 'rectangles' must be >= 0")
    return value


def _summary_of(spec: FilterSpec) -> Summary:
    content = spec.content
    if content is not None and isinstance(getattr(content, "tag", None), str):
        if content.tag == f"{{{EDN_NS}}}Summary":
            return Summary.from_element(content)
        found = content.find(f"{{{EDN_NS}}}Summary")
        if found is not None:
            return Summary.from_element(found)
    if not spec.expression.strip():
        raise InvalidFilter("empty filter: a summary filter carries an edn:Summary")
    return Summary.from_text(spec.expression)
