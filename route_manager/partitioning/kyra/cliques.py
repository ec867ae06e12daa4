"""Server cliques (Kyra, Fig. 5): complete-linkage agglomerative clustering of servers by
network latency, bounded by a clique diameter and a clique size."""
from __future__ import annotations

import numpy as np

__all__ = ["cliques", "check_latency"]


def check_latency(latency) -> np.ndarray:
    """``latency`` as a square, finite, non-negative float matrix (ValueError otherwise)."""
    matrix = np.asarray(latency, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"latency must be a square matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
        raise ValueError("latency must be finite and non-negative")
    return matrix


def cliques(latency: np.ndarray, max_distance: float, max_servers: int) -> list[list[int]]:
    """Figure 5: start with one clique per server; repeatedly merge the closest pair of
    cliques (distance = the furthest pair of their servers, so a clique's diameter is the
    distance it was merged at) whose merged size is at most ``max_servers``; stop when the
    closest mergeable pair is farther than ``max_distance``.

    Ties go to the pair of lowest indices. Latency need not be symmetric: the distance of two
    servers is the larger of the two directions (a clique must be tight both ways). Cliques are
    returned as sorted server lists, ordered by their first server."""
    matrix = check_latency(latency)
    if int(max_servers) < 1:
        raise ValueError("max_servers must be >= 1")
    matrix = np.maximum(matrix, matrix.T)
    groups: list[list[int]] = [[i] for i in range(len(matrix))]
    proximity = matrix.copy()
    np.fill_diagonal(proximity, np.inf)
    while len(groups) > 1:
        sizes = np.array([len(g) for g in groups])
        fits = sizes[:, None] + sizes[None, :] <= max_servers
        candidates = np.where(fits, proximity, np.inf)
        flat = int(np.argmin(candidates))
        i, j = divmod(flat, len(groups))
        if not np.isfinite(candidates[i, j]) or candidates[i, j] > max_distance:
            break
        i, j = min(i, j), max(i, j)
        groups[i] = sorted(groups[i] + groups[j])
        del groups[j]
        # Complete linkage: the merged clique is as far from another as its farther half.
        proximity[i, :] = np.maximum(proximity[i, :], proximity[j, :])
        proximity[:, i] = proximity[i, :]
        proximity[i, i] = np.inf
        proximity = np.delete(np.delete(proximity, j, axis=0), j, axis=1)
    return sorted(groups, key=lambda g: g[0])
