"""The matcher contract the framework dispatches through: the :class:`Matcher` interface,
:class:`FilterSpec`, the errors, and the registry that finds engines by URI.

The engines themselves live above the framework (the ``matchers`` package and plugins) and
are found through the ``wsframework.matchers`` entry-point group, loaded only when a topic,
route or message filter names them.
"""
from .base import FilterFailures, FilterSpec, Matcher
from .errors import (InvalidFilter, InvalidMatcherOptions, MatcherError, UnknownFilter, UnknownMatcher,
                     UnsupportedDialect)
from .registry import (DEFAULT_MATCHER_URI, ENTRY_POINT_GROUP, create_matcher, known_matchers,
                       refresh, register_matcher, unregister_matcher)

__all__ = [
    "FilterFailures", "FilterSpec", "Matcher", "InvalidFilter", "InvalidMatcherOptions", "MatcherError", "UnknownFilter", "UnknownMatcher",
    "UnsupportedDialect", "DEFAULT_MATCHER_URI", "ENTRY_POINT_GROUP", "create_matcher",
    "known_matchers", "refresh", "register_matcher", "unregister_matcher",
]
