"""The routing summary a subscription server ships to the dispatcher: a small frozen value
and its wire form.

:class:`Summary` holds ``k`` boxes ``mins``/``maxs`` of shape ``(k, d)`` over the named
dimensions ``dims`` (coordinates as :mod:`matchers.schema` defines them), and optionally the
schema, so that a dispatcher can read events without being configured.  It covers a set of
filters when every event any of them can match lies in one of its boxes.

Bloom dimensions (:mod:`.bloom`)
    ``blooms`` maps some dimension names to a :class:`~.bloom.BloomFilter` of coordinates:
    an event is then covered iff some box contains it **and**, on every such dimension, the
    filter contains the event's coordinate there.  A server summarizes an attribute that
    all its subscriptions test by equality this way (``symbol = 'GE'``): its boxes span the
    attribute's whole range on that dimension (so they merge across symbols) and the
    filter holds the symbols.  An eCube event spanning an interval on a Bloom dimension
    cannot be looked up: it passes the filter (:meth:`Summary.intersects`).  Dropping the
    filters never loses an event (the boxes alone cover at least as much), which is what a
    reader that does not know ``edn:Bloom`` does.

Wire form (:meth:`Summary.to_element`), the content of a route update::

    <edn:Summary xmlns:edn="urn:wsframework:edn" dims="price symbol" boxes="2">
      <edn:Schema>...</edn:Schema>                         (optional)
      <edn:Mins encoding="base64-float64le">AAAAAAAAPkA...</edn:Mins>
      <edn:Maxs encoding="base64-float64le">AAAAAAAASUA...</edn:Maxs>
      <edn:Bloom dim="symbol" bits="8192" hashes="7" values="900"
                 encoding="base64">...</edn:Bloom>           (optional, one per dimension)
    </edn:Summary>

Coordinates are little-endian float64, row by row, base64-encoded: exact (a summary must
cover its filters to the last bit, so no decimal rounding), and ~11 bytes per coordinate
against ~20 for decimal text; 1,000 boxes in d = 4 are ~85 KB.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
from lxml import etree

from matchers.vocabulary import EDN, SUMMARY_DIALECT
from wsframework.matching.errors import InvalidFilter

from ..schema import InvalidSchema, Schema
from .bloom import BloomFilter, bloom_from_element

__all__ = ["SUMMARY_DIALECT", "MAX_SUMMARY_BOXES", "Summary"]

MAX_SUMMARY_BOXES = 1_000_000
_ENCODING = "base64-float64le"
_SUMMARY = f"{{{EDN}}}Summary"
_BLOOM = f"{{{EDN}}}Bloom"


def _frozen(array: Any, shape: tuple[int, int]) -> np.ndarray:
    result = np.array(array, dtype=np.float64, order="C").reshape(shape)
    result.setflags(write=False)
    return result


@dataclass(frozen=True, eq=False)
class Summary:
    """``k`` boxes over ``dims`` and Bloom filters on some of them (see the module
    docstring).  Zero boxes route nothing."""

    dims: tuple[str, ...]
    mins: np.ndarray
    maxs: np.ndarray
    schema: Schema | None = field(default=None)
    blooms: Mapping[str, BloomFilter] = field(default_factory=dict)

    def __post_init__(self) -> None:
        dims = tuple(self.dims)
        object.__setattr__(self, "dims", dims)
        arrays = []
        for array in (self.mins, self.maxs):
            array = np.asarray(array, dtype=np.float64)
            if array.ndim != 2 and array.size == 0:
                array = array.reshape(0, len(dims))
            if array.ndim != 2 or array.shape[1] != len(dims):
                raise ValueError(f"summary boxes must be (k, {len(dims)}) arrays, got {array.shape}")
            arrays.append(_frozen(array, array.shape))
        mins, maxs = arrays
        if mins.shape != maxs.shape:
            raise ValueError(f"summary mins {mins.shape} and maxs {maxs.shape} differ")
        if not (np.all(np.isfinite(mins)) and np.all(np.isfinite(maxs))):
            raise ValueError("summary coordinates must be finite")
        if not np.all(mins <= maxs):
            raise ValueError("a summary box has a minimum above its maximum")
        if self.schema is not None and self.schema.dims != dims:
            raise ValueError(f"summary dims {dims} differ from its schema's {self.schema.dims}")
        object.__setattr__(self, "mins", mins)
        object.__setattr__(self, "maxs", maxs)
        blooms = dict(self.blooms or {})
        for name, bloom in blooms.items():
            if name not in dims:
                raise ValueError(f"a Bloom filter on {name!r}, which is not a summary dimension")
            if not isinstance(bloom, BloomFilter):
                raise ValueError(f"the filter on {name!r} is not a BloomFilter")
        object.__setattr__(self, "blooms", MappingProxyType(
            {name: blooms[name] for name in dims if name in blooms}))  # in dimension order

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def everything(cls, schema: Schema) -> "Summary":
        """One box spanning the whole space: "no summary", every event routes here."""
        lo, hi = schema.everything()
        return cls(schema.dims, lo[None, :], hi[None, :], schema)

    @classmethod
    def nothing(cls, schema: Schema) -> "Summary":
        """No boxes: no event routes here (a server without subscriptions)."""
        return cls(schema.dims, np.empty((0, schema.d)), np.empty((0, schema.d)), schema)

    # -- queries -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.mins.shape[0]

    @property
    def d(self) -> int:
        return len(self.dims)

    @property
    def bloom_dims(self) -> tuple[int, ...]:
        """The positions of the dimensions with a Bloom filter."""
        return tuple(self.dims.index(name) for name in self.blooms)

    def covers(self, point: Any) -> bool:
        """Is ``point`` (d coordinates) inside some box and in every Bloom filter?"""
        point = np.asarray(point, dtype=np.float64)
        return self.intersects(point, point)

    def _blooms_pass(self, lo: np.ndarray, hi: np.ndarray) -> bool:
        """Every Bloom filter holds the box's coordinate on its dimension; a box that spans
        an interval there cannot be looked up and passes."""
        for j, bloom in zip(self.bloom_dims, self.blooms.values()):
            if lo[j] == hi[j] and not bloom.contains(lo[j:j + 1])[0]:
                return False
        return True

    def intersects(self, lo: Any, hi: Any) -> bool:
        """Does the box [lo, hi] (an eCube event) meet some box and pass the Bloom filters?"""
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        return bool(np.any(np.all((self.mins <= hi) & (self.maxs >= lo), axis=1))) \
            and self._blooms_pass(lo, hi)

    def contains_box(self, lo: Any, hi: Any) -> bool:
        """Is the box [lo, hi] inside a single summary box (and, on a Bloom dimension, one
        coordinate the filter holds: an interval there is never inside a set of points)?"""
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        if any(lo[j] != hi[j] for j in self.bloom_dims) or not self._blooms_pass(lo, hi):
            return False
        return bool(np.any(np.all((self.mins <= lo) & (self.maxs >= hi), axis=1)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Summary):
            return NotImplemented
        return (self.dims == other.dims and self.schema == other.schema
                and np.array_equal(self.mins, other.mins) and np.array_equal(self.maxs, other.maxs)
                and dict(self.blooms) == dict(other.blooms))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        blooms = f" blooms={','.join(self.blooms)}" if self.blooms else ""
        return f"<Summary dims={','.join(self.dims)} boxes={len(self)}{blooms}>"

    # -- XML ---------------------------------------------------------------------------------
    def to_element(self, *, with_schema: bool = True) -> etree._Element:
        root = etree.Element(_SUMMARY, nsmap={"edn": EDN})
        root.set("dims", " ".join(self.dims))
        root.set("boxes", str(len(self)))
        if with_schema and self.schema is not None:
            root.append(self.schema.to_element())
        for tag, array in (("Mins", self.mins), ("Maxs", self.maxs)):
            child = etree.SubElement(root, f"{{{EDN}}}{tag}")
            child.set("encoding", _ENCODING)
            child.text = base64.b64encode(array.astype("<f8").tobytes()).decode("ascii")
        for name, bloom in self.blooms.items():
            root.append(bloom.to_element(name))
        return root

    def to_text(self) -> str:
        return etree.tostring(self.to_element(), encoding="unicode")

    @classmethod
    def from_element(cls, element: Any) -> "Summary":
        """Parse an ``edn:Summary``; :class:`InvalidFilter` on anything malformed."""
        if getattr(element, "tag", None) != _SUMMARY:
            raise InvalidFilter(f"expected an {_SUMMARY} element, got "
                                f"{getattr(element, 'tag', type(element).__name__)!r}")
        dims = tuple((element.get("dims") or "").split())
        try:
            count = int(element.get("boxes", ""))
        except ValueError:
            raise InvalidFilter("summary: 'boxes' must be an integer") from None
        if not 0 <= count <= MAX_SUMMARY_BOXES:
            raise InvalidFilter(f"summary: 'boxes' must be in [0, {MAX_SUMMARY_BOXES}]")
        schema = None
        schema_element = element.find(f"{{{EDN}}}Schema")
        if schema_element is not None:
            try:
                schema = Schema.from_element(schema_element)
            except InvalidSchema as exc:
                raise InvalidFilter(f"summary: {exc.reason}") from None
        arrays = []
        for tag in ("Mins", "Maxs"):
            child = element.find(f"{{{EDN}}}{tag}")
            if child is None:
                raise InvalidFilter(f"summary: missing edn:{tag}")
            if child.get("encoding", _ENCODING) != _ENCODING:
                raise InvalidFilter(f"summary: edn:{tag} encoding must be {_ENCODING}")
            try:
                raw = base64.b64decode((child.text or "").strip(), validate=True)
            except ValueError:
                raise InvalidFilter(f"summary: edn:{tag} is not base64") from None
            if len(raw) != 8 * count * len(dims):
                raise InvalidFilter(f"summary: edn:{tag} holds {len(raw)} bytes; {count} boxes "
                                    f"in {len(dims)} dimensions need {8 * count * len(dims)}")
            arrays.append(np.frombuffer(raw, dtype="<f8").astype(np.float64))
        blooms: dict[str, BloomFilter] = {}
        for child in element.iterchildren(_BLOOM):
            if len(blooms) >= len(dims):
                raise InvalidFilter("summary: more edn:Bloom elements than dimensions")
            name, bloom = bloom_from_element(child, dims)
            if name in blooms:
                raise InvalidFilter(f"summary: two edn:Bloom elements for {name!r}")
            blooms[name] = bloom
        try:
            return cls(dims, arrays[0].reshape(count, len(dims)),
                       arrays[1].reshape(count, len(dims)), schema, blooms)
        except ValueError as exc:
            raise InvalidFilter(f"summary: {exc}") from None

    @classmethod
    def from_text(cls, text: str | bytes) -> "Summary":
        from wsframework.xmlparse import parse_xml  # the hardened parser

        try:
            element = parse_xml(text.encode() if isinstance(text, str) else text)
        except Exception as exc:
            raise InvalidFilter(f"summary: not well-formed XML: {exc}") from None
        return cls.from_element(element)
