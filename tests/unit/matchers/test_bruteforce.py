"""BruteForceMatcher: the numpy baseline and oracle, on its own terms."""

import numpy as np
import pytest
from lxml import etree

from matchers import BRUTE_FORCE_MATCHER_URI, BruteForceMatcher, FilterSpec, Schema, create_matcher
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Attribute

SCHEMA = Schema((Attribute("x", "number", "/e/@x", (), 0, 10),
                 Attribute("s", "string", "/e/@s", ())))


def test_registered_and_configured_like_the_engine():
    matcher = create_matcher(BRUTE_FORCE_MATCHER_URI, SCHEMA)
    assert isinstance(matcher, BruteForceMatcher) and matcher.schema is SCHEMA


def test_matches_in_insertion_order_with_exact_checks():
    matcher = BruteForceMatcher(SCHEMA)
    matcher.add_filter("b", FilterSpec(RANGES_DIALECT, "x > 5"))
    matcher.add_filter("a", FilterSpec(RANGES_DIALECT, "x >= 5 and s ^= 'AAAAAA'"))
    matcher.add_filter("c", FilterSpec(RANGES_DIALECT, "s = 'AAAAAAy'"))
    assert matcher.match(etree.fromstring('<e x="5" s="AAAAAAx"/>')) == ["a"]
    assert matcher.match(etree.fromstring('<e x="6" s="AAAAAAy"/>')) == ["b", "a", "c"]
    matcher.add_filter("b", FilterSpec(RANGES_DIALECT, "x < 1"))
    assert matcher.filter_ids() == ["b", "a", "c"]
    assert matcher.match(etree.fromstring('<e x="0"/>')) == ["b"]


def test_removal_compacts_and_keeps_answers():
    matcher = BruteForceMatcher(SCHEMA)
    rng = np.random.default_rng(0)
    lo = np.column_stack([rng.uniform(0, 9, 200), np.full(200, SCHEMA.null[1])])
    hi = np.column_stack([lo[:, 0] + 1, np.full(200, SCHEMA.domain_hi[1])])
    matcher.bulk_load([f"s{i}" for i in range(200)], lo, hi)
    for i in range(150):
        matcher.remove_filter(f"s{i}")
    assert matcher._size < 200  # compacted
    point = np.array([5.0, SCHEMA.null[1]])
    expected = [f"s{i}" for i in range(150, 200) if lo[i, 0] <= 5 <= hi[i, 0]]
    assert matcher.match_box(point) == expected
    assert matcher.match(etree.fromstring('<e x="5"/>')) == expected
    with pytest.raises(ValueError):
        matcher.bulk_load(["s199"], lo[:1], hi[:1])
