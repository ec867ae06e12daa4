"""The ``source`` role: a standalone WS-Eventing event source.

``build_source(config)`` composes a :class:`~wsframework.service.Service` with the base
:class:`~subscription_manager.manager.SubscriptionManager` (reachable afterwards as
``service.subscription_manager``). Keyword arguments:

``transport``        client transport for notifications (default pooled HTTP)
``store``            an existing :class:`~wsframework.store.Store` (default ``DATA/edn.db``)
``resolver``         ``getaddrinfo``-like callable for notification target checks
``settings``         settings overriding ``config.settings`` (see
                     :mod:`subscription_manager.settings`); a key no group of
                     ``settings_groups`` knows is refused
``settings_groups``  the role's settings groups (default :attr:`build_source.settings`,
                     the event source's :class:`EventingSettings`)
``manager_class``    a :class:`SubscriptionManager` subclass (the EDN manager uses this)
``admin_operations`` the admin operations the admin WSDL describes (default the base ones,
                     ``wsframework.admin.OPERATIONS``); the dead-letter ones are added
``start_sweeper``    run the expiry sweeper thread (default True)
``clock``            epoch-seconds clock for expiry decisions (tests pin it)
"""
from __future__ import annotations

from route_manager.protocol import SERVICE_NAMES
from wsdl.admin import serve_admin_wsdl
from wsdl.eventing import serve_eventing_wsdl
from wsframework.admin import OPERATIONS as BASE_ADMIN_OPERATIONS
from wsframework.service import Service, ServiceConfig

from .console import install_console
from .bulk_subscribe import OPERATIONS as BULK_SUBSCRIBE_OPERATIONS
from .deadletters import OPERATIONS as DEAD_LETTER_OPERATIONS
from .manager import SubscriptionManager
from .metrics import serve_source_metrics

__all__ = ["build_source"]


def build_source(config: ServiceConfig, *, resolver=None, settings=None,
                 settings_groups: tuple | None = None,
                 manager_class: type[SubscriptionManager] = SubscriptionManager,
                 start_sweeper: bool = True, clock=None, admin_operations: tuple | None = None,
                 **kwargs) -> Service:
    service = Service(config, names=SERVICE_NAMES, **kwargs)
    # every event source also answers the dead-letter and bulk-subscribe messages
    # (registered by its manager)
    serve_admin_wsdl(service, tuple(admin_operations or BASE_ADMIN_OPERATIONS)
                     + DEAD_LETTER_OPERATIONS + BULK_SUBSCRIBE_OPERATIONS)
    serve_eventing_wsdl(service)
    try:
        pinned = {"clock": clock} if clock is not None else {}
        manager = manager_class(service, resolver=resolver, settings=settings,
                                settings_groups=settings_groups or build_source.settings,
                                start_sweeper=start_sweeper, **pinned)
    except BaseException:
        service.close()
        raise
    service.subscription_manager = manager
    install_console(service)  # the web console's panels ({base}/console)
    serve_source_metrics(service, manager)  # Prometheus: {base}/metrics (the server's too)
    return service


# The settings groups the role reads (``edn serve source --set`` is validated against them).
build_source.settings = SubscriptionManager.settings_groups
