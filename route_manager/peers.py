"""What a subscription server knows about its peers (paper II, III-A): their addresses and
loads, and per route the subscription-routing summary and subscription centroid each last
reported in a ``PeerUpdate``.

    table = PeerTable(service.store)
    table.set_servers([("s2", "http://h:8082", 120)], exclude="s1")   # from ListServers
    table.update("s2", "http://h:8082", "stocks", 120, PeerSummary.from_element(element))
    table.route_states("stocks")      # -> [PeerState(name, address, load, mins, maxs, ...)]

The state lives in the service's store (SQLite), not in memory: every worker process of a
server places subscriptions with the same knowledge, whichever worker received the update.
Each change bumps the ``edn:peers`` generation; readers keep a parsed snapshot per generation.

Wire form of a peer's routing summary (the ``Summary`` of ``PeerUpdate``)::

    <edn:PeerSummary xmlns:edn="urn:wsframework:edn">
      <edn:Summary dims="x y" boxes="2">...</edn:Summary>     (matchers.summary.Summary)
      <edn:Centroid count="57">4.25 7.5</edn:Centroid>          (mean centre, per dimension)
    </edn:PeerSummary>

Both children are optional; a bare ``edn:Summary`` is accepted too. The centroid travels
with the boxes because online K-means needs each server's centroid and weight, and neither can
be recovered from maximal rectangles (a covered subscription leaves no trace in them).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Iterable

import numpy as np
from lxml import etree

from wsframework.matching.errors import InvalidFilter
from matchers.summary import Summary
from matchers.vocabulary import EDN
from wsframework.migrations import migrate
from wsframework.store import Store, upsert_sql
from .protocol import CENTROID, PEER_SUMMARY, SUMMARY

__all__ = ["PeerSummary", "PeerState", "PeerTable"]

GENERATION = "edn:peers"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_peers (
    name TEXT PRIMARY KEY, address TEXT NOT NULL, load INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS edn_peer_routes (
    name TEXT NOT NULL, route TEXT NOT NULL, summary BLOB, centroid TEXT,
    count INTEGER NOT NULL DEFAULT 0, updated REAL NOT NULL, PRIMARY KEY (name, route));
"""

_PEER_ROUTE_UPSERT = upsert_sql("edn_peer_routes", ("name", "route", "summary", "centroid",
                                                    "count", "updated"), ("name", "route"))


@dataclass(frozen=True, eq=False)
class PeerSummary:
    """One server's subscription-routing summary of one route."""

    summary: Summary | None = None
    centroid: np.ndarray | None = None
    count: int = 0

    def to_element(self) -> etree._Element:
        root = etree.Element(PEER_SUMMARY, nsmap={"edn": EDN})
        if self.summary is not None:
            root.append(self.summary.to_element(with_schema=False))
        if self.centroid is not None and self.count > 0:
            centroid = etree.SubElement(root, CENTROID)
            centroid.set("count", str(int(self.count)))
            centroid.text = " ".join(repr(float(v)) for v in self.centroid)
        return root

    @classmethod
    def from_element(cls, element) -> "PeerSummary":
        """Parse a peer's summary; :class:`~wsframework.matching.errors.InvalidFilter` if malformed."""
        tag = getattr(element, "tag", None)
        if tag == SUMMARY:
            return cls(Summary.from_element(element))
        if tag != PEER_SUMMARY:
            raise InvalidFilter(f"expected {PEER_SUMMARY} or {SUMMARY}, got {tag!r}")
        found = element.find(SUMMARY)
        summary = Summary.from_element(found) if found is not None else None
        centroid, count = None, 0
        node = element.find(CENTROID)
        if node is not None:
            try:
                count = int(node.get("count", "0"))
                values = [float(v) for v in (node.text or "").split()]
            except ValueError:
                raise InvalidFilter("peer summary: malformed edn:Centroid") from None
            if count < 0 or not all(math.isfinite(v) for v in values):
                raise InvalidFilter("peer summary: edn:Centroid needs finite values and a "
                                    "count >= 0")
            if summary is not None and len(values) != summary.d:
                raise InvalidFilter(f"peer summary: the centroid has {len(values)} values for "
                                    f"{summary.d} dimensions")
            centroid = np.array(values, dtype=np.float64) if count else None
        return cls(summary, centroid, count if centroid is not None else 0)


@dataclass(frozen=True, eq=False)
class PeerState:
    """A peer as known for one route (boxes empty when it reported none for the route)."""

    name: str
    address: str
    load: int
    dims: tuple[str, ...] | None
    mins: np.ndarray
    maxs: np.ndarray
    centroid: np.ndarray | None
    count: int
    updated: float


class PeerTable:
    def __init__(self, store: Store, *, clock=time.time):
        self.store = store
        self.clock = clock
        migrate(store, "peers", [_SCHEMA])
        self._lock = threading.Lock()
        self._snapshot_generation = -1
        self._servers: dict[str, tuple[str, int]] = {}
        self._routes: dict[str, list[PeerState]] = {}

    def generation(self) -> int:
        return self.store.generation(GENERATION)

    # -- changes ---------------------------------------------------------------------------
    def set_servers(self, servers: Iterable[tuple[str, str, int | None]], *,
                    exclude: str | None = None) -> bool:
        """Make the peer set exactly ``servers`` (name, address, load or None), e.g. from the
        dispatcher's ListServers; ``exclude`` (this server) is left out. True if it changed.

        A listed load is taken only for a peer new to the table: afterwards the peer's own
        PeerUpdates are the fresher source (the dispatcher learns loads from route updates)."""
        wanted = {name: (address.rstrip("/"), load) for name, address, load in servers
                  if name != exclude}
        current = self.servers()
        if set(wanted) == set(current) and all(current[n][0] == a for n, (a, _) in wanted.items()):
            return False
        now = self.clock()
        with self.store.transaction() as conn:
            for name in set(current) - set(wanted):
                conn.execute("DELETE FROM edn_peers WHERE name = ?", (name,))
                conn.execute("DELETE FROM edn_peer_routes WHERE name = ?", (name,))
            for name, (address, load) in wanted.items():
                conn.execute(
                    "INSERT INTO edn_peers(name, address, load, updated) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET address = excluded.address",
                    (name, address, int(load or 0), now))
            Store.bump(conn, GENERATION)
        return True

    def update(self, name: str, address: str, route: str, load: int,
               summary: PeerSummary | None) -> None:
        """Record a peer's PeerUpdate: its address and load, and its summary of ``route``."""
        now = self.clock()
        blob = centroid = None
        count = 0
        if summary is not None:
            if summary.summary is not None:
                blob = etree.tostring(summary.summary.to_element(with_schema=False))
            if summary.centroid is not None:
                centroid = " ".join(repr(float(v)) for v in summary.centroid)
                count = summary.count
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO edn_peers(name, address, load, updated) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET address = excluded.address, "
                "load = excluded.load, updated = excluded.updated",
                (name, address.rstrip("/"), int(load), now))
            if summary is not None:
                conn.execute(
                    _PEER_ROUTE_UPSERT,
                    (name, route, blob, centroid, count, now))
            Store.bump(conn, GENERATION)

    # -- reading (snapshots per generation) ------------------------------------------------
    def servers(self) -> dict[str, tuple[str, int]]:
        """name -> (address, load) of every known peer."""
        self._refresh()
        return dict(self._servers)

    def address_of(self, name: str) -> str | None:
        entry = self.servers().get(name)
        return entry[0] if entry else None

    def route_states(self, route: str) -> list[PeerState]:
        """Every known peer with what it reported for ``route``, sorted by name."""
        self._refresh()
        with self._lock:
            cached = self._routes.get(route)
            if cached is not None:
                return cached
            rows = {row["name"]: row for row in self.store.query(
                "SELECT name, summary, centroid, count, updated FROM edn_peer_routes "
                "WHERE route = ?", (route,))}
            states = [self._state(name, address, load, rows.get(name))
                      for name, (address, load) in sorted(self._servers.items())]
            self._routes[route] = states
            return states

    def _refresh(self) -> None:
        generation = self.generation()
        if generation == self._snapshot_generation:
            return
        with self._lock:
            generation = self.generation()
            if generation == self._snapshot_generation:
                return
            rows = self.store.query("SELECT name, address, load FROM edn_peers")
            self._servers = {r["name"]: (r["address"], r["load"]) for r in rows}
            self._routes = {}
            self._snapshot_generation = generation

    @staticmethod
    def _state(name, address, load, row) -> PeerState:
        dims = None
        mins = maxs = np.empty((0, 0))
        centroid, count, updated = None, 0, 0.0
        if row is not None:
            updated = row["updated"]
            if row["summary"]:
                try:
                    summary = Summary.from_text(bytes(row["summary"]))
                    dims, mins, maxs = summary.dims, summary.mins, summary.maxs
                except InvalidFilter:
                    pass
            if row["centroid"] and row["count"]:
                centroid = np.array([float(v) for v in row["centroid"].split()])
                count = int(row["count"])
        return PeerState(name, address, int(load), dims, mins, maxs, centroid, count, updated)
