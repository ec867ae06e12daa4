"""The example keyword matcher plugin, and its discovery through the entry point."""

import pytest
from lxml import etree

from edn_example_matcher import KEYWORD_MATCHER_URI, KEYWORDS_DIALECT, KeywordMatcher
from matchers import (
    FilterSpec,
    InvalidFilter,
    UnknownFilter,
    UnsupportedDialect,
    create_matcher,
    known_matchers,
)
from matchers.conformance import MATCHER_CHECKS
from wsframework.matching.registry import refresh


@pytest.mark.parametrize("check", MATCHER_CHECKS, ids=lambda check: check.__name__)
def test_keeps_the_matcher_contract(check):
    """The framework's conformance checks, run on the plugin as on every shipped engine;
    they use the cases of KeywordMatcher.example_filters()."""
    check(KeywordMatcher)


def keywords(text):
    return FilterSpec(KEYWORDS_DIALECT, text)


NEWS = etree.fromstring(
    "<news>\n  <title>ACME raises dividend</title>\n"
    "  <body>Shares of Acme-Corp rose.</body>\n</news>"
)


@pytest.fixture
def matcher():
    return KeywordMatcher()


def test_every_word_must_occur_case_insensitively(matcher):
    matcher.add_filter("both", keywords("acme DIVIDEND"))
    matcher.add_filter("missing", keywords("acme loss"))
    matcher.add_filter("across-elements", keywords("dividend shares"))
    assert matcher.match(NEWS) == ["both", "across-elements"]


def test_whole_words_only(matcher):
    matcher.add_filter("part", keywords("divid"))
    matcher.add_filter("hyphen-split", keywords("corp"))
    assert matcher.match(NEWS) == ["hyphen-split"]


def test_text_is_the_xpath_string_value(matcher):
    matcher.add_filter("glued", keywords("acmedividend"))
    assert matcher.match(etree.fromstring("<n><a>acme</a><b>dividend</b></n>")) == ["glued"]


def test_empty_or_non_word_filters_are_invalid(matcher):
    for text in ("", "   "):
        with pytest.raises(InvalidFilter, match="empty filter"):
            matcher.add_filter("x", keywords(text))
    with pytest.raises(InvalidFilter):
        matcher.add_filter("x", keywords("acme-corp"))
    assert len(matcher) == 0


def test_dialect_is_checked(matcher):
    with pytest.raises(UnsupportedDialect) as info:
        matcher.add_filter("x", FilterSpec("http://www.w3.org/TR/1999/REC-xpath-19991116", "a"))
    assert info.value.supported == (KEYWORDS_DIALECT,)


def test_remove_and_replace(matcher):
    matcher.add_filter("a", keywords("acme"))
    matcher.add_filter("a", keywords("nothing"))
    assert matcher.filter_ids() == ["a"] and matcher.match(NEWS) == []
    matcher.remove_filter("a")
    assert "a" not in matcher
    with pytest.raises(UnknownFilter):
        matcher.remove_filter("a")


def test_installed_plugin_is_discovered_by_uri():
    refresh()
    assert known_matchers()[KEYWORD_MATCHER_URI] is KeywordMatcher
    matcher = create_matcher(KEYWORD_MATCHER_URI)
    matcher.add_filter("s", keywords("dividend"))
    assert matcher.match(NEWS) == ["s"]
