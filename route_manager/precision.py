"""Summary precision as the dispatcher's operators and its self-tuning see it.

Precision (paper IV, V-B) is summary boxes / subscription rectangles of a server, one number
in [0, 1] everywhere in this package::

    0.0   "none":    no summary, every event is forwarded to every server unread
    0.1 .. 0.9       summaries cut to that share of the server's rectangles (STR groups of
                     its maximal rectangles; :meth:`matchers.RTreeRouteSet.set_precision`)
    1.0   "precise": the servers' maximal rectangles

On the wire (``Configure`` setting ``precision``, ``edn precision --at URL VALUE``, the
dispatcher setting ``initial_precision``) a precision is written ``none``, ``precise``, a
number in (0, 1] or a percentage (``30%``)::

    parse_precision("none") == 0.0;  parse_precision("30%") == 0.3
    format_precision(0.3) == "0.3";  format_precision(1.0) == "precise"

:class:`Ladder` is the self-tuning's set of operating points: steps of ``x`` from the lowest
allowed level (``none`` by default, or the first step ``x``) to precise. Levels are integers,
so repeated steps never drift (0.1 + 0.2 != 0.3 in floating point).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["NO_SUMMARY", "PRECISE", "parse_precision", "format_precision", "Ladder"]

NO_SUMMARY = 0.0
PRECISE = 1.0
_NAMES = {"none": NO_SUMMARY, "no-summary": NO_SUMMARY, "no summary": NO_SUMMARY,
          "precise": PRECISE}


def parse_precision(value) -> float:
    """A precision in [0, 1] from ``none`` | ``precise`` | a number in (0, 1] | ``N%``;
    ValueError (with the reason) for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"not a precision: {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        text = str(value).strip().lower()
        if text in _NAMES:
            return _NAMES[text]
        scale = 1.0
        if text.endswith("%"):
            text, scale = text[:-1].strip(), 0.01
        try:
            number = float(text) * scale
        except ValueError:
            raise ValueError(f"precision must be none, precise, a number in (0, 1] or a "
                             f"percentage, not {value!r}") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValueError(f"precision must lie in (0, 1] (or be none), not {value!r}")
    return round(number, 6)


def format_precision(precision: float) -> str:
    if precision <= NO_SUMMARY:
        return "none"
    if precision >= PRECISE:
        return "precise"
    return repr(round(precision, 6))


@dataclass(frozen=True)
class Ladder:
    """Operating points ``lowest*step .. 1.0`` in steps of ``step`` (level 0 is "none")."""

    step: float = 0.1
    with_none: bool = True

    def __post_init__(self):
        if not 0 < self.step <= 1:
            raise ValueError("the precision step must lie in (0, 1]")
        if abs(round(1 / self.step) * self.step - 1) > 1e-9:
            raise ValueError("the precision step must divide 1 (0.1, 0.05, 0.2, 0.25, ...)")

    @property
    def top(self) -> int:
        return round(1 / self.step)

    @property
    def bottom(self) -> int:
        return 0 if self.with_none else 1

    def level(self, precision: float) -> int:
        """The nearest level of ``precision`` (clamped to the ladder)."""
        return min(self.top, max(self.bottom, round(precision / self.step)))

    def precision(self, level: int) -> float:
        return round(min(self.top, max(self.bottom, level)) * self.step, 6)

    def levels(self) -> list[float]:
        return [self.precision(k) for k in range(self.bottom, self.top + 1)]
