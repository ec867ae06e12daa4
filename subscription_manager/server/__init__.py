"""The EDN subscription server (paper sections II, III-A/B, V-A).

Run one with ``edn serve server --dispatcher URL [--dispatcher URL2 ...] [--name N]
[--partitioner rtree] [--load-threshold N]`` (one ``--dispatcher`` per root dispatcher: the
server registers with and reports to each), or compose it in process::

    from wsframework.service import ServiceConfig
    from subscription_manager.server import build_server

    config = ServiceConfig("http://s1:8081", data_dir, admin_token,
                           settings={"dispatcher": "http://d:8080", "partitioner": "rtree"})
    service = build_server(config)              # registers in the background
    manager = service.subscription_manager      # an EdnSubscriptionManager
    manager.flush_summaries()                   # send due route updates now
    manager.step()                              # register + route updates + peer exchange
    manager.stats()                             # counters (also the GetStats admin message)

``build_server(config, start_background=False)`` leaves the background threads off: tests
drive :meth:`EdnSubscriptionManager.step` themselves.

Modules, one idea each:

=======================  =====================================================================
``manager``              the EDN subscription manager: composes the parts below, decides where
                         a request is answered, publishes the dispatcher's event batches
``summaries``            R-tree engines per topic, the subscriptions' centres, the load, peer
                         summaries
``subscribe_placement``  where a Subscribe goes (the best server under the load threshold)
``relay``                a Subscribe placed elsewhere, and requests for moved subscriptions,
                         carried to the server that holds them; the answer relayed back
``admin``                the admin messages: PeerUpdate, Export / Import / MoveSubscriptions,
                         GetStats
``exceptions``           the server's errors and the faults they are answered with
``moves``                export / import / move of subscriptions and the forwarding records
``moved_subscriptions``  the ``edn:Subscriptions`` element subscriptions travel in
``network``              registration with each root, route updates (coalesced, with
                         generations), peer exchange
``peer_health``          which peers answer (one that does not is left out of placement)
``election``             the one worker process that runs the network conversation
``settings``             the role's settings
=======================  =====================================================================

Limits worth knowing:

* a route update follows a change within ``summary_interval``: an event published at the
  dispatcher in between does not see a subscription just made (or moved in); the paper's
  design, since updates are coalesced (``flush_summaries()`` sends them now);
* ``edn:EventBatch`` carries events, not their actions: notifications of events routed by
  the dispatcher carry ``{dispatcher}/topics/T/Event`` (the first root's), whichever
  server holds them and whichever root routed the event;
* ``GetStats`` counters belong to the worker process that answers;
* notifications a server has accepted but not yet delivered live in its memory (the base
  delivery queue): a ``kill -9`` loses them, not the subscriptions.

Placement rules live in :mod:`route_manager.placement_router`, peer state in
:mod:`route_manager.peers`, the dispatcher's offline re-partitioning in
:mod:`route_manager.repartition`.
"""
from __future__ import annotations

from route_manager import protocol
from wsframework.service import Service, ServiceConfig

from ..source import build_source
from .manager import EdnSubscriptionManager
from .subscribe_placement import PLACED
from .settings import EdnSettings

__all__ = ["build_server", "EdnSubscriptionManager", "EdnSettings", "PLACED"]


def build_server(config: ServiceConfig, *, start_background: bool = True, settings=None,
                 **kwargs) -> Service:
    """The ``server`` role: the base source composition with :class:`EdnSubscriptionManager`.

    Keyword arguments are :func:`~subscription_manager.source.build_source`'s (``transport``,
    ``store``, ``resolver``, ``settings``, ``start_sweeper``, ``clock``);
    ``start_background=False`` leaves registration and the route-update and peer threads to
    the caller (:meth:`EdnSubscriptionManager.step`).
    """
    overrides = dict(settings or {})
    given = {str(key).replace("-", "_") for key in {**(config.settings or {}), **overrides}}
    if "keep_subscriptions_on_shutdown" not in given:
        # Subscriptions belong to the network: a server restart must not end them.
        overrides["keep_subscriptions_on_shutdown"] = True
    service = build_source(config, manager_class=EdnSubscriptionManager, settings=overrides,
                           settings_groups=build_server.settings,
                           admin_operations=protocol.ADMIN_OPERATIONS, **kwargs)
    if start_background:
        try:
            service.subscription_manager.start()
        except BaseException:
            service.close()
            raise
    return service


# The settings groups the role reads from one mapping, the manager's own (``edn serve server
# --set`` is validated against them before anything starts).
build_server.settings = EdnSubscriptionManager.settings_groups
