"""Gryphon's parallel search tree and link matching (matchers.pst.search_tree, .trits)
against brute-force oracles, Table 1 and the worked example of section 3.1."""
import itertools

from hypothesis import given, settings, strategies as st

from matchers.pst.search_tree import ParallelSearchTree
from matchers.pst.trits import (LinkMatcher, M, alternative, combine,
                                initialization_mask, parallel)

ATTRIBUTES = ["a1", "a2", "a3", "a4"]
LINKS = ["l0", "l1", "l2"]


def test_table_1():
    assert [alternative(a, b) for a, b in itertools.product("YMN", repeat=2)] == \
        ["Y", "M", "M", "M", "M", "M", "M", "M", "N"]
    assert [parallel(a, b) for a, b in itertools.product("YMN", repeat=2)] == \
        ["Y", "Y", "Y", "Y", "M", "M", "Y", "M", "N"]


def test_the_worked_example_of_section_3_1():
    assert combine(["MYY", "NYN"], alternative) == "MYM"
    assert combine(["MYM", "YYN"], parallel) == "YYM"


def test_the_search_follows_the_value_and_the_star_branch():
    tree = ParallelSearchTree(ATTRIBUTES)
    tree.add("s1", {"a1": 1, "a3": 3})
    tree.add("s2", {"a1": 1})
    tree.add("s3", {"a2": 9})
    found, steps = tree.match_counting({"a1": 1, "a2": 2, "a3": 3, "a4": 0})
    assert sorted(found) == ["s1", "s2"] and steps > 0
    assert tree.order[0] == "a1"  # fewest don't-cares at the root


def test_initialization_mask():
    assert initialization_mask(LINKS, {"l0", "l2"}) == "MNM"


SUBSCRIPTIONS = st.lists(st.tuples(
    st.dictionaries(st.sampled_from(ATTRIBUTES), st.integers(0, 2), max_size=4),
    st.sampled_from(LINKS)), max_size=25)
EVENTS = st.lists(st.fixed_dictionaries({a: st.integers(0, 2) for a in ATTRIBUTES}),
                  min_size=1, max_size=10)


def _matches(tests, event):
    return all(event[a] == v for a, v in tests.items())


@settings(max_examples=150, deadline=None)
@given(SUBSCRIPTIONS, EVENTS, st.text(alphabet="MN", min_size=3, max_size=3))
def test_matching_and_link_matching_equal_the_oracles(subscriptions, events, mask):
    tree = ParallelSearchTree(ATTRIBUTES)
    links = LinkMatcher(ATTRIBUTES, LINKS)
    for k, (tests, link) in enumerate(subscriptions):
        tree.add(k, tests)
        links.add(k, tests, link)
    for event in events:
        expected = {k for k, (tests, _) in enumerate(subscriptions) if _matches(tests, event)}
        assert set(tree.match(event)) == expected
        wanted = {subscriptions[k][1] for k in expected}
        assert links.link_match(event)[0] == wanted  # all-M mask: exactly the matching links
        masked, _ = links.link_match(event, mask)
        # never a link the mask rules out; every downstream link with a matching subscriber
        assert masked == {link for link in wanted if mask[LINKS.index(link)] == M}
