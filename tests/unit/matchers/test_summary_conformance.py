"""One contract for every summary builder: the summary covers every input rectangle (each lies
inside a single summary box, so no event a rectangle holds is withheld) and keeps within the
box count it was asked for.

The builders, each asked for at most ``budget`` boxes of rectangles in [0, 10]^d:

* STR groups (:func:`matchers.summary.str_groups`), ``budget`` groups;
* the summary manager's cut (:meth:`matchers.summary.MaximalRectangles.boxes_at`);
* the engine's summary at a precision (:meth:`matchers.RTreeMatchingEngine.summary`),
  ``summary_target(precision, n)`` boxes;
* the route set's cut of a precise summary at a precision
  (:class:`matchers.route_set.table.SummaryCuts`), as ``set_precision`` takes it;
* the TGS R-tree's nodes at a depth (:func:`route_manager.partitioning.tgs.rtree_summary`),
  at most ``fanout ** (depth - 1)`` boxes.
"""
import math

import numpy as np
import pytest

from matchers import RTreeMatchingEngine, Schema, Summary
from matchers.route_set.table import SummaryCuts
from matchers.schema import Attribute
from matchers.summary import MaximalRectangles, str_groups, summary_target
from route_manager.partitioning.tgs import rtree_summary

FANOUT = 4


def _schema(d):
    return Schema(tuple(Attribute(f"a{j}", "number", f"/e/@a{j}", (), 0.0, 10.0)
                        for j in range(d)))


def by_str_groups(mins, maxs, budget):
    return (*str_groups(mins, maxs, budget), budget)


def by_maximal_rectangles(mins, maxs, budget):
    manager = MaximalRectangles(mins.shape[1])
    manager.load(np.arange(len(mins)), mins, maxs)
    return (*manager.boxes_at(budget), budget)


def _precision(budget, n):
    return min(1.0, budget / n) if n else 1.0


def by_engine_summary(mins, maxs, budget):
    engine = RTreeMatchingEngine(_schema(mins.shape[1]))
    engine.bulk_load([f"r{i}" for i in range(len(mins))], mins, maxs)
    precision = _precision(budget, len(mins))
    summary = engine.summary(precision)
    return summary.mins, summary.maxs, summary_target(precision, len(mins))


def by_route_set_cut(mins, maxs, budget):
    schema = _schema(mins.shape[1])
    manager = MaximalRectangles(schema.d)
    manager.load(np.arange(len(mins)), mins, maxs)
    precise = Summary(schema.dims, *manager.maximal_boxes(), schema)
    cuts = SummaryCuts()
    cuts.replace("server", len(mins))
    precision = _precision(budget, len(mins))
    cut_mins, cut_maxs, _ = cuts.cut("server", precise, precision)
    return cut_mins, cut_maxs, summary_target(precision, len(mins))


def by_rtree_depth(mins, maxs, budget):
    depth = 1 + int(math.floor(math.log(budget, FANOUT) + 1e-9))
    return (*rtree_summary(mins, maxs, depth, FANOUT), FANOUT ** (depth - 1))


BUILDERS = [by_str_groups, by_maximal_rectangles, by_engine_summary, by_route_set_cut,
            by_rtree_depth]


def rectangles(seed):
    """A random rectangle set: uniform ones, copies and shrunken copies (so some are covered
    by others, and some identical), of random size and dimension; and a box budget."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(0, 400)), int(rng.integers(1, 5))
    a, b = rng.uniform(0, 10, (n, d)), rng.uniform(0, 10, (n, d))
    mins, maxs = np.minimum(a, b), np.maximum(a, b)
    if n > 1:
        copies = rng.choice(n, n // 4)
        shrink = rng.uniform(0, 0.5, (len(copies), d)) * (maxs[copies] - mins[copies])
        mins = np.vstack([mins, mins[copies] + shrink, mins[copies[:3]]])
        maxs = np.vstack([maxs, maxs[copies] - shrink, maxs[copies[:3]]])
    budget = int(rng.integers(1, max(2, len(mins) + 5)))
    return mins, maxs, budget


def uncovered(mins, maxs, box_mins, box_maxs):
    """Indices of input rectangles inside no single summary box."""
    if len(mins) == 0:
        return []
    if len(box_mins) == 0:
        return list(range(len(mins)))
    inside = np.all((box_mins[None] <= mins[:, None]) & (box_maxs[None] >= maxs[:, None]), axis=2)
    return np.flatnonzero(~inside.any(axis=1)).tolist()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_summary_covers_every_rectangle_within_its_box_count(build, seed):
    mins, maxs, budget = rectangles(seed)
    box_mins, box_maxs, allowed = build(mins, maxs, budget)
    assert allowed <= max(budget, 1)
    assert box_mins.shape == box_maxs.shape and box_mins.shape[1:] == (mins.shape[1],)
    assert len(box_mins) <= allowed, f"{len(box_mins)} boxes asked for at most {allowed}"
    assert np.all(box_mins <= box_maxs)
    missed = uncovered(mins, maxs, box_mins, box_maxs)
    assert not missed, f"{len(missed)} of {len(mins)} rectangles uncovered, e.g. {missed[:5]}"


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_a_budget_of_one_box_is_the_bounding_box(build):
    mins, maxs, _ = rectangles(3)
    box_mins, box_maxs, _ = build(mins, maxs, 1)
    assert len(box_mins) == 1
    assert np.array_equal(box_mins[0], mins.min(axis=0))
    assert np.array_equal(box_maxs[0], maxs.max(axis=0))


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_no_rectangles_no_boxes(build):
    box_mins, box_maxs, _ = build(np.zeros((0, 2)), np.zeros((0, 2)), 3)
    assert box_mins.shape == box_maxs.shape == (0, 2)
