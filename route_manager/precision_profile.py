"""Reading a precision recommendation (written by ``edn profile``) for the dispatcher::

    edn profile ... --out prof           # -> prof/recommendation.json
    edn serve dispatcher --precision-profile prof/recommendation.json

The dispatcher starts at the recommended precision (its ``initial_precision`` setting) and
its self-tuning moves on from there.  The file is JSON; only ``initial_precision`` is read:
a number in (0, 1] or ``"none"`` (no summary: forward every event to every server);
``"precise"`` is accepted as 1.0.  A directory holding ``recommendation.json`` may be given.
This module needs nothing from Spark.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

__all__ = ["InvalidPrecisionProfile", "initial_precision_from", "parse_initial_precision"]


class InvalidPrecisionProfile(ValueError):
    """The file is missing, not JSON, or holds no usable ``initial_precision``."""


def parse_initial_precision(value) -> float | str:
    """A precision in (0, 1] as a float, or "none"."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "none":
            return "none"
        if text == "precise":
            return 1.0
        try:
            value = float(text)
        except ValueError:
            raise InvalidPrecisionProfile(f"initial_precision {value!r} is neither a number "
                                          "in (0, 1] nor 'none'") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidPrecisionProfile(f"initial_precision must be a number in (0, 1] or "
                                      f"'none', got {value!r}")
    value = float(value)
    if math.isnan(value) or not 0 < value <= 1:
        raise InvalidPrecisionProfile(f"initial_precision must lie in (0, 1], got {value}")
    return value


def initial_precision_from(path: str | Path) -> float | str:
    """The dispatcher's starting precision from a recommendation file (or its directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / "recommendation.json"
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InvalidPrecisionProfile(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InvalidPrecisionProfile(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or "initial_precision" not in data:
        raise InvalidPrecisionProfile(f"{path} has no 'initial_precision' "
                                      "(is it the recommendation.json of edn profile?)")
    return parse_initial_precision(data["initial_precision"])
