"""A hostile subscriber's filter costs only what the limits allow, and hurts only itself
(issue items 4, 5 and 10b), in process (no sockets)."""
from __future__ import annotations

import pytest

from tests.support.eventing import Harness, quote
from wsframework import ns
from matchers.vocabulary import RANGES_DIALECT
from wsframework.exceptions import SENDER, SoapFault
from wsframework.matching import FilterSpec, InvalidFilter
from wsframework.matching.limits import FilterLimits, check_filter_limits

Q = "urn:quotes"
RE = "http://exslt.org/regular-expressions"
XPATH20 = ns.XPATH20_DIALECT_2011
RANGES = RANGES_DIALECT
REFUSED = {"2004": "InvalidMessage", "2011": "CannotProcessFilter"}


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


HOSTILE = [
    # nested scans: the cost is the square of the event's size
    ("nested-absolute-scan", None, "count(//*[count(//*) > 0]) > 0", {}),
    ("xpath20-path-step-scan", XPATH20, "//*/count(//*)", {}),
    ("xpath20-quantified-scan", XPATH20, "some $a in //* satisfies count(//*) > 0", {}),
    ("xpath20-nested-quantifiers", XPATH20, "every $a in //* satisfies every $b in //* "
                                            "satisfies true()", {}),
    ("following-in-predicate", None, "//*[following::*]", {}),
    ("nested-relative-scans", None, "count(//*" + "[.//*" * 30 + "]" * 30 + ") >= 0", {}),
    ("xpath20-nested-descendant-axes", XPATH20, "//*[descendant::*[descendant::*]]", {}),
    ("xpath20-descendant-in-predicate", XPATH20, "count(//*[.//*]) >= 0", {}),
    ("xpath20-thousand-predicates", XPATH20, "price" + "[. > 1]" * 1000, {}),
    ("xpath20-300-predicates", XPATH20, "price" + "[. > 1]" * 300, {}),
    ("xpath10-nested-thousand", None, "//q:quote[q:price > 3" * 1000 + "]" * 1000, {"q": Q}),
    ("xpath10-5000-parentheses", None, "(" * 5000 + "1" + ")" * 5000, {}),
    ("xpath20-nested-40", XPATH20, "(" * 40 + "1" + ")" * 40, {}),
    ("exslt-regex", None, "re:test(string(.), '^(a+)+$')", {"re": RE}),
    ("exslt-regex-other-prefix", None, "x:match (string(.), 'a')", {"x": RE}),
    ("xpath20-matches", XPATH20, "fn:matches(string(.), '^(a+)+$')", {}),
    ("xpath20-tokenize", XPATH20, "count(tokenize(string(.), 'a*')) > 1", {}),
]


# XPath 2.0 is a 2011 dialect: its cases run in 2011 only, the others in both versions.
HOSTILE_BY_VERSION = [(version, *case) for case in HOSTILE
                      for version in (("2011",) if case[1] == XPATH20 else ("2004", "2011"))]


@pytest.mark.parametrize("version,name,dialect,expression,namespaces", HOSTILE_BY_VERSION,
                         ids=[f"{c[1]}-{c[0]}" for c in HOSTILE_BY_VERSION])
def test_hostile_filters_are_refused_at_subscribe(harness, version, name, dialect, expression,
                                                  namespaces):
    options = {"filter": expression, "namespaces": namespaces}
    if dialect:
        options["dialect"] = dialect
    with pytest.raises(SoapFault) as refused:
        harness.subscribe(version, **options)
    assert refused.value.code == SENDER
    assert refused.value.subcode.endswith(REFUSED[version])
    # the topic still works for everybody else
    harness.subscribe(version, notify_path="/fine", filter="true()")
    harness.publish(quote(42))
    harness.drain()
    assert len(harness.sink.at("/fine")) == 1


@pytest.mark.parametrize("dialect,expression", [
    (RANGES, "(" * 5000 + "price > 1" + ")" * 5000),
    (RANGES, " and ".join(["price > 1"] * 300)),
    (ns.ACTION_DIALECT_DPWS11, " ".join(f"urn:a:{i}" for i in range(1000))),
    (ns.XPATH10_DIALECT_2011, "//q:price" * 200),
])
def test_limits_hold_for_every_dialect(dialect, expression):
    with pytest.raises(InvalidFilter):
        check_filter_limits(FilterSpec(dialect, expression), FilterLimits())


def test_limits_are_measured_without_recursion():
    # a million nested brackets: refused by depth, not by Python's recursion limit
    deep = FilterSpec(XPATH20, "(" * 1_000_000 + ")" * 1_000_000)
    with pytest.raises(InvalidFilter, match="deeper"):
        check_filter_limits(deep, FilterLimits(max_length=10_000_000))


@pytest.mark.parametrize("expression", [
    "/q:quote[q:price > 30 and q:symbol = 'test(']",
    "price in [1, 2) and symbol = 'GE'",
    "q:quote[" * 31 + "1" + "]" * 31,
    "//q:a[.//q:b > 3]",
    "count(//*) > 0",
    "some $p in //q:price satisfies $p > 10",
    "/env:Envelope/env:Body/q:quote[q:price > 30]",
])
def test_ordinary_filters_pass(expression):
    check_filter_limits(FilterSpec(ns.XPATH10_DIALECT_2011, expression), FilterLimits())


def test_limits_are_settings(tmp_path):
    h = Harness(tmp_path, settings={"filter_max_length": "10", "filter_allow_regex": "true"})
    try:
        with pytest.raises(SoapFault):
            h.subscribe("2011", filter="/q:quote[q:price > 30]", namespaces={"q": Q})
        assert h.manager.view.filter_limits == FilterLimits(max_length=10, allow_regex=True)
    finally:
        h.close()


@pytest.mark.parametrize("dialect,expression", [
    (RANGES, "(" * 5000 + "x0 > 1" + ")" * 5000),
    (None, "e:x0 > 4" + "[1]" * 300),
])
def test_an_edn_server_refuses_hostile_filters_before_placing_them(tmp_path, dialect,
                                                                   expression):
    from subscription_manager.client import EventingClient, subscribe_body
    from tests.support.edn import EV, TOPIC, Network, server_url
    from tests.support.eventing import SINK
    net = Network(tmp_path, ("rtree", "local"))
    try:
        net.create_topic()
        client = EventingClient("2011", transport=net.transport)
        options = {"dialect": dialect} if dialect else {}
        body = subscribe_body(client.version, f"{SINK}/n/1", filter=expression,
                              namespaces={"e": EV}, **options)
        with pytest.raises(SoapFault) as refused:
            client.subscribe_raw(f"{server_url(0)}/topics/{TOPIC}", body)
        assert refused.value.subcode.endswith("CannotProcessFilter")
    finally:
        net.close()


# -- events over the element limits (item 5: count(//*) over 100,000 elements) -----------

def _wide(n):
    return f'<q:quote xmlns:q="{Q}">' + "<q:x/>" * n + "</q:quote>"


def _deep(n):
    return f'<q:quote xmlns:q="{Q}">' + "<q:x>" * n + "</q:x>" * n + "</q:quote>"


@pytest.mark.parametrize("event,settings", [
    (_wide(99_000), {}),  # just under the parser's own element cap
    (_wide(50), {"event_max_elements": "50"}),
    (_deep(90), {}),  # the parser itself stops at 100 levels, envelope included
    (_deep(10), {"event_max_depth": "10"}),
])
def test_events_over_the_limits_are_refused_before_matching(tmp_path, event, settings):
    from wsframework.soap import parse_envelope
    h = Harness(tmp_path, settings=settings)
    try:
        for _ in range(10):
            h.subscribe("2011", filter="count(//*) > 0")
        matched = []
        original = h.manager.view.match
        h.manager.view.match = lambda *a: matched.append(a) or original(*a)
        response = h.publish(event)
        fault = parse_envelope(response.body).fault()
        assert fault.code == SENDER and "event refused" in fault.reason
        assert matched == []
    finally:
        h.close()


def test_events_at_the_limits_are_published(tmp_path):
    h = Harness(tmp_path, settings={"event_max_elements": "51", "event_max_depth": "11"})
    try:
        h.subscribe("2011", filter="count(//*) > 0")
        assert h.publish(_wide(50)).status == 202
        assert h.publish(_deep(10)).status == 202
        h.drain()
        assert len(h.sink.at("/notify")) == 2
    finally:
        h.close()


# -- one subscriber's failing or slow filter hurts only that subscription (item 4) ----------

LOOSE = {"filter_max_length": "100000", "filter_max_steps": "5000", "filter_max_depth": "5000"}


def _ends(h, path="/end"):
    return [(e.body.find("{*}Status").text, e.body.find("{*}Reason").text)
            for e in h.sink.envelopes(path)]


@pytest.mark.parametrize("version", ["2004", "2011"])
def test_a_filter_that_raises_hurts_only_its_subscription(tmp_path, version):
    settings = {**LOOSE, "filter_strikes": "3"}
    if version == "2004":
        hostile = {"filter": "$nope = 1"}  # an unbound variable fails at evaluation
    else:
        hostile = {"dialect": XPATH20, "filter": "price" + "[. > 1]" * 1000}
    h = Harness(tmp_path, settings=settings)
    try:
        h.subscribe(version, notify_path="/hostile", end_to=f"http://sink.test/end", **hostile)
        h.subscribe(version, notify_path="/fine", filter="true()")
        h.subscribe(version, notify_path="/all")
        for price in range(5):
            assert h.publish(quote(price)).status == 202
        h.drain()
        assert len(h.sink.at("/fine")) == len(h.sink.at("/all")) == 5
        assert h.sink.at("/hostile") == []
        [(status, reason)] = _ends(h)
        assert status.endswith("SourceCancelling") and "filter failed" in reason
        assert h.manager.counters["filter_failures"] == 3
        assert h.manager.counters["subscriptions"] == 2
    finally:
        h.close()


def test_a_filter_over_its_time_budget_is_ended_and_others_still_served(tmp_path):
    # elementpath walks 3,000 elements in milliseconds; true() in lxml takes microseconds
    h = Harness(tmp_path, settings={"filter_budget": "0.0005", "filter_strikes": "2"})
    try:
        h.subscribe("2011", notify_path="/slow", end_to="http://sink.test/end",
                    dialect=XPATH20, filter="count(//*) > 0")
        h.subscribe("2011", notify_path="/fine", filter="true()")
        for _ in range(3):
            assert h.publish(_wide(3000)).status == 202
        h.drain()
        assert len(h.sink.at("/fine")) == 3
        # a slow answer stands; the second strike ends it before that event is delivered
        assert len(h.sink.at("/slow")) == 1
        [(status, reason)] = _ends(h)
        assert status.endswith("SourceCancelling") and "budget" in reason
    finally:
        h.close()


def test_the_xpath_matcher_reports_failures_and_keeps_matching():
    from lxml import etree

    from matchers import XPathFilterMatcher
    from wsframework.matching import FilterFailures
    matcher = XPathFilterMatcher()
    matcher.add_filter("deep", FilterSpec(XPATH20, "price" + "[. > 1]" * 1000))
    matcher.add_filter("good", FilterSpec(XPATH20, "true()"))
    failures = FilterFailures(budget=10.0)
    event = etree.fromstring("<price>3</price>")
    assert matcher.match_reporting(event, failures) == ["good"]
    assert list(failures.failed) == ["deep"] and "RecursionError" in failures.failed["deep"]
    assert matcher.match(event) == ["good"]


# -- item 10b: the 2004/08 XPath dialect's context node is the notification's envelope -----

OW = "urn:example:weather"
WIND = f'<ow:WindReport xmlns:ow="{OW}"><ow:Speed>70</ow:Speed></ow:WindReport>'
ENVELOPE_FILTER = "/env:Envelope/env:Body/ow:WindReport/ow:Speed >= 65"
EVENT_FILTER = "/ow:WindReport/ow:Speed >= 65"


@pytest.mark.parametrize("version,soap_ns,expression,expected", [
    ("2004", ns.SOAP12, ENVELOPE_FILTER, True),
    ("2004", ns.SOAP11, ENVELOPE_FILTER, True),
    ("2004", ns.SOAP12, EVENT_FILTER, False),
    ("2004", ns.SOAP12, "env:Body/ow:WindReport/ow:Speed >= 65", True),
    ("2004", ns.SOAP12, "env:Header/wsa:Action = 'urn:weather/Wind' and env:Body//ow:Speed > 65", True),
    ("2011", ns.SOAP12, EVENT_FILTER, True),
    ("2011", ns.SOAP12, ENVELOPE_FILTER, False),
    ("2011", ns.SOAP12, "ow:Speed >= 65", True),
])
def test_xpath_context_node_per_version(harness, version, soap_ns, expression, expected):
    harness.subscribe(version, notify_path="/wind", filter=expression,
                      namespaces={"env": soap_ns, "ow": OW, "wsa": ns.WSA2004})
    harness.publish(WIND, action="urn:weather/Wind")
    harness.publish(WIND.replace("70", "10"), action="urn:weather/Wind")
    harness.drain()
    assert len(harness.sink.at("/wind")) == (1 if expected else 0)


@pytest.mark.parametrize("engine", ["rtree", "bruteforce"])
def test_the_box_engines_report_failures_and_keep_matching(engine):
    from lxml import etree

    from matchers.bruteforce import BruteForceMatcher
    from matchers.rtree_engine import RTreeMatchingEngine
    from wsframework.matching import FilterFailures
    matcher = {"rtree": RTreeMatchingEngine, "bruteforce": BruteForceMatcher}[engine]()
    matcher.add_filter("bad", FilterSpec(ns.XPATH10_DIALECT_2011, "$nope = 1"))
    matcher.add_filter("good", FilterSpec(ns.XPATH10_DIALECT_2011, "true()"))
    failures = FilterFailures(budget=10.0)
    event = etree.fromstring("<price>3</price>")
    assert matcher.match_reporting(event, failures) == ["good"]
    assert list(failures.failed) == ["bad"]
    assert matcher.match(event) == ["good"]
