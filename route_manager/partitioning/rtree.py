"""R-tree subscription partitioning (paper III-A): offline bulk loading, online routing by
maximum overlap, and the two combined.

Online rule: a new subscription goes to the server owning the summary rectangle with the
largest overlap volume with it, among servers below the load threshold. Choices the paper
leaves open, made here:

* ties on the overlap volume (typically: several servers already cover the subscription
  whole) go to the least loaded of them, then the lowest index;
* a subscription that overlaps no eligible server's summary goes to the least loaded eligible
  server (then the lowest index), so empty servers are seeded first; the smallest volume
  enlargement is the alternative, but it sends every isolated subscription to the server whose
  bounding box is already largest, which defeats load balance;
* precise summary: the server's maximal rectangles. The index keeps every rectangle that was
  not already covered by its server when it arrived; a rectangle covered later stays but never
  changes a maximum (its container scores at least as high), so the answer is exactly the one
  over the maximal rectangles;
* depth-limited summary (``summary_depth=k``, Fig. 4): the node boxes at depth k of a TGS
  R-tree (fan-out ``fanout``) over the server's rectangles. Servers exchange summaries
  periodically (paper II), so a server's tree is rebuilt when its load has grown by the factor
  ``1 + refresh`` since the last build; in between, a new rectangle enlarges the summary box
  needing the least volume enlargement, as an R-tree insertion would.
"""
from __future__ import annotations

import numpy as np

from . import tgs
from .base import Partitioner
from .overlap_index import MaxOverlapIndex

__all__ = ["OnlineRTreePartitioner", "OfflineOnlineRTreePartitioner", "OfflineRTreePartitioner"]

_SLABS = 64


class _RectStore:
    """Append-only rectangle storage with per-server member lists (depth-limited mode)."""

    def __init__(self, d: int):
        self.lo = np.empty((1024, d))
        self.hi = np.empty((1024, d))
        self.n = 0

    def add(self, lo, hi) -> int:
        if self.n == len(self.lo):
            self.lo = np.concatenate([self.lo, np.empty_like(self.lo)])
            self.hi = np.concatenate([self.hi, np.empty_like(self.hi)])
        self.lo[self.n], self.hi[self.n] = lo, hi
        self.n += 1
        return self.n - 1

    def add_many(self, mins, maxs) -> np.ndarray:
        while self.n + len(mins) > len(self.lo):
            self.lo = np.concatenate([self.lo, np.empty_like(self.lo)])
            self.hi = np.concatenate([self.hi, np.empty_like(self.hi)])
        ids = np.arange(self.n, self.n + len(mins))
        self.lo[ids], self.hi[ids] = mins, maxs
        self.n += len(mins)
        return ids


class OnlineRTreePartitioner(Partitioner):
    """Online R-tree routing; with ``offline_share > 0`` the first share of the subscriptions
    given to ``fit`` is bulk-loaded offline (TGS, one subtree per server) and the rest routed
    online (the paper's offline/online R-tree).

    Parameters: ``load_factor`` / ``capacity`` (load threshold, see ``Partitioner``);
    ``offline_share`` in [0, 1]; ``summary_depth`` (None: precise summaries; k >= 1: node
    boxes at depth k, 1 = one bounding box per server); ``fanout`` of the summary R-tree;
    ``refresh``: rebuild a server's depth-limited summary after its load grew by this
    fraction.

    Learned: ``labels_``, ``loads_``, ``capacity_``, ``n_servers_``, ``mean_summary_depth_``
    (the x-axis of Fig. 4: per non-empty server min(summary_depth, height + 1) of an R-tree with
    ``fanout`` over its rectangles, averaged).

    Live use: after ``fit`` (possibly on empty arrays with an explicit ``capacity``),
    ``update_server(s, mins, maxs, load)`` installs a peer's reported summary and load,
    ``assign(lo, hi)`` picks a server and records the subscription in that server's summary
    and load, ``server_summary(s)`` gives the boxes currently held for server ``s``.
    """

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None,
                 offline_share: float = 0.0, summary_depth: int | None = None,
                 fanout: int = 8, refresh: float = 0.5):
        self.load_factor = load_factor
        self.capacity = capacity
        self.offline_share = offline_share
        self.summary_depth = summary_depth
        self.fanout = fanout
        self.refresh = refresh

    # ---- fitting -------------------------------------------------------------------------
    def _fit(self, mins, maxs):
        if not 0.0 <= self.offline_share <= 1.0:
            raise ValueError("offline_share must be in [0, 1]")
        if self.summary_depth is not None and self.summary_depth < 1:
            raise ValueError("summary_depth must be None or >= 1")
        n = len(mins)
        n_offline = int(round(self.offline_share * n))
        labels = np.empty(n, dtype=np.int64)
        labels[:n_offline] = tgs.partition(mins[:n_offline], maxs[:n_offline], self.n_servers_)
        self._start(mins, maxs, n_offline, labels[:n_offline])
        for j in range(n_offline, n):
            server = self._assign_one(mins[j], maxs[j])
            self.loads_[server] += 1
            labels[j] = server
        self.labels_ = labels
        self._fit_data = None
        self._set_mean_depth()

    def _start(self, mins, maxs, n_offline: int, offline_labels: np.ndarray) -> None:
        """Build the routing state from the offline part of the data."""
        d = mins.shape[1]
        if len(mins):
            low, high = mins.min(axis=0), maxs.max(axis=0)
        else:
            low, high = np.zeros(d), np.full(d, 10.0)
        self._index = MaxOverlapIndex(d, self.n_servers_, low, high, slabs=_SLABS,
                                      initial_capacity=max(1024, n_offline))
        self._external = set()
        self._members = [[] for _ in range(self.n_servers_)]
        self._built_at = np.zeros(self.n_servers_, dtype=np.int64)
        self._store = _RectStore(d) if self.summary_depth is not None else None
        self.loads_[:] = np.bincount(offline_labels, minlength=self.n_servers_)
        for server in range(self.n_servers_):
            members = offline_labels == server
            s_lo, s_hi = mins[:n_offline][members], maxs[:n_offline][members]
            if self._store is None:
                # Duplicates add nothing to a precise summary and would make every covering
                # query slow (Zipf workloads repeat the popular rectangles thousands of times).
                unique = np.unique(np.hstack([s_lo, s_hi]), axis=0)
                self._index.add_many(server, unique[:, :d], unique[:, d:])
            else:
                self._members[server].extend(self._store.add_many(s_lo, s_hi).tolist())
                self._rebuild(server)

    def _set_mean_depth(self) -> None:
        sizes = np.array([len(m) for m in self._members]) if self._store is not None \
            else self.loads_
        heights = [tgs.tree_height(int(m), self.fanout) + 1 for m in sizes if m > 0]
        if self.summary_depth is not None:
            heights = [min(h, self.summary_depth) for h in heights]
        self.mean_summary_depth_ = float(np.mean(heights)) if heights else 0.0

    # ---- routing -------------------------------------------------------------------------
    def _sync_eligibility(self) -> None:
        eligible = self.loads_ < self.capacity_
        index = self._index
        for server in np.flatnonzero(eligible != index._server_eligible):
            index.set_server_eligible(int(server), bool(eligible[server]))

    def _assign_one(self, lo, hi) -> int:
        if getattr(self, "_index", None) is None:
            self._start_from_fit_data()
        self._sync_eligibility()
        server, _, covered = self._index.best_server(lo, hi, self.loads_)
        self._record(server, lo, hi, covered)
        return server

    def _start_from_fit_data(self) -> None:  # used by the offline partitioner's assign
        mins, maxs = self._fit_data
        self._start(mins, maxs, len(mins), self.labels_)
        self._fit_data = None

    def _record(self, server: int, lo, hi, covered: bool) -> None:
        if self._store is None:
            if not covered:
                self._index.add(server, lo, hi)
            return
        self._members[server].append(self._store.add(lo, hi))
        m = len(self._members[server])
        if server not in self._external and m >= (1.0 + self.refresh) * self._built_at[server]:
            self._rebuild(server)
            return
        slots = self._index.server_slots(server)
        if slots.size == 0:
            self._index.add(server, lo, hi)
            return
        b_lo, b_hi = self._index.lo[slots], self._index.hi[slots]
        volume = np.prod(b_hi - b_lo, axis=1)
        grown = np.prod(np.maximum(b_hi, hi) - np.minimum(b_lo, lo), axis=1)
        best = np.lexsort((volume, grown - volume))[0]
        self._index.enlarge(int(slots[best]), lo, hi)

    def _rebuild(self, server: int) -> None:
        ids = np.asarray(self._members[server], dtype=np.int64)
        self._built_at[server] = len(ids)
        self._index.remove_server_boxes(server)
        if len(ids) == 0:
            return
        box_lo, box_hi = tgs.rtree_summary(self._store.lo[ids], self._store.hi[ids],
                                           self.summary_depth, self.fanout)
        self._index.add_many(server, box_lo, box_hi)

    # ---- live use ------------------------------------------------------------------------
    def update_server(self, server: int, mins, maxs, load: int):
        """Install the summary boxes and load a peer reported for ``server`` (a route update);
        the reported boxes are installed as they are, not rebuilt here."""
        self._check_fitted()
        if getattr(self, "_index", None) is None:
            self._start_from_fit_data()
        mins = np.asarray(mins, dtype=np.float64).reshape(-1, self.n_features_in_)
        maxs = np.asarray(maxs, dtype=np.float64).reshape(-1, self.n_features_in_)
        self._index.remove_server_boxes(server)
        self._index.add_many(server, mins, maxs)
        self.loads_[server] = int(load)
        self._external.add(server)
        return self

    def server_summary(self, server: int):
        """The boxes currently held for ``server`` (``(mins, maxs)``)."""
        self._check_fitted()
        if getattr(self, "_index", None) is None:
            self._start_from_fit_data()
        slots = self._index.server_slots(server)
        return self._index.lo[slots].copy(), self._index.hi[slots].copy()


class OfflineOnlineRTreePartitioner(OnlineRTreePartitioner):
    """The paper's offline/online R-tree: ``offline_share`` (default 50%) of the subscriptions
    bulk-loaded offline, the rest routed online."""

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None,
                 offline_share: float = 0.5, summary_depth: int | None = None,
                 fanout: int = 8, refresh: float = 0.5):
        super().__init__(load_factor=load_factor, capacity=capacity,
                         offline_share=offline_share, summary_depth=summary_depth,
                         fanout=fanout, refresh=refresh)


class OfflineRTreePartitioner(OnlineRTreePartitioner):
    """Offline bulk-loading R-tree (TGS) with the root fan-out forced to the number of
    servers: exactly ``n_servers`` partitions whose sizes differ by at most one. ``assign``
    continues online by maximum overlap against precise summaries."""

    offline_share = 1.0
    summary_depth = None
    fanout = 8
    refresh = 0.5

    def __init__(self, load_factor: float = 2.0, capacity: int | None = None):
        self.load_factor = load_factor
        self.capacity = capacity

    def _fit(self, mins, maxs):
        self.labels_ = tgs.partition(mins, maxs, self.n_servers_)
        self._index = None
        self._fit_data = (mins, maxs)
        self.loads_[:] = np.bincount(self.labels_, minlength=self.n_servers_)
        self._members = [[] for _ in range(self.n_servers_)]
        self._store = None
        self._set_mean_depth()
