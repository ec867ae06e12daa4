"""What the processes of one dispatcher share: the routes, the registered nodes and their
summaries live in the store, and each process routes from its own copy in memory.

A dispatcher may run as several processes on one store: gunicorn workers (``--workers N``),
and hosts that share a PostgreSQL database. A change one of them commits (a topic, a node
registering, a summary) bumps a generation in the same transaction; every process reads the
generations before it routes a publication or runs an admin operation, one small read, and
reloads what moved. So a publication accepted by any process is routed with every summary
acknowledged before it, whichever process took the summary.

Operators' run-time settings (Configure: the precision, self-tuning and its parameters) are
stored too, and every process applies what another one took.

What stays per process: the counters and figures it reports (GetStats, the console), the
self-tuner's own moves of the precision (each tunes on the traffic it routes), and a
publisher's retry (MessageID) of a message another process accepted, which is routed again
(at least once).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from lxml import etree

from matchers import MatcherError
from wsframework.namespace import Namespace

from .tables import STATE_GENERATION, DispatcherTables

log = logging.getLogger(__name__)

__all__ = ["SharedState"]


class SharedState:
    """``routes``: the dispatcher's route namespace (reloaded by its own generation);
    ``servers``/``kinds``: its live maps of nodes; ``add_server(name, address, kind)``;
    ``install(entry, server, summary, load)``: put a summary into a route's matcher, as an
    update would; ``configure(pairs)``: apply run-time settings in this process only."""

    def __init__(self, tables: DispatcherTables, routes: Namespace, *, servers: dict,
                 kinds: dict, add_server: Callable, install: Callable, configure: Callable,
                 lock: threading.Lock):
        self.tables = tables
        self.store = tables.store
        self.routes = routes
        self.servers, self.kinds = servers, kinds
        self._add_server = add_server
        self._install = install
        self._configure = configure
        self.configured: dict[str, str] = {}  # the operators' settings applied here
        self._names = (routes.generation_name, STATE_GENERATION)
        self._applied = self.store.generations(self._names)[STATE_GENERATION]
        self.installed: dict[tuple[str, str], int] = {}  # (route, server) -> generation
        self._lock = threading.Lock()  # one reload at a time
        # the dispatcher's summary lock: a summary is read from the store and installed as
        # one step, as an update checks, installs and stores as one
        self._summary_lock = lock
        self.reloads = 0

    def installed_now(self, route: str, server: str, generation: int) -> None:
        """This process installed ``server``'s summary of ``generation`` for ``route``."""
        self.installed[(route, server)] = generation

    def configure(self, settings: dict[str, str]) -> None:
        """An operator's ``settings`` (validated, and applied in this process already):
        stored, for every other process and for a restart."""
        self.tables.save_configured(settings)
        self.configured.update(settings)

    def apply_configured(self) -> None:
        """Apply the stored settings that differ from what this process applied, each on
        its own (one this version refuses leaves the others in force)."""
        stored = self.tables.configured()
        for name, value in stored.items():
            if self.configured.get(name) == value:
                continue
            try:
                self._configure([(name, value)])
                log.info("run-time setting %s=%s (Configure, stored)", name, value)
            except Exception as exc:  # stored by a newer version, say
                log.error("stored run-time setting %s=%r not applied: %s", name, value, exc)
            self.configured[name] = value

    def forget_route(self, route: str) -> None:
        for key in [k for k in list(self.installed) if k[0] == route]:
            self.installed.pop(key, None)

    def install_stored(self, entry, server: str) -> None:
        """Install ``server``'s stored summary of ``entry``'s route (under the summary
        lock, which the caller may hold already)."""
        row = self.tables.summary(entry.name, server)
        if row is None:
            return
        try:
            self._install(entry, server, etree.fromstring(row["summary"]), row["load"])
        except (MatcherError, etree.XMLSyntaxError) as exc:
            log.error("stored summary of %s for %s unusable: %s", server, entry.name, exc)
        self.installed[(entry.name, server)] = row["generation"]

    def sync(self) -> bool:
        """Bring this process's routes, nodes and summaries up to what the store holds; True
        when anything was reloaded."""
        generations = self.store.generations(self._names)
        routes_moved = self.routes.sync(generations[self._names[0]])
        state = generations[STATE_GENERATION]
        if state == self._applied:
            return routes_moved
        with self._lock:
            if state == self._applied:
                return routes_moved
            self._reload()
            self._applied = state
            self.reloads += 1
        return True

    def _reload(self) -> None:
        self.apply_configured()
        for name, address, kind in self.tables.servers():
            if self.servers.get(name) != address.rstrip("/") or self.kinds.get(name) != kind:
                self._add_server(name, address, kind)
        for (route, server), generation in self.tables.summary_generations().items():
            if self.installed.get((route, server)) == generation or route not in self.routes:
                continue
            with self._summary_lock:
                self.install_stored(self.routes.get(route), server)
