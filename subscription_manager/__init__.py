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
matches (``on_event_matched``), or to answer requests differently (``handle_subscribe`` and
the others); build the subclass's parts in ``build_parts``. Pass the class as
``build_source(config, manager_class=...)``.

Modules, one idea each:

=====================  =======================================================================
``manager``            the event source / subscription manager: composition, routes, hooks,
                       SubscriptionEnd, expiry sweeps, shutdown
``operations``         Subscribe / Renew / GetStatus / Unsubscribe
``publication``        the one publication path: limits, matching, strikes, NotifyWhen, the
                       outbox transaction (``manager.publish_many``)
``event_limits``       the bounds on a published event (elements, depth)
``strikes``            strikes against filters that fail or overrun their budget
``strike_table``       the strike counts, durable and shared by the workers
``view``               the process's in-memory view (installed filters, templates) that follows
                       the store and the namespace
``messages``           Subscribe/Renew/... parsing and response building (pure)
``versions``           2004/08 vs 2011 vocabulary and the fault each situation calls for
``exceptions``         precise errors (unknown subscription, refused endpoint or filter) and
                       their faults, registered once with :mod:`wsframework.faults`
``expiry``             xs:duration / xs:dateTime and the grant policy
``lifecycle``          the subscription states and their legal transitions (one table)
``store``              durable subscriptions (SQLite), conditional transitions, change tracking
``notify_when``        the edn:NotifyWhen Subscribe extension (notification conditions)
``notify_state``       the durable last value notified (L) of NotifyWhen subscriptions
``notify_index``       which NotifyWhen subscriptions a value reaches, decided in the outbox's
                       transaction
``outbox``             accepted events, pending notifications, retries, dead letters, batch
                       positions (durable)
``process_owner``      which process owns an outbox row
``outbox_deliveries``  from the outbox to the delivery queue and back (outcomes, recovery)
``delivery``           bounded queue per host, worker pool, retries with backoff, counters
``delivery_job``       one delivery job and the policy it is sent under
``notifications``      notification envelopes from per-subscription templates (Wrap/Unwrap)
``settings``           the ``--set KEY=VALUE`` settings of the source role
``source``             the ``source`` role: a Service with the manager and both WSDLs
``server``             the EDN subscription server (a package)
``stateful``           stateful subscriptions served statelessly (a package)
=====================  =======================================================================
"""
from .manager import MANAGER_PATH, SubscriptionManager
from .store import Subscription

__all__ = ["SubscriptionManager", "Subscription", "MANAGER_PATH"]
