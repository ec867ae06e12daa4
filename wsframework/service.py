"""A service: the messaging layer, the durable store, the namespace of topics and the admin
endpoint, composed; roles (event source, dispatcher, subscription server) add components.

``Service.handle_request`` is the single transport-independent entry point: the WSGI
application and the in-process transport both call it.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from .commandline import new_token
from .access.sealing import SealKey
from .access import AccessAdmin, AccessPolicy, AccessStore
from .admission import ControlGate
from .greenlets import threads_are_greenlets
from .admin import AdminEndpoint, NamespaceAdmin
from .http_routes import Routes
from .messaging import MessagingLayer, Outcome, request_action
from .metrics import ACCESS_ENV
from .namespace import Namespace
from .store import Store
from .transport import HttpTransport
from .utilization import BusyMeter
from .xmlparse import DEFAULT_LIMITS, ParserLimits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceNames:
    """The names an application gives its services where operators and other programs see
    them: the store's file in the data directory, the prefix of the metrics every role
    reports and the environment variable that says who may read them
    (:mod:`wsframework.metrics`), the console's session cookie (:mod:`wsframework.console`)
    and the environment variable that may hold the admin credential (None: only an explicit
    one, else a generated one)."""

    store_file: str = "service.db"
    metric_prefix: str = "wsframework_"
    metrics_access_env: str = ACCESS_ENV
    console_cookie: str = "wsframework_console"
    admin_token_env: str | None = None


DEFAULT_NAMES = ServiceNames()


@dataclass
class ServiceConfig:
    base_url: str
    data_dir: Path
    admin_token: str
    limits: ParserLimits = DEFAULT_LIMITS
    role: str = "source"
    # Free-form role settings (dispatcher URL, delivery policy, ...), from the command line.
    settings: dict = field(default_factory=dict)
    # what the role serves HTTPS with (wsframework.tls.ServerTls), None for plain HTTP
    tls: object | None = None
    # who may publish and subscribe (wsframework.access.ACCESS_MODES)
    access: str = "open"


def resolve_admin_token(explicit: str | None, data_dir: Path, env: str | None = None) -> str:
    """The admin credential: the explicit value, else the environment variable ``env`` (the
    application's :attr:`ServiceNames.admin_token_env`), else a random token kept in
    ``{data}/admin-token`` (mode 0600) so the service is never left open."""
    token = explicit or (os.environ.get(env) if env else None)
    if token:
        return token
    path = Path(data_dir) / "admin-token"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = new_token(24)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    log.warning("no admin token given: generated one in %s", path)
    return token


class Component(Protocol):
    def close(self) -> None: ...


WsdlProvider = Callable[[str, str], "bytes | None"]


class Service:
    def __init__(self, config: ServiceConfig, *, transport=None, store: Store | None = None,
                 topic_admin: bool = True, names: ServiceNames = DEFAULT_NAMES):
        """``topic_admin=False`` leaves topic administration to the role (a dispatcher
        creates topics network-wide); ``names``: the application's (:class:`ServiceNames`)."""
        self.config = config
        self.names = names
        self.base_url = config.base_url.rstrip("/")
        self.store = store or Store(Path(config.data_dir) / names.store_file)
        self.transport = transport or HttpTransport()
        self.messaging = MessagingLayer(limits=config.limits, transport=self.transport)
        self.topics = Namespace("topics", self.store, self.base_url)
        self.admin = AdminEndpoint(self.messaging, config.admin_token)
        if topic_admin:
            NamespaceAdmin(self.admin, self.topics)
        # principals and per-topic permissions (wsframework.access), managed through admin
        access_store = AccessStore(self.store, SealKey(
            Path(config.data_dir) / f"{names.store_file}.access-key"))
        AccessAdmin(self.admin, access_store)
        self.access = AccessPolicy(config.access, access_store, config.admin_token)
        self.admin.delegate_topics(self.access)  # an admin grant on a topic administers it
        self.components: list[Component] = []
        self.busy = BusyMeter()  # utilization: time with a request in hand (wsframework.utilization)
        # the event path before the control path: roles mark their events' actions
        self.gate = ControlGate(enabled=threads_are_greenlets())  # see wsframework.admission
        self._wsdl: list[tuple[str, WsdlProvider, bool]] = []
        self.http_routes = Routes()  # plain HTTP pages beside SOAP (wsframework.http_routes)
        self._closed = threading.Event()

    # -- composition -----------------------------------------------------------------------
    def add_component(self, component: Component) -> Component:
        self.components.append(component)
        return component

    def add_wsdl(self, path_prefix: str, provider: WsdlProvider, *, with_query: bool = False) -> None:
        """``provider(path, address)`` returns the WSDL for an address under the prefix;
        with ``with_query`` it is called ``provider(path, address, query)`` with the parsed
        query parameters (``?wsdl&version=2004`` -> ``{"wsdl": [""], "version": ["2004"]}``)."""
        self._wsdl.append((path_prefix, provider, with_query))

    # -- entry points ----------------------------------------------------------------------
    def handle_request(self, data: bytes, *, path: str = "/", content_type: str | None = None,
                       soap_action: str | None = None, remote_addr: str | None = None,
                       peer_principal: str | None = None,
                       authorization: str | None = None) -> Outcome:
        action = request_action(soap_action, content_type)
        with self.gate.admitted(action), self.busy.busy():
            self.topics.sync()
            return self.messaging.handle(data, path=path, base_url=self.base_url,
                                         content_type=content_type, soap_action=soap_action,
                                         remote_addr=remote_addr, peer_principal=peer_principal,
                                         authorization=authorization,
                                         required_action=action if self.gate.passes(action)
                                         else None)

    def wsdl_for(self, path: str, query: dict | None = None) -> bytes | None:
        self.topics.sync()
        for prefix, provider, with_query in sorted(self._wsdl, key=lambda p: len(p[0]), reverse=True):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                document = (provider(path, self.base_url + path, query or {}) if with_query
                            else provider(path, self.base_url + path))
                if document is not None:
                    return document
        return None

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for component in reversed(self.components):
            try:
                component.close()
            except Exception:
                log.exception("closing %r failed", component)
        self.messaging.close()
        self.transport.close()
        self.store.close()
