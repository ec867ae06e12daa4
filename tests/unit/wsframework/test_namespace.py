"""The namespace of topics: names, trie resolution, matcher binding, durability, and keeping
several workers' caches in step through the store."""

import pytest
from lxml import etree

from matchers import UnknownMatcher, XPathFilterMatcher
from wsframework.matching.registry import DEFAULT_MATCHER_URI
from wsframework.namespace import (MAX_SEGMENTS, EntryExists, InvalidName, Namespace, UnknownEntry,
                                   validate_name)
from wsframework.store import Store

KEYWORDS_URI = "urn:edn-example:matchers:keywords"


@pytest.fixture
def db(tmp_path):
    return tmp_path / "edn.db"


@pytest.fixture
def stores(db):
    opened = []

    def open_store():
        store = Store(db)
        opened.append(store)
        return store
    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def topics(stores):
    return Namespace("topics", stores(), "http://svc.example/")


def names(namespace, prefix=None):
    return [entry.name for entry in namespace.entries(prefix)]


def stored_names(namespace):
    return sorted(row["name"] for row in namespace.store.query("SELECT name FROM ns_topics"))


# --- names ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, cleaned", [
    ("stocks", "stocks"),
    ("/stocks/nyse/", "stocks/nyse"),
    ("  a/b  ", "a/b"),
    ("A_1/b.c~d-e", "A_1/b.c~d-e"),
    ("_x", "_x"),
    ("/".join(["s"] * MAX_SEGMENTS), "/".join(["s"] * MAX_SEGMENTS)),
    ("x" * 64, "x" * 64),
])
def test_valid_names(name, cleaned):
    assert validate_name(name) == cleaned


@pytest.mark.parametrize("name", [
    "", "/", "  ", "..", ".", "a/../b", "a/./b", "a//b", ".hidden", "-x", "~x", "a b", "a$b",
    "a\\b", "é", "a?b", "a#b", "a\n/b", "a/b\n/c", "a\x00", "a\tb", "x" * 65, "/".join(["s"] * (MAX_SEGMENTS + 1)), None, 42,
])
def test_invalid_names(name):
    with pytest.raises(InvalidName):
        validate_name(name)


def test_invalid_name_is_not_stored(topics):
    with pytest.raises(InvalidName):
        topics.create("../etc")
    assert len(topics) == 0 and stored_names(topics) == []


def test_namespace_kind_must_be_letters(stores):
    with pytest.raises(ValueError):
        Namespace("ns_x; DROP TABLE", stores())


# --- create / get / delete ------------------------------------------------------------

def test_create_get_delete(topics):
    entry = topics.create("/stocks/nyse/")
    assert entry.name == "stocks/nyse"
    assert entry.matcher_uri == DEFAULT_MATCHER_URI
    assert isinstance(entry.matcher, XPathFilterMatcher)
    assert entry.uid and entry.created > 0 and entry.config is None
    assert topics.get("stocks/nyse") is entry
    assert topics.get("/stocks/nyse") is entry
    assert "stocks/nyse" in topics and "stocks" not in topics
    assert len(topics) == 1
    assert topics.address_of("stocks/nyse") == "http://svc.example/topics/stocks/nyse"
    assert topics.path_of("stocks/nyse") == "/topics/stocks/nyse"
    assert topics.name_from_path("/topics/stocks/nyse/") == "stocks/nyse"
    assert topics.name_from_path("/routes/x") is None
    assert topics.delete("stocks/nyse") is entry
    assert len(topics) == 0 and "stocks/nyse" not in topics
    with pytest.raises(UnknownEntry):
        topics.get("stocks/nyse")
    assert stored_names(topics) == []


def test_duplicate_refused(topics):
    first = topics.create("a/b")
    with pytest.raises(EntryExists):
        topics.create("/a/b/")
    assert topics.get("a/b") is first and stored_names(topics) == ["a/b"]


def test_delete_unknown(topics):
    topics.create("a")
    with pytest.raises(UnknownEntry) as info:
        topics.delete("a/b")
    assert "a/b" in str(info.value)
    assert names(topics) == ["a"]


def test_unknown_matcher_refused_and_nothing_stored(topics):
    with pytest.raises(UnknownMatcher) as info:
        topics.create("x", "urn:no-such-matcher")
    assert DEFAULT_MATCHER_URI in info.value.known
    assert len(topics) == 0 and stored_names(topics) == []
    assert topics.store.generation("namespace:topics") == 0


def test_matcher_bound_from_uri(topics):
    from edn_example_matcher import KeywordMatcher
    entry = topics.create("news", KEYWORDS_URI)
    assert isinstance(entry.matcher, KeywordMatcher)
    assert entry.matcher_uri == KEYWORDS_URI


def test_config_is_kept(topics):
    config = etree.fromstring('<cfg xmlns="urn:cfg"><k>v</k></cfg>')
    entry = topics.create("c", config=config)
    assert entry.config_element().find("{urn:cfg}k").text == "v"


# --- resolution -----------------------------------------------------------------------

def test_resolve_longest_prefix(topics):
    a = topics.create("a")
    abc = topics.create("a/b/c")
    assert topics.resolve("a") == (a, "")
    assert topics.resolve("/a/") == (a, "")
    assert topics.resolve("a/b") == (a, "b")
    assert topics.resolve("a/b/c") == (abc, "")
    assert topics.resolve("a/b/c/d/e") == (abc, "d/e")
    assert topics.resolve("a/x/y") == (a, "x/y")
    assert topics.resolve("b") is None
    assert topics.resolve("") is None


def test_resolve_after_delete_prunes_but_keeps_ancestors(topics):
    a = topics.create("a")
    topics.create("a/b/c")
    topics.delete("a/b/c")
    assert topics.resolve("a/b/c") == (a, "b/c")
    topics.delete("a")
    assert topics.resolve("a/b/c") is None
    topics.create("a/b")
    topics.delete("a/b")
    assert topics._root.children == {}


def test_entries_by_prefix(topics):
    for name in ["b", "a/x", "a", "ab", "a/y/z"]:
        topics.create(name)
    assert names(topics) == ["a", "a/x", "a/y/z", "ab", "b"]
    assert names(topics, "a") == ["a", "a/x", "a/y/z"]
    assert names(topics, "/a/") == ["a", "a/x", "a/y/z"]
    assert names(topics, "a/y") == ["a/y/z"]
    assert names(topics, "c") == []


# --- durability and several workers -----------------------------------------------------

def test_persistence_across_instances(stores):
    first = Namespace("topics", stores())
    created = first.create("stocks/nyse", KEYWORDS_URI)
    first.create("other")
    first.store.close()
    again = Namespace("topics", stores())
    assert names(again) == ["other", "stocks/nyse"]
    entry = again.get("stocks/nyse")
    assert (entry.uid, entry.matcher_uri) == (created.uid, KEYWORDS_URI)
    assert type(entry.matcher).__name__ == "KeywordMatcher"
    assert entry.matcher is not created.matcher


def test_kinds_are_separate(stores):
    store = stores()
    topics_ns = Namespace("topics", store)
    routes = Namespace("routes", store)
    topics_ns.create("x")
    assert routes.sync() is False
    assert len(routes) == 0


def test_two_workers_stay_in_step(stores):
    worker_a = Namespace("topics", stores())
    worker_b = Namespace("topics", stores())
    heard_a, heard_b = [], []
    worker_a.on_change(lambda event, entry: heard_a.append((event, entry.name)))
    worker_b.on_change(lambda event, entry: heard_b.append((event, entry.name)))

    worker_a.create("shared")
    assert "shared" not in worker_b  # a cache until it syncs
    assert worker_b.sync() is True
    assert worker_b.get("shared").uid == worker_a.get("shared").uid
    assert worker_b.sync() is False  # nothing new

    worker_b.delete("shared")
    assert "shared" in worker_a
    assert worker_a.sync() is True
    assert "shared" not in worker_a and worker_a.resolve("shared") is None

    assert heard_a == [("added", "shared"), ("removed", "shared")]
    assert heard_b == [("added", "shared"), ("removed", "shared")]


def test_recreated_entry_is_replaced_in_the_other_worker(stores):
    worker_a = Namespace("topics", stores())
    worker_b = Namespace("topics", stores())
    worker_a.create("t")
    worker_b.sync()
    old = worker_b.get("t")
    worker_a.delete("t")
    worker_a.create("t", KEYWORDS_URI)
    worker_b.sync()
    new = worker_b.get("t")
    assert new.uid != old.uid and new.matcher_uri == KEYWORDS_URI


def test_unchanged_entries_keep_their_matcher_across_sync(stores):
    worker_a = Namespace("topics", stores())
    worker_b = Namespace("topics", stores())
    kept = worker_a.create("kept")
    worker_b.create("new")
    assert worker_a.sync() is True
    assert worker_a.get("kept").matcher is kept.matcher
    assert names(worker_a) == ["kept", "new"]


def test_create_in_one_worker_refuses_a_name_another_created(stores):
    worker_a = Namespace("topics", stores())
    worker_b = Namespace("topics", stores())
    worker_a.create("x")
    with pytest.raises(EntryExists):
        worker_b.create("x")
    assert "x" in worker_b  # create synced first


def test_own_writes_do_not_force_a_reload(topics):
    topics.create("a")
    topics.create("b")
    assert topics.sync() is False


def test_listener_errors_do_not_break_mutations(topics):
    heard = []

    def broken(event, entry):
        raise RuntimeError("listener bug")
    topics.on_change(broken)
    topics.on_change(lambda event, entry: heard.append(event))
    topics.create("a")
    topics.delete("a")
    assert heard == ["added", "removed"]
    assert len(topics) == 0
