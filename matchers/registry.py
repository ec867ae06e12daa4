"""Finding matcher engines by URI: built-ins, installed plugins, programmatic registrations.

Plugins are classes named in the ``wsframework.matchers`` entry-point group.  The entry
point's name is only a short label; the key a topic or route uses is the class's ``uri``.
"""

from __future__ import annotations

import functools
import importlib.metadata as _metadata
import inspect
import logging
from typing import Any

from .base import Matcher
from .errors import UnknownMatcher
from .xpath import XPATH_MATCHER_URI, XPathFilterMatcher

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
DEFAULT_MATCHER_URI = XPATH_MATCHER_URI


def _builtins() -> tuple[type[Matcher], ...]:
    """The engines this distribution ships: always available, even when the distribution
    metadata (and so the entry points) is missing. Imported lazily: the R-tree engines pull
    in numpy and libspatialindex."""
    from .bruteforce import BruteForceMatcher
    from .route_set import RTreeRouteSet
    from .rtree_engine import RTreeMatchingEngine
    return (XPathFilterMatcher, RTreeMatchingEngine, RTreeRouteSet, BruteForceMatcher)

_registered: dict[str, type[Matcher]] = {}


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


@functools.lru_cache(maxsize=None)
def _discovered() -> dict[str, type[Matcher]]:
    found: dict[str, type[Matcher]] = {cls.uri: cls for cls in _builtins()}
    try:
        entry_points = list(_metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # broken metadata must not take the registry down
        log.warning("cannot list entry points of %s", ENTRY_POINT_GROUP, exc_info=True)
        entry_points = []
    for entry_point in entry_points:
        try:
            candidate = entry_point.load()
        except Exception as exc:
            log.warning(
                "skipping matcher plugin %r (%s): import failed: %s",
                entry_point.name, entry_point.value, exc,
            )
            continue
        problem = _problem(candidate)
        if problem is not None:
            log.warning(
                "skipping matcher plugin %r (%s): %s", entry_point.name, entry_point.value, problem
            )
            continue
        existing = found.get(candidate.uri)
        if existing is not None and existing is not candidate:
            log.warning(
                "skipping matcher plugin %r (%s): uri %r already provided by %s.%s",
                entry_point.name, entry_point.value, candidate.uri,
                existing.__module__, existing.__qualname__,
            )
            continue
        found[candidate.uri] = candidate
    return found


def known_matchers() -> dict[str, type[Matcher]]:
    """Every available engine by URI (a fresh dict; plugin discovery is cached)."""
    return {**_discovered(), **_registered}


def refresh() -> None:
    """Forget cached plugin discovery, e.g. after installing a plugin in a running process."""
    _discovered.cache_clear()


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
    engines = known_matchers()
    cls = engines.get(uri or DEFAULT_MATCHER_URI)
    if cls is None:
        raise UnknownMatcher(uri, engines)
    return cls(config)
