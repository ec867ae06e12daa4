"""Helpers shared by tests of what the R-tree engine compiles (this module holds no tests)."""
from __future__ import annotations

import matchers.rtree_engine as rtree_engine


def count_compiles(monkeypatch) -> list[str]:
    """The expressions the R-tree engine compiles from their text from now on (the list
    grows as it does)."""
    seen: list[str] = []
    real = rtree_engine.compile_filter

    def counting(spec, schema):
        seen.append(spec.expression)
        return real(spec, schema)
    monkeypatch.setattr(rtree_engine, "compile_filter", counting)
    return seen
