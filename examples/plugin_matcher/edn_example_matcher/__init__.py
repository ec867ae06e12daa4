"""An example matcher plugin: a filter is a list of keywords that must all occur in the event.

    from matchers import FilterSpec, create_matcher
    from edn_example_matcher import KEYWORDS_DIALECT, KEYWORD_MATCHER_URI

    matcher = create_matcher(KEYWORD_MATCHER_URI)
    matcher.add_filter("s1", FilterSpec(KEYWORDS_DIALECT, "acme dividend"))
"""

from .keywords import KEYWORD_MATCHER_URI, KEYWORDS_DIALECT, KeywordMatcher

__all__ = ["KeywordMatcher", "KEYWORD_MATCHER_URI", "KEYWORDS_DIALECT"]
