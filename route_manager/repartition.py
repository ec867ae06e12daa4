"""Offline re-partitioning of a topic's subscriptions across the servers (paper III-A), run by
the dispatcher on request::

    Repartition {Topic, Algorithm: rtree | kmeans}
      -> RepartitionResponse {Moved, Figure*: subscriptions, servers, hit_ratio_before,
                              hit_ratio_after, seconds}

``edn partition --at DISPATCHER TOPIC --algorithm rtree`` sends it.

Steps: ``ExportSubscriptions`` from every registered server (their ids and rectangles; a
server that does not answer aborts the whole operation before anything moves); the offline
partitioner computes one label per subscription (:class:`OfflineRTreePartitioner`: TGS bulk
loading with the root fan-out forced to the number of servers; :class:`KMeansPartitioner`);
labels are matched to servers so that as few subscriptions as possible move (each label goes
to the server already holding most of its members, greedily); then ``MoveSubscriptions`` per
(source, target) pair, in chunks. Moving keeps every subscription's identifier and EPR (the
source forwards requests for it, see :mod:`subscription_manager.edn.moves`).

Coordinates are normalized per dimension to [0, 10] over the exported rectangles before
partitioning (K-means distances then do not depend on attribute units; the R-tree's volume
cost is unchanged up to a constant). The hit ratio figures are estimates over uniform
sample points in that box, with each server's rectangles as its (precise) summary.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.namespace import UnknownEntry, validate_name
from wsframework.transport import HttpTransport, TransportError
from wsframework.xmlparse import ParserLimits

from . import edn_wire, hit_ratio
from .exceptions import RepartitionFailed, UnknownAlgorithm
from .partitioning import KMeansPartitioner, OfflineRTreePartitioner

log = logging.getLogger(__name__)

__all__ = ["Repartitioner", "ALGORITHMS"]

ALGORITHMS = ("rtree", "kmeans")


class Repartitioner:
    """The ``Repartition`` admin operation of a dispatcher (``transport``: the client
    transport to the servers; default HTTP with a read timeout of ``timeout`` seconds, as an
    export of tens of thousands of subscriptions takes a while)."""

    def __init__(self, dispatcher, *, transport=None, chunk: int = 500, samples: int = 2000,
                 load_factor: float = 2.0, seed: int = 0, timeout: float = 300.0):
        self.dispatcher = dispatcher
        self._own_transport = transport is None
        self.transport = transport or HttpTransport(timeout=(3.0, timeout))
        self.chunk = chunk
        self.samples = samples
        self.load_factor = load_factor
        self.seed = seed
        # An export holds ~8 elements per subscription: far above the default element cap.
        self._soap = SoapClient(self.transport, limits=ParserLimits(
            max_bytes=512 * 1024 * 1024, max_depth=100, max_elements=50_000_000))
        dispatcher.service.admin.register(edn_wire.Repartition, self._repartition)
        dispatcher.service.add_component(self)

    def _client(self, address: str) -> AdminClient:
        return AdminClient(address, self.dispatcher.service.config.admin_token,
                           soap_client=self._soap)

    def close(self) -> None:
        if self._own_transport:
            self.transport.close()

    def _repartition(self, request, message):
        moved, figures = self.repartition(request.Topic, request.Algorithm)
        return edn_wire.RepartitionResponse(Moved=moved, Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in figures.items()])

    def repartition(self, topic: str, algorithm: str) -> tuple[int, dict]:
        started = time.perf_counter()
        topic = validate_name(topic)
        algorithm = (algorithm or "").strip().lower()
        if algorithm not in ALGORITHMS:
            raise UnknownAlgorithm(algorithm, ALGORITHMS)
        if topic not in self.dispatcher.routes:
            raise UnknownEntry(topic, "topic")
        servers = sorted(self.dispatcher.subscription_servers().items())
        if not servers:
            return 0, {"subscriptions": 0, "servers": 0}
        ids, mins, maxs, owner = self._collect(topic, servers)
        figures: dict[str, object] = {"subscriptions": len(ids), "servers": len(servers)}
        if len(ids) == 0 or len(servers) == 1:
            figures["seconds"] = time.perf_counter() - started
            return 0, figures
        low, high = mins.min(axis=0), maxs.max(axis=0)
        width = np.where(high > low, high - low, 1.0)
        n_mins, n_maxs = (mins - low) / width * 10.0, (maxs - low) / width * 10.0
        k = len(servers)
        if algorithm == "rtree":
            partitioner = OfflineRTreePartitioner(load_factor=self.load_factor)
        else:
            partitioner = KMeansPartitioner(load_factor=self.load_factor, random_state=self.seed)
        labels = partitioner.fit(n_mins, n_maxs, k).labels_
        assignment = _match_labels(labels, owner, k)
        target = assignment[labels]
        events = np.random.default_rng(self.seed).uniform(0.0, 10.0, size=(self.samples, mins.shape[1]))
        for name, labels_ in (("hit_ratio_before", owner), ("hit_ratio_after", target)):
            figures[name] = float(hit_ratio.hit_ratio(
                events, hit_ratio.precise_summaries(n_mins, n_maxs, labels_, k)))
        moved = 0
        for source in range(k):
            for destination in range(k):
                if source == destination:
                    continue
                chosen = np.flatnonzero((owner == source) & (target == destination))
                for start in range(0, len(chosen), self.chunk):
                    batch = [ids[i] for i in chosen[start:start + self.chunk]]
                    moved += self._move(servers[source], servers[destination], topic, batch)
        figures["moved"] = moved
        figures["seconds"] = time.perf_counter() - started
        log.info("repartitioned %s with %s: %d of %d subscriptions moved (hit ratio %.3f -> %.3f)",
                 topic, algorithm, moved, len(ids), figures["hit_ratio_before"],
                 figures["hit_ratio_after"])
        return moved, figures

    def _collect(self, topic: str, servers):
        ids: list[str] = []
        boxes_lo: list[np.ndarray] = []
        boxes_hi: list[np.ndarray] = []
        owner: list[int] = []
        seen: set[str] = set()
        for index, (name, address) in enumerate(servers):
            try:
                response = self._client(address).call(edn_wire.ExportSubscriptions(Topic=topic))
            except (TransportError, SoapFault) as exc:  # which server, and that nothing moved
                raise RepartitionFailed(f"server {name} did not export {topic}: "
                                        f"{getattr(exc, 'reason', exc)}; nothing moved") from exc
            for element in response.Subscriptions.iter(edn_wire.SUBSCRIPTION):
                subscription_id = element.get("id")
                hull = _hull(element)
                if not subscription_id or subscription_id in seen or hull is None:
                    continue
                seen.add(subscription_id)
                ids.append(subscription_id)
                boxes_lo.append(hull[0])
                boxes_hi.append(hull[1])
                owner.append(index)
        if not ids:
            return ids, np.empty((0, 1)), np.empty((0, 1)), np.empty(0, dtype=np.int64)
        dims = {len(b) for b in boxes_lo}
        if len(dims) != 1:
            raise RepartitionFailed(f"the servers disagree on the dimensions of {topic}")
        return ids, np.vstack(boxes_lo), np.vstack(boxes_hi), np.asarray(owner, dtype=np.int64)

    def _move(self, source, destination, topic: str, batch: list[str]) -> int:
        (source_name, source_address), (destination_name, destination_address) = source, destination
        try:
            response = self._client(source_address).call(edn_wire.MoveSubscriptions(
                Topic=topic, Target=destination_address, Id=batch))
        except (TransportError, SoapFault) as exc:
            log.error("moving %d subscriptions of %s from %s to %s failed: %s", len(batch), topic,
                      source_name, destination_name, getattr(exc, "reason", exc))
            return 0
        return int(response.Moved)


def _hull(element) -> tuple[np.ndarray, np.ndarray] | None:
    lows, highs = [], []
    for box in element.findall(edn_wire.BOX):
        try:
            lows.append(np.array([float(v) for v in box.get("lo", "").split()]))
            highs.append(np.array([float(v) for v in box.get("hi", "").split()]))
        except ValueError:
            return None
    if not lows or len({len(v) for v in lows + highs}) != 1 or len(lows[0]) == 0:
        return None
    lo, hi = np.min(lows, axis=0), np.max(highs, axis=0)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
        return None
    return lo, hi


def _match_labels(labels: np.ndarray, owner: np.ndarray, k: int) -> np.ndarray:
    """label -> server, greedily pairing the largest (label, current server) overlaps first,
    so that as few subscriptions as possible move."""
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (labels, owner), 1)
    assignment = np.full(k, -1, dtype=np.int64)
    taken = np.zeros(k, dtype=bool)
    for flat in np.argsort(-counts, axis=None, kind="stable"):
        label, server = divmod(int(flat), k)
        if assignment[label] < 0 and not taken[server]:
            assignment[label] = server
            taken[server] = True
    return assignment


