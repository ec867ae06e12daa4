"""The one settings mechanism: typed fields, one boolean parser, unknown keys refused."""
from dataclasses import dataclass

import pytest

from wsframework.settings import (Settings, SettingsError, UnknownSetting, describe, parse_bool,
                                  read_settings, setting)


@dataclass(frozen=True)
class Delivery(Settings):
    retries: int = setting(3, "retries after the first attempt")
    backoff: float = setting(0.5, "first retry delay (s)")
    keep: bool = setting(False, "keep subscriptions on shutdown")
    timeout: float | None = setting(None, "seconds; none = unbounded")
    allow: tuple[str, ...] = setting((), "CIDRs")

    def validate(self):
        if self.retries < 0:
            raise ValueError("retries must be >= 0")


@dataclass(frozen=True)
class Tuning(Settings):
    PREFIX = "selftuning_"
    threshold: float = setting(0.85, "CPU threshold")
    on: bool = setting(True, "self-tuning on")


def test_text_values_are_read_by_declared_type():
    d = Delivery.from_mapping({"retries": "5", "backoff": "0.25", "keep": "yes",
                               "timeout": "none", "allow": "10.0.0.0/8, 192.168.0.0/16"})
    assert d == Delivery(retries=5, backoff=0.25, keep=True, timeout=None,
                         allow=("10.0.0.0/8", "192.168.0.0/16"))


@pytest.mark.parametrize("text, value", [("true", True), ("On", True), ("1", True), ("YES", True),
                                         ("false", False), ("off", False), ("0", False),
                                         ("No", False), (True, True), (False, False)])
def test_one_boolean_parser(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("typo", ["ture", "flase", "", "2", "y", "enabled", None])
def test_boolean_typos_are_refused(typo):
    with pytest.raises(ValueError):
        parse_bool(typo)
    if typo is not None:
        with pytest.raises(SettingsError, match="keep"):
            Delivery.from_mapping({"keep": typo})


def test_unknown_key_is_refused_with_the_known_ones():
    with pytest.raises(UnknownSetting) as info:
        read_settings({"retires": "5"}, Delivery, Tuning)
    message = str(info.value)
    assert "'retires'" in message
    for key in ("retries", "backoff", "selftuning_threshold", "selftuning_on"):
        assert key in message


def test_one_mapping_fills_several_groups_with_prefixes_and_dashes():
    delivery, tuning = read_settings({"retries": 1, "selftuning-threshold": "0.9",
                                      "selftuning_on": "off"}, Delivery, Tuning)
    assert delivery.retries == 1 and tuning == Tuning(threshold=0.9, on=False)


def test_validation_runs_at_construction():
    with pytest.raises(SettingsError, match="retries must be >= 0"):
        Delivery.from_mapping({"retries": "-1"})
    with pytest.raises(SettingsError):
        Delivery(retries=-1)


@pytest.mark.parametrize("key, value", [("retries", "1" * 5000), ("backoff", "9" * 5000),
                                        ("backoff", "nan"), ("retries", "3.5"), ("retries", True)])
def test_numbers_are_bounded_and_exact(key, value):
    with pytest.raises(SettingsError, match=key):
        Delivery.from_mapping({key: value})


def test_none_means_default_and_allow_unknown_skips():
    (d,) = read_settings({"retries": None, "other": "x"}, Delivery, allow_unknown=True)
    assert d == Delivery()


def test_describe_lists_every_key_with_default_and_meaning():
    rows = {key: (default, doc) for key, default, doc in describe(Delivery, Tuning)}
    assert rows["retries"] == ("3", "retries after the first attempt")
    assert rows["timeout"][0] == "--"
    assert rows["selftuning_threshold"] == ("0.85", "CPU threshold")
    assert Tuning().as_mapping() == {"selftuning_threshold": 0.85, "selftuning_on": True}


def test_ip_ranges_are_checked_when_read():
    from wsframework.settings import parse_ip_ranges
    assert parse_ip_ranges("10.0.0.0/8, fd00::/8") == ("10.0.0.0/8", "fd00::/8")
    for bad in ("10.0.0.0/33", "not-a-range", "10.0.0.0/8,300.1.1.1"):
        with pytest.raises(ValueError, match="invalid IP range"):
            parse_ip_ranges(bad)
