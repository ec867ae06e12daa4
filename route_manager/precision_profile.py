"""Reading a precision recommendation (written by ``edn profile``) for the dispatcher::

    edn profile ... --out prof           # -> prof/recommendation.json
    edn serve dispatcher --precision-profile prof/recommendation.json

The dispatcher starts at the recommended precision (its ``initial_precision`` setting) and
its self-tuning moves on from there.  The file is JSON; only ``initial_precision`` is read:
a number in (0, 1] or ``"none"`` (no summary: forward every event to every server);
``"precise"`` is accepted as 1.0.  A directory holding ``recommendation.json`` may be given.
This module needs nothing from Spark.

A running dispatcher takes a profile too (``edn profile --apply --at DISPATCHER``): the
Configure setting ``profile`` carries a :class:`PrecisionProfile` -- the recommended
precision and the predicted throughput at each precision profiled, the model of throughput
against precision the self-tuner is handed -- as bounded JSON (:meth:`PrecisionProfile.parse`
refuses anything else). The dispatcher stamps when it applied it, stores it as it stores
every Configure setting (a restart and every process apply it again) and reports it in its
figures (``profile.*``, which ``edn status`` prints).
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

__all__ = ["InvalidPrecisionProfile", "initial_precision_from", "parse_initial_precision",
           "PrecisionProfile", "MAX_PROFILE_TEXT", "MAX_PROFILE_POINTS"]

#: the most characters a profile's JSON takes (a Configure value a peer sends)
MAX_PROFILE_TEXT = 16_384
#: the most precisions a profile gives a throughput for
MAX_PROFILE_POINTS = 101
_MAX_SOURCE = 200


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
    number = _finite(value)
    if number is None:
        raise InvalidPrecisionProfile(f"initial_precision must be a number in (0, 1] or "
                                      f"'none', got {_shown(value)}")
    value = number
    if not 0 < value <= 1:
        raise InvalidPrecisionProfile(f"initial_precision must lie in (0, 1], got {value}")
    return value


def _finite(value) -> float | None:
    """``value`` as a finite float, or None if it is not a number (bools are not), is not
    finite, or is an integer too large for a float (JSON can carry thousands of digits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


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


@dataclasses.dataclass(frozen=True)
class PrecisionProfile:
    """An applied profile: the precision it recommends, the predicted events/s at each
    precision profiled (``curve``: (precision or "none", events/s), in the profile's order),
    where it came from (``source``: free text, as the operator gave it) and when the
    dispatcher applied it (``applied_at``, epoch seconds; None before it has)."""

    initial_precision: float | str
    curve: tuple[tuple[float | str, float], ...]
    source: str = ""
    applied_at: float | None = None

    @classmethod
    def from_recommendation(cls, data: dict, source: str = "") -> "PrecisionProfile":
        """The profile in a recommendation (``edn profile``'s recommendation.json)."""
        if not isinstance(data, dict):
            raise InvalidPrecisionProfile("a recommendation is a JSON object")
        curve = data.get("curve")
        if not isinstance(curve, list):
            raise InvalidPrecisionProfile("the recommendation has no 'curve' list")
        points = []
        for point in curve:
            if not isinstance(point, dict):
                raise InvalidPrecisionProfile("each point of the curve is a JSON object")
            if point.get("throughput") is not None:  # (None: not finite, no prediction)
                points.append([point.get("precision"), point.get("throughput")])
        return cls._checked(data.get("initial_precision"), points, source, None)

    @classmethod
    def parse(cls, text: str) -> "PrecisionProfile":
        """A profile from its JSON text (:meth:`to_text`): bounded, every value checked."""
        if not isinstance(text, str) or len(text) > MAX_PROFILE_TEXT:
            raise InvalidPrecisionProfile(f"a profile is JSON text of at most "
                                          f"{MAX_PROFILE_TEXT} characters")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InvalidPrecisionProfile(f"the profile is not JSON: {exc}") from None
        if not isinstance(data, dict) or set(data) - {"initial_precision", "curve", "source",
                                                      "applied_at"}:
            raise InvalidPrecisionProfile("a profile is a JSON object of initial_precision, "
                                          "curve, source and applied_at")
        applied = data.get("applied_at")
        if applied is not None:
            seconds = _finite(applied)
            if seconds is None or seconds < 0:
                raise InvalidPrecisionProfile(f"applied_at must be epoch seconds, got "
                                              f"{_shown(applied)}")
            applied = seconds
        return cls._checked(data.get("initial_precision"), data.get("curve"),
                            data.get("source", ""), applied)

    @classmethod
    def _checked(cls, initial, curve, source, applied_at) -> "PrecisionProfile":
        if initial is None:
            raise InvalidPrecisionProfile("the profile has no initial_precision")
        initial = parse_initial_precision(initial)
        if not isinstance(curve, list) or not 0 < len(curve) <= MAX_PROFILE_POINTS:
            raise InvalidPrecisionProfile(f"the curve is a list of 1 to {MAX_PROFILE_POINTS} "
                                          "[precision, events/s] points")
        points: list[tuple[float | str, float]] = []
        for point in curve:
            if not isinstance(point, list) or len(point) != 2:
                raise InvalidPrecisionProfile("each point of the curve is [precision, events/s]")
            precision = parse_initial_precision(point[0]) if point[0] is not None else "none"
            throughput = _finite(point[1])
            if throughput is None or throughput < 0:
                raise InvalidPrecisionProfile(f"the predicted events/s at {_shown(point[0])} "
                                              f"must be a finite number >= 0, got "
                                              f"{_shown(point[1])}")
            points.append((precision, throughput))
        if len({p for p, _ in points}) != len(points):
            raise InvalidPrecisionProfile("the curve gives a precision twice")
        if initial not in {p for p, _ in points}:
            raise InvalidPrecisionProfile(f"the curve has no point at the recommended "
                                          f"precision {initial!r}")
        if not isinstance(source, str) or len(source) > _MAX_SOURCE or \
                not source.isprintable():
            raise InvalidPrecisionProfile(f"source is printable text of at most {_MAX_SOURCE} "
                                          "characters")
        return cls(initial, tuple(points), source, applied_at)

    def stamped(self, now: float) -> "PrecisionProfile":
        """This profile as applied at ``now``."""
        return dataclasses.replace(self, applied_at=now)

    def to_text(self) -> str:
        return json.dumps({"initial_precision": self.initial_precision,
                           "curve": [list(point) for point in self.curve],
                           "source": self.source, "applied_at": self.applied_at},
                          separators=(",", ":"))

    def model(self) -> dict[float, float]:
        """Predicted events/s by precision, with no summary ("none") as precision 0.0, as
        the dispatcher's precision runs."""
        return {0.0 if p == "none" else p: throughput for p, throughput in self.curve}
