"""Range extraction from XPath 1.0: what is understood, and what widens to "anything"."""

import pytest
from lxml import etree

from matchers import FilterSpec, InvalidFilter, RTreeMatchingEngine, Schema, XPathFilterMatcher
from matchers.schema import Attribute
from matchers.schema.intervals import Interval
from matchers.xpath_ranges import MAX_BOXES, compile_xpath_filter, extract_constraints, path_key

NS = {"q": "urn:quotes"}
Q = tuple(NS.items())
XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"
SCHEMA = Schema((
    Attribute("price", "number", "/q:quote/q:price", Q, 0, 1000),
    Attribute("symbol", "string", "/q:quote/q:symbol", Q),
    Attribute("volume", "number", "/q:quote/@volume", Q, 0, 1e9),
    Attribute("rel", "number", "q:rel", Q, 0, 10),
))
ANYTHING = [{}]


def extract(expression: str, namespaces=NS):
    return extract_constraints(expression, namespaces, SCHEMA)


def near(low=None, high=None):
    """The widened interval extraction produces for numeric bounds."""
    slack = lambda v: abs(v) * 1e-12
    return Interval(None if low is None else low - slack(low), False,
                    None if high is None else high + slack(high), False)


def test_predicates_on_an_absolute_path():
    assert extract("/q:quote[q:price > 30 and q:symbol = 'GE']") == [
        {0: near(30.0), 1: Interval("GE", False, "GE", False)}]


def test_comparisons_either_side_and_negative_numbers():
    assert extract("/q:quote[30 < q:price]") == [{0: near(30.0)}]
    assert extract("/q:quote[q:price <= -5]") == [{0: near(None, -5.0)}]
    assert extract("/q:quote[q:price = (-5)]") == [{0: near(-5.0, -5.0)}]


def test_top_level_paths_and_or():
    assert extract("/q:quote/q:price > 30 or /q:quote[@volume <= 5]") == [
        {0: near(30.0)}, {2: near(None, 5.0)}]
    assert extract("/q:quote[q:price > 3] | /q:quote[q:symbol = 'A']") == [
        {0: near(3.0)}, {1: Interval("A", False, "A", False)}]


def test_relative_filter_paths_match_relative_schema_paths_only():
    assert extract("q:rel >= 2") == [{3: near(2.0)}]
    # relative: from a root other than q:quote the schema's absolute price reads nothing
    assert extract("q:price > 3") == ANYTHING


def test_absolute_filter_paths_also_name_relative_schema_paths():
    # true only when the event (its document's root) is the named element, and then
    # /X/q:rel and q:rel select the same nodes: whatever X is
    assert extract("/q:quote[q:rel > 3]") == [{3: near(3.0)}]
    assert extract("/q:other/q:rel <= 4") == [{3: near(None, 4.0)}]
    assert extract("/q:quote[q:price > 1 and q:rel > 3]") == [{0: near(1.0), 3: near(3.0)}]
    assert extract("/q:rel > 3") == ANYTHING  # the root itself is no child of the root
    assert extract("//q:rel > 3") == ANYTHING


@pytest.mark.parametrize("filter_text, inside, expected", [
    ("/q:quote[q:rel > 3]", "<q:rel>5</q:rel>", True),
    ("/q:quote[q:rel > 3]", "<q:rel>2</q:rel>", False),
    ("/q:other[q:rel > 3]", "<q:rel>5</q:rel>", False),
])
def test_engines_match_an_event_inside_a_larger_document_as_its_own_document(
        filter_text, inside, expected):
    """Boxes from /R/s... assume the event is the root: an event handed over inside an
    envelope is matched as a document of its own, by the box and by the exact check."""
    from matchers import BruteForceMatcher

    envelope = etree.fromstring(f'<env xmlns:q="urn:quotes"><body><q:quote>{inside}</q:quote>'
                                f'</body></env>')
    event = envelope.find(".//{urn:quotes}quote")
    spec = FilterSpec(XPATH10, filter_text, Q)
    for engine in (RTreeMatchingEngine(SCHEMA), BruteForceMatcher(SCHEMA)):
        engine.add_filter("f", spec)
        assert engine.match(event) == (["f"] if expected else [])
    assert event.getparent() is not None  # the caller's document is left as it was


def test_axes_dot_and_nested_steps():
    assert extract("/child::q:quote[child::q:price > 1]") == [{0: near(1.0)}]
    assert extract("/q:quote/q:price[. > 7]") == [{0: near(7.0)}]
    assert extract("/q:quote[attribute::volume = 3]") == [{2: near(3.0, 3.0)}]


def test_and_on_one_dimension_keeps_intersection_or_gap():
    assert extract("/q:quote[q:price > 10 and q:price < 20]") == [{0: Interval(
        near(10.0).lo, False, near(None, 20.0).hi, False)}]
    # Disjoint: two q:price elements can satisfy both; every hull holding both meets the gap.
    (term,) = extract("/q:quote[q:price > 50 and q:price < 40]")
    assert term[0].lo == pytest.approx(40.0) and term[0].hi == pytest.approx(50.0)
    event = etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>60</q:price>'
                             '<q:price>30</q:price></q:quote>')
    assert etree.XPath("/q:quote[q:price > 50 and q:price < 40]", namespaces=NS)(event)


@pytest.mark.parametrize("expression", [
    "not(/q:quote/q:price > 3)",
    "/q:quote[q:price != 3]",
    "/q:quote[q:price * 2 > 3]",
    "/q:quote[q:symbol > 'A']",          # relational on strings compares numbers in XPath 1.0
    "/q:quote[q:symbol = 5]",            # string node vs number: number(string-value)
    "/q:quote[q:symbol = '']",           # blank literal: eCube elements have blank text
    "/q:quote[q:symbol = ' ']",
    "/q:quote[q:price = 'abc']",
    "//q:price > 3",
    "/q:quote[q:price = true()]",        # an empty node-set compares equal to false()
    "/q:quote[q:*[1] > 3]",
    "/q:quote[q:price/text() > 3]",
    "/q:quote[q:price = q:volume]",
    "/q:quote[contains(q:symbol, 'G')]",
    "/q:quote[1]",
])
def test_what_is_not_understood_constrains_nothing(expression):
    assert extract(expression) == ANYTHING


def test_false_never_matches_and_true_is_anything():
    assert extract("/q:quote[false()]") == []
    assert extract("/q:quote[true()]") == ANYTHING
    assert extract("/q:quote[q:price > 5 or false()]") == [{0: near(5.0)}]


def test_too_many_alternatives_collapse_to_their_hull_and_stay_safe():
    expression = "/q:quote[" + " and ".join(f"(q:price = {i} or q:price = {i + 100})"
                                              for i in range(5)) + "]"
    terms = extract(expression)
    assert 2 ** 5 > MAX_BOXES and 1 <= len(terms) <= MAX_BOXES
    compiled = compile_xpath_filter(FilterSpec(XPATH10, expression, Q), SCHEMA)
    for values in ([0, 1, 2, 3, 4], [100, 101, 102, 103, 104], [0, 101, 2, 103, 4]):
        body = "".join(f"<q:price>{v}</q:price>" for v in values)
        event = etree.fromstring(f'<q:quote xmlns:q="urn:quotes">{body}</q:quote>')
        box = SCHEMA.extract(event)
        assert compiled.check(event, box, None)
        assert any((lo <= box.hi).all() and (hi >= box.lo).all()
                   for lo, hi in zip(compiled.mins, compiled.maxs))


def test_unparseable_for_elementpath_means_anything():
    assert extract("/q:quote[q:price > 3]", namespaces={}) == ANYTHING  # unknown prefix


def test_path_keys_resolve_prefixes_to_uris():
    assert path_key("/a:x/@y", {"a": "urn:1"}) == ("abs", (("child", "urn:1", "x"), ("attribute", "", "y")))
    assert path_key("/b:x/@y", {"b": "urn:1"}) == path_key("/a:x/@y", {"a": "urn:1"})
    assert path_key("x", {}) == ("rel", (("child", "", "x"),))
    assert path_key("/x[1]", {}) is None and path_key("//x", {}) is None


def test_compiled_filter_keeps_lxml_semantics_and_errors():
    with pytest.raises(InvalidFilter):
        compile_xpath_filter(FilterSpec(XPATH10, "/q:quote[", Q), SCHEMA)
    with pytest.raises(InvalidFilter):
        compile_xpath_filter(FilterSpec(XPATH10, "/z:quote", ()), SCHEMA)
    compiled = compile_xpath_filter(FilterSpec(XPATH10, "count(/q:quote/q:price) - 1", Q), SCHEMA)
    one = etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>1</q:price></q:quote>')
    assert not compiled.check(one, SCHEMA.extract(one), None)  # 0 is false
    compiled = compile_xpath_filter(FilterSpec(XPATH10, "/q:quote[q:price > $limit]", Q), SCHEMA)
    assert compiled.check(one, None, {"limit": 0})
    with pytest.raises(etree.XPathEvalError):  # the engines count it against this filter
        compiled.check(one, None, None)


def test_engine_runs_xpath_filters_with_different_formats_for_filtering_and_routing():
    engine, reference = RTreeMatchingEngine(SCHEMA), XPathFilterMatcher()
    filters = {
        "cheap-ge": "/q:quote[q:price < 10 and q:symbol = 'GE']",
        "big": "/q:quote[@volume >= 1000000]",
        "any-price": "/q:quote[q:price]",
        "not-cheap": "not(/q:quote[q:price < 10])",
    }
    for name, expression in filters.items():
        spec = FilterSpec(XPATH10, expression, Q)
        engine.add_filter(name, spec)
        reference.add_filter(name, spec)
    for body, attributes in [("<q:price>5</q:price><q:symbol>GE</q:symbol>", ""),
                             ("<q:price>50</q:price>", ' volume="2000000"'), ("", "")]:
        event = etree.fromstring(f'<q:quote xmlns:q="urn:quotes"{attributes}>{body}</q:quote>')
        assert engine.match(event) == reference.match(event)
    precise = engine.summary(1.0)
    assert len(precise) >= 1


# -- 2004/08 filters: the context node is the notification's SOAP envelope ------------------

XPATH10_2004 = "http://www.w3.org/TR/1999/REC-xpath-19991116"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"


def extract_2004(expression: str, soap_ns: str = SOAP12):
    return extract_constraints(expression, {**NS, "s": soap_ns}, SCHEMA, envelope=soap_ns)


def test_2004_paths_through_the_body_read_the_event():
    assert extract_2004("/s:Envelope/s:Body/q:quote[q:price > 30]") == [{0: near(30.0)}]
    assert extract_2004("s:Body/q:quote/q:price > 30") == [{0: near(30.0)}]
    assert extract_2004("/s:Envelope/s:Body/q:quote/@volume <= 5") == [{2: near(None, 5.0)}]
    # a relative schema attribute, read under any event element
    assert extract_2004("/s:Envelope/s:Body/q:other/q:rel >= 2") == [{3: near(2.0)}]


def test_2004_paths_not_through_the_body_read_nothing():
    # as 2011 filters these would constrain; on the envelope they select other nodes
    assert extract_2004("/q:quote[q:price > 30]") == ANYTHING
    assert extract_2004("q:rel >= 2") == ANYTHING
    assert extract_2004("/s:Envelope/s:Header/q:quote/q:price > 30") == ANYTHING
    # the body of the other SOAP version is another element
    assert extract_2004("/s:Envelope/s:Body/q:quote[q:price > 30]", SOAP11) == [{0: near(30.0)}]
    assert extract_constraints("/s:Envelope/s:Body/q:quote[q:price > 30]",
                               {**NS, "s": SOAP11}, SCHEMA, envelope=SOAP12) == ANYTHING


@pytest.mark.parametrize("expression, soap_ns, matches", [
    ("/s:Envelope/s:Body/q:quote[q:price > 30]", SOAP12, {"hi"}),
    ("s:Body/q:quote[q:price > 30 and q:symbol = 'GE']", SOAP12, {"hi"}),
    ("/s:Envelope/s:Body/q:quote[q:price > 30]", SOAP11, {"hi"}),
    ("//q:price < 20", SOAP12, {"lo"}),
    ("/q:quote[q:price > 30]", SOAP12, set()),  # the envelope is the root: never matches
    ("/s:Envelope/s:Header/wsa:Action = 'urn:act'", SOAP12, {"hi", "lo"}),
])
def test_2004_filters_match_on_the_envelope_in_the_box_engine_as_in_lxml(expression, soap_ns,
                                                                         matches):
    namespaces = (*Q, ("s", soap_ns), ("wsa", "http://schemas.xmlsoap.org/ws/2004/08/addressing"))
    spec = FilterSpec(XPATH10_2004, expression, namespaces)
    events = {
        "hi": etree.fromstring('<q:quote xmlns:q="urn:quotes" volume="3"><q:price>42</q:price>'
                               '<q:symbol>GE</q:symbol></q:quote>'),
        "lo": etree.fromstring('<q:quote xmlns:q="urn:quotes"><q:price>10</q:price></q:quote>'),
    }
    engine, lxml_matcher = RTreeMatchingEngine(SCHEMA), XPathFilterMatcher()
    for matcher in (engine, lxml_matcher):
        matcher.add_filter("f", spec)
    for name, event in events.items():
        expected = name in matches
        assert (lxml_matcher.match(event, variables={"action": "urn:act"}) == ["f"]) is expected
        assert (engine.match(event, variables={"action": "urn:act"}) == ["f"]) is expected
