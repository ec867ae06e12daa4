"""Every dialect the box engines accept, compiled to one form (:class:`CompiledFilter`):
range filters bound to the schema (:mod:`matchers.ranges`), XPath 1.0 with the ranges
:mod:`matchers.xpath_ranges` can prove, and XPath 2.0 (no ranges extracted: one box
spanning the space, elementpath evaluating every event).
"""

from __future__ import annotations

import functools
from typing import Any

from wsframework.matching.base import FilterSpec
from wsframework.matching.errors import UnsupportedDialect

from .compiled_filter import CompiledFilter, frozen_rows
from .range_aggregate import RANGE_AGGREGATE_DIALECT, compile_range_aggregate
from .ranges import RANGES_DIALECT, bind_range_filter, parse_range_filter
from .schema import Schema
from .schema.extraction import EventBox
from .xpath import XPATH10_DIALECTS
from .xpath2 import XPATH20_DIALECTS, compile_xpath2
from .xpath_ranges import compile_xpath_filter

__all__ = ["compile_filter", "box_dialects"]


def box_dialects() -> frozenset[str]:
    """The dialects :func:`compile_filter` understands: ranges, range-aggregate, XPath 1.0
    (both URIs) and XPath 2.0."""
    return (frozenset({RANGES_DIALECT, RANGE_AGGREGATE_DIALECT}) | XPATH10_DIALECTS
            | XPATH20_DIALECTS)


def compile_filter(spec: FilterSpec, schema: Schema) -> CompiledFilter:
    """A :class:`CompiledFilter` for ``spec``: range filters bound to ``schema``; XPath 1.0
    filters with the ranges :mod:`matchers.xpath_ranges` can prove, checked exactly by lxml."""
    if spec.dialect == RANGES_DIALECT:
        if len(spec.expression) <= CACHED_RANGE_FILTER_LENGTH:
            return _compiled_range_filter(spec.expression, schema)
        return bind_range_filter(parse_range_filter(spec.expression), schema)
    if spec.dialect == RANGE_AGGREGATE_DIALECT:  # S-CN: a point against change boxes
        return compile_range_aggregate(spec, schema)
    if spec.dialect in XPATH10_DIALECTS:
        return compile_xpath_filter(spec, schema)
    if spec.dialect in XPATH20_DIALECTS:
        return _whole_space(compile_xpath2(spec), schema)
    raise UnsupportedDialect(spec.dialect, box_dialects())


#: range filters up to this many characters are compiled once for :data:`CACHED_RANGE_FILTERS`
#: uses: a Subscribe compiles its filter up to three times (placement, the matcher, the
#: centre of its box), a bulk subscribe or an import twice (validation, the matcher)
CACHED_RANGE_FILTER_LENGTH = 512
CACHED_RANGE_FILTERS = 8192


@functools.lru_cache(maxsize=CACHED_RANGE_FILTERS)
def _compiled_range_filter(expression: str, schema: Schema) -> CompiledFilter:
    # A CompiledFilter is immutable (read-only corner arrays, a pure check), so one object
    # serves every subscription with the same text and schema; refusals are not cached.
    return bind_range_filter(parse_range_filter(expression), schema)


def _whole_space(evaluate: Any, schema: Schema) -> CompiledFilter:
    """A filter no ranges are extracted from (XPath 2.0): one box spanning the whole space,
    every event checked by ``evaluate(event, **variables) -> bool``."""
    lo, hi = schema.everything()

    def check(event: Any, box: EventBox, variables: Any = None) -> bool:
        return bool(evaluate(event, **variables) if variables else evaluate(event))

    return CompiledFilter(frozen_rows([lo], schema.d), frozen_rows([hi], schema.d), False, check)
