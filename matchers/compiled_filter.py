"""CompiledFilter: a filter as the box engines store it (the R-tree engine, the brute-force
baseline), whatever dialect it was written in (:func:`matchers.box_filters.compile_filter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .schema.extraction import EventBox

__all__ = ["CompiledFilter", "frozen_rows"]


@dataclass(frozen=True, eq=False)
class CompiledFilter:
    """A filter as the box engines store it: its boxes, and the exact check behind them.

    ``mins``/``maxs`` (b, d) are coordinates; the filter can only match events whose box
    intersects one of them.  ``check(event, event_box, variables)`` is the exact answer.
    When ``box_exact`` is true, intersection with a *clean* event box already is the exact
    answer, and engines skip ``check``.  (A bulk-loaded box filter has no CompiledFilter:
    its box is its meaning, clean event or not.)
    """

    mins: np.ndarray
    maxs: np.ndarray
    box_exact: bool
    check: Callable[[Any, EventBox, Mapping[str, Any] | None], bool]


def frozen_rows(rows: Sequence[np.ndarray], d: int) -> np.ndarray:
    """``rows`` (b boxes' corners) as a read-only (b, d) float64 array."""
    array = np.array(rows, dtype=np.float64).reshape(len(rows), d)
    array.setflags(write=False)
    return array
