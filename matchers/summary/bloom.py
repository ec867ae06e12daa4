"""Bloom filters over attribute coordinates: the summary of an attribute that every
subscription tests by equality (paper II: "For equality predicates (e.g., Symbol=GE) in
subscription filters, we can summarize them using a Bloom filter").

A :class:`BloomFilter` holds a set of float64 coordinates with no false negatives and a
false-positive rate chosen when it is sized (:meth:`BloomFilter.sized`)::

    bloom = BloomFilter.of([0.25, 0.5], false_positive_rate=0.01)
    bloom.contains(np.array([0.25, 0.75]))   # -> array([ True, False]) (False: almost surely)

Hashing
    A coordinate's 64-bit pattern (``-0.0`` read as ``0.0``) is mixed by the splitmix64
    finalizer into ``h1``, and its pattern xor a constant into ``h2`` (made odd); the ``k``
    bit positions are ``(h1 + i * h2) mod m`` for ``i < k`` (double hashing, Kirsch and
    Mitzenmacher 2006), all in numpy, so a batch costs a few array operations per filter.

Why ``m`` is a power of two
    ``(x mod 2m) mod m == x mod m``, so a filter of ``2m`` bits folds (its halves ORed) into
    exactly the filter of ``m`` bits the same values would have built, and a filter of ``m``
    bits unfolds (tiled twice) into one of ``2m`` bits that answers every query as it did.
    Filters of different sizes are therefore brought to one size without error, and a union
    is an OR (:func:`union_of`).  And since the positions of ``k`` hashes are the first
    ``k`` of ``k + 1``, a union tests with the smallest hash count of its inputs: a filter
    built with more hashes has those bits set too, so still no false negative.

Wire form (a child of ``edn:Summary``; bit ``p`` is bit ``p mod 8`` (least significant
first) of byte ``p // 8``)::

    <edn:Bloom dim="symbol" bits="8192" hashes="7" values="900" encoding="base64">...</edn:Bloom>

:func:`bloom_from_element` reads it hostile-by-default: ``bits`` a power of two in
[:data:`MIN_BITS`, :data:`MAX_BITS`], ``hashes`` in [1, :data:`MAX_HASHES`], the text's size
checked before it is decoded; anything else is :class:`InvalidFilter`.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Iterable, Sequence

import numpy as np
from lxml import etree

from matchers.vocabulary import EDN
from wsframework.matching.errors import InvalidFilter

from ..schema.model import DEFAULT_FALSE_POSITIVE_RATE

__all__ = ["BloomFilter", "DEFAULT_FALSE_POSITIVE_RATE", "MIN_BITS", "MAX_BITS", "MAX_HASHES",
           "hash_pairs", "union_of", "bloom_from_element"]

MIN_BITS = 64
MAX_BITS = 1 << 24          # 2 MiB on the wire at most per filter
MAX_HASHES = 32
MAX_VALUES = 1 << 40        # the ``values`` attribute (a count for reports, never allocated)
_ENCODING = "base64"
_BLOOM = f"{{{EDN}}}Bloom"
_SECOND_SEED = np.uint64(0xD6E8FEB86659FD93)


def _mix(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on uint64 (wrapping arithmetic)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def hash_pairs(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(h1, h2)`` (uint64, ``h2`` odd) of float64 coordinates: computed once per batch and
    dimension, then tested against every server's filter on that dimension."""
    coordinates = np.asarray(values, dtype=np.float64).reshape(-1) + 0.0  # -0.0 -> 0.0
    pattern = coordinates.view(np.uint64)
    return _mix(pattern), _mix(pattern ^ _SECOND_SEED) | np.uint64(1)


def _bits_for(values: int, false_positive_rate: float) -> int:
    """The power of two of bits (clamped to [MIN_BITS, MAX_BITS]) that keeps ``values``
    values at about ``false_positive_rate``: m = -n ln p / (ln 2)^2, rounded up."""
    wanted = -max(values, 1) * math.log(false_positive_rate) / (math.log(2) ** 2)
    bits = 1 << max(0, math.ceil(math.log2(max(wanted, 1.0))))
    return min(max(bits, MIN_BITS), MAX_BITS)


def _hashes_for(false_positive_rate: float) -> int:
    """k = log2(1/p), rounded up: optimal for a filter of exactly the bits :func:`_bits_for`
    asks before rounding, and close to it after (more bits per value, a lower rate)."""
    return min(max(1, math.ceil(-math.log2(false_positive_rate))), MAX_HASHES)


def _check_bits(bits: int) -> int:
    bits = int(bits)
    if bits < MIN_BITS or bits & (bits - 1) or bits > MAX_BITS:
        raise ValueError(f"bits must be a power of two in [{MIN_BITS}, {MAX_BITS}], got {bits}")
    return bits


def _check_rate(false_positive_rate: float) -> float:
    rate = float(false_positive_rate)
    if not 0.0 < rate < 1.0:
        raise ValueError(f"a false-positive rate must be in (0, 1), got {false_positive_rate!r}")
    return rate


class BloomFilter:
    """``bits`` (m, a power of two) bits tested by ``hashes`` (k) positions per value;
    ``values`` counts the values inserted (an upper bound after unions).  Immutable."""

    __slots__ = ("bits", "hashes", "values", "_bytes", "_set_bits")

    def __init__(self, bits: int, hashes: int, values: int, data: Any) -> None:
        bits, hashes, values = _check_bits(bits), int(hashes), int(values)
        if not 1 <= hashes <= MAX_HASHES:
            raise ValueError(f"hashes must be in [1, {MAX_HASHES}], got {hashes}")
        if not 0 <= values <= MAX_VALUES:
            raise ValueError(f"values must be in [0, {MAX_VALUES}], got {values}")
        array = np.array(np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes)
                         else data, dtype=np.uint8).reshape(-1)
        if array.size != bits // 8:
            raise ValueError(f"{bits} bits need {bits // 8} bytes, got {array.size}")
        array.setflags(write=False)
        self.bits, self.hashes, self.values = bits, hashes, values
        self._bytes = array
        self._set_bits = int(np.unpackbits(array).sum())

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def sized(cls, values: int, false_positive_rate: float = DEFAULT_FALSE_POSITIVE_RATE
              ) -> "BloomFilter":
        """An empty filter for about ``values`` values at ``false_positive_rate``."""
        rate = _check_rate(false_positive_rate)
        bits = _bits_for(values, rate)
        return cls(bits, _hashes_for(rate), 0, np.zeros(bits // 8, dtype=np.uint8))

    @classmethod
    def of(cls, values: Any, false_positive_rate: float = DEFAULT_FALSE_POSITIVE_RATE
           ) -> "BloomFilter":
        """A filter holding the distinct coordinates ``values``."""
        distinct = np.unique(np.asarray(values, dtype=np.float64).reshape(-1) + 0.0)
        return cls.sized(len(distinct), false_positive_rate).with_values(distinct)

    def with_values(self, values: Any) -> "BloomFilter":
        """This filter with ``values`` inserted too (same size and hash count)."""
        coordinates = np.unique(np.asarray(values, dtype=np.float64).reshape(-1) + 0.0)
        flat = np.unpackbits(self._bytes, bitorder="little")
        flat[self._positions(*hash_pairs(coordinates)).reshape(-1)] = 1
        return BloomFilter(self.bits, self.hashes, self.values + len(coordinates),
                           np.packbits(flat, bitorder="little"))

    def resized(self, bits: int) -> "BloomFilter":
        """The same set at ``bits`` (a power of two): folded when smaller (exactly the
        filter those values build at that size), tiled when larger (the same answers)."""
        bits = _check_bits(bits)
        if bits == self.bits:
            return self
        data = self._bytes
        if bits < self.bits:
            data = np.bitwise_or.reduce(data.reshape(self.bits // bits, bits // 8), axis=0)
        else:
            data = np.tile(data, bits // self.bits)
        return BloomFilter(bits, self.hashes, self.values, data)

    # -- queries -----------------------------------------------------------------------------
    def _positions(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        steps = np.arange(self.hashes, dtype=np.uint64)
        return (h1[:, None] + h2[:, None] * steps[None, :]) & np.uint64(self.bits - 1)

    def contains(self, values: Any) -> np.ndarray:
        """Per coordinate: False when it was certainly never inserted (bool array)."""
        return self.contains_hashed(*hash_pairs(values))

    def contains_hashed(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """:meth:`contains` for coordinates already hashed (:func:`hash_pairs`)."""
        positions = self._positions(h1, h2)
        bit = (self._bytes[positions >> np.uint64(3)] >> (positions & np.uint64(7)).astype(np.uint8)) & 1
        return bit.all(axis=1)

    @property
    def fill_ratio(self) -> float:
        """The share of bits set."""
        return self._set_bits / self.bits

    @property
    def false_positive_rate(self) -> float:
        """Estimated from the bits themselves: (share of bits set) ** hashes (exact in
        expectation for a coordinate never inserted, whatever the history of unions)."""
        return self.fill_ratio ** self.hashes

    def to_bytes(self) -> bytes:
        return self._bytes.tobytes()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return (self.bits, self.hashes, self.values) == (other.bits, other.hashes, other.values) \
            and np.array_equal(self._bytes, other._bytes)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"<BloomFilter bits={self.bits} hashes={self.hashes} values={self.values} "
                f"fpr~{self.false_positive_rate:.2g}>")

    # -- XML ---------------------------------------------------------------------------------
    def to_element(self, dim: str) -> etree._Element:
        element = etree.Element(_BLOOM, nsmap={"edn": EDN})
        element.set("dim", dim)
        element.set("bits", str(self.bits))
        element.set("hashes", str(self.hashes))
        element.set("values", str(self.values))
        element.set("encoding", _ENCODING)
        element.text = base64.b64encode(self.to_bytes()).decode("ascii")
        return element


def union_of(filters: Sequence[BloomFilter], extra_values: Any = (),
             false_positive_rate: float | None = None) -> BloomFilter:
    """One filter holding every value of ``filters`` and ``extra_values``.

    The hash count is the smallest of the inputs' (see the module docstring: no false
    negative); the size is the largest input's, or more when the extra values need it at
    ``false_positive_rate`` (default: the rate that hash count is made for)."""
    if not filters:
        raise ValueError("a union of Bloom filters needs at least one filter")
    hashes = min(f.hashes for f in filters)
    extra = np.unique(np.asarray(extra_values, dtype=np.float64).reshape(-1) + 0.0)
    rate = _check_rate(false_positive_rate if false_positive_rate is not None else 2.0 ** -hashes)
    values = sum(f.values for f in filters) + len(extra)
    bits = max(max(f.bits for f in filters), _bits_for(values, rate) if len(extra) else MIN_BITS)
    data = np.zeros(bits // 8, dtype=np.uint8)
    for bloom in filters:
        data |= bloom.resized(bits)._bytes
    combined = BloomFilter(bits, hashes, values - len(extra), data)
    return combined.with_values(extra) if len(extra) else combined


def bloom_from_element(element: Any, dims: Iterable[str]) -> tuple[str, BloomFilter]:
    """``(dim, filter)`` of an ``edn:Bloom`` element; :class:`InvalidFilter` on anything
    malformed, too large, or naming a dimension not in ``dims``."""
    dims = tuple(dims)
    dim = element.get("dim") or ""
    if dim not in dims:
        raise InvalidFilter(f"summary: edn:Bloom names dimension {dim!r}, not one of {dims}")
    numbers = {}
    for name, low, high in (("bits", MIN_BITS, MAX_BITS), ("hashes", 1, MAX_HASHES),
                            ("values", 0, MAX_VALUES)):
        text = (element.get(name) or "").strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 15:
            raise InvalidFilter(f"summary: edn:Bloom {name!r} must be a non-negative integer")
        value = int(text)
        if not low <= value <= high:
            raise InvalidFilter(f"summary: edn:Bloom {name!r} must be in [{low}, {high}]")
        numbers[name] = value
    bits = numbers["bits"]
    if bits & (bits - 1):
        raise InvalidFilter("summary: edn:Bloom 'bits' must be a power of two")
    if element.get("encoding", _ENCODING) != _ENCODING:
        raise InvalidFilter(f"summary: edn:Bloom encoding must be {_ENCODING}")
    text = "".join((element.text or "").split())
    if len(text) != 4 * math.ceil(bits // 8 / 3):  # checked before decoding anything
        raise InvalidFilter(f"summary: edn:Bloom of {bits} bits needs "
                            f"{4 * math.ceil(bits // 8 / 3)} base64 characters, got {len(text)}")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise InvalidFilter("summary: edn:Bloom is not base64") from None
    if len(raw) != bits // 8:
        raise InvalidFilter(f"summary: edn:Bloom holds {len(raw)} bytes; {bits} bits need {bits // 8}")
    return dim, BloomFilter(bits, numbers["hashes"], numbers["values"], raw)
