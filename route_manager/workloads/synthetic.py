"""Subscription and event workloads of the paper's partitioning study (section III-C).

Subscriptions are axis-aligned rectangles given as two ``(n, d)`` float arrays ``(mins, maxs)``;
events are points, one ``(n, d)`` array. Every generator takes a ``seed`` (an int, a
``numpy.random.Generator`` or None) and is deterministic for a given seed::

    from route_manager import workloads
    mins, maxs = workloads.uniform_rectangles(100_000, 4, seed=1)
    events = workloads.uniform_events(10_000, 4, seed=2)
    zmins, zmaxs = workloads.zipf_rectangles(100_000, 4, alpha=1.0, seed=3)
    zevents = workloads.zipf_events(10_000, 4, alpha=1.0, seed=4)

Uniform rectangles
    The paper says only that "events and subscriptions are both generated randomly ... with
    coordinate values uniformly distributed in the range of 0 to 10". We draw, per dimension,
    two independent uniform values and take their min and max as the interval. This is the
    continuous limit of the paper's own Zipf construction with alpha = 0 (two bins drawn
    uniformly, per-dimension min/max), so the uniform and Zipf workloads share one geometry.
    It sets the absolute hit ratio: a point at x (in units of the range) lies inside such an
    interval with probability 2x(1-x), 1/3 on average, so a uniform event lies in 3^-d of the
    rectangles on average (1/81 for d = 4: with 10,000 rectangles per server almost every event
    reaches every server under random partitioning, as the paper's Fig. 3 reports; in d = 10 an
    event lies in ~0.17 of 10,000 rectangles and hit ratios are low for every scheme).

Zipf-like rectangles (paper, section III-C)
    Each dimension is cut into ``bins`` equal bins; the bins^d cells are numbered x1x2..xd (base
    ``bins`` digits, x1 most significant) and the cell numbered i-1 has popularity 1/i^alpha.
    A rectangle draws two cells and takes per dimension min(x_i, x'_i) .. max(x_i, x'_i); it
    covers those bins whole, i.e. [min * w, (max + 1) * w] with w = (high - low) / bins.
    Cells are never materialised: a rank is drawn from the Zipf law over bins^d ranks (an exact
    table when bins^d is small, rejection-inversion otherwise) and decoded into digits.

Zipf-like events (footnote 2)
    The same steps with one cell and a *random* popularity ranking of the cells (a seeded
    bijection of the cell numbers), the event a uniform point inside the drawn cell.
"""
from __future__ import annotations

import numpy as np

from ..partitioning.base import as_generator

__all__ = [
    "as_generator",
    "uniform_rectangles",
    "uniform_events",
    "normal_events",
    "zipf_ranks",
    "zipf_cells",
    "cell_digits",
    "zipf_rectangles",
    "zipf_events",
]

LOW, HIGH = 0.0, 10.0
# Up to this many ranks the Zipf law is sampled from an exact cumulative table.
_EXACT_TABLE_LIMIT = 1 << 22


def uniform_rectangles(n: int, d: int, seed=None, *, low: float = LOW, high: float = HIGH):
    """``n`` rectangles in [low, high]^d: per dimension the min and max of two uniform draws."""
    rng = as_generator(seed)
    a = rng.uniform(low, high, size=(n, d))
    b = rng.uniform(low, high, size=(n, d))
    return np.minimum(a, b), np.maximum(a, b)


def uniform_events(n: int, d: int, seed=None, *, low: float = LOW, high: float = HIGH):
    """``n`` points uniform in [low, high]^d."""
    return as_generator(seed).uniform(low, high, size=(n, d))


def normal_events(n: int, d: int, seed=None, *, mean: float = 9.5, sd: float = 0.25,
                  low: float = LOW, high: float = HIGH):
    """``n`` points with independent normal coordinates, clipped to [low, high]."""
    return np.clip(as_generator(seed).normal(mean, sd, size=(n, d)), low, high)


# --- Zipf law over ranks 1..n_ranks -------------------------------------------------------

def zipf_ranks(size: int, n_ranks: int, alpha: float, seed=None) -> np.ndarray:
    """``size`` ranks in 1..n_ranks with P(i) proportional to 1 / i^alpha (int64)."""
    if n_ranks < 1:
        raise ValueError("n_ranks must be >= 1")
    if alpha < 0:
        raise ValueError("alpha must be >= 0")
    rng = as_generator(seed)
    if alpha == 0:
        return rng.integers(1, n_ranks + 1, size=size, dtype=np.int64)
    if n_ranks <= _EXACT_TABLE_LIMIT:
        weights = np.arange(1, n_ranks + 1, dtype=np.float64) ** -alpha
        cdf = np.cumsum(weights)
        cdf /= cdf[-1]
        ranks = np.searchsorted(cdf, rng.random(size), side="right") + 1
        return np.minimum(ranks, n_ranks).astype(np.int64)
    return _rejection_inversion(size, n_ranks, alpha, rng)


def _helper1(x):  # log1p(x) / x, continuous at 0
    x = np.asarray(x, dtype=np.float64)
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 - x / 2.0, np.log1p(safe) / safe)


def _helper2(x):  # expm1(x) / x, continuous at 0
    x = np.asarray(x, dtype=np.float64)
    small = np.abs(x) < 1e-8
    safe = np.where(small, 1.0, x)
    return np.where(small, 1.0 + x / 2.0, np.expm1(safe) / safe)


def _rejection_inversion(size: int, n: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """Exact Zipf sampling without a table (Hoermann & Derflinger, "Rejection-inversion to
    generate variates from monotone discrete distributions", 1996)."""
    def h(x):
        return np.exp(-s * np.log(x))

    def h_integral(x):
        log_x = np.log(x)
        return _helper2((1.0 - s) * log_x) * log_x

    def h_integral_inverse(x):
        t = np.maximum(x * (1.0 - s), -1.0)
        return np.exp(_helper1(t) * x)

    h_x1 = h_integral(1.5) - 1.0
    h_n = h_integral(n + 0.5)
    s_coeff = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0))
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        u = h_n + rng.random(todo.size) * (h_x1 - h_n)
        x = h_integral_inverse(u)
        k = np.clip(np.floor(x + 0.5), 1, n)
        accept = (k - x <= s_coeff) | (u >= h_integral(k + 0.5) - h(k))
        out[todo[accept]] = k[accept].astype(np.int64)
        todo = todo[~accept]
    return out


# --- cells -------------------------------------------------------------------------------

def cell_digits(cells: np.ndarray, d: int, bins: int) -> np.ndarray:
    """Decode cell numbers into per-dimension bin indices, shape (n, d); column 0 is the most
    significant digit (x1 of the paper)."""
    cells = np.asarray(cells, dtype=np.int64).copy()
    digits = np.empty((cells.size, d), dtype=np.int64)
    for i in range(d - 1, -1, -1):
        digits[:, i] = cells % bins
        cells //= bins
    return digits


def zipf_cells(size: int, d: int, bins: int, alpha: float, seed=None, *,
               ranking: str = "numerical", ranking_seed=None) -> np.ndarray:
    """``size`` cell numbers in 0..bins^d - 1 drawn with popularity 1/i^alpha.

    ``ranking="numerical"``: the i-th most popular cell is cell number i-1 (the paper's
    subscriptions). ``ranking="random"``: a seeded random bijection of the cell numbers
    (footnote 2; ``ranking_seed`` fixes the bijection independently of the draws)."""
    n_cells = bins ** d
    ranks = zipf_ranks(size, n_cells, alpha, seed) - 1
    if ranking == "numerical":
        return ranks
    if ranking == "random":
        return _random_bijection(ranks, n_cells, ranking_seed)
    raise ValueError(f"unknown ranking {ranking!r}")


def _random_bijection(values: np.ndarray, n: int, seed) -> np.ndarray:
    """Apply a seeded pseudo-random permutation of 0..n-1 to ``values``."""
    rng = as_generator(seed)
    if n <= _EXACT_TABLE_LIMIT:
        return rng.permutation(n)[values]
    # A 4-round Feistel network on 2*half bits, cycle-walked back into 0..n-1.
    half = (int(n - 1).bit_length() + 1) // 2
    mask = (1 << half) - 1
    keys = [int(k) for k in rng.integers(0, 1 << 31, size=4)]
    out = np.asarray(values, dtype=np.uint64).copy()
    todo = np.arange(out.size)
    while todo.size:
        x = out[todo]
        for key in keys:
            left, right = x >> np.uint64(half), x & np.uint64(mask)
            mixed = (right * np.uint64(0x9E3779B1) + np.uint64(key)) & np.uint64(0xFFFFFFFF)
            mixed ^= mixed >> np.uint64(15)
            mixed = (mixed * np.uint64(0x85EBCA77)) & np.uint64(0xFFFFFFFF)
            left, right = right, left ^ (mixed & np.uint64(mask))
            x = (left << np.uint64(half)) | right
        out[todo] = x
        todo = todo[x >= np.uint64(n)]
    return out.astype(np.int64)


def zipf_rectangles(n: int, d: int, alpha: float, seed=None, *, bins: int = 10,
                    low: float = LOW, high: float = HIGH):
    """``n`` rectangles by the paper's Zipf-like construction (see the module docstring)."""
    rng = as_generator(seed)
    a = cell_digits(zipf_cells(n, d, bins, alpha, rng), d, bins)
    b = cell_digits(zipf_cells(n, d, bins, alpha, rng), d, bins)
    width = (high - low) / bins
    return low + np.minimum(a, b) * width, low + (np.maximum(a, b) + 1) * width


def zipf_events(n: int, d: int, alpha: float, seed=None, *, bins: int = 10,
                ranking_seed=None, low: float = LOW, high: float = HIGH):
    """``n`` points: a cell drawn with popularity 1/i^alpha under a random ranking of the cells
    (``ranking_seed``, default derived from ``seed``), then a uniform point inside it."""
    rng = as_generator(seed)
    if ranking_seed is None:
        ranking_seed = int(rng.integers(0, 2**63 - 1))
    cells = zipf_cells(n, d, bins, alpha, rng, ranking="random", ranking_seed=ranking_seed)
    width = (high - low) / bins
    return low + (cell_digits(cells, d, bins) + rng.random((n, d))) * width
