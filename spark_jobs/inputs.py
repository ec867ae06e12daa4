"""What a profile runs on: subscription rectangles per server, sample events, the schema.

Subscriptions come from one of two places:

* a **workload spec** (:func:`from_workload`): uniform or Zipf-like rectangles in
  [0, 10]^d (:mod:`route_manager.workloads`), partitioned among the servers by one of the
  paper's partitioners (:mod:`route_manager.partitioning`); the schema is d numeric
  attributes ``x0..x{d-1}`` over [0, 10].
* the **stores of a running network** (:func:`from_stores`): each subscription server's
  SQLite file (``DATA/edn.db``; a server's data directory may be given instead).  The
  topic's schema is read from the ``ns_topics`` table (the options it was created with),
  its active, unexpired subscriptions from ``eventing_subscriptions``, and every filter
  is compiled to its rectangles with the engine's own compiler
  (:func:`matchers.box_filters.compile_filter`); a subscription without a filter is the whole
  space, as the servers' placement treats it.  The files are opened read-only, so a
  running server is not disturbed (SQLite WAL readers do not block the writer).  This
  needs no admin credential and no running process; the alternative, the
  ``ExportSubscriptions`` admin message, returns one bounding box per subscription rather
  than the engine's rectangles, so the stores are the faithful source.

A third place, the live network through its admin messages, is :mod:`.live_network`.

Events come from a file (:func:`load_events`: ``.npy``, a trace of ``edn record``
(``.parquet``), or CSV / whitespace-separated text
with one point per line, a non-numeric first line taken as a header) or a spec
(:func:`events_from_spec`: uniform, Zipf-like or normal points in the schema's domain).
"""
from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from lxml import etree

from matchers import FilterSpec
from matchers.box_filters import compile_filter
from matchers.schema import Schema

from route_manager import workloads
from route_manager.workloads.grid_xml import schema_element

__all__ = [
    "PARTITIONERS",
    "ProfileInputs",
    "events_from_spec",
    "from_stores",
    "from_workload",
    "load_events",
    "make_partitioner",
    "workload_rectangles",
]

PARTITIONERS = ("random", "online_rtree", "offline_online_rtree", "offline_rtree", "kmeans",
                "online_kmeans")


@dataclass(frozen=True, eq=False)
class ProfileInputs:
    """Rectangles per server, sample events and the schema (as ``edn:Schema`` XML)."""

    servers: tuple[str, ...]
    rectangles: tuple[tuple[np.ndarray, np.ndarray], ...]   # per server (mins, maxs)
    events: np.ndarray                                       # (m, d) points
    schema_xml: bytes
    source: dict = field(default_factory=dict)               # how they were made

    def __post_init__(self) -> None:
        if len(self.servers) != len(self.rectangles) or not self.servers:
            raise ValueError("one rectangle set per server, at least one server")
        if len(set(self.servers)) != len(self.servers):
            raise ValueError("server names must be distinct")
        d = Schema.from_config(etree.fromstring(self.schema_xml)).d
        events = np.asarray(self.events, dtype=np.float64)
        if events.ndim != 2 or events.shape[1] != d or len(events) == 0:
            raise ValueError(f"events must be a non-empty (m, {d}) array, got {events.shape}")
        if not np.isfinite(events).all():
            raise ValueError("event coordinates must be finite")
        object.__setattr__(self, "events", events)
        for mins, maxs in self.rectangles:
            if mins.shape != maxs.shape or mins.ndim != 2 or mins.shape[1] != d:
                raise ValueError(f"rectangles must be (n, {d}) arrays")

    @property
    def d(self) -> int:
        return self.events.shape[1]

    @property
    def rectangle_count(self) -> int:
        return sum(len(mins) for mins, _ in self.rectangles)


def grid_schema_xml(d: int, low: float = workloads.LOW, high: float = workloads.HIGH) -> bytes:
    return etree.tostring(schema_element(d, low, high))


def make_partitioner(name: str, *, load_factor: float = 2.0, seed: int = 7):
    """A fresh partitioner by name (see :data:`PARTITIONERS`)."""
    from route_manager.partitioning import (KMeansPartitioner, OfflineOnlineRTreePartitioner,
                                OfflineRTreePartitioner, OnlineKMeansPartitioner,
                                OnlineRTreePartitioner, RandomPartitioner)

    makers = {
        "random": lambda: RandomPartitioner(load_factor=load_factor, random_state=seed),
        "online_rtree": lambda: OnlineRTreePartitioner(load_factor=load_factor),
        "offline_online_rtree": lambda: OfflineOnlineRTreePartitioner(load_factor=load_factor),
        "offline_rtree": lambda: OfflineRTreePartitioner(load_factor=load_factor),
        "kmeans": lambda: KMeansPartitioner(load_factor=load_factor, random_state=seed),
        "online_kmeans": lambda: OnlineKMeansPartitioner(load_factor=load_factor),
    }
    try:
        return makers[name]()
    except KeyError:
        raise ValueError(f"unknown partitioner {name!r}; known: {', '.join(PARTITIONERS)}") from None


def workload_rectangles(kind: str, n: int, d: int, *, seed: int = 1, alpha: float = 1.0,
                        bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """``n`` subscription rectangles of the paper's workloads (deterministic per seed)."""
    if kind == "uniform":
        return workloads.uniform_rectangles(n, d, seed=seed)
    if kind == "zipf":
        return workloads.zipf_rectangles(n, d, alpha, seed=seed, bins=bins)
    raise ValueError(f"unknown workload {kind!r} (uniform | zipf)")


def events_from_spec(kind: str, n: int, d: int, *, seed: int = 2, alpha: float = 1.0,
                     bins: int = 10, low: float = workloads.LOW,
                     high: float = workloads.HIGH) -> np.ndarray:
    """``n`` sample events: ``uniform`` in [low, high]^d, ``zipf`` (footnote 2: random
    popularity ranking of the cells) or ``normal`` (clipped) points."""
    if n < 1:
        raise ValueError("at least one event")
    if kind == "uniform":
        return workloads.uniform_events(n, d, seed=seed, low=low, high=high)
    if kind == "zipf":
        return workloads.zipf_events(n, d, alpha, seed=seed, bins=bins, low=low, high=high)
    if kind == "normal":
        return workloads.normal_events(n, d, seed=seed, low=low, high=high,
                                       mean=low + 0.95 * (high - low), sd=0.025 * (high - low))
    raise ValueError(f"unknown event workload {kind!r} (uniform | zipf | normal)")


def from_workload(kind: str = "uniform", subscriptions: int = 10_000, d: int = 8,
                  servers: int = 10, *, partitioner: str = "random", events: int = 10_000,
                  event_kind: str | None = None, events_array: np.ndarray | None = None,
                  seed: int = 1, alpha: float = 1.0, bins: int = 10,
                  load_factor: float = 2.0) -> ProfileInputs:
    """Generated subscriptions partitioned among ``servers`` servers, and sample events
    (``events_array`` if given, else ``events`` points of ``event_kind``, by default the
    subscriptions' kind)."""
    if subscriptions < 1 or servers < 1 or d < 1:
        raise ValueError("subscriptions, servers and d must be >= 1")
    mins, maxs = workload_rectangles(kind, subscriptions, d, seed=seed, alpha=alpha, bins=bins)
    start = time.perf_counter()
    labels = make_partitioner(partitioner, load_factor=load_factor).fit(mins, maxs, servers).labels_
    partition_seconds = time.perf_counter() - start
    if events_array is None:
        events_array = events_from_spec(event_kind or kind, events, d, seed=seed + 1,
                                        alpha=alpha, bins=bins)
    names = tuple(f"server-{i}" for i in range(servers))
    rectangles = tuple((mins[labels == s], maxs[labels == s]) for s in range(servers))
    source = {"kind": "workload", "workload": kind, "subscriptions": subscriptions, "d": d,
              "servers": servers, "partitioner": partitioner, "seed": seed,
              "partition_seconds": round(partition_seconds, 3)}
    if kind == "zipf":
        source.update(alpha=alpha, bins=bins)
    return ProfileInputs(names, rectangles, events_array, grid_schema_xml(d), source)


# -- the stores of a running network -------------------------------------------------------------

def _database(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        path = path / "edn.db"
    if not path.is_file():
        raise FileNotFoundError(f"no subscription store at {path}")
    return path


def _read_store(db: Path, topic: str) -> tuple[bytes | None, list[tuple]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        row = conn.execute("SELECT uid, config FROM ns_topics WHERE name = ?", (topic,)).fetchone()
        if row is None:
            raise LookupError(f"{db}: no topic {topic!r}")
        uid, config = row
        now = time.time()
        rows = conn.execute(
            "SELECT id, dialect, expression, namespaces FROM eventing_subscriptions "
            "WHERE topic_uid = ? AND status = 'active' AND (expires IS NULL OR expires > ?) "
            "ORDER BY created, id", (uid, now)).fetchall()
        return config, rows
    finally:
        conn.close()


def from_stores(paths: Sequence[str | Path], topic: str, *, events_array: np.ndarray | None = None,
                events: int = 10_000, event_kind: str = "uniform", seed: int = 2,
                names: Sequence[str] | None = None) -> ProfileInputs:
    """The subscriptions of ``topic`` held by each server store in ``paths`` (see the module
    docstring); server names default to the data directories' names."""
    if not paths:
        raise ValueError("give at least one server store")
    databases = [_database(p) for p in paths]
    names = tuple(names) if names else tuple(
        db.parent.name if db.name == "edn.db" else db.stem for db in databases)
    if len(set(names)) != len(names):
        names = tuple(f"{name}#{i}" for i, name in enumerate(names))
    schema_xml = None
    schema = None
    rectangles = []
    skipped = 0
    for db in databases:
        config, rows = _read_store(db, topic)
        element = etree.fromstring(config) if config else None
        this = Schema.from_config(element)
        if schema is None:
            schema = this
            schema_xml = etree.tostring(this.to_element())
        elif this != schema:
            raise ValueError(f"{db}: topic {topic!r} has another schema than the first store's")
        mins, maxs = [], []
        for _, dialect, expression, namespaces in rows:
            if dialect is None:
                lo, hi = schema.everything()
                mins.append(lo[None, :])
                maxs.append(hi[None, :])
                continue
            spec = FilterSpec(dialect, expression or "",
                              tuple(tuple(p) for p in json.loads(namespaces or "[]")))
            try:
                compiled = compile_filter(spec, schema)
            except Exception:  # the server refused it too: it holds no rectangle for it
                skipped += 1
                continue
            mins.append(compiled.mins)
            maxs.append(compiled.maxs)
        d = schema.d
        rectangles.append((np.vstack(mins) if mins else np.zeros((0, d)),
                           np.vstack(maxs) if maxs else np.zeros((0, d))))
    if schema is None or schema.d == 0:
        raise ValueError(f"topic {topic!r} has no event schema: nothing to profile")
    if events_array is None:
        # unit events in [0, 1]^d mapped onto each dimension's own domain
        unit = events_from_spec(event_kind, events, schema.d, seed=seed, low=0.0, high=1.0)
        events_array = schema.domain_lo + unit * (schema.domain_hi - schema.domain_lo)
    source = {"kind": "stores", "topic": topic, "stores": [str(db) for db in databases],
              "unusable_filters": skipped}
    return ProfileInputs(names, tuple(rectangles), events_array, schema_xml, source)


def load_events(path: str | Path, d: int | None = None) -> np.ndarray:
    """Points from ``.npy``, a trace of ``edn record`` (``.parquet``) or text (CSV or
    whitespace separated; a header line is skipped)."""
    path = Path(path)
    if path.suffix == ".parquet":
        from .live_network import read_trace

        points = read_trace(path)
    elif path.suffix == ".npy":
        points = np.load(path, allow_pickle=False)
    else:
        text = path.read_text().splitlines()
        rows = [line.replace(",", " ").split() for line in text if line.strip()]
        if rows and not _numeric(rows[0]):
            rows = rows[1:]
        points = np.array([[float(v) for v in row] for row in rows], dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    if points.ndim == 1:
        points = points[:, None]
    if d is not None and points.shape[1] != d:
        raise ValueError(f"{path}: events have {points.shape[1]} coordinates, the schema {d}")
    return points


def _numeric(row: list[str]) -> bool:
    try:
        [float(v) for v in row]
        return True
    except ValueError:
        return False
