"""The matcher contract as checks a plugin author runs on an engine.

Each check takes a :class:`~wsframework.matching.base.Matcher` subclass (called with an
optional config, as :func:`~wsframework.matching.registry.create_matcher` does) and raises
:class:`AssertionError` saying what broke; the cases come from the engine's own
``example_filters()`` (at least one matching and one non-matching case, sharing one event).
No test framework is needed::

    from matchers.conformance import check_matcher
    from my_plugin import MyMatcher

    check_matcher(MyMatcher)                   # every check, in order

    # or one test per check, e.g. with pytest:
    @pytest.mark.parametrize("check", MATCHER_CHECKS, ids=lambda c: c.__name__)
    def test_conformance(check):
        check(MyMatcher)

The framework runs the same checks over every engine ``known_matchers()`` finds
(``tests/unit/matchers/test_matcher_conformance.py``).
"""

from __future__ import annotations

from typing import Any, Callable

from wsframework.matching.base import FilterFailures, FilterSpec, Matcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter, UnsupportedDialect

__all__ = [
    "MATCHER_CHECKS",
    "check_matcher",
    "check_class_attributes",
    "check_starts_empty_and_keeps_config",
    "check_examples_match_as_declared",
    "check_add_remove_len_contains",
    "check_remove_unknown_raises",
    "check_match_returns_ids_in_insertion_order",
    "check_replacing_keeps_one_entry",
    "check_unsupported_dialect",
    "check_empty_expression_is_invalid",
    "check_match_reporting_agrees_with_match",
]

NO_SUCH_DIALECT = "urn:conformance:no-such-dialect"

Examples = list  # list[tuple[FilterSpec, Any, bool]]


def _raises(error: type[Exception], action: Callable[[], Any], what: str) -> Exception:
    """Run ``action``; it must raise ``error`` (returned), else AssertionError on ``what``."""
    try:
        action()
    except error as caught:
        return caught
    raise AssertionError(f"{what}: expected {error.__name__}, nothing was raised")


def examples_of(matcher_class: type[Matcher]) -> Examples:
    """The engine's ``example_filters()``, checked to hold a matching and a non-matching case."""
    cases = list(matcher_class.example_filters())
    name = matcher_class.__name__
    assert any(expected for _, _, expected in cases), \
        f"{name}.example_filters() needs a case that matches"
    assert any(not expected for _, _, expected in cases), \
        f"{name}.example_filters() needs a case that does not match"
    return cases


def check_class_attributes(matcher_class: type[Matcher]) -> None:
    """A Matcher subclass with a non-empty ``uri`` and a non-empty frozenset of dialects."""
    name = getattr(matcher_class, "__name__", repr(matcher_class))
    assert isinstance(matcher_class, type) and issubclass(matcher_class, Matcher), \
        f"{name} is not a subclass of wsframework.matching.Matcher"
    assert isinstance(getattr(matcher_class, "uri", None), str) and matcher_class.uri, \
        f"{name}.uri must be a non-empty string"
    dialects = getattr(matcher_class, "dialects", None)
    assert isinstance(dialects, frozenset) and dialects, \
        f"{name}.dialects must be a non-empty frozenset, got {dialects!r}"
    assert all(isinstance(dialect, str) for dialect in dialects), \
        f"{name}.dialects must hold URI strings, got {sorted(map(repr, dialects))}"


def check_starts_empty_and_keeps_config(matcher_class: type[Matcher]) -> None:
    """A new matcher holds no filters, keeps its config and describes itself by its URI."""
    config = object()
    matcher = matcher_class(config)
    name = matcher_class.__name__
    assert matcher.config is config, f"{name}(config) must keep config as .config"
    assert len(matcher) == 0 and matcher.filter_ids() == [], \
        f"a new {name} must hold no filters, holds {matcher.filter_ids()!r}"
    described = matcher.describe()
    assert described["uri"] == matcher_class.uri, \
        f"{name}.describe()['uri'] is {described.get('uri')!r}, not {matcher_class.uri!r}"
    assert described["filters"] == 0, f"{name}.describe()['filters'] must be 0 when empty"


def check_examples_match_as_declared(matcher_class: type[Matcher],
                                     examples: Examples | None = None) -> None:
    """Each example filter, alone in a new matcher, matches its event exactly as declared."""
    for index, (spec, event, expected) in enumerate(examples or examples_of(matcher_class)):
        matcher = matcher_class()
        matcher.add_filter(f"f{index}", spec)
        found = matcher.match(event)
        wanted = [f"f{index}"] if expected else []
        assert found == wanted, (f"{matcher_class.__name__}: example {index} "
                                 f"({spec.dialect} {spec.expression!r}) matched {found!r}, "
                                 f"expected {wanted!r}")


def check_add_remove_len_contains(matcher_class: type[Matcher],
                                  examples: Examples | None = None) -> None:
    """filter_ids, len and ``in`` follow additions and removals; removing twice raises
    UnknownFilter."""
    examples = examples or examples_of(matcher_class)
    name = matcher_class.__name__
    matcher = matcher_class()
    for index, (spec, _, _) in enumerate(examples):
        matcher.add_filter(f"f{index}", spec)
    ids = [f"f{index}" for index in range(len(examples))]
    assert matcher.filter_ids() == ids, \
        f"{name}.filter_ids() is {matcher.filter_ids()!r}, expected {ids!r} (insertion order)"
    assert len(matcher) == len(ids), f"len({name}) is {len(matcher)}, expected {len(ids)}"
    missing = [filter_id for filter_id in ids if filter_id not in matcher]
    assert not missing, f"{missing!r} not `in` the {name} that holds them"
    assert "absent" not in matcher, f"an id never added is `in` the {name}"
    matcher.remove_filter(ids[0])
    assert ids[0] not in matcher and len(matcher) == len(ids) - 1, \
        f"{name}.remove_filter({ids[0]!r}) left it in place"
    _raises(UnknownFilter, lambda: matcher.remove_filter(ids[0]),
            f"{name}.remove_filter of an id already removed")


def check_remove_unknown_raises(matcher_class: type[Matcher]) -> None:
    """Removing an id never added raises UnknownFilter."""
    _raises(UnknownFilter, lambda: matcher_class().remove_filter("never-added"),
            f"{matcher_class.__name__}.remove_filter of an id never added")


def check_match_returns_ids_in_insertion_order(matcher_class: type[Matcher],
                                               examples: Examples | None = None) -> None:
    """``match`` returns a list of held ids, without duplicates, in insertion order."""
    examples = examples or examples_of(matcher_class)
    name = matcher_class.__name__
    matcher = matcher_class()
    ids = []
    for index, (spec, _, _) in enumerate(examples):
        for copy in range(2):
            ids.append(f"f{index}-{copy}")
            matcher.add_filter(ids[-1], spec)
    for _, event, _ in examples:
        result = matcher.match(event)
        assert isinstance(result, list), \
            f"{name}.match returned a {type(result).__name__}, not a list"
        assert len(set(result)) == len(result), f"{name}.match returned duplicates: {result!r}"
        assert set(result) <= set(matcher.filter_ids()), \
            f"{name}.match returned ids it does not hold: {sorted(set(result) - set(ids))!r}"
        ordered = [filter_id for filter_id in ids if filter_id in result]
        assert result == ordered, \
            f"{name}.match returned {result!r}, not in insertion order {ordered!r}"


def check_replacing_keeps_one_entry(matcher_class: type[Matcher],
                                    examples: Examples | None = None) -> None:
    """Adding under a held id replaces that filter: one entry, the new filter's answers."""
    examples = examples or examples_of(matcher_class)
    name = matcher_class.__name__
    matching = next(spec for spec, _, expected in examples if expected)
    event, failing = next((event, spec) for spec, event, expected in examples if not expected)
    matcher = matcher_class()
    matcher.add_filter("x", matching)
    # the old filter matches this event, so an empty answer below means it was replaced
    assert matcher.match(event) == ["x"], \
        f"{name}.example_filters(): the matching and non-matching cases must share an event"
    matcher.add_filter("x", failing)
    assert matcher.filter_ids() == ["x"] and len(matcher) == 1, \
        f"replacing filter 'x' left {matcher.filter_ids()!r} in the {name}"
    assert matcher.match(event) == [], f"{name} still answers with the replaced filter"


def check_unsupported_dialect(matcher_class: type[Matcher]) -> None:
    """An unknown dialect raises UnsupportedDialect naming the supported ones, storing nothing."""
    name = matcher_class.__name__
    matcher = matcher_class()
    error = _raises(UnsupportedDialect,
                    lambda: matcher.add_filter("x", FilterSpec(NO_SUCH_DIALECT, "x")),
                    f"{name}.add_filter with dialect {NO_SUCH_DIALECT!r}")
    assert error.supported == tuple(sorted(matcher_class.dialects)), \
        f"UnsupportedDialect.supported is {error.supported!r}, not {name}.dialects"
    assert len(matcher) == 0, f"{name} stored a filter of an unsupported dialect"


def check_empty_expression_is_invalid(matcher_class: type[Matcher]) -> None:
    """An empty expression in a supported dialect raises InvalidFilter."""
    dialect = sorted(matcher_class.dialects)[0]
    _raises(InvalidFilter, lambda: matcher_class().add_filter("x", FilterSpec(dialect, "")),
            f"{matcher_class.__name__}.add_filter of an empty {dialect!r} filter")


def check_match_reporting_agrees_with_match(matcher_class: type[Matcher],
                                            examples: Examples | None = None) -> None:
    """``match_reporting`` answers exactly as ``match`` does, and reports nothing for
    filters that evaluate fine within a generous budget."""
    name = matcher_class.__name__
    for index, (spec, event, _) in enumerate(examples or examples_of(matcher_class)):
        matcher = matcher_class()
        matcher.add_filter(f"f{index}", spec)
        failures = FilterFailures(budget=60.0)
        found = matcher.match_reporting(event, failures)
        assert found == matcher.match(event), \
            f"{name}.match_reporting answered {found!r}, match {matcher.match(event)!r}"
        assert not failures.failed, f"{name} reported {failures.failed!r} for example {index}"


MATCHER_CHECKS: tuple[Callable[[type[Matcher]], None], ...] = (
    check_class_attributes,
    check_starts_empty_and_keeps_config,
    check_examples_match_as_declared,
    check_add_remove_len_contains,
    check_remove_unknown_raises,
    check_match_returns_ids_in_insertion_order,
    check_replacing_keeps_one_entry,
    check_unsupported_dialect,
    check_empty_expression_is_invalid,
    check_match_reporting_agrees_with_match,
)


def check_matcher(matcher_class: type[Matcher]) -> None:
    """Every check of :data:`MATCHER_CHECKS`, in order (the first failure raises)."""
    for check in MATCHER_CHECKS:
        check(matcher_class)
