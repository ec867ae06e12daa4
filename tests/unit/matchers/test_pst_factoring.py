"""The PST's section 2.1 options (matchers.pst.search_tree): factoring and delayed branching
match what a brute-force oracle matches, with and without each, link matching decides as its
oracle with them on, they save steps, and what they would blow up is refused."""
import pytest
from hypothesis import given, settings, strategies as st

from benchmarks.reproductions.pst import ATTRIBUTES as CHART3_ATTRIBUTES, chart3_workload
from matchers.pst.search_tree import OTHER, Delayed, Index, ParallelSearchTree, leaves_below
from matchers.pst.trits import M, LinkMatcher

ATTRIBUTES = ["a1", "a2", "a3", "a4"]
LINKS = ["l0", "l1", "l2"]
OPTIONS = [{}, {"factoring": 2}, {"factoring": ("a3",)}, {"delayed_branching": 1},
           {"delayed_branching": 2}, {"factoring": 1, "delayed_branching": True},
           {"factoring": 4, "delayed_branching": 2}]

TESTS = st.dictionaries(st.sampled_from(ATTRIBUTES), st.integers(0, 2), max_size=4)
# duplicates (one test set under several ids) and all-'*' subscriptions ({}) on purpose
SUBSCRIPTIONS = st.lists(st.tuples(TESTS, st.sampled_from(LINKS), st.integers(1, 3)),
                         max_size=20).map(
    lambda drawn: [(tests, link) for tests, link, copies in drawn for _ in range(copies)])
# value 3 is tested by no subscription; a missing attribute is a don't-know
EVENTS = st.lists(st.dictionaries(st.sampled_from(ATTRIBUTES), st.integers(0, 3), min_size=3),
                  min_size=1, max_size=8)


def _matches(tests, event) -> bool:
    return all(a in event and event[a] == v for a, v in tests.items())


@settings(max_examples=60, deadline=None)
@given(SUBSCRIPTIONS, EVENTS)
def test_every_option_matches_what_the_oracle_matches(subscriptions, events):
    trees = [ParallelSearchTree(ATTRIBUTES, **options) for options in OPTIONS]
    for tree in trees:
        for k, (tests, _) in enumerate(subscriptions):
            tree.add(k, tests)
    for event in events:
        expected = sorted(k for k, (tests, _) in enumerate(subscriptions) if _matches(tests, event))
        for options, tree in zip(OPTIONS, trees):
            assert sorted(tree.match(event)) == expected, options


@settings(max_examples=60, deadline=None)
@given(SUBSCRIPTIONS, EVENTS, st.text(alphabet="MN", min_size=3, max_size=3),
       st.sampled_from(OPTIONS[1:]))
def test_link_matching_with_the_options_decides_as_the_oracle(subscriptions, events, mask, options):
    links = LinkMatcher(ATTRIBUTES, LINKS, **options)
    for k, (tests, link) in enumerate(subscriptions):
        links.add(k, tests, link)
    for event in events:
        below = {link for tests, link in subscriptions if _matches(tests, event)}
        # Y iff a matching subscription is downstream of the link (and the mask left it open)
        assert links.link_match(event, mask)[0] == {l for l in below if mask[LINKS.index(l)] == M}
        assert links.link_match(event)[0] == below


@settings(max_examples=30, deadline=None)
@given(SUBSCRIPTIONS, EVENTS, st.sampled_from(OPTIONS))
def test_a_broker_visits_no_more_nodes_than_centralized_matching(subscriptions, events, options):
    tree = ParallelSearchTree(ATTRIBUTES, **options)
    for k, (tests, _) in enumerate(subscriptions):
        tree.add(k, tests)
    broker = LinkMatcher.over(tree, LINKS, {k: link for k, (_, link) in enumerate(subscriptions)})
    for event in events:
        assert broker.link_match(event)[1] <= tree.match_counting(event)[1]


def _mean_steps(options, subscriptions, events) -> float:
    tree = ParallelSearchTree(CHART3_ATTRIBUTES, **options)
    for k, tests in enumerate(subscriptions):
        tree.add(k, tests)
    return sum(tree.match_counting(event)[1] for event in events) / len(events)


def test_factoring_and_delayed_branching_save_steps_on_a_skewed_workload():
    subscriptions, events = chart3_workload(1000, 40)   # P = 0.98, D = 0.82: skewed cares
    plain = _mean_steps({}, subscriptions, events)
    factored = _mean_steps({"factoring": 3}, subscriptions, events)
    delayed = _mean_steps({"delayed_branching": 3}, subscriptions, events)
    both = _mean_steps({"factoring": 3, "delayed_branching": 3}, subscriptions, events)
    assert factored < 0.7 * plain and delayed < plain and both < factored


def test_a_star_on_a_factoring_attribute_copies_the_subscription_into_every_entry():
    tree = ParallelSearchTree(["a", "b"], factoring=("a",))
    tree.add("s1", {"a": 1, "b": 1})
    tree.add("s2", {"b": 2})
    tree.add("s3", {"a": 2})
    index = tree.prepare()
    assert isinstance(index, Index) and index.complete
    held = {key: sorted(i for leaf in leaves_below(root) for i in leaf.ids)
            for key, root in index.entries.items()}
    assert held == {(1,): ["s1", "s2"], (2,): ["s2", "s3"], (OTHER,): ["s2"]}
    assert tree.match({"a": 7, "b": 2}) == ["s2"]    # 7: no subscription tests it
    # one step for the index, then the entry's sub-tree: its root and one leaf
    assert tree.match_counting({"a": 2, "b": 5}) == (["s3"], 3)


def test_delayed_branching_prunes_a_star_path_the_next_test_rules_out():
    subscriptions = {"s1": {"a": 1, "b": 1}, "s2": {"b": 2}}
    plain = ParallelSearchTree(["a", "b"], order=["a", "b"])
    delayed = ParallelSearchTree(["a", "b"], order=["a", "b"], delayed_branching=2)
    for tree in (plain, delayed):
        for sub_id, tests in subscriptions.items():
            tree.add(sub_id, tests)
    # a plain search visits the root, its 1-branch and its *-branch, both dead ends for b = 3
    assert plain.match_counting({"a": 1, "b": 3}) == ([], 3)
    # delayed: the root's test, then one test of b for the 1-branch and *-branch together
    assert delayed.match_counting({"a": 1, "b": 3}) == ([], 2)
    assert isinstance(delayed.prepare(), Delayed)
    assert delayed.match_counting({"a": 1, "b": 1}) == (["s1"], 3)
    assert sorted(delayed.match({"a": 5, "b": 2})) == ["s2"]


def test_link_matching_annotates_the_index_by_alternative_combine():
    links = LinkMatcher(["a", "b"], LINKS, factoring=1)
    links.add("everywhere", {}, "l0")
    links.add("a is 1", {"a": 1}, "l1")
    # entry (1,): both subscriptions, YYN; entry (OTHER,): only the first, YNN
    index = links.tree.prepare()
    assert links.annotate()[id(index)] == "YMN"
    # l1 is M at the root: the search goes on into the entry of a = 1 (2 steps)
    assert links.link_match({"a": 1, "b": 0}, "MMM") == ({"l0", "l1"}, 2)
    assert links.link_match({"a": 1, "b": 0}, "MNN") == ({"l0"}, 1)   # settled at the root


def test_matchers_over_one_tree_each_decide_for_their_own_links():
    tree = ParallelSearchTree(ATTRIBUTES, factoring=2)
    tree.add("s", {"a1": 1})
    left = LinkMatcher.over(tree, ["up", "down"], {"s": "down"})
    right = LinkMatcher.over(tree, ["x", "y", "z"], {"s": "x"})
    assert left.link_match({"a1": 1})[0] == {"down"} and right.link_match({"a1": 1})[0] == {"x"}
    assert left.tree is right.tree
    with pytest.raises(ValueError, match="no link"):
        LinkMatcher.over(tree, ["up"], {})
    with pytest.raises(ValueError, match="unknown links"):
        LinkMatcher.over(tree, ["up"], {"s": "sideways"})


@pytest.mark.parametrize("options, error", [
    ({"factoring": ("zz",)}, "distinct attributes"), ({"factoring": ("a1", "a1")}, "distinct"),
    ({"factoring": 9}, "outside"), ({"delayed_branching": 99}, "window")])
def test_bad_options_are_refused(options, error):
    with pytest.raises(ValueError, match=error):
        ParallelSearchTree(ATTRIBUTES, **options)


def test_factoring_that_would_blow_up_is_refused_with_a_reason():
    wide = ParallelSearchTree(ATTRIBUTES, factoring=3)
    for k in range(20):   # 21 ** 3 index entries
        wide.add(k, {"a1": k, "a2": k, "a3": k})
    with pytest.raises(ValueError, match="index entries"):
        wide.match({})
    copied = ParallelSearchTree(ATTRIBUTES, factoring=("a1", "a2"))
    for k in range(50):   # 51 x 51 entries, and 50 subscriptions that are '*' on both
        copied.add(("tests", k), {"a1": k, "a2": k})
        copied.add(("star", k), {"a3": k})
    with pytest.raises(ValueError, match="copies"):
        copied.match({})
