"""The partitioner contract (:mod:`.base`) as checks a partitioner's author runs on it.

Each check takes a *factory*: a callable that returns a new, unfitted partitioner from
keyword parameters (the class itself, or ``functools.partial(MyPartitioner,
random_state=0)`` to pin a seed, since the checks expect the same answer twice). It raises
:class:`AssertionError` saying what broke; no test framework is needed::

    from route_manager.partitioning.conformance import check_partitioner

    check_partitioner(functools.partial(MyPartitioner, random_state=0))

The checks, each usable alone with rectangles of your choosing (two ``(n, d)`` arrays):
:func:`check_estimator_conventions`, :func:`check_fit_and_online_use`,
:func:`check_empty_fit_then_live_assignment` and :func:`check_threshold_never_exceeded`.
The framework runs them over every partitioner in ``ALL_PARTITIONERS``
(``tests/unit/route_manager/test_partitioning.py``).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import numpy as np

from .. import workloads
from .base import CapacityExceeded, Partitioner, clone

__all__ = [
    "check_partitioner",
    "check_estimator_conventions",
    "check_fit_and_online_use",
    "check_empty_fit_then_live_assignment",
    "check_threshold_never_exceeded",
]

Factory = Callable[..., Partitioner]


def _raises(error: type[Exception], action: Callable[[], Any], what: str) -> None:
    try:
        action()
    except error:
        return
    raise AssertionError(f"{what}: expected {error.__name__}, nothing was raised")


def check_estimator_conventions(factory: Factory) -> None:
    """Parameters only in ``__init__``, stored unchanged under their names; nothing learned
    before ``fit``; ``clone``/``get_params``/``set_params`` agree; ``assign`` before ``fit``
    raises RuntimeError."""
    est = factory()
    cls = type(est)
    name = cls.__name__
    params = est.get_params()
    declared = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(params) == declared, \
        f"{name}.get_params() gives {sorted(params)}, __init__ declares {sorted(declared)}"
    learned = [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]
    assert not learned, f"{name} has learned state {learned} before fit"
    assert clone(est).get_params() == params, f"clone({name}) changes its parameters"
    assert est.set_params(**params) is est, f"{name}.set_params must return self"
    _raises(ValueError, lambda: est.set_params(no_such_parameter=1),
            f"{name}.set_params(no_such_parameter=1)")
    _raises(RuntimeError, lambda: est.assign(np.zeros(1), np.ones(1)),
            f"{name}.assign before fit")


def _expected_capacity(est: Partitioner, n: int, n_servers: int) -> int:
    capacity = getattr(est, "capacity", None)
    if capacity is not None:
        return int(capacity)
    return max(1, math.ceil(getattr(est, "load_factor", 2.0) * n / n_servers - 1e-9))


def check_fit_and_online_use(factory: Factory, mins: np.ndarray | None = None,
                             maxs: np.ndarray | None = None, n_servers: int = 4,
                             extra: tuple[np.ndarray, np.ndarray] | None = None) -> None:
    """``fit`` returns self with a label per subscription within the load threshold, leaves
    the parameters alone and is deterministic; then ``assign_batch`` routes ``extra``
    subscriptions online within the threshold, and bad rectangles raise ValueError."""
    if mins is None or maxs is None:
        mins, maxs = workloads.uniform_rectangles(1200, 3, seed=11)
    d = mins.shape[1]
    if extra is None:
        extra = workloads.uniform_rectangles(50, d, seed=12)
    extra_mins, extra_maxs = extra
    est = factory()
    name = type(est).__name__
    params = est.get_params()
    assert est.fit(mins, maxs, n_servers) is est, f"{name}.fit must return self"
    labels = est.labels_
    assert labels.shape == (len(mins),) and labels.dtype == np.int64, \
        f"{name}.labels_ must be int64 of shape ({len(mins)},), got {labels.dtype} {labels.shape}"
    assert len(labels) == 0 or (labels.min() >= 0 and labels.max() < n_servers), \
        f"{name}.labels_ must lie in [0, {n_servers})"
    capacity = _expected_capacity(est, len(mins), n_servers)
    assert est.capacity_ == capacity and est.n_servers_ == n_servers, \
        f"{name}: capacity_ {est.capacity_} / n_servers_ {est.n_servers_}, expected " \
        f"{capacity} / {n_servers}"
    assert np.array_equal(est.loads_, np.bincount(labels, minlength=n_servers)), \
        f"{name}.loads_ must count labels_ per server"
    assert est.loads_.max() <= est.capacity_, \
        f"{name} loaded a server with {est.loads_.max()} > capacity {est.capacity_}"
    assert est.get_params() == params, f"{name}.fit changed its parameters"
    again = clone(est).fit(mins, maxs, n_servers)
    assert np.array_equal(again.labels_, labels), \
        f"{name}.fit is not deterministic (pin its seed in the factory)"
    online = est.assign_batch(extra_mins, extra_maxs)
    assert online.shape == (len(extra_mins),) and ((online >= 0) & (online < n_servers)).all(), \
        f"{name}.assign_batch must give one server in [0, {n_servers}) per subscription"
    assert est.loads_.sum() == len(mins) + len(extra_mins), \
        f"{name}.assign does not record the loads it adds"
    assert est.loads_.max() <= est.capacity_, f"{name}.assign exceeded the load threshold"
    _raises(ValueError, lambda: est.assign(np.zeros(d - 1), np.ones(d - 1)),
            f"{name}.assign with {d - 1} coordinates")
    _raises(ValueError, lambda: est.assign(np.ones(d), np.zeros(d)), f"{name}.assign with lo > hi")


def check_empty_fit_then_live_assignment(factory: Factory, mins: np.ndarray | None = None,
                                         maxs: np.ndarray | None = None,
                                         n_servers: int = 4) -> None:
    """Fitted on nothing with ``capacity = n / n_servers``, ``n`` live subscriptions fill
    every server exactly; one more raises CapacityExceeded."""
    if mins is None or maxs is None:
        mins, maxs = workloads.uniform_rectangles(40, 2, seed=3)
    capacity = len(mins) // n_servers
    assert capacity * n_servers == len(mins), "give a multiple of n_servers rectangles"
    est = factory(capacity=capacity).fit(mins[:0], maxs[:0], n_servers)
    name = type(est).__name__
    assert est.labels_.shape == (0,), f"{name} fitted on nothing must have no labels_"
    labels = est.assign_batch(mins, maxs)
    loads = np.bincount(labels, minlength=n_servers).tolist()
    assert loads == [capacity] * n_servers, \
        f"{name} placed {loads} live subscriptions; capacity {capacity} each"
    _raises(CapacityExceeded, lambda: est.assign(mins[0], maxs[0]),
            f"{name}.assign with every server at capacity")


def check_threshold_never_exceeded(factory: Factory, mins: np.ndarray | None = None,
                                   maxs: np.ndarray | None = None, n_servers: int = 6,
                                   load_factor: float = 1.0) -> None:
    """With ``load_factor``, ``fit`` keeps every server within ceil(load_factor x n /
    n_servers) and places every subscription."""
    if mins is None or maxs is None:
        mins, maxs = workloads.uniform_rectangles(900, 3, seed=5)
    est = factory(load_factor=load_factor).fit(mins, maxs, n_servers)
    name = type(est).__name__
    threshold = int(np.ceil(load_factor * len(mins) / n_servers))
    assert est.capacity_ == threshold, f"{name}.capacity_ is {est.capacity_}, not {threshold}"
    assert est.loads_.max() <= threshold, \
        f"{name} loaded a server with {est.loads_.max()} > threshold {threshold}"
    assert est.loads_.sum() == len(mins), f"{name} placed {est.loads_.sum()} of {len(mins)}"


def check_partitioner(factory: Factory) -> None:
    """Every check, on uniform rectangles (the first failure raises)."""
    check_estimator_conventions(factory)
    check_fit_and_online_use(factory)
    check_empty_fit_then_live_assignment(factory)
    for load_factor in (1.0, 1.3):
        check_threshold_never_exceeded(factory, load_factor=load_factor)
