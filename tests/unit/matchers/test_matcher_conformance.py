"""The shared contract, checked for every engine known_matchers() finds (STYLE item 9).

Each engine supplies its own ``example_filters()``: (filter, event, should_match) cases.
"""

import pytest

from matchers import (
    FilterSpec,
    InvalidFilter,
    Matcher,
    UnknownFilter,
    UnsupportedDialect,
    known_matchers,
)

ENGINES = sorted(known_matchers().items())


@pytest.fixture(params=[cls for _, cls in ENGINES], ids=[uri for uri, _ in ENGINES])
def engine(request):
    return request.param


@pytest.fixture
def examples(engine):
    cases = engine.example_filters()
    assert any(expected for _, _, expected in cases), "needs a matching example"
    assert any(not expected for _, _, expected in cases), "needs a non-matching example"
    return cases


def test_class_attributes(engine):
    assert issubclass(engine, Matcher)
    assert isinstance(engine.uri, str) and engine.uri
    assert isinstance(engine.dialects, frozenset) and engine.dialects
    assert all(isinstance(dialect, str) for dialect in engine.dialects)


def test_starts_empty_and_keeps_config(engine):
    config = object()
    matcher = engine(config)
    assert matcher.config is config
    assert len(matcher) == 0 and matcher.filter_ids() == []
    assert matcher.describe()["uri"] == engine.uri
    assert matcher.describe()["filters"] == 0


def test_examples_match_as_declared(engine, examples):
    for index, (spec, event, expected) in enumerate(examples):
        matcher = engine()
        matcher.add_filter(f"f{index}", spec)
        assert matcher.match(event) == ([f"f{index}"] if expected else []), spec


def test_add_remove_len_contains(engine, examples):
    matcher = engine()
    for index, (spec, _, _) in enumerate(examples):
        matcher.add_filter(f"f{index}", spec)
    ids = [f"f{index}" for index in range(len(examples))]
    assert matcher.filter_ids() == ids
    assert len(matcher) == len(ids)
    assert all(filter_id in matcher for filter_id in ids)
    assert "absent" not in matcher
    matcher.remove_filter(ids[0])
    assert ids[0] not in matcher and len(matcher) == len(ids) - 1
    with pytest.raises(UnknownFilter):
        matcher.remove_filter(ids[0])


def test_remove_unknown_raises(engine):
    with pytest.raises(UnknownFilter):
        engine().remove_filter("never-added")


def test_match_returns_ids_subset_in_insertion_order(engine, examples):
    matcher = engine()
    ids = []
    for index, (spec, _, _) in enumerate(examples):
        for copy in range(2):
            ids.append(f"f{index}-{copy}")
            matcher.add_filter(ids[-1], spec)
    for _, event, _ in examples:
        result = matcher.match(event)
        assert isinstance(result, list)
        assert len(set(result)) == len(result)
        assert set(result) <= set(matcher.filter_ids())
        assert result == [filter_id for filter_id in ids if filter_id in result]


def test_replacing_keeps_one_entry_with_the_new_filter(engine, examples):
    matching = next(spec for spec, _, expected in examples if expected)
    event, failing = next((event, spec) for spec, event, expected in examples if not expected)
    matcher = engine()
    matcher.add_filter("x", matching)
    # the old filter matches this event, so an empty answer below means it was replaced
    assert matcher.match(event) == ["x"], "the examples must share an event"
    matcher.add_filter("x", failing)
    assert matcher.filter_ids() == ["x"] and len(matcher) == 1
    assert matcher.match(event) == []


def test_unsupported_dialect(engine):
    matcher = engine()
    with pytest.raises(UnsupportedDialect) as info:
        matcher.add_filter("x", FilterSpec("urn:conformance:no-such-dialect", "x"))
    assert info.value.supported == tuple(sorted(engine.dialects))
    assert len(matcher) == 0


def test_empty_expression_is_invalid(engine):
    dialect = sorted(engine.dialects)[0]
    with pytest.raises(InvalidFilter):
        engine().add_filter("x", FilterSpec(dialect, ""))
