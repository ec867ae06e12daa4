"""A filter's rectangles as bytes, stored beside its text so that a restart takes them from
arrays instead of parsing and binding every range filter again (the largest part of a
restart: over a third of it at 100,000 subscriptions).

A packed form is :data:`MAGIC`, the schema's fingerprint (a schema that binds differently
gives other rectangles), the rectangle count (uint16), then that many rectangles' mins and
that many maxs, little-endian float64. :func:`unpack` takes only forms that carry the
fingerprint it is given, have the length their count says and hold finite, ordered
rectangles; for any other the caller compiles the filter from its text, so a form from
another schema or a malformed one costs time, not a wrong match. A well-formed form is
trusted as the store's own data, as the filter's text beside it is: only this process's
engine writes one, never a peer.
"""

from __future__ import annotations

import hashlib
import struct
from typing import NamedTuple

import numpy as np

from wsframework.matching.packed_forms import PackedForms

from .schema import Schema

__all__ = ["MAGIC", "Unpacked", "pack", "prefix_for", "unpack"]

MAGIC = b"EDNbox1"
_COUNT = struct.Struct("<H")
_MOST_RECTANGLES = 0xFFFF


def prefix_for(schema: Schema) -> bytes:
    """What every form packed under ``schema`` starts with: :data:`MAGIC` and the
    fingerprint of the schema's attributes (their names, types, paths, namespaces and
    domains, as written by their dataclass: plain strings and numbers)."""
    described = repr(schema.attributes).encode("utf-8")
    return MAGIC + hashlib.blake2b(described, digest_size=8).digest()


def pack(prefix: bytes, mins: np.ndarray, maxs: np.ndarray) -> bytes | None:
    """The form of rectangles ``mins``/``maxs`` (b, d) under ``prefix``; None for more
    rectangles than a form counts."""
    count = len(mins)
    if count > _MOST_RECTANGLES:
        return None
    return b"".join((prefix, _COUNT.pack(count), np.asarray(mins, dtype="<f8").tobytes(),
                     np.asarray(maxs, dtype="<f8").tobytes()))


class Unpacked(NamedTuple):
    """What :func:`unpack` read: the positions of the forms of one rectangle and their
    rectangles (``mins``/``maxs``, (n, d), in the positions' order), and position ->
    ``(mins, maxs)`` for the forms of several. Positions in neither were not usable."""

    single: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    several: dict[int, tuple[np.ndarray, np.ndarray]]


def unpack(prefix: bytes, forms: PackedForms, d: int,
           wanted: np.ndarray | None = None) -> Unpacked:
    """The rectangles of ``forms`` (see the module's text for which are usable), only at
    the positions ``wanted`` marks when given; the forms of one rectangle, nearly all of
    them, read and checked in one numpy pass over the buffer (a start reads a million)."""
    head = len(prefix) + _COUNT.size
    single_length = head + 16 * d
    lengths = _int64s(forms.lengths)
    take = lengths == single_length
    other = (lengths >= head) & ~take
    if wanted is not None:
        take &= wanted
        other &= wanted
    single = np.flatnonzero(take)
    several: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for position in np.flatnonzero(other).tolist():
        form = forms[position]
        rectangles = _several(form, head, d) if form.startswith(prefix) else None
        if rectangles is not None:
            several[position] = rectangles
    rows = _rows(forms, single, single_length)
    # each one's prefix and a count of 1: a form of this length counting more is malformed
    intact = (rows[:, :head] == np.frombuffer(prefix + _COUNT.pack(1), dtype=np.uint8)).all(
        axis=1)
    boxes = np.ascontiguousarray(rows[:, head:]).view("<f8").reshape(len(single), 2, d)
    mins, maxs = boxes[:, 0, :].astype(np.float64), boxes[:, 1, :].astype(np.float64)
    usable = intact & _usable(mins, maxs)
    return Unpacked(single[usable], mins[usable], maxs[usable], several)


def _int64s(values) -> np.ndarray:
    """An int64 ``array`` as a numpy array (a view)."""
    return np.frombuffer(values, dtype=np.int64) if len(values) else np.zeros(0, dtype=np.int64)


def _rows(forms: PackedForms, positions: np.ndarray, length: int) -> np.ndarray:
    """The forms at ``positions``, each ``length`` bytes long, as an (n, length) uint8
    array: a view of the buffer when they lie back to back (a start reading one topic's
    forms), else gathered a block at a time."""
    if not len(positions):
        return np.zeros((0, length), dtype=np.uint8)
    starts = _int64s(forms.starts)[positions]
    data = np.frombuffer(forms.buffer, dtype=np.uint8)
    first = int(starts[0])
    if np.array_equal(starts, first + length * np.arange(len(starts))):
        return data[first:first + length * len(starts)].reshape(len(starts), length)
    out = np.empty((len(starts), length), dtype=np.uint8)
    offsets = np.arange(length)
    block = max(1, (1 << 22) // length)  # index arrays of at most 32 MB
    for begin in range(0, len(starts), block):
        chunk = starts[begin:begin + block]
        out[begin:begin + len(chunk)] = data[chunk[:, None] + offsets]
    return out


def _several(form: bytes, head: int, d: int) -> tuple[np.ndarray, np.ndarray] | None:
    (count,) = _COUNT.unpack_from(form, head - _COUNT.size)
    if count == 0 or len(form) != head + 16 * d * count:
        return None
    boxes = np.frombuffer(form, dtype="<f8", offset=head).reshape(2, count, d)
    mins, maxs = boxes[0].astype(np.float64), boxes[1].astype(np.float64)
    return (mins, maxs) if _usable(mins, maxs).all() else None


def _usable(mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
    """Per rectangle: finite corners, each min at most its max."""
    return (np.isfinite(mins).all(axis=1) & np.isfinite(maxs).all(axis=1)
            & (mins <= maxs).all(axis=1))
