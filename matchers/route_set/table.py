"""The route set's tables: one immutable :class:`RoutingTable` per precision, built from every
server's summary cut to that precision (:class:`SummaryCuts` caches the cuts).

Precision (paper IV, V-B)
    Servers send precise summaries (their maximal rectangles) and say how many subscription
    rectangles they hold (the ``rectangles`` attribute of the ``edn:Summary`` element, or
    ``set_summary(..., rectangles=N)``; absent, the summary's own box count is used).
    :meth:`~.matcher.RTreeRouteSet.set_precision` routes with every summary cut to ``precision`` =
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

    A summary's Bloom filters (:mod:`matchers.summary.bloom`) are the same at every
    precision: cuts reduce its boxes only, so on a Bloom dimension precision means the
    filter's false-positive rate.  At "no summary" they are not consulted either.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .._rtree import BoxIndex
from ..summary import Summary, str_groups, summary_target
from .bitmaps import MAX_BITMAP_BOXES, LazyBitmaps, no_boxes
from .cells import CellBitmaps

__all__ = ["NO_SUMMARY", "PRECISE", "RoutingTable", "SummaryCuts", "build_table"]

NO_SUMMARY = 0.0  # precision of "no summary": every event to every server
PRECISE = 1.0     # precision of the precise summaries (the maximal rectangles)


@dataclass(frozen=True, eq=False)
class RoutingTable:
    """One immutable routing table (see :mod:`matchers.route_set.routing`).

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
    bitmaps: tuple                               # per server: LazyBitmaps, or None if too big
    precision: float = PRECISE                   # the cut every summary was taken at
    # (server position, ((dimension, BloomFilter), ...)) for the servers whose summary has
    # Bloom filters, applied after the boxes (routing.drop_bloom_misses); () costs nothing
    blooms: tuple = ()
    columns_lo: np.ndarray = field(init=False)   # (d, K): contiguous per dimension
    columns_hi: np.ndarray = field(init=False)
    choice: dict = field(default_factory=lambda: {"batch": None, "single": None})
    recent: list = field(default_factory=list)   # single events seen before calibrating
    _index: list = field(default_factory=lambda: [None])
    _cells: list = field(default_factory=lambda: [None])
    _lock: threading.Lock = field(default_factory=threading.Lock)
    calibrating: threading.Lock = field(default_factory=threading.Lock)  # one calibrator
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

    @property
    def cells(self) -> CellBitmaps:
        """The table's cell bitmaps (:mod:`.cells`), built on first use."""
        with self._lock:
            if self._cells[0] is None:
                self._cells[0] = CellBitmaps(self.mins, self.maxs)
            return self._cells[0]

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


class SummaryCuts:
    """Per server: how many subscription rectangles it said its summary covers (the
    denominator of precision) and its summary's cuts, cached per box count until that
    server's summary changes."""

    def __init__(self) -> None:
        self._rectangles: dict[str, int | None] = {}
        # server -> boxes wanted -> (mins, maxs largest first, bitmaps or None)
        self._cuts: dict[str, dict[int, tuple[np.ndarray, np.ndarray, LazyBitmaps | None]]] = {}

    def replace(self, server_id: str, rectangles: int | None) -> None:
        """``server_id`` has a new summary covering ``rectangles``: drop its old cuts."""
        self._cuts.pop(server_id, None)
        self._rectangles[server_id] = rectangles

    def forget(self, server_id: str) -> None:
        self._cuts.pop(server_id, None)
        self._rectangles.pop(server_id, None)

    def rectangles_of(self, server_id: str) -> int | None:
        return self._rectangles.get(server_id)

    def target(self, server_id: str, summary: Summary, precision: float) -> int:
        """Boxes of ``server_id``'s summary at ``precision`` (never more than it has)."""
        rectangles = self._rectangles.get(server_id)
        if precision >= PRECISE or not len(summary):
            return len(summary)
        wanted = summary_target(precision, rectangles if rectangles else len(summary))
        return min(wanted, len(summary))

    def cut(self, server_id: str, summary: Summary, precision: float):
        """(mins, maxs, bitmaps) of ``server_id``'s summary at ``precision``, largest box
        first; cached per box count until the server's summary changes."""
        target = self.target(server_id, summary, precision)
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
            bitmaps = LazyBitmaps(mins, maxs) if len(mins) <= MAX_BITMAP_BOXES else None
            found = cuts[target] = (mins, maxs, bitmaps)
        return found


def build_table(servers: tuple[str, ...], summaries: dict, cuts: SummaryCuts, d: int,
                precision: float = PRECISE) -> RoutingTable:
    """The table routing by every server's summary cut to ``precision``."""
    parts_min, parts_max, owners, starts, bitmaps = [], [], [], [0], []
    everything = precision <= NO_SUMMARY
    for position, server in enumerate(servers):
        summary = summaries[server]
        if summary is None or everything:
            mins, maxs, lazy = np.zeros((0, d)), np.zeros((0, d)), no_boxes()
        else:
            mins, maxs, lazy = cuts.cut(server, summary, precision)
        parts_min.append(mins)
        parts_max.append(maxs)
        owners.append(np.full(len(mins), position, dtype=np.int64))
        starts.append(starts[-1] + len(mins))
        bitmaps.append(lazy)
    mins = np.vstack(parts_min) if parts_min else np.zeros((0, d))
    maxs = np.vstack(parts_max) if parts_max else np.zeros((0, d))
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    always = np.array([everything or summaries[s] is None for s in servers], dtype=bool)
    blooms = () if everything else tuple(
        (position, tuple(zip(summaries[server].bloom_dims, summaries[server].blooms.values())))
        for position, server in enumerate(servers)
        if summaries[server] is not None and summaries[server].blooms)
    return RoutingTable(servers, summaries, mins, maxs, owner, np.array(starts, dtype=np.int64),
                        always, tuple(bitmaps), precision, blooms)
