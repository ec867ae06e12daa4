"""Precise matcher errors; the messaging edge translates them into SOAP faults."""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "MatcherError",
    "InvalidFilter",
    "InvalidMatcherOptions",
    "UnsupportedDialect",
    "UnknownFilter",
    "UnknownMatcher",
]


class MatcherError(Exception):
    """Base class of every error a matcher or the matcher registry raises."""


class InvalidFilter(MatcherError):
    """A filter expression in a supported dialect that cannot be compiled."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid filter: {reason}")


class InvalidMatcherOptions(MatcherError):
    """Options (a topic's matcher configuration) a matcher cannot be built with: the
    requester's error, answered with a Sender fault."""


class UnsupportedDialect(MatcherError):
    """A filter dialect the matcher does not accept (FilteringRequestedUnavailable)."""

    def __init__(self, dialect: str, supported: Iterable[str]) -> None:
        self.dialect = dialect
        self.supported = tuple(sorted(supported))
        super().__init__(
            f"unsupported filter dialect {dialect!r}; supported: {', '.join(self.supported)}"
        )


class UnknownFilter(MatcherError, KeyError):
    """Removal (or lookup) of a filter id the matcher does not hold."""

    def __init__(self, filter_id: str) -> None:
        self.filter_id = filter_id
        super().__init__(filter_id)

    def __str__(self) -> str:  # KeyError would repr() the argument
        return f"unknown filter {self.filter_id!r}"


class UnknownMatcher(MatcherError):
    """A matcher URI no built-in engine or installed plugin provides."""

    def __init__(self, uri: str, known: Iterable[str]) -> None:
        self.uri = uri
        self.known = tuple(sorted(known))
        super().__init__(
            f"unknown matcher {uri!r}; known matchers: {', '.join(self.known) or '(none)'}"
        )
