"""The shared contract (matchers.conformance), checked for every engine known_matchers()
finds (STYLE item 9); each engine supplies its own ``example_filters()``."""

import pytest
from lxml import etree

from matchers import FilterSpec, Matcher, known_matchers
from matchers.conformance import MATCHER_CHECKS, check_matcher, check_remove_unknown_raises

ENGINES = sorted(known_matchers().items())


@pytest.mark.parametrize("check", MATCHER_CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("engine", [cls for _, cls in ENGINES], ids=[uri for uri, _ in ENGINES])
def test_engine_conforms(engine, check):
    check(engine)


class _Forgetful(Matcher):
    """Breaks the contract: remove_filter of an unknown id is silently ignored."""

    uri = "urn:conformance:forgetful"
    dialects = frozenset({"urn:conformance:words"})

    def __init__(self, config=None):
        super().__init__(config)
        self._filters = {}

    def add_filter(self, filter_id, spec):
        self.check_dialect(spec)
        self._filters[filter_id] = spec.expression

    def remove_filter(self, filter_id):
        self._filters.pop(filter_id, None)

    def match(self, event, *, variables=None):
        return [i for i, word in self._filters.items() if word and word in (event.text or "")]

    def filter_ids(self):
        return list(self._filters)

    @classmethod
    def example_filters(cls):
        event = etree.fromstring("<e>hello</e>")
        return [(FilterSpec("urn:conformance:words", "hello"), event, True),
                (FilterSpec("urn:conformance:words", "bye"), event, False)]


def test_a_broken_engine_fails_with_a_clear_message():
    with pytest.raises(AssertionError, match=r"remove_filter of an id never added: "
                                             r"expected UnknownFilter"):
        check_remove_unknown_raises(_Forgetful)
    with pytest.raises(AssertionError, match="UnknownFilter"):
        check_matcher(_Forgetful)
