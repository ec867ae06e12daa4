"""The PST matcher (urn:wsframework:matchers:pst) against the brute-force engine on
equality subscriptions, and its refusals of what is not an equality conjunction."""
import pytest
from hypothesis import given, settings, strategies as st
from lxml import etree

from matchers import FilterSpec, Schema
from matchers.bruteforce import BruteForceMatcher
from matchers.pst.plugin import PSTMatcher
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute
from wsframework import ns
from wsframework.matching import InvalidFilter

Q = "urn:q"
QN = (("q", Q),)
SCHEMA = Schema((Attribute("a", "number", "/q:e/q:a", QN, 0, 3),
                 Attribute("b", "number", "/q:e/q:b", QN, 0, 3),
                 Attribute("sym", "string", "/q:e/q:sym", QN)))
SYMBOLS = ["GE", "IBM", "MSFT"]


def event(a, b, sym):
    parts = "".join(f"<q:{name}>{value}</q:{name}>"
                    for name, value in (("a", a), ("b", b), ("sym", sym)) if value is not None)
    return etree.fromstring(f'<q:e xmlns:q="{Q}">{parts}</q:e>')


TESTS = st.fixed_dictionaries({}, optional={"a": st.integers(0, 3), "b": st.integers(0, 3),
                                            "sym": st.sampled_from(SYMBOLS)})


def text_of(tests) -> str:
    parts = [f"{k} = '{v}'" if k == "sym" else f"{k} = {v}" for k, v in tests.items()]
    return " and ".join(parts) or "a exists or not a exists"


@settings(max_examples=80, deadline=None)
@given(st.lists(TESTS.filter(bool), max_size=20),
       st.lists(st.tuples(st.none() | st.integers(0, 3), st.none() | st.integers(0, 3),
                          st.none() | st.sampled_from(SYMBOLS + ["HP"])), min_size=1, max_size=8))
def test_the_pst_matches_what_the_brute_force_engine_matches(subscriptions, events):
    brute = BruteForceMatcher(SCHEMA)
    # as made by URI, and with the section 2.1 options (factoring on the symbol)
    psts = [PSTMatcher(SCHEMA), PSTMatcher(SCHEMA, factoring=("sym",), delayed_branching=2)]
    for k, tests in enumerate(subscriptions):
        spec = FilterSpec(RANGES_DIALECT, text_of(tests))
        brute.add_filter(f"s{k}", spec)
        for pst in psts:
            pst.add_filter(f"s{k}", spec)
    for values in events:
        expected = brute.match(event(*values))
        assert [pst.match(event(*values)) for pst in psts] == [expected, expected]


def test_the_equivalent_xpath_is_taken():
    pst = PSTMatcher(SCHEMA)
    pst.add_filter("x", FilterSpec(ns.XPATH10_DIALECT_2011, "/q:e[q:a = 1 and q:sym = 'GE']", QN))
    assert pst.match(event(1, 2, "GE")) == ["x"] and pst.match(event(1, 2, "IBM")) == []
    assert pst.steps(event(1, 2, "GE")) > 0


@pytest.mark.parametrize("text", ["a < 2", "a in [1, 2]", "a = 1 or a = 2", "sym ^= 'G'"])
def test_ranges_and_alternatives_are_refused_with_a_reason(text):
    pst = PSTMatcher(SCHEMA)
    with pytest.raises(InvalidFilter):
        pst.add_filter("x", FilterSpec(RANGES_DIALECT, text))
    assert len(pst) == 0
