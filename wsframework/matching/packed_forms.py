"""Filters' compiled forms (:meth:`~.base.Matcher.packed_filter`) held side by side: one
buffer and two arrays, not an object per form.

A start reads a million stored forms and holds them until its filters are installed. A
million small bytes objects held that long leave their allocator pools empty but
unreturnable among the objects made beside them (about 140 bytes a subscription of resident
memory, measured at a million), and handing them over one by one costs a Python step each.
:class:`PackedForms` keeps them in one buffer instead, which an engine may read whole
(:meth:`~.base.Matcher.add_packed_forms`; the R-tree engine reads it in numpy).
"""
from __future__ import annotations

from array import array
from typing import Iterable, Sequence

__all__ = ["PackedForms"]


class PackedForms(Sequence):
    """Forms position by position: bytes, or None where a filter has none."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._starts = array("q")
        self._lengths = array("q")  # -1: no form

    def append(self, form: bytes | memoryview | None) -> None:
        self._starts.append(len(self._buffer))
        if form is None:
            self._lengths.append(-1)
        else:
            self._lengths.append(len(form))
            self._buffer += form

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        length = self._lengths[position]
        if length < 0:
            return None
        start = self._starts[position]
        return bytes(memoryview(self._buffer)[start:start + length])  # one copy

    def select(self, positions: Iterable[int]) -> PackedForms:
        """The forms at ``positions``, in that order (sharing this buffer)."""
        chosen = PackedForms()
        chosen._buffer = self._buffer
        taken = positions if isinstance(positions, array) else array("q", positions)
        chosen._starts = array("q", map(self._starts.__getitem__, taken))
        chosen._lengths = array("q", map(self._lengths.__getitem__, taken))
        return chosen

    # -- what an engine reads whole (while it reads, nothing can be appended) ---------------
    @property
    def buffer(self) -> bytearray:
        """The bytes the forms are in."""
        return self._buffer

    @property
    def starts(self) -> array:
        """Each form's offset in :attr:`buffer` (int64)."""
        return self._starts

    @property
    def lengths(self) -> array:
        """Each form's length, -1 where there is none (int64)."""
        return self._lengths
