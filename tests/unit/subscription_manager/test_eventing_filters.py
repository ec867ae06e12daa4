"""The default matcher's WS-Eventing dialects beyond XPath 1.0: XPath 2.0 (elementpath,
compiled once) and action lists (DPWS)."""
from __future__ import annotations

import pytest
from lxml import etree

from matchers import (ACTION_DIALECTS, XPATH10_DIALECTS, XPATH20_DIALECTS, FilterSpec,
                      InvalidFilter, XPathFilterMatcher)
from wsframework import ns

XPATH20 = ns.XPATH20_DIALECT_2011
ACTION = ns.ACTION_DIALECT_DPWS11
QUOTE = etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>')


def test_dialects():
    assert XPathFilterMatcher.dialects == XPATH10_DIALECTS | XPATH20_DIALECTS | ACTION_DIALECTS
    assert XPATH20 in XPATH20_DIALECTS and ACTION in ACTION_DIALECTS


@pytest.mark.parametrize("expression,expected", [
    ("/q:quote/q:price > 30", True),
    ("xs:integer(/q:quote/q:price) gt 50", False),
    ("every $p in //q:price satisfies $p > 10", True),
    ("if (//q:price > 40) then true() else false()", True),
    ("matches(string(//q:price), '^4')", True),
    ("$action = 'urn:a'", True),
])
def test_xpath20_filters(expression, expected):
    matcher = XPathFilterMatcher()
    matcher.add_filter("f", FilterSpec(XPATH20, expression, (("q", "urn:quotes"),
                                                             ("xs", "http://www.w3.org/2001/XMLSchema"))))
    assert (matcher.match(QUOTE, variables={"action": "urn:a"}) == ["f"]) is expected


@pytest.mark.parametrize("expression", ["/z:quote", "/q:quote[", "", "   ", "unknown-fn(1)"])
def test_xpath20_compile_errors_are_invalid_filters(expression):
    with pytest.raises(InvalidFilter):
        XPathFilterMatcher().add_filter("f", FilterSpec(XPATH20, expression, (("q", "urn:quotes"),)))


def test_xpath20_is_compiled_once(monkeypatch):
    import elementpath
    parses = []
    original = elementpath.XPath2Parser.parse

    def counting(self, source):
        parses.append(source)
        return original(self, source)

    monkeypatch.setattr(elementpath.XPath2Parser, "parse", counting)
    matcher = XPathFilterMatcher()
    matcher.add_filter("f", FilterSpec(XPATH20, "/q:quote", (("q", "urn:quotes"),)))
    for _ in range(5):
        assert matcher.match(QUOTE) == ["f"]
    assert len(parses) == 1


def test_xpath20_evaluation_error_does_not_match():
    matcher = XPathFilterMatcher()
    matcher.add_filter("bad", FilterSpec(XPATH20, "xs:integer(name(/*)) = 1",
                                         (("xs", "http://www.w3.org/2001/XMLSchema"),)))
    matcher.add_filter("unbound", FilterSpec(XPATH20, "$nope = 1"))
    matcher.add_filter("good", FilterSpec(XPATH20, "true()"))
    assert matcher.match(QUOTE) == ["good"]


@pytest.mark.parametrize("action,expected", [
    ("urn:example:quotes", True),
    ("urn:example:quotes/changed", True),
    ("urn:example:quotesx", False),
    ("http://example.org/events/Alarm", True),
    ("http://example.org/events", False),
    ("", False),
    (None, False),
])
def test_action_filters_match_whole_segments(action, expected):
    matcher = XPathFilterMatcher()
    matcher.add_filter("f", FilterSpec(ACTION, " urn:example:quotes\n http://example.org/events/Alarm "))
    variables = {"action": action} if action is not None else None
    assert (matcher.match(QUOTE, variables=variables) == ["f"]) is expected


@pytest.mark.parametrize("expression", ["", "not-a-uri", "urn:ok <bad>"])
def test_bad_action_filters(expression):
    with pytest.raises(InvalidFilter):
        XPathFilterMatcher().add_filter("f", FilterSpec(ACTION, expression))


def test_dialects_mix_in_one_matcher_in_insertion_order():
    matcher = XPathFilterMatcher()
    matcher.add_filter("a", FilterSpec(ACTION, "urn:x"))
    matcher.add_filter("b", FilterSpec(ns.XPATH10_DIALECT_2011, "//q:price > 1", (("q", "urn:quotes"),)))
    matcher.add_filter("c", FilterSpec(XPATH20, "true()"))
    assert matcher.match(QUOTE, variables={"action": "urn:x"}) == ["a", "b", "c"]
    matcher.remove_filter("b")
    assert matcher.match(QUOTE) == ["c"]
