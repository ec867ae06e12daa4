"""Intervals of attribute values: what a filter's predicates on one attribute allow.

Filters (range dialect and XPath range extraction alike) reduce each attribute's predicates
to one :class:`Interval`; the box engines turn intervals into coordinate boxes
(:meth:`matchers.schema.Schema.box`) and use :meth:`Interval.overlaps` as the exact check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Interval", "MIRROR"]

# ``v op x`` is ``x MIRROR[op] v``: a comparison with its operands swapped.
MIRROR = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _lower(a: Any, a_open: bool, b: Any, b_open: bool) -> tuple[Any, bool]:
    """The larger of two lower bounds (None = unbounded)."""
    if a is None:
        return b, b_open
    if b is None or a > b:
        return a, a_open
    if b > a:
        return b, b_open
    return a, a_open or b_open


def _upper(a: Any, a_open: bool, b: Any, b_open: bool) -> tuple[Any, bool]:
    """The smaller of two upper bounds (None = unbounded)."""
    if a is None:
        return b, b_open
    if b is None or a < b:
        return a, a_open
    if b < a:
        return b, b_open
    return a, a_open or b_open


def _nonempty(lo: Any, lo_open: bool, hi: Any, hi_open: bool) -> bool:
    if lo is None or hi is None:
        return True
    return lo < hi or (lo == hi and not lo_open and not hi_open)


@dataclass(frozen=True)
class Interval:
    """A set of values ``lo (<|<=) v (<|<=) hi``; ``None`` bounds are unbounded.

    Values are those of one attribute type (float, str or int microseconds).  Event values are
    closed ranges ``[a, b]`` (a point is ``a == b``); a filter interval matches an event value
    when they intersect.
    """

    lo: Any = None
    lo_open: bool = False
    hi: Any = None
    hi_open: bool = False

    def intersect(self, other: "Interval") -> "Interval":
        lo, lo_open = _lower(self.lo, self.lo_open, other.lo, other.lo_open)
        hi, hi_open = _upper(self.hi, self.hi_open, other.hi, other.hi_open)
        return Interval(lo, lo_open, hi, hi_open)

    @property
    def empty(self) -> bool:
        return not _nonempty(self.lo, self.lo_open, self.hi, self.hi_open)

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None

    def overlaps(self, a: Any, b: Any) -> bool:
        """Does the closed event range [a, b] (None = unbounded) meet this interval?"""
        lo, lo_open = _lower(self.lo, self.lo_open, a, False)
        hi, hi_open = _upper(self.hi, self.hi_open, b, False)
        return _nonempty(lo, lo_open, hi, hi_open)
