"""Range-min (and range-max) subscriptions over a stateless network: Mar, Hull, EMar and the
S-CN message/subscription reformulation of Chandramouli's section 4.2.4.

A table holds tuples ``key -> (x, y)``; a subscription asks for ``MIN(y)`` over the tuples
with ``x1 <= x <= x2``. The publisher-side service (:mod:`.table_service`) runs every update
through :meth:`RangeMinTable.update`, which classifies it (Corollary 1) and reformulates it
into zero or more :class:`AggregateMessage` ``<NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R>``;
a subscription ``[x1, x2]`` is the stateless predicate (:func:`matches`)::

    OUTER_L < x1 <= INNER_L  and  INNER_R <= x2 < OUTER_R

MAX is MIN on ``-y`` (``RangeMinTable(sign=-1)``): the table negates on the way in and out.

Definitions (where the paper is loose, these are ours, and the tests check them)
    *Absence is +inf.* An insert is an update from ``y_o = +inf``, a delete an update to
    ``y_n = +inf``; a range with no tuple has the result None (``NEW_MIN`` absent).

    *Columns.* Several tuples may share an ``x``; only the column's smallest ``y`` can be a
    minimum, so the ordered structure holds one point per distinct ``x``: its column minimum.

    *Mar* (Definition 1) of ``(x0, y0)`` w.r.t. the tuples other than the updated one: the
    open interval ``(l, r)`` between the nearest point left of ``x0`` with ``y <= y0`` and the
    nearest one right of it (``-inf``/``+inf`` when there is none); empty when another tuple
    at ``x0`` has ``y <= y0``. Equal values block: a tie leaves a result's *value* unchanged,
    and subscribers see values, not tuples.

    *Classification* (Corollary 1), with ``A = Mar(x, y_o)``, ``B = Mar(x, y_n)``:
    ``y_o == y_n`` or ``A`` and ``B`` both empty: ignorable (no message). ``A`` inside ``B``
    (every decrease; an increase only when ``A == B``): good, one message
    ``<y_n, x, x, B>``. Otherwise (an increase that exposes other tuples): bad.

    *EMar and Hull* for a bad update, over the points after the update. Ties are broken by
    one total order, ``p < q`` iff ``(p.y, p.x) < (q.y, q.x)`` (of equal values, the leftmost
    counts as the smaller), so every range has exactly one minimum point. ``EMar(q)`` is the
    largest open interval around ``q.x`` holding no point smaller than ``q`` in that order:
    bounded on the left by the nearest point with ``y <= q.y``, on the right by the nearest
    with ``y < q.y``. The hull is the *peak* (the column minimum at ``x`` after the update,
    ``(x, +inf)`` when the column is empty) and every point of ``A`` smaller than all points
    between it and ``x`` (peak included): walking left, the nearest point with ``y <= `` the
    last hull value; walking right, the nearest with ``y <`` it; each walk stops at the first
    point with ``y <= y_o`` (``A``'s bound). Each hull point ``q`` gives
    ``<q.y, min(x, q.x), max(x, q.x), EMar(q)>``. With these definitions, every subscription
    whose result changes matches exactly one message, carrying its new result, and every
    other subscription matches none (Theorems 1 and 2; ``test_range_aggregate.py`` checks it
    against recomputation on random tables).

Costs: the ordered structure (:class:`OrderedMinima`, a treap keyed by ``x`` whose nodes
keep their subtree's minimum) answers "nearest point left/right of x with y <= v" in
O(log n) expected, so a good update costs O(log n) and a bad one O(h log n) for h hull
points; state is O(n) (one node per distinct x, one sorted column per x).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from enum import Enum
from typing import Iterator

INF = math.inf

__all__ = ["INF", "AggregateMessage", "Update", "OrderedMinima", "RangeMinTable", "matches",
           "recompute"]


class Update(Enum):
    IGNORABLE = "ignorable"
    GOOD = "good"
    BAD = "bad"


@dataclass(frozen=True)
class AggregateMessage:
    """``<NEW_MIN, INNER_L, INNER_R, OUTER_L, OUTER_R>``; ``new`` None means "no tuple in
    the range". Outer bounds are open (may be -inf/+inf), inner ones closed."""

    new: float | None
    inner_l: float
    inner_r: float
    outer_l: float
    outer_r: float

    def as_tuple(self) -> tuple:
        return (self.new, self.inner_l, self.inner_r, self.outer_l, self.outer_r)


def matches(message: AggregateMessage, x1: float, x2: float) -> bool:
    """The reformulated subscription ``[x1, x2]``: a stateless predicate over the message."""
    return (message.outer_l < x1 <= message.inner_l) and (message.inner_r <= x2 < message.outer_r)


# -- the ordered structure -----------------------------------------------------------------


class _Node:
    __slots__ = ("key", "val", "low", "prio", "left", "right")

    def __init__(self, key: float, val: float, prio: float):
        self.key, self.val, self.low, self.prio = key, val, val, prio
        self.left: _Node | None = None
        self.right: _Node | None = None


def _low(node: _Node | None) -> float:
    return INF if node is None else node.low


def _pull(node: _Node) -> _Node:
    node.low = min(node.val, _low(node.left), _low(node.right))
    return node


def _split(node: _Node | None, key: float) -> tuple[_Node | None, _Node | None]:
    """(keys < key, keys >= key)."""
    if node is None:
        return None, None
    if node.key < key:
        left, right = _split(node.right, key)
        node.right = left
        return _pull(node), right
    left, right = _split(node.left, key)
    node.left = right
    return left, _pull(node)


def _merge(a: _Node | None, b: _Node | None) -> _Node | None:
    if a is None:
        return b
    if b is None:
        return a
    if a.prio > b.prio:
        a.right = _merge(a.right, b)
        return _pull(a)
    b.left = _merge(a, b.left)
    return _pull(b)


class OrderedMinima:
    """Points ``x -> y`` (distinct x) with "nearest point left/right of x whose y is <= v
    (or < v)" and range minima in O(log n) expected: a treap whose nodes keep their subtree's
    smallest y, so a search skips every subtree that cannot hold an answer."""

    def __init__(self, seed: int = 0x5EED):
        self._root: _Node | None = None
        self._random = random.Random(seed)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def set(self, key: float, val: float) -> None:
        less, rest = _split(self._root, key)
        same, more = _split(rest, math.nextafter(key, INF))
        if same is None:
            self._size += 1
            same = _Node(key, val, self._random.random())
        else:
            same.val = val
            _pull(same)
        self._root = _merge(_merge(less, same), more)

    def discard(self, key: float) -> None:
        less, rest = _split(self._root, key)
        same, more = _split(rest, math.nextafter(key, INF))
        if same is not None:
            self._size -= 1
        self._root = _merge(less, more)

    def items(self) -> Iterator[tuple[float, float]]:
        stack, node = [], self._root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node.key, node.val
            node = node.right

    def nearest_left(self, x: float, bound: float, strict: bool = False) -> tuple[float, float] | None:
        """The point with the largest key < x whose value is <= bound (< bound if strict)."""
        ok = (lambda v: v < bound) if strict else (lambda v: v <= bound)
        found = _nearest(self._root, x, ok, leftward=True)
        return None if found is None else (found.key, found.val)

    def nearest_right(self, x: float, bound: float, strict: bool = False) -> tuple[float, float] | None:
        """The point with the smallest key > x whose value is <= bound (< bound if strict)."""
        ok = (lambda v: v < bound) if strict else (lambda v: v <= bound)
        found = _nearest(self._root, x, ok, leftward=False)
        return None if found is None else (found.key, found.val)

    def range_min(self, lo: float, hi: float) -> float:
        """The smallest value with lo <= key <= hi (+inf when none)."""
        return _range_min(self._root, lo, hi, False, False)


def _nearest(node: _Node | None, x: float, ok, leftward: bool) -> _Node | None:
    """The node nearest to x on one side (keys < x when ``leftward``, > x otherwise) whose
    value is ``ok``: the walk is written once for the left side, with the children swapped
    for the right."""
    inner, outer = ("right", "left") if leftward else ("left", "right")
    while node is not None and (node.key >= x if leftward else node.key <= x):
        node = getattr(node, outer)
    if node is None:
        return None
    found = _nearest(getattr(node, inner), x, ok, leftward)
    if found is not None:
        return found
    if ok(node.val):
        return node
    return _outermost(getattr(node, outer), ok, inner, outer)


def _outermost(node: _Node | None, ok, inner: str, outer: str) -> _Node | None:
    """The ``ok`` node of the subtree nearest to the side ``inner`` points to."""
    while node is not None and ok(node.low):
        near = getattr(node, inner)
        if near is not None and ok(near.low):
            node = near
        elif ok(node.val):
            return node
        else:
            node = getattr(node, outer)
    return None


def _range_min(node: _Node | None, lo: float, hi: float, left_in: bool, right_in: bool) -> float:
    """Minimum over keys in [lo, hi]; ``left_in``/``right_in``: the subtree is known to lie
    above lo / below hi already (then its stored minimum answers for that side)."""
    best = INF
    while node is not None:
        if left_in and right_in:
            return min(best, node.low)
        if node.key < lo:
            node = node.right
        elif node.key > hi:
            node = node.left
        else:
            best = min(best, node.val,
                       _range_min(node.left, lo, hi, left_in, True),
                       _range_min(node.right, lo, hi, True, right_in))
            return best
    return best


# -- the table -----------------------------------------------------------------------------


class RangeMinTable:
    """The server's state for one (range attribute, aggregate attribute) pair and one
    direction: ``sign=1`` for MIN, ``sign=-1`` for MAX (values negated inside)."""

    def __init__(self, sign: int = 1):
        if sign not in (1, -1):
            raise ValueError("sign is 1 (MIN) or -1 (MAX)")
        self.sign = sign
        self._tuples: dict[str, tuple[float, float]] = {}   # key -> (x, signed y)
        self._columns: dict[float, list[float]] = {}       # x -> sorted signed ys
        self._points = OrderedMinima()

    def __len__(self) -> int:
        return len(self._tuples)

    def get(self, key: str) -> tuple[float, float] | None:
        found = self._tuples.get(key)
        return None if found is None else (found[0], self.sign * found[1])

    def result(self, x1: float, x2: float) -> float | None:
        """The current ``MIN(y)`` (``MAX``) over ``x1 <= x <= x2``; None when no tuple."""
        low = self._points.range_min(x1, x2)
        return None if low == INF else self.sign * low

    def update(self, key: str, x: float, y: float | None) -> tuple[Update, list[AggregateMessage]]:
        """Set tuple ``key`` to ``(x, y)`` (``y`` None deletes it; an unknown key is
        inserted); returns the classification and the messages to publish. A tuple keeps its
        x: moving one is a delete and an insert (:class:`ValueError` otherwise)."""
        old = self._tuples.get(key)
        if old is not None and old[0] != x:
            raise ValueError(f"tuple {key!r} lies at x={old[0]}; delete it to move it")
        y_o = INF if old is None else old[1]
        y_n = INF if y is None else self.sign * y
        if not math.isfinite(x) or (y is not None and not math.isfinite(y)):
            raise ValueError("x and y must be finite numbers")
        column = self._columns.get(x, [])
        if old is not None:
            column.remove(y_o)
        others = column[0] if column else INF
        kind, messages = Update.IGNORABLE, []
        if y_o != y_n:
            before = self._mar(x, y_o, others)
            after = self._mar(x, y_n, others)
            if before is not None or after is not None:
                if before is None or (after is not None and after[0] <= before[0]
                                      and before[1] <= after[1]):
                    kind = Update.GOOD
                    messages = [self._message(y_n, x, x, after)]
                else:
                    kind = Update.BAD
        self._apply(key, x, y_n, column)
        if kind is Update.BAD:
            messages = self._hull_messages(x, y_o)
        return kind, messages

    # The update's parts, in the order update() runs them.

    def _mar(self, x: float, y: float, others: float) -> tuple[float, float] | None:
        if others != INF and others <= y:   # another tuple at x holds the column (INF: none)
            return None
        left = self._points.nearest_left(x, y)
        right = self._points.nearest_right(x, y)
        return (-INF if left is None else left[0], INF if right is None else right[0])

    def _apply(self, key: str, x: float, y_n: float, column: list[float]) -> None:
        if y_n == INF:
            self._tuples.pop(key, None)
        else:
            self._tuples[key] = (x, y_n)
            bisect.insort(column, y_n)
        if column:
            self._columns[x] = column
            self._points.set(x, column[0])
        else:
            self._columns.pop(x, None)
            self._points.discard(x)

    def _hull_messages(self, x: float, y_o: float) -> list[AggregateMessage]:
        column = self._columns.get(x)
        peak = column[0] if column else INF
        messages = [self._message(peak, x, x, self._emar(x, peak))]
        level, at = peak, x
        while (found := self._points.nearest_left(at, level)) is not None and found[1] > y_o:
            at, level = found
            messages.append(self._message(level, at, x, self._emar(at, level)))
        level, at = peak, x
        while (found := self._points.nearest_right(at, level, strict=True)) is not None \
                and found[1] > y_o:
            at, level = found
            messages.append(self._message(level, x, at, self._emar(at, level)))
        return messages

    def _emar(self, x: float, y: float) -> tuple[float, float]:
        left = self._points.nearest_left(x, y)
        right = self._points.nearest_right(x, y, strict=True)
        return (-INF if left is None else left[0], INF if right is None else right[0])

    def _message(self, y: float, inner_l: float, inner_r: float,
                 outer: tuple[float, float]) -> AggregateMessage:
        return AggregateMessage(None if y == INF else self.sign * y, inner_l, inner_r, *outer)


def recompute(tuples: dict[str, tuple[float, float]], x1: float, x2: float,
              sign: int = 1) -> float | None:
    """The oracle: the aggregate over ``tuples`` (key -> (x, y)) by a scan."""
    values = [sign * y for x, y in tuples.values() if x1 <= x <= x2]
    return sign * min(values) if values else None
