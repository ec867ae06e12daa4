"""Matchers: pluggable filtering engines, one interface, each named by a URI.

A topic or route names its engine when it is created; the engine stores filters and answers
"which filters does this event match"::

    from lxml import etree
    from matchers import FilterSpec, create_matcher

    matcher = create_matcher(None)  # the XPath 1.0 default; or a URI from known_matchers()
    wse_filter = etree.fromstring(
        '<wse:Filter xmlns:wse="http://www.w3.org/2011/03/ws-evt" xmlns:q="urn:quotes">'
        "/q:quote[q:price &gt; 30]</wse:Filter>"
    )
    spec = FilterSpec.from_element(
        wse_filter, default_dialect="http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"
    )
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

Engines come from the ``wsframework.matchers`` entry-point group (see
``examples/plugin_matcher`` for a complete plugin) or from :func:`register_matcher`.
All errors derive from :class:`MatcherError`; the messaging edge turns them into SOAP faults.
"""

from .base import FilterSpec, Matcher
from .errors import (
    InvalidFilter,
    MatcherError,
    UnknownFilter,
    UnknownMatcher,
    UnsupportedDialect,
)
from .registry import (
    DEFAULT_MATCHER_URI,
    ENTRY_POINT_GROUP,
    create_matcher,
    known_matchers,
    refresh,
    register_matcher,
    unregister_matcher,
)
from .xpath import (
    ACTION_DIALECTS,
    XPATH10_DIALECTS,
    XPATH20_DIALECTS,
    XPATH_MATCHER_URI,
    XPathFilterMatcher,
)
from .bruteforce import BRUTE_FORCE_MATCHER_URI, BruteForceMatcher
from .ranges import RANGES_DIALECT, RangeFilter, parse_range_filter
from .route_set import RTreeRouteSet
from .rtree_engine import RTreeMatchingEngine
from .schema import EDN_NS, Attribute, InvalidSchema, Schema
from .summary import SUMMARY_DIALECT, Summary

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
    "EDN_NS",
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
