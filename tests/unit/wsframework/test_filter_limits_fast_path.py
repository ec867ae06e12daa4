"""check_filter_limits answers texts without paths, calls, axes, variables and literals by
counting (brackets, commas, bars, boolean words) instead of scanning: whatever the count
accepts, the scan accepts too. Checked on generated texts under tight limits."""
from __future__ import annotations

import random

from wsframework.matching.base import FilterSpec
from wsframework.matching.errors import InvalidFilter
from wsframework.matching.limits import (FilterLimits, _is_complex, _scan,
                                         _within_simple_bounds, check_filter_limits)

_PIECES = ["x", "and", "or", " ", "[", "]", "(", ")", ",", "|", "1", "é", "-", ".", ":",
           "in", "band", "or1", "/", "$", "'", "re:test", "::", "{", "}"]


def test_what_the_count_accepts_the_scan_accepts():
    rng = random.Random(3)
    limits = FilterLimits(max_depth=3, max_steps=5)
    counted = 0
    for _ in range(30_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 14)))
        if not _is_complex(text) and _within_simple_bounds(text, limits):
            counted += 1
            _scan(FilterSpec("urn:x", text), text, limits)  # raises if the count was wrong
    assert counted > 1000


def test_a_range_filter_over_the_limits_is_still_refused():
    text = " and ".join(f"x{i} in [0, 1]" for i in range(100))  # 100 + 100 + 99 steps
    try:
        check_filter_limits(FilterSpec("urn:x", text), FilterLimits())
    except InvalidFilter as refused:
        assert "steps" in str(refused)
    else:
        raise AssertionError("a filter of 299 steps passed")
    check_filter_limits(FilterSpec("urn:x", text), FilterLimits(max_steps=299))
