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
from array import array
from typing import Iterable, NamedTuple

import numpy as np

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


def unpack(prefix: bytes, forms: Iterable[bytes | None], d: int) -> Unpacked:
    """The rectangles of ``forms`` (see the module's text for which are usable); the forms
    of one rectangle, nearly all of them, read and checked in one numpy pass (a start
    reads a million). ``forms`` is read once, and no form is kept: those of one rectangle
    are copied into one buffer as they come."""
    head = len(prefix) + _COUNT.size
    single_length = head + 16 * d
    single = array("q")
    single_forms = bytearray()
    several: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for position, form in enumerate(forms):
        if form is None:
            continue
        if len(form) == single_length:
            single.append(position)
            single_forms += form
        elif len(form) >= head:
            form = bytes(form)
            rectangles = _several(form, head, d) if form.startswith(prefix) else None
            if rectangles is not None:
                several[position] = rectangles
    rows = np.frombuffer(single_forms, dtype=np.uint8).reshape(len(single), single_length)
    # each one's prefix and a count of 1: a form of this length counting more is malformed
    intact = (rows[:, :head] == np.frombuffer(prefix + _COUNT.pack(1), dtype=np.uint8)).all(
        axis=1)
    boxes = np.ascontiguousarray(rows[:, head:]).view("<f8").reshape(len(single), 2, d)
    mins, maxs = boxes[:, 0, :].astype(np.float64), boxes[:, 1, :].astype(np.float64)
    usable = intact & _usable(mins, maxs)
    return Unpacked(np.frombuffer(single, dtype=np.int64)[usable], mins[usable], maxs[usable],
                    several)


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
