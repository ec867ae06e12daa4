"""The base route manager (paper Fig. 11): route administration and routing of every message
addressed to a route entry through that entry's matcher.

Route entries live in a namespace (by default the service's ``topics`` namespace, so a route
named ``stocks/quotes`` is addressed as ``{base}/topics/stocks/quotes``, the address
publishers already use). Each entry is bound to the matcher named when the route is created;
the matcher's filters are the *routes* (for the EDN: one routing summary per server, in an
``RTreeRouteSet``), and ``match(event)`` answers where the event goes. Subclasses decide
what "going there" means in :meth:`BaseRouteManager.dispatch`.

Route administration messages: ``CreateRoute``, ``DeleteRoute``, ``ListRoutes``,
authenticated like every admin message.
"""
from __future__ import annotations

import logging

from lxml import etree

from wsframework.addressing import destination_unreachable
from wsframework.admin import NamespaceAdmin
from wsframework.exceptions import sender_fault
from wsframework.messaging import IncomingMessage, MessageFilter, Reply
from wsframework.namespace import NamespaceEntry

from . import protocol

log = logging.getLogger(__name__)


class BaseRouteManager:
    #: matcher a route is bound to when CreateRoute names none
    default_route_matcher: str | None = None
    #: messaging-layer priority of the routing handler (below specific actions)
    routing_priority = -10

    def __init__(self, service, namespace=None):
        self.service = service
        self.routes = namespace or service.topics
        self.route_admin = NamespaceAdmin(None, self.routes, default_matcher=self.default_route_matcher)
        service.admin.register(protocol.CreateRoute, self._create_route)
        service.admin.register(protocol.DeleteRoute, self._delete_route)
        service.admin.register(protocol.ListRoutes, self._list_routes)
        prefix = f"/{self.routes.kind}/"
        service.messaging.route(f"route-manager:{self.routes.kind}", MessageFilter(path_prefix=prefix),
                                self._on_message, priority=self.routing_priority)

    # -- routing -----------------------------------------------------------------------------
    def entry_for(self, message: IncomingMessage) -> NamespaceEntry:
        name = self.routes.name_from_path(message.path)
        if not name or name not in self.routes:
            raise destination_unreachable(message.wsa_version, message.address)
        return self.routes.get(name)

    def _on_message(self, message: IncomingMessage) -> Reply | None:
        entry = self.entry_for(message)
        if message.body is None:
            raise sender_fault("the message has no body to route")
        self.service.access.require(message, "publish", entry.name)  # wsframework.access
        self.service.gate.event_seen()
        return self.dispatch(entry, message)

    def dispatch(self, entry: NamespaceEntry, message: IncomingMessage) -> Reply | None:
        """Route ``message`` addressed to ``entry``; the base implementation only matches."""
        targets = entry.matcher.match(message.body, variables={"action": message.action or ""})
        log.debug("route %s: %s -> %s", entry.name, message.action, targets)
        return None

    # -- route administration ----------------------------------------------------------------
    def describe_route(self, entry: NamespaceEntry) -> protocol.RouteInfo:
        return protocol.RouteInfo(Name=entry.name, Matcher=entry.matcher_uri,
                                  Address=self.routes.address_of(entry.name),
                                  Servers=len(entry.matcher))

    def create_route(self, name: str, matcher: str | None, options: etree._Element | None) -> NamespaceEntry:
        return self.route_admin.create(name, matcher, options)

    def _create_route(self, request, message):
        entry = self.create_route(request.Name, request.Matcher, request.Options)
        return protocol.CreateRouteResponse(Name=entry.name, Matcher=entry.matcher_uri,
                                            Address=self.routes.address_of(entry.name))

    def _delete_route(self, request, message):
        return protocol.DeleteRouteResponse(Name=self.route_admin.delete(request.Name))

    def _list_routes(self, request, message):
        return protocol.ListRoutesResponse(
            Route=[self.describe_route(e) for e in self.route_admin.entries(request.Prefix)])
