"""Offline re-partitioning of a topic's subscriptions across the servers (paper III-A; Kyra
III), run by the dispatcher on request::

    Repartition {Topic, Algorithm: rtree | kmeans | kyra maxDistance=MS [maxNumServers=N]}
      -> RepartitionResponse {Moved, Figure*: subscriptions, servers, moved, hit_ratio_before,
                              hit_ratio_after, seconds; with kyra also cliques, zones,
                              multi_zone}

``edn partition --at DISPATCHER TOPIC --algorithm rtree`` sends it (``--algorithm kyra
--max-distance MS [--max-servers N]`` for Kyra).

Steps: ``ExportSubscriptions`` from every registered server (their ids and rectangles; a
server that does not answer aborts the whole operation before anything moves); the algorithm
computes one target server per subscription; then ``MoveSubscriptions`` per (source, target)
pair, in chunks. Moving keeps every subscription's identifier and EPR (the source forwards
requests for it, see :mod:`subscription_manager.server.moves`).

* ``rtree`` / ``kmeans``: the offline partitioner computes one label per subscription
  (:class:`OfflineRTreePartitioner`: TGS bulk loading with the root fan-out forced to the
  number of servers; :class:`KMeansPartitioner`); labels are matched to servers so that as
  few subscriptions as possible move (each label goes to the server already holding most of
  its members, greedily).
* ``kyra``: the servers' latencies come from the dispatcher's ``latency_file`` setting
  (:func:`route_manager.latency_matrix.load_latency`; no file, or a registered server missing
  from it, is a Receiver fault and nothing moves). Servers are grouped into cliques (Fig. 5:
  complete-linkage clustering, no clique wider than ``maxDistance`` ms nor larger than
  ``maxNumServers``), each server of a clique gets a non-overlapping median zone of the
  content space over its clique's subscriptions, and each subscription goes to the server of
  its own clique (the clique of the server holding it) whose zone it overlaps, one server per
  subscription (:class:`route_manager.partitioning.kyra.KyraPlacement`: the zone holding most of its
  volume, the holder's own on a tie). ``multi_zone`` counts the subscriptions that overlap
  more than one zone of their clique (Kyra would give them one proxy per zone).

What of Kyra runs on real processes, and what only in the simulator. On real processes:
the cliques, the zones and the placement of each subscription at one proxy (this module, then
the usual moves). The events are still routed by the dispatcher's summaries: an event goes
straight from the dispatcher to every server whose summary holds its point. There is no hop to
the in-clique owner of the event's zone and no per-zone routing tree between servers: Kyra's
two-step routing (publisher -> the owner of the event's zone in its clique -> that zone's MST,
filtering on the tree), with its several proxies per subscription, runs only in the
wide-area simulator (:class:`route_manager.partitioning.kyra.KyraNetwork`,
:mod:`simulation.kyra_mode`). With one proxy per subscription, summary routing stays
exact (each subscription is held, and delivered, once). Compared with Kyra's rule "an event
goes to the owner of its zone in each clique": in a clique, the subscriptions matching an
event sit mostly at that owner, but a matching subscription placed in a neighbouring zone
(which holds more of it) is reached at its own server, where Kyra's owner would have
delivered a copy of it; so an event may reach more than one server of a clique.

Requests are hostile input: the Algorithm text is at most ``MAX_ALGORITHM_TEXT`` characters,
its parameters known, given once, finite and within bounds (``maxDistance`` in [0, 600000]
ms, ``maxNumServers`` in [1, 1024]); rtree and kmeans take none. A refused request is the
Sender fault adm:InvalidRequest, as an unknown algorithm is. (The parameters travel inside
the Algorithm text because the Repartition contract has no fields for them.)

Coordinates are normalized per dimension to [0, 10] over the exported rectangles before
partitioning (K-means distances and Kyra's median cuts then do not depend on attribute units;
the R-tree's volume cost is unchanged up to a constant). The hit ratio figures are estimates
over uniform sample points in that box, with each server's rectangles as its (precise)
summary.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.namespace import UnknownEntry, validate_name
from wsframework.transport import HttpTransport, TransportError
from wsframework.xmlparse import ParserLimits

from . import protocol
from .models import hit_ratio
from .exceptions import InvalidRepartition, RepartitionFailed, UnknownAlgorithm
from .partitioning.kyra import KyraPlacement
from .latency_matrix import MAX_MS, MAX_SERVERS, LatencyFileError, LatencyMatrix, load_latency
from .partitioning import KMeansPartitioner, OfflineRTreePartitioner

log = logging.getLogger(__name__)

MAX_FAILURE_TEXT = 300  # characters of a failed move's reason in the answer

__all__ = ["Repartitioner", "ALGORITHMS", "KyraParameters", "InvalidRepartition",
           "algorithm_text", "parse_algorithm"]

ALGORITHMS = ("rtree", "kmeans", "kyra")
MAX_ALGORITHM_TEXT = 256
SCALE = 10.0  # the partitioners' native space is [0, SCALE]^d


@dataclass(frozen=True)
class KyraParameters:
    """Fig. 5's bounds: the widest clique in ms, the most servers in a clique (None: no
    bound)."""

    max_distance: float
    max_servers: int | None = None


def algorithm_text(name: str, *, max_distance: float | None = None,
                   max_servers: int | None = None) -> str:
    """The Algorithm of a Repartition request: the name, then Kyra's parameters if given."""
    words = [name]
    if max_distance is not None:
        words.append(f"maxDistance={float(max_distance)!r}")
    if max_servers is not None:
        words.append(f"maxNumServers={int(max_servers)}")
    return " ".join(words)


def parse_algorithm(text: str | None) -> tuple[str, KyraParameters | None]:
    """(name, Kyra's parameters or None) from a request's Algorithm text; UnknownAlgorithm
    for an unknown name, InvalidRepartition for unusable parameters."""
    text = text or ""
    if len(text) > MAX_ALGORITHM_TEXT:
        raise InvalidRepartition(f"the Algorithm is longer than {MAX_ALGORITHM_TEXT} characters")
    name, *words = text.split() or [""]
    name = name.lower()
    if name not in ALGORITHMS:
        raise UnknownAlgorithm(name[:64], ALGORITHMS)
    if name != "kyra":
        if words:
            raise InvalidRepartition(f"{name} takes no parameters")
        return name, None
    values: dict[str, str] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or key not in ("maxDistance", "maxNumServers"):
            raise InvalidRepartition(f"kyra takes maxDistance=MS and maxNumServers=N, not "
                                     f"{word[:64]!r}")
        if key in values:
            raise InvalidRepartition(f"{key} given twice")
        values[key] = value
    if "maxDistance" not in values:
        raise InvalidRepartition("kyra needs maxDistance=MS (the widest server clique)")
    try:
        max_distance = float(values["maxDistance"])
    except ValueError:
        max_distance = float("nan")
    if not 0.0 <= max_distance <= MAX_MS:  # NaN and infinities fail too
        raise InvalidRepartition(f"maxDistance must be a number of ms in [0, {MAX_MS:g}]")
    max_servers = None
    if "maxNumServers" in values:
        digits = values["maxNumServers"]
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 5
                and 1 <= int(digits) <= MAX_SERVERS):
            raise InvalidRepartition(f"maxNumServers must be an integer in [1, {MAX_SERVERS}]")
        max_servers = int(digits)
    return name, KyraParameters(max_distance, max_servers)


class Repartitioner:
    """The ``Repartition`` admin operation of a dispatcher, registered with its admin
    ``endpoint``. ``routes``: the dispatcher's route namespace (the topics it knows);
    ``subscription_servers()``: name -> address of the servers that hold subscriptions now;
    ``credential``: the network's, for the servers' admin operations. ``transport``: the
    client transport to the servers; default HTTP with a read timeout of ``timeout`` seconds,
    as an export of tens of thousands of subscriptions takes a while. ``latency``: Kyra's
    server latencies; default: read at each request from the file ``latency_file()`` names
    (the dispatcher's setting, asked each time), so an edited file is taken without a restart."""

    def __init__(self, endpoint, *, routes, subscription_servers: Callable[[], Mapping[str, str]],
                 credential: str | None,
                 latency_file: Callable[[], str | None] = lambda: None, transport=None,
                 chunk: int = 500, samples: int = 2000, load_factor: float = 2.0, seed: int = 0,
                 timeout: float = 300.0, latency: LatencyMatrix | None = None):
        self.routes = routes
        self.subscription_servers = subscription_servers
        self.credential = credential
        self.latency_file = latency_file
        self._own_transport = transport is None
        self.transport = transport or HttpTransport(timeout=(3.0, timeout))
        self.chunk = chunk
        self.samples = samples
        self.load_factor = load_factor
        self.seed = seed
        self.latency = latency
        # An export holds ~8 elements per subscription: far above the default element cap.
        self._soap = SoapClient(self.transport, limits=ParserLimits(
            max_bytes=512 * 1024 * 1024, max_depth=100, max_elements=50_000_000))
        endpoint.register(protocol.Repartition, self._repartition)

    def _client(self, address: str) -> AdminClient:
        return AdminClient(address, self.credential, soap_client=self._soap)

    def close(self) -> None:
        if self._own_transport:
            self.transport.close()

    def _repartition(self, request, message):
        moved, figures = self.repartition(request.Topic, request.Algorithm)
        return protocol.RepartitionResponse(Moved=moved, Figure=[
            contracts.Figure(Name=k, Value=repr(v) if isinstance(v, float) else str(v))
            for k, v in figures.items()])

    def repartition(self, topic: str, algorithm: str) -> tuple[int, dict]:
        started = time.perf_counter()
        topic = validate_name(topic)
        algorithm, kyra = parse_algorithm(algorithm)
        if topic not in self.routes:
            raise UnknownEntry(topic, "topic")
        servers = sorted(self.subscription_servers().items())
        if not servers:
            return 0, {"subscriptions": 0, "servers": 0}
        latency = self._latency([name for name, _ in servers]) if kyra else None
        ids, mins, maxs, owner = self._collect(topic, servers)
        figures: dict[str, object] = {"subscriptions": len(ids), "servers": len(servers)}
        if len(ids) == 0 or len(servers) == 1:
            figures["seconds"] = time.perf_counter() - started
            return 0, figures
        low, high = mins.min(axis=0), maxs.max(axis=0)
        width = np.where(high > low, high - low, 1.0)
        n_mins, n_maxs = (mins - low) / width * SCALE, (maxs - low) / width * SCALE
        k = len(servers)
        if kyra is not None:
            target = self._kyra_targets(latency, kyra, n_mins, n_maxs, owner, figures)
        else:
            target = self._partition_targets(algorithm, n_mins, n_maxs, owner, k)
        events = np.random.default_rng(self.seed).uniform(0.0, SCALE,
                                                          size=(self.samples, mins.shape[1]))
        for name, labels_ in (("hit_ratio_before", owner), ("hit_ratio_after", target)):
            figures[name] = float(hit_ratio.hit_ratio(
                events, hit_ratio.precise_summaries(n_mins, n_maxs, labels_, k)))
        moved = not_moved = 0
        failures: list[str] = []
        for source in range(k):
            for destination in range(k):
                if source == destination:
                    continue
                chosen = np.flatnonzero((owner == source) & (target == destination))
                for start in range(0, len(chosen), self.chunk):
                    batch = [ids[i] for i in chosen[start:start + self.chunk]]
                    count, failure = self._move(servers[source], servers[destination], topic,
                                                batch)
                    moved += count
                    if failure is not None:
                        not_moved += len(batch) - count
                        failures.append(failure)
        figures["moved"] = moved
        if failures:
            # the operator sees what stayed where it was, and why (the first reason)
            figures["not_moved"] = not_moved
            figures["failed_moves"] = len(failures)
            figures["first_failure"] = failures[0]
        figures["seconds"] = time.perf_counter() - started
        log.info("repartitioned %s with %s: %d of %d subscriptions moved (hit ratio %.3f -> %.3f)",
                 topic, algorithm, moved, len(ids), figures["hit_ratio_before"],
                 figures["hit_ratio_after"])
        return moved, figures

    def _partition_targets(self, algorithm: str, n_mins, n_maxs, owner, k: int) -> np.ndarray:
        if algorithm == "rtree":
            partitioner = OfflineRTreePartitioner(load_factor=self.load_factor)
        else:
            partitioner = KMeansPartitioner(load_factor=self.load_factor, random_state=self.seed)
        labels = partitioner.fit(n_mins, n_maxs, k).labels_
        return _match_labels(labels, owner, k)[labels]

    @staticmethod
    def _kyra_targets(latency: np.ndarray, kyra: KyraParameters, n_mins, n_maxs, owner,
                      figures: dict) -> np.ndarray:
        d = n_mins.shape[1]
        placement = KyraPlacement(kyra.max_distance, kyra.max_servers or len(latency)).fit(
            latency, n_mins, n_maxs, owner, (np.zeros(d), np.full(d, SCALE)))
        figures["cliques"] = len(placement.cliques_)
        figures["zones"] = len(latency)  # one per server
        figures["multi_zone"] = int(np.count_nonzero(placement.zones_overlapped_ > 1))
        return placement.labels_

    def _latency(self, names: list[str]) -> np.ndarray:
        """The (servers, servers) latency sub-matrix in ``names``' order, or RepartitionFailed
        saying what is missing (asked before any export: nothing has moved)."""
        matrix = self.latency
        if matrix is None:
            path = self.latency_file()
            if not path:
                raise RepartitionFailed("kyra needs the servers' latencies: the dispatcher has "
                                        "no latency_file setting (edn serve dispatcher "
                                        "--latency FILE); nothing moved")
            try:
                matrix = load_latency(path)
            except LatencyFileError as exc:  # load_latency reports unreadable files so too
                raise RepartitionFailed(f"the latency file cannot be used: {exc}; "
                                        "nothing moved") from exc
        missing = [name for name in names if name not in matrix]
        if missing:
            shown = ", ".join(repr(name) for name in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise RepartitionFailed(f"servers missing from the latency matrix: {shown}{more}; "
                                    "nothing moved")
        return matrix.restricted(names)

    def _collect(self, topic: str, servers):
        ids: list[str] = []
        boxes_lo: list[np.ndarray] = []
        boxes_hi: list[np.ndarray] = []
        owner: list[int] = []
        seen: set[str] = set()
        for index, (name, address) in enumerate(servers):
            try:
                response = self._client(address).call(protocol.ExportSubscriptions(Topic=topic))
            except (TransportError, SoapFault) as exc:  # which server, and that nothing moved
                raise RepartitionFailed(f"server {name} did not export {topic}: "
                                        f"{getattr(exc, 'reason', exc)}; nothing moved") from exc
            for element in response.Subscriptions.iter(protocol.SUBSCRIPTION):
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

    def _move(self, source, destination, topic: str, batch: list[str]) -> tuple[int, str | None]:
        """Subscriptions moved, and None or what went wrong (they stay at the source)."""
        (source_name, source_address), (destination_name, destination_address) = source, destination
        try:
            response = self._client(source_address).call(protocol.MoveSubscriptions(
                Topic=topic, Target=destination_address, Id=batch))
        except (TransportError, SoapFault) as exc:
            reason = (f"{source_name} -> {destination_name}: "
                      f"{getattr(exc, 'reason', exc)}")[:MAX_FAILURE_TEXT]
            log.error("moving %d subscriptions of %s failed (%s); they stay where they are",
                      len(batch), topic, reason)
            return 0, reason
        return int(response.Moved), None


def _hull(element) -> tuple[np.ndarray, np.ndarray] | None:
    lows, highs = [], []
    for box in element.findall(protocol.BOX):
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


