"""Kyra's routing (:mod:`route_manager.partitioning.kyra`) on the Gryphon topology, for the comparison table.
Kyra is an overlay: its links join any two brokers (the latency between them is the shortest
path's), and the event reaches a subscription's proxy, not the subscriber's own broker. So it
is evaluated event by event, not in the timed simulation: per event, its overlay links, the
physical hops they take (shortest paths), the hops from each proxy to the brokers of its
matching subscribers (counted apart), the servers that matched, exactness against the
oracle (each client with a matching subscription gets the event from a proxy), and the
latency from publisher to each subscriber's broker under the simulator's model: the link
delays of the shortest paths, ``per_message_s`` at every broker that handles the event (the
ends of an overlay link and the brokers between them), 1 ms from and to the clients.
"""

from __future__ import annotations

import numpy as np

from route_manager.partitioning.kyra import KyraNetwork

from .topology import Topology
from .workload import DONT_CARE, Workload

__all__ = ["kyra_network", "kyra_row"]


def kyra_network(topology: Topology, workload: Workload, *, max_distance: float = 40.0,
                 max_servers: int = 4) -> tuple[KyraNetwork, np.ndarray, np.ndarray, list]:
    """The Kyra network over the brokers, with the shortest-path latency (ms) and hop
    matrices."""
    brokers = topology.brokers
    trees = [topology.spanning_tree(b) for b in brokers]
    latency = np.array([[tree.distance_ms[b] for b in brokers] for tree in trees])
    hops = np.array([[tree.hops(b) for b in brokers] for tree in trees])
    rows = workload.subscriptions
    mins = np.where(rows == DONT_CARE, 0, rows).astype(np.float64)
    maxs = np.where(rows == DONT_CARE, workload.values - 1, rows).astype(np.float64)
    index = {b: i for i, b in enumerate(brokers)}
    entry = np.array([index[workload.broker_of(i)] for i in range(len(rows))])
    domain = (np.zeros(workload.attributes), np.full(workload.attributes, workload.values - 1.0))
    network = KyraNetwork(latency, mins, maxs, entry, domain, max_distance=max_distance,
                          max_servers=max_servers)
    return network, latency, hops, brokers


def _arrivals(route, latency: np.ndarray, hops: np.ndarray, start: int, first_ms: float,
              per_message_ms: float) -> dict:
    """Server -> the time (ms) the event reaches it along the overlay links, in sent order."""
    arrival = {start: first_ms}
    for u, v in route.links:
        arrival[v] = arrival[u] + _travel_ms(latency, hops, u, v, per_message_ms)
    return arrival


def _travel_ms(latency, hops, u: int, v: int, per_message_ms: float) -> float:
    """From ``u`` having the event to ``v`` having it: ``u`` and every broker between them
    serve it, the links delay it."""
    return float(latency[u, v]) + int(hops[u, v]) * per_message_ms if u != v else 0.0


def kyra_row(topology: Topology, workload: Workload, event_bytes: int = 200,
             per_message_s: float = 0.5e-3) -> dict:
    network, latency, hops, brokers = kyra_network(topology, workload)
    per_message_ms, client_ms = per_message_s * 1e3, topology.client_delay_ms
    latencies = []
    index = {b: i for i, b in enumerate(brokers)}
    overlay = physical = delivery = work = missed = extra = published = 0
    broker_of_client = np.array([index[b] for b in brokers
                                 for _ in range(workload.clients_per_broker)])
    for publisher, events in workload.events.items():
        for values in events:
            point = values.astype(np.float64)
            route = network.route(point, index[publisher])
            arrival = _arrivals(route, latency, hops, index[publisher], client_ms,
                                per_message_ms)
            published += 1
            overlay += len(route.links)
            physical += sum(int(hops[u, v]) for u, v in route.links)
            work += route.matching_work
            got = set()
            for server in route.delivering:
                clients = set(workload.subscriber[network.matching_proxies(point, server)].tolist())
                got.update(clients)
                # the proxy sends one copy to each subscriber's broker, not on the tree
                targets = {int(broker_of_client[c]) for c in clients}
                delivery += sum(int(hops[server, b]) for b in targets)
                latencies.extend(arrival[server] + _travel_ms(latency, hops, server, b,
                                                              per_message_ms)
                                 + per_message_ms + client_ms for b in targets)
            wanted = set(workload.subscriber[workload.matching(values)].tolist())
            missed += len(wanted - got)
            extra += len(got - wanted)
    return {"mode": "kyra", "cliques": len(network.cliques_),
            "overlay_links_per_event": overlay / published,
            "link_messages_per_event": physical / published,
            "link_bytes_per_event": physical * event_bytes / published,
            "proxy_to_broker_hops_per_event": delivery / published,
            "servers_matching_per_event": work / published,
            "median_latency_ms": float(np.median(latencies)) if latencies else None,
            "missed": missed, "extra": extra, "exact": missed == 0 and extra == 0}
