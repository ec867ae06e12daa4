"""Matchers: pluggable filtering engines, one interface, each named by a URI.

A topic or route names its engine when it is created; the engine stores filters and answers
"which filters does this event match"::

    from lxml import etree
    from matchers import FilterSpec, create_matcher
    from wsframework import ns

    matcher = create_matcher(None)  # the XPath 1.0 default; or a URI from known_matchers()
    wse_filter = etree.fromstring(
        '<wse:Filter xmlns:wse="http://www.w3.org/2011/03/ws-evt" xmlns:q="urn:quotes">'
        "/q:quote[q:price &gt; 30]</wse:Filter>"
    )
    spec = FilterSpec.from_element(wse_filter, default_dialect=ns.XPATH10_DIALECT_2011)
    matcher.add_filter("sub-1", spec)  # UnsupportedDialect / InvalidFilter on bad input
    event = etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>')
    matcher.match(event)  # -> ["sub-1"]
    matcher.remove_filter("sub-1")  # UnknownFilter if absent

Content-based routing (the EDN) adds box engines over a topic's event schema
(:class:`Schema`, given as an ``edn:Schema`` in the topic's Options): the range dialect
(:data:`RANGES_DIALECT`, ``price >= 30 and symbol = 'GE'``) and XPath 1.0 filters go into
:class:`RTreeMatchingEngine`, whose ``summary(precision)`` (a :class:`Summary`) is what a
server sends the dispatcher, where :class:`RTreeRouteSet` routes events by it;
:class:`BruteForceMatcher` is their numpy baseline and test oracle.

The interface, the errors and the registry belong to the framework
(:mod:`wsframework.matching`) and are re-exported here for plugin authors. Engines come
from the ``wsframework.matchers`` entry-point group (see ``examples/plugin_matcher`` for a
complete plugin) or from :func:`register_matcher`. Names are imported on first use, so
``import matchers`` alone pulls in neither numpy nor rtree nor elementpath.
All errors derive from :class:`MatcherError`; the messaging edge turns them into SOAP faults.
"""

import importlib

from wsframework.matching import (
    DEFAULT_MATCHER_URI,
    ENTRY_POINT_GROUP,
    FilterSpec,
    InvalidFilter,
    Matcher,
    MatcherError,
    UnknownFilter,
    UnknownMatcher,
    UnsupportedDialect,
    create_matcher,
    known_matchers,
    refresh,
    register_matcher,
    unregister_matcher,
)

# name -> submodule that defines it; imported on first attribute access (PEP 562)
_LAZY = {
    "XPathFilterMatcher": "xpath", "XPATH_MATCHER_URI": "xpath", "XPATH10_DIALECTS": "xpath",
    "XPATH20_DIALECTS": "xpath2", "ACTION_DIALECTS": "xpath2",
    "BruteForceMatcher": "bruteforce", "BRUTE_FORCE_MATCHER_URI": "bruteforce",
    "RANGES_DIALECT": "ranges", "RangeFilter": "ranges", "parse_range_filter": "ranges",
    "RTreeRouteSet": "route_set", "RTreeMatchingEngine": "rtree_engine",
    "Attribute": "schema", "InvalidSchema": "schema", "Schema": "schema",
    "SUMMARY_DIALECT": "summary", "Summary": "summary",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'matchers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "Matcher",
    "FilterSpec",
    "create_matcher",
    "known_matchers",
    "refresh",
    "register_matcher",
    "unregister_matcher",
    "DEFAULT_MATCHER_URI",
    "ENTRY_POINT_GROUP",
    "XPathFilterMatcher",
    "XPATH_MATCHER_URI",
    "XPATH10_DIALECTS",
    "RTreeMatchingEngine",
    "RTreeRouteSet",
    "BruteForceMatcher",
    "BRUTE_FORCE_MATCHER_URI",
    "Schema",
    "Attribute",
    "InvalidSchema",
    "Summary",
    "SUMMARY_DIALECT",
    "RANGES_DIALECT",
    "RangeFilter",
    "parse_range_filter",
    "XPATH20_DIALECTS",
    "ACTION_DIALECTS",
    "MatcherError",
    "InvalidFilter",
    "UnsupportedDialect",
    "UnknownFilter",
    "UnknownMatcher",
]
