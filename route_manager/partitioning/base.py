"""What every partitioner shares: scikit-learn estimator conventions and the load threshold.

Parameters live only in ``__init__`` (stored unchanged under the same names); ``fit(mins, maxs,
n_servers)`` does the work and returns ``self``; learned state ends in ``_``. After ``fit`` a
partitioner is ready for online use: ``assign(lo, hi)`` routes one more subscription and
records it, ``assign_batch(mins, maxs)`` routes several in order.

The load threshold (paper III-A: "only those servers with load below the prespecified
threshold are considered candidate targets") is ``capacity`` when given, otherwise
``ceil(load_factor * n / n_servers)`` for the ``n`` subscriptions given to ``fit``: the
paper's *load balancing factor* is the ratio of the maximum allowed load to the average load.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

__all__ = ["Partitioner", "CapacityExceeded", "as_generator", "check_rectangles", "clone"]


class CapacityExceeded(RuntimeError):
    """Every server has reached the load threshold: the subscription cannot be placed."""


def as_generator(seed) -> np.random.Generator:
    """A numpy Generator from an int, a Generator (returned as is) or None: what a
    partitioner's ``random_state`` (and a workload's ``seed``) may be."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def check_rectangles(mins, maxs) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert a rectangle set to two float64 ``(n, d)`` arrays (a single
    rectangle may be given as two ``(d,)`` arrays; an empty set as two ``(0, d)`` arrays)."""
    mins = np.asarray(mins, dtype=np.float64)
    maxs = np.asarray(maxs, dtype=np.float64)
    if mins.ndim == 1 and mins.size:
        mins, maxs = mins[None, :], maxs[None, :]
    if mins.ndim != 2 or mins.shape != maxs.shape:
        raise ValueError(f"mins and maxs must be (n, d) arrays of one shape, got {mins.shape} "
                         f"and {maxs.shape}")
    if mins.shape[1] < 1:
        raise ValueError("rectangles need at least one dimension")
    if not (np.isfinite(mins).all() and np.isfinite(maxs).all()):
        raise ValueError("rectangle coordinates must be finite")
    if (mins > maxs).any():
        raise ValueError("every rectangle needs mins <= maxs")
    return mins, maxs


def clone(estimator):
    """A new unfitted partitioner with the same parameters."""
    return type(estimator)(**estimator.get_params())


class Partitioner:
    """Base class. Subclasses implement ``_fit(mins, maxs)`` (setting ``labels_``) and
    ``_assign_one(lo, hi) -> int`` (choosing a server below the threshold; the base records
    the load)."""

    # ---- estimator conventions -----------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind is not p.VAR_KEYWORD]

    def get_params(self) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---- fitting -------------------------------------------------------------------------
    def fit(self, mins, maxs, n_servers: int):
        """Partition the subscriptions ``(mins, maxs)`` among ``n_servers`` servers; sets
        ``labels_`` (server index per subscription), ``loads_``, ``capacity_``,
        ``n_servers_``."""
        mins, maxs = check_rectangles(mins, maxs)
        n_servers = int(n_servers)
        if n_servers < 1:
            raise ValueError("n_servers must be >= 1")
        self.n_servers_ = n_servers
        self.n_features_in_ = mins.shape[1]
        self.capacity_ = self._capacity(len(mins), n_servers)
        if len(mins) > self.capacity_ * n_servers:
            raise CapacityExceeded(f"{len(mins)} subscriptions exceed {n_servers} servers x "
                                   f"capacity {self.capacity_}")
        self.loads_ = np.zeros(n_servers, dtype=np.int64)
        self._fit(mins, maxs)
        self.labels_ = np.asarray(self.labels_, dtype=np.int64)
        self.loads_ = np.bincount(self.labels_, minlength=n_servers).astype(np.int64)
        return self

    def _capacity(self, n: int, n_servers: int) -> int:
        capacity = getattr(self, "capacity", None)
        if capacity is not None:
            if capacity < 1:
                raise ValueError("capacity must be >= 1")
            return int(capacity)
        load_factor = getattr(self, "load_factor", 2.0)
        if load_factor < 1.0:
            raise ValueError("load_factor must be >= 1 (total capacity must hold every "
                             "subscription)")
        return max(1, math.ceil(load_factor * n / n_servers - 1e-9))

    def _fit(self, mins, maxs):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- online use ----------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "labels_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() first "
                               "(fit with empty arrays to start from empty servers)")

    def assign(self, lo, hi) -> int:
        """Route one new subscription ``[lo, hi]`` to a server below the threshold, record it,
        and return the server index."""
        self._check_fitted()
        lo = np.asarray(lo, dtype=np.float64).reshape(-1)
        hi = np.asarray(hi, dtype=np.float64).reshape(-1)
        if lo.shape != (self.n_features_in_,) or hi.shape != lo.shape:
            raise ValueError(f"expected {self.n_features_in_} coordinates")
        if (lo > hi).any():
            raise ValueError("lo must be <= hi")
        if not (self.loads_ < self.capacity_).any():
            raise CapacityExceeded(f"all {self.n_servers_} servers are at capacity "
                                   f"{self.capacity_}")
        server = int(self._assign_one(lo, hi))
        self.loads_[server] += 1
        return server

    def assign_batch(self, mins, maxs) -> np.ndarray:
        """Route several subscriptions in order (each sees the effect of the previous ones)."""
        mins, maxs = check_rectangles(mins, maxs)
        return np.array([self.assign(lo, hi) for lo, hi in zip(mins, maxs)], dtype=np.int64)

    def _assign_one(self, lo, hi) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def _eligible(self) -> np.ndarray:
        return self.loads_ < self.capacity_
