"""The one module that talks to libspatialindex (through ``rtree``): boxes in, integer ids out.

Every other module sees :class:`BoxIndex`, whose contract is small and fixed:

* **One coordinate order.**  A box is two float64 arrays ``lo`` and ``hi`` of length ``d``;
  bulk loads take ``(ids, mins, maxs)`` with ``mins``/``maxs`` of shape ``(n, d)``.  Nothing
  outside this module ever builds rtree's interleaved ``(minx, miny, ..., maxx, ...)`` tuples.
* **Ids only.**  Queries return read-only ``int64`` numpy arrays; ``objects=True`` is never
  used (it is ~25x slower than ids).  Single queries call libspatialindex's
  ``Index_Intersects_id`` / ``Index_Contains_id`` directly with preallocated coordinate
  buffers and copy the id buffer into numpy once, instead of iterating rtree's generator; batches use ``Index_Intersects_id_v`` with a buffer
  sized from the previous batch so the query usually runs once.
* **Numpy bulk loading.**  ``BoxIndex.bulk(ids, mins, maxs)`` hands the arrays to rtree's
  array stream (3-7x faster than a generator stream, 8-14x faster than inserts).  An empty
  load (which libspatialindex refuses) gives an empty index.
* **Point queries** are intersections with a degenerate box (``contains`` would answer the
  reverse question: boxes *inside* the query, see :meth:`BoxIndex.inside`).
* **One hidden axis.**  libspatialindex's C API stores (and queries with) a *point*
  whenever every extent of a box is at most DBL_EPSILON, at the box's low corner: a box
  like [0, 1e-17] would lose everything above 0.  Every stored box therefore gets one extra
  axis spanning [0, 1]; queries get [0, 0] there when they are exact points (point-in-box,
  correct) and [0, 1] otherwise (region intersection, exact).  The same axis pads 0- and
  1-dimensional indexes up to the 2 dimensions libspatialindex needs.
* **Errors translated.**  ``RTreeError`` (and ctypes argument errors) become
  :class:`SpatialIndexError`, a :class:`~wsframework.matching.errors.MatcherError`.
* **Thread safety.**  libspatialindex is not thread-safe, not even for concurrent reads, so
  every call into one index holds that index's lock.  Uncontended, the lock costs ~50 ns.
  Indexes are never pickled: rebuild them from the arrays (on Spark executors too).
"""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np
from rtree import core, index
from rtree.exceptions import RTreeError

from wsframework.matching.errors import MatcherError

__all__ = ["BoxIndex", "SpatialIndexError", "str_labels"]

_VOID_PP = ctypes.POINTER(ctypes.c_void_p)
_MIN_DIMENSION = 2  # libspatialindex refuses fewer
_NO_IDS = np.empty(0, dtype=np.int64)
_NO_IDS.setflags(write=False)


class SpatialIndexError(MatcherError):
    """libspatialindex refused an operation (bad coordinates, corrupt index, ...)."""


def _properties(dimension: int, leaf_capacity: int, index_capacity: int, *,
                bulk: bool) -> index.Property:
    """R* for bulk-loaded trees (STR packing, full nodes); the quadratic split for trees
    grown by insertion: measured 2x faster inserts than R* (no forced reinsertion) at the
    same query speed, where the linear split was as fast to insert but 2.5x slower to query."""
    properties = index.Property()
    properties.dimension = dimension
    properties.leaf_capacity = leaf_capacity
    properties.index_capacity = index_capacity
    if bulk:
        properties.variant = index.RT_Star
    else:
        properties.variant = index.RT_Quadratic
        properties.fill_factor = 0.4  # libspatialindex: must be below 0.5 for quadratic
    return properties


class BoxIndex:
    """An R-tree over axis-aligned boxes in ``dims`` dimensions, keyed by int64 ids.

    The capacities default to libspatialindex's (100/100): measured on uniform boxes in
    d = 4 at 1M entries, larger or smaller nodes and the linear/quadratic variants were
    all as fast or slower (the query cost is dominated by the entries it has to report).
    """

    def __init__(self, dims: int, *, leaf_capacity: int = 100, index_capacity: int = 100,
                 _stream: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        if dims < 0:
            raise ValueError("dims must be >= 0")
        self.dims = dims
        self._d = max(dims + 1, _MIN_DIMENSION)
        self._pad = self._d - dims  # >= 1: the hidden axis (see the module docstring)
        self._lock = threading.Lock()
        self._count = 0
        self._batch_hint = 4  # ids per query expected by the next batch
        bulk = _stream is not None and len(_stream[0]) > 0
        properties = _properties(self._d, leaf_capacity, index_capacity, bulk=bulk)
        try:
            if bulk:
                ids, mins, maxs = _stream
                self._index = index.Index((ids, mins, maxs), properties=properties)
                self._count = len(ids)
            else:
                self._index = index.Index(properties=properties)
        except (RTreeError, ctypes.ArgumentError, ValueError) as exc:
            raise SpatialIndexError(f"cannot build R-tree: {exc}") from None
        self._handle = self._index.handle
        self._query_lo = (ctypes.c_double * self._d)()  # zero on the hidden axis
        self._query_hi = (ctypes.c_double * self._d)()

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def bulk(cls, ids: np.ndarray, mins: np.ndarray, maxs: np.ndarray, *, dims: int | None = None,
             **capacities: int) -> "BoxIndex":
        """An index holding ``n`` boxes at once: ``ids`` (n,), ``mins``/``maxs`` (n, d)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        mins = np.asarray(mins, dtype=np.float64)
        maxs = np.asarray(maxs, dtype=np.float64)
        if dims is None:
            dims = mins.shape[1] if mins.ndim == 2 else 0
        if mins.shape != maxs.shape or mins.shape != (len(ids), dims):
            raise SpatialIndexError(
                f"bulk load wants ids (n,) and mins/maxs (n, {dims}); got {ids.shape}, "
                f"{mins.shape}, {maxs.shape}")
        if len(ids) and not np.all(mins <= maxs):
            raise SpatialIndexError("a box has a minimum above its maximum (or a NaN)")
        pad = max(dims + 1, _MIN_DIMENSION) - dims
        mins = np.hstack([mins, np.zeros((len(ids), pad))])
        maxs = np.hstack([maxs, np.ones((len(ids), pad))])
        stream = (ids, np.ascontiguousarray(mins), np.ascontiguousarray(maxs))
        return cls(dims, _stream=stream, **capacities)

    # -- mutations ---------------------------------------------------------------------------
    def _stored(self, lo: np.ndarray, hi: np.ndarray, box_id: int) -> tuple[list, list]:
        lo = lo.tolist() if isinstance(lo, np.ndarray) else [float(v) for v in lo]
        hi = hi.tolist() if isinstance(hi, np.ndarray) else [float(v) for v in hi]
        if len(lo) != self.dims or len(hi) != self.dims:
            raise SpatialIndexError(
                f"box has {len(lo)}/{len(hi)} coordinates; the index has {self.dims}")
        if not all(a <= b for a, b in zip(lo, hi)):
            raise SpatialIndexError(f"box {box_id}: a minimum is above its maximum (or NaN)")
        return lo + [0.0] * self._pad, hi + [1.0] * self._pad

    def insert(self, box_id: int, lo: np.ndarray, hi: np.ndarray) -> None:
        lo, hi = self._stored(lo, hi, box_id)
        with self._lock:
            self._query_lo[:], self._query_hi[:] = lo, hi
            try:
                core.rt.Index_InsertData(self._handle, int(box_id), self._query_lo,
                                         self._query_hi, self._d, None, 0)
            except (RTreeError, ctypes.ArgumentError) as exc:
                raise SpatialIndexError(f"cannot insert box {box_id}: {exc}") from None
            self._count += 1

    def delete(self, box_id: int, lo: np.ndarray, hi: np.ndarray) -> None:
        """Remove the entry ``box_id`` stored with exactly this box."""
        lo, hi = self._stored(lo, hi, box_id)
        with self._lock:
            self._query_lo[:], self._query_hi[:] = lo, hi
            try:
                core.rt.Index_DeleteData(self._handle, int(box_id), self._query_lo,
                                         self._query_hi, self._d)
            except (RTreeError, ctypes.ArgumentError) as exc:
                raise SpatialIndexError(f"cannot delete box {box_id}: {exc}") from None
            self._count -= 1

    # -- queries -----------------------------------------------------------------------------
    def _query(self, function, lo: np.ndarray, hi: np.ndarray, *, point: bool = True) -> np.ndarray:
        lo = lo.tolist() if isinstance(lo, np.ndarray) else [float(v) for v in lo]
        hi = hi.tolist() if isinstance(hi, np.ndarray) else [float(v) for v in hi]
        dims = self.dims
        if len(lo) != dims or len(hi) != dims:
            raise SpatialIndexError(f"box has {len(lo)}/{len(hi)} coordinates; the index has {dims}")
        top = 0.0 if point and lo == hi else 1.0
        buffer = ctypes.POINTER(ctypes.c_int64)()
        found = ctypes.c_uint64(0)
        with self._lock:  # the coordinate buffers are shared by this index's callers
            query_lo, query_hi = self._query_lo, self._query_hi
            query_lo[:dims] = lo
            query_hi[:dims] = hi
            query_hi[dims:] = [top] * self._pad
            try:
                function(self._handle, query_lo, query_hi, self._d, ctypes.byref(buffer),
                         ctypes.byref(found))
            except (RTreeError, ctypes.ArgumentError) as exc:
                raise SpatialIndexError(f"R-tree query failed: {exc}") from None
        count = found.value
        try:
            if not count:
                return _NO_IDS
            return np.frombuffer(ctypes.string_at(buffer, 8 * count), dtype=np.int64)
        finally:
            core.rt.Index_Free(ctypes.cast(buffer, _VOID_PP))

    def intersecting(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Ids of the boxes that intersect [lo, hi] (closed); for a point pass lo = hi."""
        return self._query(core.rt.Index_Intersects_id, lo, hi)

    def containing_point(self, point: np.ndarray) -> np.ndarray:
        """Ids of the boxes that contain ``point`` (an intersection with a degenerate box)."""
        return self._query(core.rt.Index_Intersects_id, point, point)

    def inside(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Ids of the boxes that lie inside [lo, hi] (libspatialindex's 'contains' query)."""
        return self._query(core.rt.Index_Contains_id, lo, hi, point=False)

    def intersecting_batch(self, mins: np.ndarray, maxs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For ``m`` query boxes ``(m, d)``: all hit ids, concatenated query by query, and the
        number of hits of each query (``(ids, counts)``, as ``rtree``'s ``intersection_v``)."""
        mins = np.asarray(mins, dtype=np.float64)
        maxs = np.asarray(maxs, dtype=np.float64)
        if mins.ndim != 2 or mins.shape != maxs.shape or mins.shape[1] != self.dims:
            raise SpatialIndexError(f"batch queries want (m, {self.dims}) arrays; got {mins.shape}")
        m = mins.shape[0]
        points = np.all(mins == maxs, axis=1)
        mins = np.hstack([mins, np.zeros((m, self._pad))])
        maxs = np.hstack([maxs, np.repeat(np.where(points, 0.0, 1.0)[:, None], self._pad, axis=1)])
        mins = np.ascontiguousarray(mins)
        maxs = np.ascontiguousarray(maxs)
        counts = np.zeros(m, dtype=np.uint64)
        ids = np.empty(max(16, m * self._batch_hint), dtype=np.int64)
        done_queries = done_ids = 0
        finished = ctypes.c_int64(0)
        row = mins.strides[0] // 8
        with self._lock:
            while done_queries < m:
                try:
                    core.rt.Index_Intersects_id_v(
                        self._handle, m - done_queries, self._d, len(ids) - done_ids, row, 1,
                        mins[done_queries:].ctypes.data, maxs[done_queries:].ctypes.data,
                        ids[done_ids:].ctypes.data, counts[done_queries:].ctypes.data,
                        ctypes.byref(finished))
                except (RTreeError, ctypes.ArgumentError) as exc:
                    raise SpatialIndexError(f"R-tree batch query failed: {exc}") from None
                completed = finished.value
                done_ids += int(counts[done_queries:done_queries + completed].sum())
                done_queries += completed
                if done_queries < m:  # buffer too small for the next query: grow and resume
                    ids.resize(2 * len(ids) + int(counts[done_queries]), refcheck=False)
        total = int(counts.sum())
        self._batch_hint = max(1, -(-total // max(m, 1)) + 1)
        return ids[:total], counts.astype(np.int64)

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"<BoxIndex d={self.dims} boxes={self._count}>"

    def __reduce__(self):
        raise TypeError("a BoxIndex cannot be pickled; rebuild it from its arrays")


def str_labels(centres: np.ndarray, groups: int) -> np.ndarray:
    """Sort-Tile-Recursive grouping (Leutenegger et al. 1997): a group label per point.

    Points are sorted on the first dimension and cut into ``s = ceil(g^(1/d))`` slabs of
    equal counts, each slab is cut the same way on the next dimension, and so on: the
    groups are tiles compact in every dimension, with equal numbers of points (within one),
    and there are exactly ``min(groups, n)`` of them.
    """
    m, d = centres.shape
    labels = np.zeros(m, dtype=np.int64)
    if m == 0 or groups <= 1 or d == 0:
        return labels
    next_label = 0
    stack = [(np.arange(m), min(groups, m), 0)]
    while stack:
        members, wanted, dim = stack.pop()
        if wanted <= 1 or len(members) <= 1 or dim >= d:
            labels[members] = next_label
            next_label += 1
            continue
        remaining = d - dim
        slabs = wanted if remaining == 1 else math.ceil(wanted ** (1.0 / remaining) - 1e-9)
        slabs = max(1, min(slabs, wanted, len(members)))
        ordered = members[np.argsort(centres[members, dim], kind="stable")]
        shares = [wanted // slabs + (1 if i < wanted % slabs else 0) for i in range(slabs)]
        cuts = np.round(np.cumsum([0] + shares) / wanted * len(ordered)).astype(np.int64)
        for i in range(slabs - 1, -1, -1):
            part = ordered[cuts[i]:cuts[i + 1]]
            if len(part):
                stack.append((part, shares[i], dim + 1))
    return labels
