"""Workload generators: deterministic, in range, and the paper's Zipf construction."""
import numpy as np
import pytest

from route_manager.workloads import synthetic as workloads


def test_uniform_rectangles_deterministic_and_in_range():
    a = workloads.uniform_rectangles(2000, 4, seed=3)
    b = workloads.uniform_rectangles(2000, 4, seed=3)
    c = workloads.uniform_rectangles(2000, 4, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    mins, maxs = a
    assert mins.shape == maxs.shape == (2000, 4)
    assert (mins >= 0).all() and (maxs <= 10).all() and (mins <= maxs).all()
    # min/max of two uniforms: mean side 10/3
    assert abs((maxs - mins).mean() - 10 / 3) < 0.1


def test_events_deterministic_and_in_range():
    e = workloads.uniform_events(1000, 3, seed=1)
    assert np.array_equal(e, workloads.uniform_events(1000, 3, seed=1))
    assert e.shape == (1000, 3) and (e >= 0).all() and (e <= 10).all()
    n = workloads.normal_events(5000, 2, seed=2)
    assert (n >= 0).all() and (n <= 10).all()
    assert abs(n.mean() - 9.5) < 0.05 and abs(n.std() - 0.25) < 0.05


@pytest.mark.parametrize("n_ranks", [1000, 10**9])  # exact table / rejection-inversion
def test_zipf_ranks_follow_the_law(n_ranks):
    alpha = 1.0
    ranks = workloads.zipf_ranks(200_000, n_ranks, alpha, seed=5)
    assert ranks.min() >= 1 and ranks.max() <= n_ranks
    counts = np.bincount(np.minimum(ranks, 6), minlength=7)[1:6]
    assert (np.diff(counts) < 0).all(), counts  # rank 1 most popular, decreasing
    h = np.log(n_ranks) + np.euler_gamma + 1 / (2 * n_ranks)  # harmonic number H(n)
    expected = 200_000 / h / np.arange(1, 6) ** alpha
    assert np.allclose(counts, expected, rtol=0.1)


def test_zipf_rejection_inversion_matches_exact_table():
    rng = np.random.default_rng(0)
    for alpha in (0.25, 2.0, 4.0):
        a = workloads._rejection_inversion(100_000, 500, alpha, rng)
        b = workloads.zipf_ranks(100_000, 500, alpha, seed=1)
        pa = np.bincount(a, minlength=501)[1:4] / 1e5
        pb = np.bincount(b, minlength=501)[1:4] / 1e5
        assert np.allclose(pa, pb, atol=0.01), (alpha, pa, pb)


def test_zipf_cells_numerical_ranking_bin_zero_most_popular():
    cells = workloads.zipf_cells(100_000, 2, 10, 1.0, seed=2)
    counts = np.bincount(cells, minlength=100)
    assert counts.argmax() == 0
    assert counts[0] > counts[1] > counts[2] > counts[10]  # 00, 01, 02, ..., 10
    digits = workloads.cell_digits(np.array([0, 1, 10, 99, 123]), 3, 10)
    assert digits.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 9, 9], [1, 2, 3]]


def test_zipf_rectangles_cover_whole_bins():
    mins, maxs = workloads.zipf_rectangles(5000, 4, 1.0, seed=3, bins=10)
    assert (mins >= 0).all() and (maxs <= 10).all() and (maxs > mins).all()
    assert np.allclose(mins, np.round(mins)) and np.allclose(maxs, np.round(maxs))
    # the most popular rectangle is the cell 0000 itself
    hot = np.hstack(workloads.zipf_rectangles(5000, 4, 2.0, seed=3, bins=10))
    unique, counts = np.unique(hot, axis=0, return_counts=True)
    assert unique[counts.argmax()].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    # larger alpha concentrates the rectangles: smaller volume
    small = workloads.zipf_rectangles(5000, 4, 4.0, seed=3)
    assert np.prod(small[1] - small[0], axis=1).mean() < np.prod(maxs - mins, axis=1).mean()


def test_zipf_rectangles_deterministic_in_many_dimensions():
    a = workloads.zipf_rectangles(100, 10, 1.0, seed=9)  # 10^10 cells: never materialised
    b = workloads.zipf_rectangles(100, 10, 1.0, seed=9)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_zipf_events_use_a_random_ranking():
    events = workloads.zipf_events(20_000, 2, 2.0, seed=4, ranking_seed=7)
    assert (events >= 0).all() and (events <= 10).all()
    assert np.array_equal(events, workloads.zipf_events(20_000, 2, 2.0, seed=4, ranking_seed=7))
    cells = (events[:, 0] // 1) * 10 + events[:, 1] // 1
    top = np.bincount(cells.astype(int), minlength=100).argmax()
    assert top != 0  # a permuted ranking: the hottest event cell is not cell 00
    assert np.array_equal(np.sort(workloads._random_bijection(np.arange(100), 100, 1)),
                          np.arange(100))


def test_feistel_bijection_is_a_permutation():
    values = np.arange(5000)
    n = 10**10
    out = workloads._random_bijection(values, n, seed=3)
    assert len(np.unique(out)) == len(values) and out.min() >= 0 and out.max() < n
