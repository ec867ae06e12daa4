"""Event source settings, read from ``ServiceConfig.settings`` (``edn serve --set KEY=VALUE``).

==================================  ==========  ================================================
key                                 default     meaning
==================================  ==========  ================================================
allow_private                       []          CIDRs of private ranges notification targets may
                                                be in (``--allow-private``)
allow_loopback                      true        loopback targets allowed
min_expires / max_expires           PT1S / --   bounds on granted lifetimes (xs:duration or
                                                seconds; no max = subscriptions may be infinite)
default_expires                     --          2011 Subscribe without Expires (default: max)
accept_datetime                     true        accept xs:dateTime expirations
sweep_interval                      1.0         seconds between expiry sweeps
purge_after                         604800      seconds terminal rows are kept before purging
delivery_workers                    8           delivery threads per process
delivery_queue_size                 50000       bounded queue; full -> newest dropped
delivery_retries                    3           retries after the first attempt
delivery_backoff / _backoff_max     0.5 / 30    first retry delay, cap (seconds, doubling)
delivery_timeout                    5.0         seconds to finish pending deliveries at close
target_cache_ttl                    10.0        seconds a target check answer is reused
keep_subscriptions_on_shutdown      false       close() leaves subscriptions active (rolling
                                                restarts) instead of ending them with
                                                SubscriptionEnd/SourceShuttingDown
==================================  ==========  ================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .delivery import DeliveryPolicy
from .expiry import ExpiryPolicy, InvalidExpiry, parse_duration

__all__ = ["EventingSettings"]


def _seconds(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.lower() in ("none", "unbounded", "inf", "infinite"):
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        duration = parse_duration(text)
    except InvalidExpiry:
        raise ValueError(f"not a number of seconds or an xs:duration: {value!r}") from None
    if duration.negative:
        raise ValueError(f"negative duration {value!r}")
    return float(duration.seconds) + duration.months * 30 * 86400


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _cidrs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class EventingSettings:
    allow_private: tuple[str, ...] = ()
    allow_loopback: bool = True
    min_expires: float | None = 1.0
    max_expires: float | None = None
    default_expires: float | None = None
    accept_datetime: bool = True
    sweep_interval: float = 1.0
    purge_after: float = 7 * 86400.0
    delivery_workers: int = 8
    delivery_queue_size: int = 50_000
    delivery_retries: int = 3
    delivery_backoff: float = 0.5
    delivery_backoff_max: float = 30.0
    delivery_timeout: float = 5.0
    target_cache_ttl: float = 10.0
    keep_subscriptions_on_shutdown: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    _CONVERTERS = {
        "allow_private": _cidrs, "allow_loopback": _bool, "accept_datetime": _bool,
        "keep_subscriptions_on_shutdown": _bool,
        "min_expires": _seconds, "max_expires": _seconds, "default_expires": _seconds,
        "sweep_interval": float, "purge_after": float, "delivery_backoff": float,
        "delivery_backoff_max": float, "delivery_timeout": float, "target_cache_ttl": float,
        "delivery_workers": int, "delivery_queue_size": int, "delivery_retries": int,
    }

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None) -> "EventingSettings":
        known = {f.name for f in fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in (settings or {}).items():
            name = key.replace("-", "_")
            if name in known:
                try:
                    values[name] = cls._CONVERTERS[name](value)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"setting {key}: {exc}") from None
            else:
                extra[key] = value
        return cls(**values, extra=extra)

    def expiry_policy(self) -> ExpiryPolicy:
        return ExpiryPolicy(min_seconds=self.min_expires or 0.0, max_seconds=self.max_expires,
                            default_seconds=self.default_expires,
                            accept_datetime=self.accept_datetime)

    def delivery_policy(self) -> DeliveryPolicy:
        return DeliveryPolicy(workers=self.delivery_workers, queue_size=self.delivery_queue_size,
                              retries=self.delivery_retries, backoff=self.delivery_backoff,
                              backoff_max=self.delivery_backoff_max)
