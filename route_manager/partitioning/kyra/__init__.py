"""Kyra (Cao & Singh, INFOCOM 2004, section III): server cliques, content zones and routing
trees, as pure algorithms over boxes, points and a latency matrix (no I/O).

* :func:`cliques` (Fig. 5): complete-linkage agglomerative clustering of the servers by
  latency, no clique wider than ``max_distance`` nor larger than ``max_servers``;
* :func:`median_zones`: a box domain cut into ``k`` balanced, non-overlapping continuous
  zones (recursive median cuts over subscription centres); one zone per server of a clique,
  and T global zones, one per routing tree;
* :class:`KyraNetwork`: the whole network. The wide-area simulator calls it thus::

      net = KyraNetwork(latency_ms, mins, maxs, entry, (lo, hi),
                        max_distance=40.0, max_servers=4)
      links, delivering, work = net.route(event_point, publisher_server)
      # links: [(from, to), ...] in order; delivering: servers with a matching proxy
      # subscription (the event's zone owner in each interested clique); work: servers
      # that matched the event against a routing table

* :func:`proxy_assignment`: per server, the subscription ids it would hold as proxy in the
  paper's scheme (a subscription overlapping several zones of its clique under each);
* :class:`KyraPlacement`: the same cliques and zones with **one** proxy per subscription, as
  real servers hold them (one durable copy, one delivery): what
  :mod:`route_manager.repartition` moves subscriptions by for ``Algorithm: kyra``
  (:mod:`.subscription_placement` says how a subscription overlapping several zones is placed).
"""
from .cliques import cliques
from .network import KyraNetwork, Route, minimum_spanning_tree, proxy_assignment
from .subscription_placement import KyraPlacement, clique_zones, zone_shares
from .zones import median_zones, overlaps, zone_of

__all__ = ["KyraNetwork", "KyraPlacement", "Route", "clique_zones", "cliques", "median_zones",
           "minimum_spanning_tree", "overlaps", "proxy_assignment", "zone_of", "zone_shares"]
