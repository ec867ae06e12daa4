"""Attribute values and their coordinates: the three value types, their text forms, and the
order-preserving mapping of each onto the real line (see :mod:`matchers.schema`).

A value is a ``float`` for numbers, a ``str`` for strings and ``int`` microseconds since
1970-01-01T00:00:00Z for dateTimes (naive times are taken as UTC).  A string's coordinate is
its first :data:`STRING_PREFIX_BYTES` UTF-8 bytes read as a base-256 fraction in [0, 1).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

__all__ = [
    "NUMBER",
    "STRING",
    "DATETIME",
    "TYPES",
    "STRING_PREFIX_BYTES",
    "STRING_MAX",
    "parse_number",
    "parse_datetime",
    "format_datetime",
    "string_coordinate",
    "prefix_upper_bound",
]

NUMBER, STRING, DATETIME = "number", "string", "dateTime"
TYPES = (NUMBER, STRING, DATETIME)
STRING_PREFIX_BYTES = 6
_STRING_SCALE = float(256 ** STRING_PREFIX_BYTES)
STRING_MAX = (256 ** STRING_PREFIX_BYTES - 1) / _STRING_SCALE  # the largest string coordinate
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
# the instants a datetime can hold in UTC: a time written with an offset can fall outside
# them ("9999-12-31T23:00:00-14:00" is in the year 10000 in UTC) and could not be written back
_FIRST_MICROS = (datetime.min.replace(tzinfo=timezone.utc) - _EPOCH) // _MICROSECOND
_LAST_MICROS = (datetime.max.replace(tzinfo=timezone.utc) - _EPOCH) // _MICROSECOND
NUMBER_PATTERN = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"  # what parse_number takes
_NUMBER = re.compile(NUMBER_PATTERN)
_MAX_CODE_POINT = 0x10FFFF


def parse_number(text: str) -> float | None:
    """A finite float from ``text`` (number syntax only, white space around), else None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_datetime(text: str) -> int | None:
    """Microseconds since the epoch for an xs:dateTime-like string (naive = UTC), else None
    (also for an instant outside the years 1 to 9999 in UTC, which
    :func:`format_datetime` could not write)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    micros = (moment - _EPOCH) // _MICROSECOND
    return micros if _FIRST_MICROS <= micros <= _LAST_MICROS else None


def format_datetime(micros: int) -> str:
    moment = _EPOCH + timedelta(microseconds=micros)
    return moment.isoformat().replace("+00:00", "Z")


def string_coordinate(text: str) -> float:
    """The order-preserving coordinate of a string: its first 6 UTF-8 bytes as a fraction."""
    head = text.encode("utf-8", "surrogatepass")[:STRING_PREFIX_BYTES]
    return int.from_bytes(head.ljust(STRING_PREFIX_BYTES, b"\0"), "big") / _STRING_SCALE


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: none is).

    ``t.startswith(p)`` is exactly ``p <= t < prefix_upper_bound(p)``.
    """
    chars = list(prefix)
    while chars and ord(chars[-1]) == _MAX_CODE_POINT:
        chars.pop()
    if not chars:
        return None
    chars[-1] = chr(ord(chars[-1]) + 1)
    return "".join(chars)
