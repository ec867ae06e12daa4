"""KeywordMatcher: an event matches when its text contains every word of the filter."""

from __future__ import annotations

import re
from typing import Any, Mapping

from lxml import etree

from matchers import FilterSpec, InvalidFilter, Matcher, UnknownFilter

KEYWORD_MATCHER_URI = "urn:edn-example:matchers:keywords"
KEYWORDS_DIALECT = "urn:edn-example:dialects:keywords"

_WORD = re.compile(r"\w+")


class KeywordMatcher(Matcher):
    """Filters are whitespace-separated words; matching is case-insensitive, whole-word.

    The text searched is the event's XPath string value (``''.join(event.itertext())``), so
    adjacent elements with no whitespace between them run together, as in XPath.
    """

    uri = KEYWORD_MATCHER_URI
    dialects = frozenset({KEYWORDS_DIALECT})

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self._filters: dict[str, frozenset[str]] = {}

    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)  # raises UnsupportedDialect
        words = spec.expression.casefold().split()
        if not words:
            raise InvalidFilter("empty filter")
        for word in words:
            if _WORD.fullmatch(word) is None:
                raise InvalidFilter(f"not a word: {word!r}")
        self._filters[filter_id] = frozenset(words)

    def remove_filter(self, filter_id: str) -> None:
        try:
            del self._filters[filter_id]
        except KeyError:
            raise UnknownFilter(filter_id) from None

    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        # Tokenize the event once; each filter is then a subset test.
        words = set(_WORD.findall("".join(event.itertext()).casefold()))
        return [filter_id for filter_id, wanted in self._filters.items() if wanted <= words]

    def filter_ids(self) -> list[str]:
        return list(self._filters)

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        news = etree.fromstring(
            "<news>\n <title>ACME raises dividend</title>\n <body>Q3</body>\n</news>"
        )
        return [
            (FilterSpec(KEYWORDS_DIALECT, "acme Dividend"), news, True),
            (FilterSpec(KEYWORDS_DIALECT, "acme loss"), news, False),
        ]
