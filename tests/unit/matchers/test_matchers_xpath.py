"""The default XPath 1.0 matcher."""

import pytest
from lxml import etree

from matchers import (
    XPATH10_DIALECTS,
    FilterSpec,
    InvalidFilter,
    UnknownFilter,
    UnsupportedDialect,
    XPathFilterMatcher,
)

WSE_2011 = "http://www.w3.org/2011/03/ws-evt"
WSE_2004 = "http://schemas.xmlsoap.org/ws/2004/08/eventing"
XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"
XPATH_2004 = "http://www.w3.org/TR/1999/REC-xpath-19991116"


def xpath(expression, **namespaces):
    return FilterSpec(XPATH10, expression, tuple(sorted(namespaces.items())))


def wse_filter(expression, dialect=XPATH10, extra_ns=""):
    element = etree.fromstring(
        f'<wse:Filter xmlns:wse="{WSE_2011}" xmlns:q="urn:quotes" {extra_ns} '
        f'Dialect="{dialect}">{expression}</wse:Filter>'
    )
    return FilterSpec.from_element(element, default_dialect=XPATH10)


def quote(price, symbol="ACME"):
    return etree.fromstring(
        f'<q:quote xmlns:q="urn:quotes" symbol="{symbol}">'
        f"<q:symbol>{symbol}</q:symbol><q:price>{price}</q:price></q:quote>"
    )


@pytest.fixture
def matcher():
    return XPathFilterMatcher()


def test_dialects_cover_both_ws_eventing_versions():
    assert XPATH10_DIALECTS == {XPATH10, XPATH_2004}


def test_matches_on_element_and_attribute_values(matcher):
    matcher.add_filter("plain", FilterSpec(XPATH10, "/plain[value > 3]"))
    matcher.add_filter("attr", FilterSpec(XPATH10, "@kind = 'x'"))
    assert matcher.match(etree.fromstring('<plain kind="x"><value>4</value></plain>')) == [
        "plain",
        "attr",
    ]
    assert matcher.match(etree.fromstring('<plain kind="y"><value>2</value></plain>')) == []


def test_filter_from_element_uses_its_in_scope_namespaces(matcher):
    matcher.add_filter("expensive", wse_filter("/q:quote[q:price &gt; 30]"))
    assert matcher.match(quote(42)) == ["expensive"]
    assert matcher.match(quote(12)) == []


def test_from_element_reads_dialect_expression_and_inherited_prefixes_it_uses():
    outer = etree.fromstring(
        f'<s:Body xmlns:s="urn:soap" xmlns="urn:default" xmlns:r="urn:r"><wse:Filter '
        f'xmlns:wse="{WSE_2004}" xmlns:q="urn:quotes">  q:price and r:x  </wse:Filter></s:Body>'
    )
    element = outer[0]
    spec = FilterSpec.from_element(element, default_dialect=XPATH_2004)
    assert spec.dialect == XPATH_2004
    assert spec.expression == "q:price and r:x"
    # inherited prefixes are read; the envelope's own, unused, are not kept
    assert spec.namespaces == (("q", "urn:quotes"), ("r", "urn:r"))
    assert spec.namespace_map["q"] == "urn:quotes"
    assert spec.content is element
    assert hash(spec) == hash(FilterSpec(XPATH_2004, "q:price and r:x", spec.namespaces))
    assert spec == FilterSpec(XPATH_2004, "q:price and r:x", spec.namespaces)


def test_a_thousand_declared_namespaces_are_not_stored_with_the_filter():
    declarations = " ".join(f'xmlns:n{i}="urn:n{i}"' for i in range(1000))
    element = etree.fromstring(f'<wse:Filter xmlns:wse="{WSE_2004}" xmlns:q="urn:quotes" '
                               f'{declarations}>q:price &gt; n7:x</wse:Filter>')
    spec = FilterSpec.from_element(element, default_dialect=XPATH_2004)
    assert spec.namespaces == (("n7", "urn:n7"), ("q", "urn:quotes"))


def test_from_element_empty_text_is_empty_expression():
    element = etree.fromstring(f'<wse:Filter xmlns:wse="{WSE_2011}" Dialect="urn:d"/>')
    spec = FilterSpec.from_element(element, default_dialect=XPATH10)
    assert (spec.dialect, spec.expression) == ("urn:d", "")


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("true()", True),
        ("false()", False),
        ("q:price > 30", True),
        ("count(q:price)", True),
        ("count(q:nothing)", False),
        ("number(q:price) - 42", False),
        ("0 div 0", False),  # NaN is false in XPath
        ("string(q:symbol)", True),
        ("string(q:nothing)", False),
        ("q:nothing", False),
        ("@symbol", True),
    ],
)
def test_result_truthiness_follows_xpath_boolean(matcher, expression, expected):
    matcher.add_filter("f", xpath(expression, q="urn:quotes"))
    assert (matcher.match(quote(42)) == ["f"]) is expected


def test_variables_are_bound_as_xpath_variables(matcher):
    matcher.add_filter("x", FilterSpec(XPATH10, "$action = 'x'"))
    matcher.add_filter("always", FilterSpec(XPATH10, "true()"))
    event = etree.fromstring("<e/>")
    assert matcher.match(event, variables={"action": "x"}) == ["x", "always"]
    assert matcher.match(event, variables={"action": "y"}) == ["always"]
    # an unbound variable is an evaluation error: that filter does not match, others do
    assert matcher.match(event) == ["always"]


@pytest.mark.parametrize("expression", ["/q:quote[", "q:price >", "unknown-function()"])
def test_bad_expression_is_invalid_filter(matcher, expression):
    with pytest.raises(InvalidFilter) as info:
        matcher.add_filter("bad", xpath(expression, q="urn:quotes"))
    assert info.value.reason
    assert "bad" not in matcher


def test_undefined_prefix_is_invalid_filter(matcher):
    with pytest.raises(InvalidFilter, match="namespace prefix"):
        matcher.add_filter("bad", xpath("/z:quote"))


@pytest.mark.parametrize("expression", ["", "   "])
def test_empty_expression_is_invalid_filter(matcher, expression):
    with pytest.raises(InvalidFilter) as info:
        matcher.add_filter("empty", xpath(expression))
    assert info.value.reason == "empty filter"


def test_unsupported_dialect_lists_supported_ones(matcher):
    with pytest.raises(UnsupportedDialect) as info:
        matcher.add_filter("f", FilterSpec("urn:other", "true()"))
    assert info.value.dialect == "urn:other"
    assert info.value.supported == tuple(sorted(XPathFilterMatcher.dialects))
    assert len(matcher) == 0


def test_remove_unknown_filter(matcher):
    with pytest.raises(UnknownFilter) as info:
        matcher.remove_filter("nope")
    assert isinstance(info.value, KeyError)
    assert "nope" in str(info.value)


def test_add_existing_id_replaces_filter(matcher):
    matcher.add_filter("a", xpath("q:price > 100", q="urn:quotes"))
    matcher.add_filter("b", xpath("true()"))
    matcher.add_filter("a", xpath("q:price > 10", q="urn:quotes"))
    assert matcher.filter_ids() == ["a", "b"]
    assert matcher.match(quote(42)) == ["a", "b"]
    assert len(matcher) == 2


def test_failed_replacement_keeps_old_filter(matcher):
    matcher.add_filter("a", xpath("true()"))
    with pytest.raises(InvalidFilter):
        matcher.add_filter("a", xpath("/["))
    assert matcher.match(quote(1)) == ["a"]


def test_match_returns_ids_in_insertion_order(matcher):
    ids = ["m", "c", "x", "a"]
    for filter_id in ids:
        matcher.add_filter(filter_id, xpath("true()"))
    matcher.add_filter("never", xpath("false()"))
    assert matcher.match(quote(1)) == ids
    matcher.remove_filter("c")
    assert matcher.match(quote(1)) == ["m", "x", "a"]
    assert matcher.filter_ids() == ["m", "x", "a", "never"]


def test_describe_len_contains(matcher):
    matcher.add_filter("a", xpath("true()"))
    assert "a" in matcher and "b" not in matcher
    assert matcher.describe() == {"uri": XPathFilterMatcher.uri, "filters": 1}


def test_context_node_is_the_event_element(matcher):
    envelope = etree.fromstring("<env><body><e n='1'/></body></env>")
    matcher.add_filter("relative", xpath("@n = 1"))
    matcher.add_filter("self", xpath("self::e"))
    assert matcher.match(envelope[0][0]) == ["relative", "self"]


def test_config_is_kept():
    config = etree.fromstring("<config/>")
    assert XPathFilterMatcher(config).config is config


def test_the_default_matcher_loads_no_engine_library_until_xpath20():
    """The messaging layer gets this matcher through the registry: importing it, and
    compiling XPath 1.0 and action filters, loads neither numpy, rtree nor elementpath."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from matchers import FilterSpec, XPathFilterMatcher, ACTION_DIALECTS, XPATH20_DIALECTS\n"
        "from wsframework import ns\n"
        "m = XPathFilterMatcher()\n"
        "m.add_filter('a', FilterSpec(ns.XPATH10_DIALECT_2011, '/a'))\n"
        "m.add_filter('b', FilterSpec(ns.ACTION_DIALECT_DPWS11, 'urn:x/a'))\n"
        "before = sorted({'numpy', 'rtree', 'elementpath'} & set(sys.modules))\n"
        "m.add_filter('c', FilterSpec(ns.XPATH20_DIALECT_2011, '1 = 1'))\n"
        "print(before, 'elementpath' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] True"
