"""Finding matcher engines by URI: built-ins, installed plugins, programmatic registrations.

Engines, the built-in ones included, are classes named in the ``wsframework.matchers``
entry-point group; the framework never imports an engine package itself. The entry point's
name is a short label; the key a topic or route uses is the class's ``uri``.

Loading is lazy: asking for one URI imports only the entry points needed to find it, trying
first the one whose name is the URI's last ``:``-segment (``urn:wsframework:matchers:xpath``
-> ``xpath``), so a service that only dispatches with XPath never imports numpy, rtree or
elementpath. Listing every engine (:func:`known_matchers`) imports them all.
"""

from __future__ import annotations

import importlib.metadata as _metadata
import inspect
import logging
import threading
from typing import Any

from .. import ns
from .base import Matcher
from .errors import UnknownMatcher

__all__ = [
    "ENTRY_POINT_GROUP",
    "DEFAULT_MATCHER_URI",
    "known_matchers",
    "refresh",
    "register_matcher",
    "unregister_matcher",
    "create_matcher",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "wsframework.matchers"
DEFAULT_MATCHER_URI = ns.MATCHER_XPATH

_registered: dict[str, type[Matcher]] = {}


class _Discovery:
    """Entry points of the group, loaded one at a time and remembered (per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list | None = None  # entry points not loaded yet
        self._found: dict[str, type[Matcher]] = {}

    def _entry_points(self) -> list:
        if self._pending is None:
            try:
                self._pending = list(_metadata.entry_points(group=ENTRY_POINT_GROUP))
            except Exception:  # broken metadata must not take the registry down
                log.warning("cannot list entry points of %s", ENTRY_POINT_GROUP, exc_info=True)
                self._pending = []
        return self._pending

    def find(self, uri: str) -> type[Matcher] | None:
        with self._lock:
            if uri in self._found:
                return self._found[uri]
            pending = self._entry_points()
            hint = uri.rsplit(":", 1)[-1]
            pending.sort(key=lambda ep: ep.name != hint)  # the likely one first; stable
            while pending and uri not in self._found:
                self._load(pending.pop(0))
            return self._found.get(uri)

    def all(self) -> dict[str, type[Matcher]]:
        with self._lock:
            pending = self._entry_points()
            while pending:
                self._load(pending.pop(0))
            return dict(self._found)

    def _load(self, entry_point) -> None:
        try:
            candidate = entry_point.load()
        except Exception as exc:
            log.warning("skipping matcher plugin %r (%s): import failed: %s",
                        entry_point.name, entry_point.value, exc)
            return
        problem = _problem(candidate)
        if problem is not None:
            log.warning("skipping matcher plugin %r (%s): %s",
                        entry_point.name, entry_point.value, problem)
            return
        existing = self._found.get(candidate.uri)
        if existing is not None and existing is not candidate:
            log.warning("skipping matcher plugin %r (%s): uri %r already provided by %s.%s",
                        entry_point.name, entry_point.value, candidate.uri,
                        existing.__module__, existing.__qualname__)
            return
        self._found[candidate.uri] = candidate


_discovery = _Discovery()


def _problem(candidate: Any) -> str | None:
    """Why ``candidate`` cannot serve as a matcher engine, or None if it can."""
    if not (isinstance(candidate, type) and issubclass(candidate, Matcher)):
        return f"{candidate!r} is not a Matcher subclass"
    uri = getattr(candidate, "uri", None)
    if not isinstance(uri, str) or not uri:
        return f"{candidate.__qualname__} has no string 'uri' attribute"
    if inspect.isabstract(candidate):
        return f"{candidate.__qualname__} is abstract"
    return None


def known_matchers() -> dict[str, type[Matcher]]:
    """Every available engine by URI (a fresh dict; plugin discovery is cached)."""
    return {**_discovery.all(), **_registered}


def refresh() -> None:
    """Forget cached plugin discovery, e.g. after installing a plugin in a running process."""
    global _discovery
    _discovery = _Discovery()


known_matchers.cache_clear = refresh  # type: ignore[attr-defined]


def register_matcher(cls: type[Matcher]) -> type[Matcher]:
    """Make ``cls`` available under ``cls.uri`` without an entry point.

    Programmatic registrations take precedence over discovered plugins.  Returns ``cls`` so it
    can be used as a class decorator.
    """
    problem = _problem(cls)
    if problem is not None:
        raise TypeError(f"cannot register matcher: {problem}")
    _registered[cls.uri] = cls
    return cls


def unregister_matcher(cls_or_uri: type[Matcher] | str) -> None:
    """Undo :func:`register_matcher` (a no-op for a URI that was not registered)."""
    uri = cls_or_uri if isinstance(cls_or_uri, str) else cls_or_uri.uri
    _registered.pop(uri, None)


def create_matcher(uri: str | None, config: Any = None) -> Matcher:
    """A new engine for ``uri`` (None or '' means the XPath default), given ``config``."""
    key = uri or DEFAULT_MATCHER_URI
    cls = _registered.get(key) or _discovery.find(key)
    if cls is None:
        raise UnknownMatcher(uri, known_matchers())
    return cls(config)
