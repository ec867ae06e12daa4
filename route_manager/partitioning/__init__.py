"""Subscription partitioning among EDN servers (paper III-A): which server hosts a new
subscription so that summaries stay tight and event traffic low, under a load threshold.

Every partitioner follows scikit-learn conventions: parameters in ``__init__``,
``fit(mins, maxs, n_servers)`` returns ``self`` with ``labels_`` (server per subscription)
and ``loads_``; afterwards ``assign(lo, hi)`` / ``assign_batch(mins, maxs)`` route new
subscriptions online::

    from route_manager import workloads
    from route_manager.partitioning import OfflineRTreePartitioner, OnlineRTreePartitioner

    mins, maxs = workloads.uniform_rectangles(100_000, 4, seed=1)
    offline = OfflineRTreePartitioner().fit(mins, maxs, n_servers=10)
    offline.labels_                      # 10 groups of 10,000

    # A live subscription server: start empty with an explicit threshold, install the peers'
    # summaries as route updates arrive, route each new subscription.
    router = OnlineRTreePartitioner(capacity=20_000).fit(mins[:0], maxs[:0], n_servers=10)
    router.update_server(3, peer_mins, peer_maxs, load=12_345)
    server = router.assign(lo, hi)

Algorithms: :class:`RandomPartitioner`, :class:`OnlineRTreePartitioner` (max-overlap routing;
``summary_depth`` for depth-limited summaries, ``offline_share`` for a bulk-loaded start),
:class:`OfflineOnlineRTreePartitioner` (50% offline), :class:`OfflineRTreePartitioner`
(TGS bulk loading, root fan-out = servers), :class:`KMeansPartitioner` (offline),
:class:`OnlineKMeansPartitioner`, and the distance-aware (paper III-D) ones in :mod:`.distance`:
:class:`OnlineDistancePartitioner` (least added traffic times network distance) and
:class:`OfflineDistanceRTreePartitioner` (TGS cuts weighted by distance; ``latency`` and each
subscription's ``entry`` server as parameters). The TGS bulk loader itself is in :mod:`.tgs`
(``partition``, ``rtree_summary``). Kyra's server cliques, content zones and routing
trees (Cao & Singh) are in :mod:`.kyra`.
"""
from .base import CapacityExceeded, Partitioner, check_rectangles, clone
from .distance import OfflineDistanceRTreePartitioner, OnlineDistancePartitioner
from .kmeans import KMeansPartitioner, OnlineKMeansPartitioner
from .random_routing import RandomPartitioner
from .rtree import OfflineOnlineRTreePartitioner, OfflineRTreePartitioner, OnlineRTreePartitioner
from .tgs import partition, rtree_summary, tree_height

ALL_PARTITIONERS = (
    RandomPartitioner,
    OnlineRTreePartitioner,
    OfflineOnlineRTreePartitioner,
    OfflineRTreePartitioner,
    KMeansPartitioner,
    OnlineKMeansPartitioner,
    OnlineDistancePartitioner,
    OfflineDistanceRTreePartitioner,
)

__all__ = [
    "ALL_PARTITIONERS",
    "CapacityExceeded",
    "KMeansPartitioner",
    "OfflineDistanceRTreePartitioner",
    "OfflineOnlineRTreePartitioner",
    "OfflineRTreePartitioner",
    "OnlineDistancePartitioner",
    "OnlineKMeansPartitioner",
    "OnlineRTreePartitioner",
    "Partitioner",
    "RandomPartitioner",
    "check_rectangles",
    "clone",
    "partition",
    "rtree_summary",
    "tree_height",
]
