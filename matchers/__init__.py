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
    "XPATH20_DIALECTS",
    "ACTION_DIALECTS",
    "MatcherError",
    "InvalidFilter",
    "UnsupportedDialect",
    "UnknownFilter",
    "UnknownMatcher",
]
