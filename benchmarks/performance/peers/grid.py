"""The coarse grid the brokers without range filters route by: RabbitMQ's headers exchange
(equality) and Mosquitto's topics. Each attribute's [0, 10] is cut into :data:`BUCKETS`
cells; an event carries its cell numbers, a subscription asks for every cell its box
touches, and the consumer drops what the box does not hold (the broker routes by cell, the
client filters exactly)."""
from __future__ import annotations

import itertools

import numpy as np

BUCKETS = 3  # cells per attribute over [0, 10]


def cell(value: float) -> int:
    return min(BUCKETS - 1, int(value * BUCKETS / 10.0))


def cells(lo: np.ndarray, hi: np.ndarray):
    """Every cell (a tuple of bucket numbers) the box [lo, hi] touches."""
    return itertools.product(*(range(cell(a), cell(b) + 1) for a, b in zip(lo, hi)))


def topic(point: np.ndarray) -> str:
    """The MQTT topic of an event: ``g/<cell>/<cell>/...``, one level per attribute."""
    return "g/" + "/".join(str(cell(v)) for v in point)


def topic_filters(lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """The MQTT topic filters that together cover the cells of [lo, hi]: an attribute whose
    range touches every bucket is the single-level wildcard ``+``, so a wide box costs one
    filter, not the product of its cells."""
    levels = []
    for a, b in zip(lo, hi):
        first, last = cell(a), cell(b)
        levels.append(["+"] if (first, last) == (0, BUCKETS - 1)
                      else [str(k) for k in range(first, last + 1)])
    return ["g/" + "/".join(parts) for parts in itertools.product(*levels)]


def inside(lo: np.ndarray, hi: np.ndarray, point: np.ndarray) -> bool:
    return bool(np.all((lo <= point) & (point <= hi)))
