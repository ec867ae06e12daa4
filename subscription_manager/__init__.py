"""Subscription managers: the base WS-Eventing event source (and later the EDN one).

Run one with ``edn serve source``, or compose it in process::

    from wsframework.service import ServiceConfig
    from subscription_manager.source import build_source

    service = build_source(ServiceConfig("http://localhost:8080", data_dir, admin_token))
    manager = service.subscription_manager
    # {base}/topics/T     Subscribe (2004/08 or 2011, by the body's namespace); anything
    #                     else sent there is an event published to T
    # {base}/subscriptions  Renew / GetStatus / Unsubscribe
    manager.counters    # queued, delivered, failed, dropped, retries, ...
    service.close()     # SubscriptionEnd(SourceShuttingDown) unless
                        # keep_subscriptions_on_shutdown

Subclass :class:`SubscriptionManager` to change where filters live (``matcher_for``), to
hear about subscriptions (``on_subscription_added`` / ``on_subscription_removed``) and
matches (``on_event_matched``), or to deliver differently (``deliver``); pass the class as
``build_source(config, manager_class=...)``.

Modules, one idea each:

=================  ===========================================================================
``manager``        the event source / subscription manager: composition, routes, hooks,
                   publication, SubscriptionEnd, expiry sweeps, shutdown
``operations``     Subscribe / Renew / GetStatus / Unsubscribe (a mixin of the manager)
``view``           the process's in-memory view (installed filters, templates) that follows
                   the store and the namespace
``messages``       Subscribe/Renew/... parsing and response building (pure)
``versions``       2004/08 vs 2011 vocabulary and the fault each situation calls for
``exceptions``     precise errors (unknown subscription, refused endpoint or filter) and
                   their faults, registered once with :mod:`wsframework.faults`
``expiry``         xs:duration / xs:dateTime and the grant policy
``lifecycle``      the subscription states and their legal transitions (one table)
``store``          durable subscriptions (SQLite), conditional transitions, change tracking
``delivery``       bounded queue, worker pool, retries with backoff, counters
``notifications``  notification envelopes from per-subscription templates (Wrap/Unwrap)
``settings``       the ``--set KEY=VALUE`` settings of the source role
``source``         the ``source`` role: a Service with the manager and both WSDLs
=================  ===========================================================================
"""
from .manager import MANAGER_PATH, SubscriptionManager
from .store import Subscription

__all__ = ["SubscriptionManager", "Subscription", "MANAGER_PATH"]
