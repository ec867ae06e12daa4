"""A server latency matrix read from a file (EDN III-D: distance-aware placement), in
milliseconds, hostile-input safe.

JSON::

    {"servers": ["ny1", "ny2", "ldn1"], "ms": [[0, 2, 70], [2, 0, 71], [70, 71, 0]]}

CSV (a header row of server names after an empty corner cell, then one row per server, in the
same order)::

    ,ny1,ny2,ldn1
    ny1,0,2,70
    ny2,2,0,71
    ldn1,70,71,0

Bounds: at most ``MAX_BYTES`` of text and ``MAX_SERVERS`` servers; names 1..128 printable
characters without commas, unique; every entry a finite number in ``[0, MAX_MS]``, the
diagonal 0. A violation raises :class:`LatencyFileError` naming the row and column. The matrix
need not be symmetric (a one-way latency is what a placement pays).

``edn latency measure`` writes such a file from the live network (:func:`format_latency`):
row i, column j is the round trip from server i to server j as i measured it."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["LatencyFileError", "LatencyMatrix", "load_latency", "parse_latency", "format_latency",
           "MAX_BYTES", "MAX_SERVERS", "MAX_MS"]

MAX_BYTES = 4 * 1024 * 1024
MAX_SERVERS = 1024
MAX_MS = 600_000.0  # ten minutes: anything slower is a mistake in the file
MAX_NAME = 128


class LatencyFileError(ValueError):
    """A latency file that cannot be used, and why."""


@dataclass(frozen=True, eq=False)
class LatencyMatrix:
    """Server ``names`` and their latencies ``ms[i, j]`` (from i to j)."""

    names: tuple[str, ...]
    ms: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "_positions", {name: i for i, name in enumerate(self.names)})

    def __contains__(self, name: object) -> bool:
        return name in self._positions

    def index(self, name: str) -> int:
        try:
            return self._positions[name]
        except KeyError:
            raise KeyError(f"server {name!r} is not in the latency matrix") from None

    def distance(self, source: str, target: str, default: float | None = None) -> float:
        """``source`` -> ``target`` in ms; 0 to itself; ``default`` (else KeyError) when
        either is unknown."""
        if source == target:
            return 0.0
        if default is not None and (source not in self or target not in self):
            return float(default)
        return float(self.ms[self.index(source), self.index(target)])

    def restricted(self, names) -> np.ndarray:
        """The (len(names), len(names)) sub-matrix, in the order given."""
        order = [self.index(n) for n in names]
        return self.ms[np.ix_(order, order)]


def load_latency(path) -> LatencyMatrix:
    """Read a ``.json`` or ``.csv`` latency file (other suffixes: sniffed from the first
    character)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise LatencyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise LatencyFileError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LatencyFileError(f"{path}: not UTF-8 ({exc.reason})") from None
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("json", "csv"):
        fmt = "json" if text.lstrip().startswith("{") else "csv"
    try:
        return parse_latency(text, fmt)
    except LatencyFileError as exc:
        raise LatencyFileError(f"{path}: {exc}") from None


def parse_latency(text: str, fmt: str) -> LatencyMatrix:
    """Parse ``text`` as ``fmt`` ("json" or "csv")."""
    if len(text) > MAX_BYTES:
        raise LatencyFileError(f"larger than {MAX_BYTES} characters")
    if fmt == "json":
        names, rows = _from_json(text)
    elif fmt == "csv":
        names, rows = _from_csv(text)
    else:
        raise LatencyFileError(f"unknown latency format {fmt!r} (json or csv)")
    return _validated(names, rows, text_cells=fmt == "csv")


def format_latency(matrix: LatencyMatrix, fmt: str) -> str:
    """``matrix`` as the text of a ``fmt`` ("json" or "csv") latency file, which
    :func:`parse_latency` reads back to the same matrix (values rounded to 0.001 ms)."""
    rows = [[round(float(v), 3) for v in row] for row in matrix.ms]
    if fmt == "json":
        body = ",\n  ".join(json.dumps(row) for row in rows)  # one line per server
        return '{"servers": %s,\n "ms": [\n  %s\n ]}\n' % (json.dumps(list(matrix.names)), body)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["", *matrix.names])
        for name, row in zip(matrix.names, rows):
            writer.writerow([name, *(f"{v:g}" for v in row)])
        return out.getvalue()
    raise LatencyFileError(f"unknown latency format {fmt!r} (json or csv)")


def _from_json(text: str):
    try:
        document = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise LatencyFileError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or set(document) != {"servers", "ms"}:
        raise LatencyFileError('expected an object with exactly "servers" and "ms"')
    names, rows = document["servers"], document["ms"]
    if not isinstance(names, list) or not isinstance(rows, list):
        raise LatencyFileError('"servers" and "ms" must be lists')
    return names, rows


def _refuse_constant(name):
    raise ValueError(f"{name} is not a latency")


def _from_csv(text: str):
    try:
        lines = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise LatencyFileError(f"not CSV: {exc}") from None
    lines = [line for line in lines if any(cell.strip() for cell in line)]
    if len(lines) > MAX_SERVERS + 1:
        raise LatencyFileError(f"more than {MAX_SERVERS} servers")
    if not lines:
        raise LatencyFileError("empty latency file")
    header = [cell.strip() for cell in lines[0]]
    if header[0] != "":
        raise LatencyFileError("the header row must start with an empty cell")
    names = header[1:]
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = [cell.strip() for cell in line]
        if cells[0] != (names[number - 2] if number - 2 < len(names) else None):
            raise LatencyFileError(f"line {number}: row name {cells[0]!r} does not match the "
                                   f"header's server {number - 1}")
        rows.append(cells[1:])
    return names, rows


def _validated(names, rows, text_cells: bool) -> LatencyMatrix:
    n = len(names)
    if n == 0:
        raise LatencyFileError("no servers")
    if n > MAX_SERVERS:
        raise LatencyFileError(f"{n} servers: at most {MAX_SERVERS}")
    for name in names:
        if (not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME
                or not name.isprintable() or "," in name or name != name.strip()):
            raise LatencyFileError(f"bad server name {name!r}: 1..{MAX_NAME} printable "
                                   "characters, no comma, no surrounding space")
    if len(set(names)) != n:
        raise LatencyFileError("duplicate server names")
    if len(rows) != n:
        raise LatencyFileError(f"{len(rows)} rows for {n} servers")
    ms = np.empty((n, n))
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n:
            raise LatencyFileError(f"row {names[i]!r}: expected {n} values")
        for j, cell in enumerate(row):
            ms[i, j] = _milliseconds(cell, names[i], names[j], text_cells)
            if i == j and ms[i, j] != 0:
                raise LatencyFileError(f"{names[i]!r} to itself must be 0 ms")
    return LatencyMatrix(tuple(names), ms)


def _milliseconds(cell, source: str, target: str, text_cells: bool) -> float:
    """One cell in ms: a JSON number, or (CSV, ``text_cells``) a number's text."""
    where = f"{source!r} -> {target!r}"
    if isinstance(cell, bool) or not isinstance(cell, (int, float, str) if text_cells
                                                else (int, float)):
        raise LatencyFileError(f"{where}: not a number")
    if isinstance(cell, str):
        if len(cell) > 32:
            raise LatencyFileError(f"{where}: not a number")
        try:
            cell = float(cell)
        except ValueError:
            raise LatencyFileError(f"{where}: {cell!r} is not a number") from None
    value = float(cell) if not isinstance(cell, int) or abs(cell) < 10**18 else math.inf
    if not math.isfinite(value) or not 0 <= value <= MAX_MS:
        raise LatencyFileError(f"{where}: {cell!r} is outside [0, {MAX_MS:g}] ms")
    return value
