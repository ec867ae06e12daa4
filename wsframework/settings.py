"""Typed settings for every role, one mechanism: declared once, validated at start.

A role's settings are frozen dataclasses deriving from :class:`Settings`; each field's type
says how its text form (``edn serve --set KEY=VALUE``, ``Configure``) is read, and its
``doc`` metadata is what ``edn serve --set help`` and the README print::

    @dataclass(frozen=True)
    class DeliverySettings(Settings):
        delivery_retries: int = setting(3, "retries after the first attempt")
        keep_subscriptions_on_shutdown: bool = setting(False, "leave subscriptions active")

        def validate(self):
            if self.delivery_retries < 0:
                raise ValueError("delivery_retries must be >= 0")

    delivery, = read_settings({"delivery_retries": "5"}, DeliverySettings)

:func:`read_settings` reads one mapping into several groups at once (a server's settings are
its EDN settings and its event source's) and refuses a key no group knows, naming the known
ones, so a typo is an error at start rather than a silently ignored default. Booleans have one
parser (:func:`parse_bool`), which refuses anything but the usual spellings.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Callable, Iterable, Mapping

from .exceptions import WsFrameworkError

__all__ = ["Settings", "SettingsError", "UnknownSetting", "setting", "read_settings",
           "parse_bool", "parse_list", "parse_ip_ranges", "parse_urls", "describe"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class SettingsError(WsFrameworkError, ValueError):
    """A setting that cannot be read or does not make sense."""


class UnknownSetting(SettingsError):
    def __init__(self, key: str, known: Iterable[str]):
        self.key = key
        self.known = tuple(sorted(known))
        super().__init__(f"unknown setting {key!r}; known settings: {', '.join(self.known)}")


def parse_bool(value: Any) -> bool:
    """``true/false, yes/no, on/off, 1/0`` (any case) or a bool; anything else is refused."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"not a boolean (true/false, yes/no, on/off, 1/0): {value!r}")


def parse_list(value: Any) -> tuple[str, ...]:
    """A comma-separated string, or an iterable of strings, as a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


def parse_ip_ranges(value: Any) -> tuple[str, ...]:
    """Private IP ranges (``10.0.0.0/8``) separated by commas, or a list of such texts;
    checked by :func:`wsframework.urlpolicy.private_ranges` (a bad one is refused)."""
    from .urlpolicy import private_ranges
    if value is None:
        return ()
    return private_ranges(value if isinstance(value, str) else [str(v) for v in value])


def parse_urls(value: Any) -> tuple[str, ...]:
    """Base URLs (a list, or text separated by commas) without a trailing slash, each once,
    in the order given; one that is not http(s) is refused."""
    urls = [url.rstrip("/") for url in parse_list(value) if url.strip()]
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http(s) base URL")
    return tuple(dict.fromkeys(urls))


def setting(default: Any = dataclasses.MISSING, doc: str = "", *,
            parse: Callable[[Any], Any] | None = None, default_factory: Any = dataclasses.MISSING):
    """A settings field: its default, a one-line meaning, and optionally its own parser."""
    metadata = {"doc": doc}
    if parse is not None:
        metadata["parse"] = parse
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


class Settings:
    """Base of a role's settings dataclass (declare it ``@dataclass(frozen=True)``).

    ``PREFIX`` puts a group's keys under a common prefix (``selftuning_`` for the
    self-tuner's ``threshold`` -> ``selftuning_threshold``).
    """

    PREFIX: typing.ClassVar[str] = ""

    def __post_init__(self) -> None:
        try:
            self.validate()
        except SettingsError:
            raise
        except (TypeError, ValueError) as exc:
            raise SettingsError(str(exc)) from None

    def validate(self) -> None:
        """Refuse values that parse but make no sense (override; raise ValueError)."""

    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field]:
        """Setting key (with the prefix) -> dataclass field."""
        return {cls.PREFIX + f.name: f for f in dataclasses.fields(cls) if f.init}

    @classmethod
    def parse_value(cls, name: str, value: Any) -> Any:
        """``value`` (text or already typed) as the type of field ``name``."""
        field = {f.name: f for f in dataclasses.fields(cls)}[name]
        parse = field.metadata.get("parse") or _parser_for(_field_type(cls, name))
        try:
            return parse(value)
        except (TypeError, ValueError) as exc:
            raise SettingsError(f"setting {cls.PREFIX}{name}: {exc}") from None

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None):
        """Read this group alone; unknown keys are refused."""
        (group,) = read_settings(mapping, cls)
        return group

    def as_mapping(self) -> dict[str, Any]:
        return {self.PREFIX + f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.init}


def read_settings(mapping: Mapping[str, Any] | None, *groups: type[Settings],
                  allow_unknown: bool = False) -> tuple:
    """One instance of each group from ``mapping``; a key (``-`` and ``_`` alike) that no
    group knows is an :class:`UnknownSetting` unless ``allow_unknown``. ``None`` values
    mean "the default"."""
    owners: dict[str, tuple[type[Settings], str]] = {}
    for group in groups:
        for key, field in group.keys().items():
            owners.setdefault(key, (group, field.name))
    values: dict[type[Settings], dict[str, Any]] = {group: {} for group in groups}
    for raw_key, value in (mapping or {}).items():
        key = str(raw_key).strip().replace("-", "_")
        owner = owners.get(key)
        if owner is None:
            if allow_unknown:
                continue
            raise UnknownSetting(key, owners)
        if value is None:
            continue
        group, name = owner
        values[group][name] = group.parse_value(name, value)
    return tuple(group(**values[group]) for group in groups)


def describe(*groups: type[Settings]) -> list[tuple[str, str, str]]:
    """``(key, default, meaning)`` of every setting of ``groups``, for help and docs."""
    rows = []
    for group in groups:
        for key, field in group.keys().items():
            if field.default is not dataclasses.MISSING:
                default = "--" if field.default is None else str(field.default)
            elif field.default_factory is not dataclasses.MISSING:
                default = str(field.default_factory())
            else:
                default = "(required)"
            rows.append((key, default, field.metadata.get("doc", "")))
    return rows


# -- parsing by declared type ------------------------------------------------------------------

def _field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _parser_for(annotation: Any) -> Callable[[Any], Any]:
    optional, inner = _unwrap_optional(annotation)
    if inner is bool:
        base = parse_bool
    elif inner is int:
        base = _parse_int
    elif inner is float:
        base = _parse_float
    elif inner is str:
        base = lambda v: str(v).strip()  # noqa: E731
    elif typing.get_origin(inner) is tuple:
        base = parse_list
    else:
        raise TypeError(f"no parser for settings of type {annotation!r}; give the field parse=")
    if not optional:
        return base
    return lambda v: None if _is_none(v) else base(v)


def _unwrap_optional(annotation: Any) -> tuple[bool, Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return True, args[0]
    return False, annotation


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if len(text) > 30:  # int() of a huge digit string is slow and unbounded
        raise ValueError(f"not an integer: {text[:30]!r}...")
    return int(text)


def _parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if len(text) > 40:
        raise ValueError(f"not a number: {text[:40]!r}...")
    number = float(text)
    if number != number:
        raise ValueError("not a number: nan")
    return number
