"""Finding matcher engines by URI."""

import logging
from importlib.metadata import EntryPoint

import pytest

import wsframework.matching.registry as registry
from matchers import (
    DEFAULT_MATCHER_URI,
    XPATH_MATCHER_URI,
    FilterSpec,
    Matcher,
    UnknownMatcher,
    XPathFilterMatcher,
    create_matcher,
    known_matchers,
    register_matcher,
    unregister_matcher,
)


class ToyMatcher(Matcher):
    uri = "urn:test:matchers:toy"
    dialects = frozenset({"urn:test:dialects:toy"})

    def __init__(self, config=None):
        super().__init__(config)
        self._ids = {}

    def add_filter(self, filter_id, spec):
        self.check_dialect(spec)
        self._ids[filter_id] = spec

    def remove_filter(self, filter_id):
        del self._ids[filter_id]

    def match(self, event, *, variables=None):
        return [i for i, spec in self._ids.items() if event.tag == spec.expression]

    def filter_ids(self):
        return list(self._ids)


class NotAMatcher:
    uri = "urn:test:not-a-matcher"


class NoUri(ToyMatcher):
    uri = None


@pytest.fixture
def fresh_registry():
    registry.refresh()
    yield
    unregister_matcher(ToyMatcher)
    registry.refresh()


def fake_entry_points(*entries):
    points = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in entries]

    def entry_points(**selection):
        assert selection == {"group": registry.ENTRY_POINT_GROUP}
        return points

    return entry_points


def test_default_is_xpath(fresh_registry):
    assert DEFAULT_MATCHER_URI == XPATH_MATCHER_URI
    for uri in (None, "", XPATH_MATCHER_URI):
        assert type(create_matcher(uri)) is XPathFilterMatcher


def test_project_entry_point_is_found(fresh_registry):
    assert known_matchers()[XPATH_MATCHER_URI] is XPathFilterMatcher


def test_create_passes_config(fresh_registry):
    config = object()
    assert create_matcher(None, config).config is config


def test_unknown_uri_names_it_and_lists_known_ones(fresh_registry):
    with pytest.raises(UnknownMatcher) as info:
        create_matcher("urn:nope")
    message = str(info.value)
    assert "urn:nope" in message
    assert XPATH_MATCHER_URI in message
    assert info.value.known == tuple(sorted(known_matchers()))


def test_builtins_are_entry_points_like_any_plugin(fresh_registry, monkeypatch):
    # The framework never imports the engine package: without the distribution's metadata
    # there are no engines at all, and asking for one is an UnknownMatcher, not an ImportError.
    monkeypatch.setattr(registry._metadata, "entry_points", fake_entry_points())
    registry.refresh()
    assert known_matchers() == {}
    with pytest.raises(UnknownMatcher):
        create_matcher(None)


def test_one_uri_loads_only_the_entry_point_it_needs(fresh_registry, monkeypatch):
    monkeypatch.setattr(
        registry._metadata,
        "entry_points",
        fake_entry_points(
            ("brute-force", "no_such_module_xyz:Thing"),  # would warn if it were loaded
            ("xpath", "matchers.xpath:XPathFilterMatcher"),
        ),
    )
    registry.refresh()
    assert isinstance(create_matcher(XPATH_MATCHER_URI), XPathFilterMatcher)
    assert registry._discovery._pending == [registry._discovery._pending[0]]
    assert registry._discovery._pending[0].name == "brute-force"


def test_broken_entry_points_are_skipped_with_a_warning(fresh_registry, monkeypatch, caplog):
    monkeypatch.setattr(
        registry._metadata,
        "entry_points",
        fake_entry_points(
            ("missing", "no_such_module_xyz:Thing"),
            ("notmatcher", f"{__name__}:NotAMatcher"),
            ("nouri", f"{__name__}:NoUri"),
            ("abstract", "wsframework.matching.base:Matcher"),
            ("toy", f"{__name__}:ToyMatcher"),
            ("xpath", "matchers.xpath:XPathFilterMatcher"),
        ),
    )
    registry.refresh()
    with caplog.at_level(logging.WARNING, logger=registry.__name__):
        found = known_matchers()
    assert found == {XPATH_MATCHER_URI: XPathFilterMatcher, ToyMatcher.uri: ToyMatcher}
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in ("missing", "notmatcher", "nouri", "abstract"):
        assert repr(name) in warned
    assert type(create_matcher(ToyMatcher.uri)) is ToyMatcher


def test_entry_point_listing_failure_keeps_registrations(fresh_registry, monkeypatch):
    def explode(**selection):
        raise RuntimeError("corrupt metadata")

    monkeypatch.setattr(registry._metadata, "entry_points", explode)
    registry.refresh()
    register_matcher(ToyMatcher)
    assert known_matchers() == {ToyMatcher.uri: ToyMatcher}


def test_discovery_is_cached_until_refresh(fresh_registry, monkeypatch):
    calls = []

    def counting(**selection):
        calls.append(selection)
        return []

    monkeypatch.setattr(registry._metadata, "entry_points", counting)
    registry.refresh()
    known_matchers()
    known_matchers()
    assert len(calls) == 1
    known_matchers.cache_clear()
    known_matchers()
    assert len(calls) == 2


def test_register_and_unregister(fresh_registry):
    assert register_matcher(ToyMatcher) is ToyMatcher
    matcher = create_matcher(ToyMatcher.uri)
    matcher.add_filter("t", FilterSpec("urn:test:dialects:toy", "e"))
    assert isinstance(matcher, ToyMatcher) and "t" in matcher
    unregister_matcher(ToyMatcher.uri)
    with pytest.raises(UnknownMatcher):
        create_matcher(ToyMatcher.uri)


@pytest.mark.parametrize("bad", [NotAMatcher, NoUri, Matcher])
def test_register_refuses_non_matchers(bad):
    with pytest.raises(TypeError):
        register_matcher(bad)


def test_known_matchers_returns_a_copy(fresh_registry):
    known_matchers().clear()
    assert XPATH_MATCHER_URI in known_matchers()
