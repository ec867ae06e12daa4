"""Subscription expiry: strict ``xs:duration`` / ``xs:dateTime`` parsing and the grant policy.

Times are stored as absolute UTC epoch seconds (``None`` = never expires): comparing
durations is ill-defined (is P1M more than P30D?), comparing instants is not. A requested
duration is anchored at *now* -- for Subscribe and, unlike some implementations that add
it to the old expiry, for Renew too.

What a request means, per version (and what we answer):

=================  ==================================  ===================================
request            2004/08 submission                  2011 Recommendation
=================  ==================================  ===================================
absent             "infinite"; granted up to max       source chooses: ``default`` (or max)
PT0S               InvalidExpirationTime               infinite; if max is finite: max with
                                                       BestEffort, else UnsupportedExp.Value
past / negative    InvalidExpirationTime               UnsupportedExpirationValue
not a duration     InvalidExpirationTime               UnsupportedExpirationValue (the 2011
or dateTime                                            fault list has no InvalidExpiration-
                                                       Time; this is the closest)
outside [min,max]  clamped (the source "is not         exact or UnsupportedExpirationValue;
                   constrained" by the request)        clamped only with BestEffort="true"
dateTime refused   UnsupportedExpirationType           UnsupportedExpirationType
(policy)
=================  ==================================  ===================================

The granted value is answered in the type that was requested (duration -> duration,
dateTime -> dateTime; the original lexical form when granted unchanged). 2011 answers an
infinite grant as ``PT0S``; 2004 omits ``wse:Expires`` (its text: "if this element does not
appear, the subscription will not expire").
"""
from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation

from wsframework.exceptions import SoapFault
from wsframework.faults import translate

from .versions import VERSIONS

__all__ = [
    "ExpiryError",
    "InvalidExpiry",
    "UnsupportedExpiryType",
    "UngrantableExpiry",
    "Duration",
    "parse_duration",
    "parse_datetime",
    "format_duration",
    "format_datetime",
    "ExpiryRequest",
    "Grant",
    "ExpiryPolicy",
    "DURATION",
    "DATETIME",
]

DURATION = "duration"
DATETIME = "dateTime"


class ExpiryError(ValueError):
    """A requested expiry that cannot be granted; subclasses say which fault applies.

    ``version`` ('2004' or '2011') is the WS-Eventing version the grant was asked under
    (set by :meth:`ExpiryPolicy.grant`); it names the fault (translations at the bottom).
    """

    version: str | None = None


class InvalidExpiry(ExpiryError):
    """Not a valid duration/dateTime, zero/negative or in the past."""


class UnsupportedExpiryType(ExpiryError):
    """A dateTime where the policy accepts durations only."""


class UngrantableExpiry(ExpiryError):
    """Valid, but outside what the policy grants and the requester wants it exact."""


# -- xs:duration ----------------------------------------------------------------------------

_DURATION = re.compile(
    r"^(?P<sign>-)?P(?!$)"
    r"(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<days>\d+)D)?"
    r"(?:T(?!$)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
# Guard rails: a year count this large is either an attack or a typo, and datetime cannot
# represent the result anyway.
_MAX_YEARS = 9000
# Lengths are checked before any int(): Python refuses to convert more than 4,300 digits
# (a ValueError that is nobody's fault in particular), and no legitimate expiry comes near
# these. A number in a duration may carry leading zeros; its significant digits may not
# exceed _MAX_DIGITS (9000 years is 2.8e11 seconds: 12 digits).
_MAX_LEXICAL = 128
_MAX_DIGITS = 15
_SHOWN = 40


def _shown(text: str) -> str:
    """``text`` for a fault reason: a hostile value is not echoed back in full."""
    return repr(text) if len(text) <= _SHOWN else f"{text[:_SHOWN]!r}... ({len(text)} characters)"


def _bounded_int(digits: str | None, text: str) -> int:
    if not digits:
        return 0
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        raise InvalidExpiry(f"duration too long: {_shown(text)}")
    return int(digits)


@dataclass(frozen=True)
class Duration:
    """An xs:duration: whole months plus (decimal) seconds, and a sign."""

    months: int
    seconds: Decimal
    negative: bool = False

    @property
    def is_zero(self) -> bool:
        return self.months == 0 and self.seconds == 0

    def add_to(self, instant: datetime) -> datetime:
        """``instant + self`` by the XML Schema algorithm (months first, day clamped)."""
        sign = -1 if self.negative else 1
        total = instant.year * 12 + (instant.month - 1) + sign * self.months
        year, month0 = divmod(total, 12)
        if not 1 <= year <= 9999:
            raise InvalidExpiry("the duration leads outside the representable years")
        day = min(instant.day, calendar.monthrange(year, month0 + 1)[1])
        moved = instant.replace(year=year, month=month0 + 1, day=day)
        try:
            return moved + sign * timedelta(seconds=float(self.seconds))
        except OverflowError:
            raise InvalidExpiry("the duration leads outside the representable years") from None


def parse_duration(text: str) -> Duration:
    """Parse an xs:duration lexically and strictly; :class:`InvalidExpiry` otherwise."""
    if not isinstance(text, str):
        raise InvalidExpiry("a duration must be text")
    if len(text.strip()) > _MAX_LEXICAL:
        raise InvalidExpiry(f"duration too long: {_shown(text)}")
    match = _DURATION.match(text.strip())
    if match is None or text.strip().endswith("T"):
        raise InvalidExpiry(f"not an xs:duration: {_shown(text)}")
    parts = match.groupdict()
    years = _bounded_int(parts["years"], text)
    if years > _MAX_YEARS:
        raise InvalidExpiry(f"duration too long: {_shown(text)}")
    months = years * 12 + _bounded_int(parts["months"], text)
    whole_seconds, _, fraction = (parts["seconds"] or "0").partition(".")
    try:
        seconds = (Decimal(_bounded_int(parts["days"], text)) * 86400
                   + Decimal(_bounded_int(parts["hours"], text)) * 3600
                   + Decimal(_bounded_int(parts["minutes"], text)) * 60
                   + Decimal(_bounded_int(whole_seconds, text))
                   + (Decimal("0." + fraction) if fraction else Decimal(0)))
    except InvalidOperation:
        raise InvalidExpiry(f"not an xs:duration: {_shown(text)}") from None
    if seconds > Decimal(_MAX_YEARS) * 366 * 86400 or months > _MAX_YEARS * 12:
        raise InvalidExpiry(f"duration too long: {_shown(text)}")
    return Duration(months, seconds, bool(parts["sign"]))


def format_duration(seconds: float) -> str:
    """A non-negative number of seconds as an xs:duration (``P1DT2H3M4S``, ``PT0.5S``)."""
    if seconds < 0:
        raise ValueError("negative duration")
    millis = int(round(seconds * 1000))
    whole, frac = divmod(millis, 1000)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    out = "P"
    if days:
        out += f"{days}D"
    time = ""
    if hours:
        time += f"{hours}H"
    if minutes:
        time += f"{minutes}M"
    if secs or frac or not (days or hours or minutes):
        time += f"{secs}.{frac:03d}".rstrip("0").rstrip(".") + "S" if frac else f"{secs}S"
    if time:
        out += "T" + time
    return out


# -- xs:dateTime ----------------------------------------------------------------------------

_DATETIME = re.compile(
    r"^(?P<year>-?\d{4,})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"T(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?P<fraction>\.\d+)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?$"
)


def parse_datetime(text: str) -> datetime:
    """Parse an xs:dateTime strictly into an aware UTC datetime.

    A value without a time zone is read as UTC (the spec says "the event source's local
    time"; this service's clock is UTC). ``24:00:00`` means the next day's midnight.
    """
    if not isinstance(text, str):
        raise InvalidExpiry("a dateTime must be text")
    if len(text.strip()) > _MAX_LEXICAL:
        raise InvalidExpiry(f"dateTime too long: {_shown(text)}")
    match = _DATETIME.match(text.strip())
    if match is None:
        raise InvalidExpiry(f"not an xs:dateTime: {_shown(text)}")
    p = match.groupdict()
    # More than four year digits is past 9999 or (with a leading zero) not canonical:
    # refused before int() sees them.
    if len(p["year"].lstrip("-")) > 4:
        raise InvalidExpiry(f"year out of range in {_shown(text)}")
    year = int(p["year"])
    if not 1 <= year <= 9999:
        raise InvalidExpiry(f"year out of range in {_shown(text)}")
    month, day = int(p["month"]), int(p["day"])
    hour, minute, second = int(p["hour"]), int(p["minute"]), int(p["second"])
    fraction = Decimal(p["fraction"]) if p["fraction"] else Decimal(0)
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise InvalidExpiry(f"no such date in {text!r}")
    midnight_24 = hour == 24 and minute == 0 and second == 0 and fraction == 0
    if not (hour <= 23 or midnight_24) or minute > 59 or second > 59:
        raise InvalidExpiry(f"no such time in {text!r}")
    offset = timedelta(0)
    if p["tz"] and p["tz"] != "Z":
        sign = -1 if p["tz"][0] == "-" else 1
        tz_hours, tz_minutes = int(p["tz"][1:3]), int(p["tz"][4:6])
        if tz_hours > 14 or tz_minutes > 59 or (tz_hours == 14 and tz_minutes):
            raise InvalidExpiry(f"time zone out of range in {text!r}")
        offset = sign * timedelta(hours=tz_hours, minutes=tz_minutes)
    try:
        value = datetime(year, month, day, 0 if midnight_24 else hour, minute, second,
                         int(fraction * 1_000_000), tzinfo=timezone(offset))
        if midnight_24:
            value += timedelta(days=1)
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise InvalidExpiry(f"dateTime out of range: {text!r}") from None


def format_datetime(epoch: float) -> str:
    value = datetime.fromtimestamp(epoch, timezone.utc)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


# -- requests and grants ----------------------------------------------------------------------

@dataclass(frozen=True)
class ExpiryRequest:
    """What a Subscribe or Renew asked for: the raw text (None = absent) and BestEffort."""

    text: str | None = None
    best_effort: bool = False


@dataclass(frozen=True)
class Grant:
    """The granted expiry: absolute epoch (None = never) and how to answer it."""

    expires: float | None
    kind: str = DURATION
    # The requester's own lexical form, answered when the grant is exactly what was asked.
    echo: str | None = None

    def render(self, now: float, *, infinite: str | None) -> str | None:
        """The answer text at ``now``; ``infinite`` is what a never-expiring grant reads as
        (None: leave the element out)."""
        if self.expires is None:
            return infinite
        if self.echo is not None:
            return self.echo
        if self.kind == DATETIME:
            return format_datetime(self.expires)
        return format_duration(max(0.0, self.expires - now))


@dataclass(frozen=True)
class ExpiryPolicy:
    """Bounds on granted lifetimes, in seconds (``max_seconds=None``: unbounded).

    ``default_seconds`` is what a 2011 request without wse:Expires gets (None: the max).
    """

    min_seconds: float = 1.0
    max_seconds: float | None = None
    default_seconds: float | None = None
    accept_datetime: bool = True

    def __post_init__(self):
        if self.min_seconds < 0:
            raise ValueError("min_seconds must not be negative")
        if self.max_seconds is not None and self.max_seconds < self.min_seconds:
            raise ValueError("max_seconds must not be below min_seconds")

    # -- the two rule sets ------------------------------------------------------------------
    def grant(self, request: ExpiryRequest, now: float, *, version: str) -> Grant:
        """The grant for ``request`` at epoch ``now`` under ``version`` ('2004' or '2011');
        an :class:`ExpiryError` raised says ``version`` (its fault depends on it)."""
        rules = {"2004": self._grant_2004, "2011": self._grant_2011}.get(version)
        if rules is None:
            raise ValueError(f"unknown WS-Eventing version {version!r}")
        try:
            return rules(request, now)
        except ExpiryError as exc:
            exc.version = version
            raise

    def _grant_2004(self, request: ExpiryRequest, now: float) -> Grant:
        if request.text is None:
            return self._infinite_or_max(now, DURATION)
        kind, expires = self._requested(request, now)
        if expires <= now:
            raise InvalidExpiry("the requested expiration is zero or in the past")
        clamped = self._clamp(expires, now)
        return Grant(clamped, kind, request.text.strip() if clamped == expires else None)

    def _grant_2011(self, request: ExpiryRequest, now: float) -> Grant:
        if request.text is None:
            if self.default_seconds is not None:
                return Grant(self._clamp(now + self.default_seconds, now), DURATION)
            return self._infinite_or_max(now, DURATION)
        kind, expires = self._requested(request, now, zero_means_infinite=True)
        if expires is None:  # PT0S: a request for a subscription that never expires
            if self.max_seconds is None:
                return Grant(None, DURATION)
            if request.best_effort:
                return Grant(now + self.max_seconds, DURATION)
            raise UngrantableExpiry("subscriptions that never expire are not granted here; "
                                    f"the longest is {format_duration(self.max_seconds)}")
        if expires <= now:
            raise InvalidExpiry("the requested expiration is negative or in the past")
        clamped = self._clamp(expires, now)
        if clamped != expires and not request.best_effort:
            raise UngrantableExpiry(
                f"the requested expiration is outside [{format_duration(self.min_seconds)}, "
                f"{format_duration(self.max_seconds) if self.max_seconds is not None else 'unbounded'}]"
                " and BestEffort is not set")
        return Grant(clamped, kind, request.text.strip() if clamped == expires else None)

    # -- helpers ----------------------------------------------------------------------------
    def _requested(self, request: ExpiryRequest, now: float, *, zero_means_infinite=False):
        text = request.text.strip()
        if text.lstrip("-").startswith("P"):
            duration = parse_duration(text)
            if duration.negative and not duration.is_zero:
                raise InvalidExpiry(f"negative duration {text!r}")
            if duration.is_zero:
                if zero_means_infinite:
                    return DURATION, None
                raise InvalidExpiry("a zero duration is not a valid expiration")
            anchor = datetime.fromtimestamp(now, timezone.utc)
            return DURATION, duration.add_to(anchor).timestamp()
        value = parse_datetime(text)
        if not self.accept_datetime:
            raise UnsupportedExpiryType("only xs:duration expirations are accepted here")
        return DATETIME, value.timestamp()

    def _infinite_or_max(self, now: float, kind: str) -> Grant:
        return Grant(None if self.max_seconds is None else now + self.max_seconds, kind)

    def _clamp(self, expires: float, now: float) -> float:
        low = now + self.min_seconds
        if expires < low:
            return low
        if self.max_seconds is not None and expires > now + self.max_seconds:
            return now + self.max_seconds
        return expires


# -- the faults a peer is answered with (see the table above and :mod:`.versions`) ---------

@translate(InvalidExpiry)
def _invalid_expiry(exc: InvalidExpiry) -> SoapFault:
    return VERSIONS[exc.version].faults.invalid_expiration(str(exc))


@translate(UngrantableExpiry)
def _ungrantable_expiry(exc: UngrantableExpiry) -> SoapFault:
    return VERSIONS[exc.version].faults.ungrantable_expiration(str(exc))


@translate(UnsupportedExpiryType)
def _unsupported_expiry_type(exc: UnsupportedExpiryType) -> SoapFault:
    return VERSIONS[exc.version].faults.unsupported_expiration_type(str(exc))
