"""Hit ratio: the slab-bitset containment index against brute force."""
import numpy as np
import pytest

from route_manager.models import hit_ratio as hr
from route_manager import workloads


@pytest.mark.parametrize("d", [1, 2, 4, 7])
@pytest.mark.parametrize("kind", ["uniform", "zipf", "points"])
def test_containment_index_matches_brute_force(d, kind):
    rng = np.random.default_rng(d)
    if kind == "uniform":
        mins, maxs = workloads.uniform_rectangles(300, d, seed=d)
        events = workloads.uniform_events(500, d, seed=d + 1)
    elif kind == "zipf":
        mins, maxs = workloads.zipf_rectangles(300, d, 1.0, seed=d, bins=4)
        # events on bin edges exercise the closed-interval boundaries
        events = rng.integers(0, 5, size=(500, d)) * 2.5
    else:  # degenerate boxes and events exactly on them
        mins = rng.uniform(0, 10, size=(50, d))
        maxs = mins.copy()
        events = np.vstack([mins[:20], rng.uniform(0, 10, size=(100, d))])
    got = hr.ContainmentIndex(mins, maxs, slabs=8).any_contains(events)
    assert np.array_equal(got, hr.any_contains_brute_force(events, mins, maxs))


def test_forwarding_matrix_and_hit_ratio_match_brute_force():
    mins, maxs = workloads.uniform_rectangles(600, 3, seed=1)
    labels = np.random.default_rng(2).integers(0, 4, 600)
    events = workloads.uniform_events(400, 3, seed=3)
    summaries = hr.precise_summaries(mins, maxs, labels, 4)
    expected = np.stack([hr.any_contains_brute_force(events, *s) for s in summaries], axis=1)
    assert np.array_equal(hr.forwarding_matrix(events, summaries), expected)
    assert hr.hit_ratio(events, summaries) == pytest.approx(expected.mean())


def test_whole_space_summaries_give_ratio_one_and_empty_zero():
    events = workloads.uniform_events(100, 4, seed=1)
    whole = (np.zeros((1, 4)), np.full((1, 4), 10.0))
    assert hr.hit_ratio(events, [whole] * 5) == 1.0
    empty = (np.empty((0, 4)), np.empty((0, 4)))
    assert hr.hit_ratio(events, [whole, empty]) == 0.5


def test_events_outside_the_boxes_extent_are_misses():
    mins, maxs = np.array([[1.0, 1.0]]), np.array([[2.0, 2.0]])
    events = np.array([[0.5, 1.5], [1.5, 1.5], [2.0, 2.0], [2.0001, 1.5]])
    assert hr.ContainmentIndex(mins, maxs).any_contains(events).tolist() == [
        False, True, True, False]


def test_depth_summaries_cover_the_precise_region():
    mins, maxs = workloads.uniform_rectangles(2000, 4, seed=5)
    labels = np.arange(2000) % 3
    events = workloads.uniform_events(2000, 4, seed=6)
    precise = hr.hit_ratio(events, hr.precise_summaries(mins, maxs, labels, 3))
    ratios = [hr.hit_ratio(events, hr.depth_summaries(mins, maxs, labels, 3, depth))
              for depth in (1, 2, 3)]
    # nested node boxes: each coarser depth forwards a superset (never a false negative)
    assert ratios[0] >= ratios[1] >= ratios[2] >= precise
    deep = hr.hit_ratio(events, hr.depth_summaries(mins, maxs, labels, 3, 10))
    assert deep == precise
