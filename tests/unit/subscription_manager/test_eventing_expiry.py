"""Expiry: strict xs:duration / xs:dateTime parsing, the per-version grant policy, Renew
computed from now, and the sweeper."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from subscription_manager.expiry import (DATETIME, DURATION, ExpiryPolicy, ExpiryRequest, Grant,
                                         InvalidExpiry, UngrantableExpiry, UnsupportedExpiryType,
                                         format_datetime, format_duration, parse_datetime,
                                         parse_duration)
from subscription_manager.lifecycle import State
from subscription_manager.versions import V2011
from tests.support.eventing import FakeClock, Harness, quote
from wsframework.exceptions import SoapFault

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize("text,months,seconds,negative", [
    ("P1Y2M3DT4H5M6.5S", 14, Decimal("273906.5"), False),
    ("PT36H", 0, Decimal(129600), False),
    ("P0Y", 0, Decimal(0), False),
    ("PT0S", 0, Decimal(0), False),
    ("-PT5M", 0, Decimal(300), True),
    ("P1M", 1, Decimal(0), False),
    ("PT0.001S", 0, Decimal("0.001"), False),
    (" PT1H ", 0, Decimal(3600), False),
])
def test_valid_durations(text, months, seconds, negative):
    assert parse_duration(text) == (parse_duration(text).__class__(months, seconds, negative))


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1D", "PT1.S", "P1.5D", "PT-1S", "P1H",
                                  "PT1D", "P1S", "P1Y1Y", "--P1D", "P 1D", "pt1h", "PT1H30",
                                  "P99999Y", "PT1,5S", "P1DT1H1M1S1"])
def test_invalid_durations(text):
    with pytest.raises(InvalidExpiry):
        parse_duration(text)


@pytest.mark.parametrize("text,expected", [
    ("2024-02-29T12:00:00Z", datetime(2024, 2, 29, 12, tzinfo=timezone.utc)),
    ("2024-02-29T24:00:00Z", datetime(2024, 3, 1, tzinfo=timezone.utc)),
    ("2024-01-01T00:00:00+14:00", datetime(2023, 12, 31, 10, tzinfo=timezone.utc)),
    ("2024-01-01T00:00:00.5-05:30", datetime(2024, 1, 1, 5, 30, 0, 500000, tzinfo=timezone.utc)),
    ("2024-01-01T00:00:00", datetime(2024, 1, 1, tzinfo=timezone.utc)),  # no zone: UTC
])
def test_valid_datetimes(text, expected):
    assert parse_datetime(text) == expected


@pytest.mark.parametrize("text", ["2023-02-29T00:00:00Z", "2024-1-01T00:00:00Z",
                                  "2024-01-01 00:00:00Z", "2024-01-01T25:00:00Z",
                                  "2024-01-01T24:00:01Z", "2024-01-01T00:60:00Z",
                                  "2024-01-01T00:00:00+15:00", "0000-01-01T00:00:00Z",
                                  "2024-13-01T00:00:00Z", "2024-01-01", "tomorrow",
                                  "2024-01-01T00:00:00ZZ", "02024-01-01T00:00:00Z"])
def test_invalid_datetimes(text):
    with pytest.raises(InvalidExpiry):
        parse_datetime(text)


@pytest.mark.parametrize("seconds,text", [(0, "PT0S"), (0.5, "PT0.5S"), (60, "PT1M"),
                                          (3600, "PT1H"), (86400, "P1D"),
                                          (90061.25, "P1DT1H1M1.25S")])
def test_format_duration_round_trips(seconds, text):
    assert format_duration(seconds) == text
    assert float(parse_duration(text).seconds) == seconds


def test_format_datetime():
    assert format_datetime(0) == "1970-01-01T00:00:00Z"
    assert parse_datetime(format_datetime(NOW + 0.25)).timestamp() == NOW + 0.25


def test_month_durations_follow_the_calendar():
    jan31 = datetime(2024, 1, 31, tzinfo=timezone.utc)
    assert parse_duration("P1M").add_to(jan31) == datetime(2024, 2, 29, tzinfo=timezone.utc)


# -- the grant policy --------------------------------------------------------------------------

POLICY = ExpiryPolicy(min_seconds=10, max_seconds=3600)
OPEN = ExpiryPolicy(min_seconds=1, max_seconds=None)

# (version, policy, text, best effort, expected expires offset or exception, kind)
GRANTS = [
    ("2004", POLICY, None, False, 3600, DURATION),        # absent: infinite -> max
    ("2004", OPEN, None, False, None, DURATION),          # absent: infinite
    ("2004", POLICY, "PT30M", False, 1800, DURATION),
    ("2004", POLICY, "PT2H", False, 3600, DURATION),      # clamped down, never a fault
    ("2004", POLICY, "PT1S", False, 10, DURATION),        # clamped up
    ("2004", POLICY, "PT0S", False, InvalidExpiry, None),
    ("2004", POLICY, "-PT1M", False, InvalidExpiry, None),
    ("2004", POLICY, "2001-01-01T00:00:00Z", False, InvalidExpiry, None),
    ("2004", POLICY, "whenever", False, InvalidExpiry, None),
    ("2004", POLICY, format_datetime(NOW + 600), False, 600, DATETIME),
    ("2011", POLICY, None, False, 3600, DURATION),
    ("2011", ExpiryPolicy(default_seconds=60), None, False, 60, DURATION),
    ("2011", OPEN, None, False, None, DURATION),
    ("2011", OPEN, "PT0S", False, None, DURATION),        # PT0S: infinite requested
    ("2011", POLICY, "PT0S", False, UngrantableExpiry, None),
    ("2011", POLICY, "PT0S", True, 3600, DURATION),
    ("2011", POLICY, "PT30M", False, 1800, DURATION),
    ("2011", POLICY, "PT2H", False, UngrantableExpiry, None),
    ("2011", POLICY, "PT2H", True, 3600, DURATION),
    ("2011", POLICY, "PT1S", False, UngrantableExpiry, None),
    ("2011", POLICY, "PT1S", True, 10, DURATION),
    ("2011", POLICY, "-PT1M", True, InvalidExpiry, None),
    ("2011", POLICY, "2001-01-01T00:00:00Z", True, InvalidExpiry, None),
    ("2011", POLICY, "P1Q", True, InvalidExpiry, None),
    ("2011", ExpiryPolicy(accept_datetime=False), format_datetime(NOW + 60), False,
     UnsupportedExpiryType, None),
]


@pytest.mark.parametrize("version,policy,text,best_effort,expected,kind", GRANTS)
def test_grant_policy(version, policy, text, best_effort, expected, kind):
    request = ExpiryRequest(text, best_effort)
    if isinstance(expected, type) and issubclass(expected, Exception):
        with pytest.raises(expected):
            policy.grant(request, NOW, version=version)
        return
    grant = policy.grant(request, NOW, version=version)
    assert grant.expires == (None if expected is None else NOW + expected)
    assert grant.kind == kind


def test_grant_echoes_the_request_when_unchanged_and_renders_otherwise():
    exact = POLICY.grant(ExpiryRequest("PT30M"), NOW, version="2011")
    assert exact.render(NOW, infinite="PT0S") == "PT30M"
    clamped = POLICY.grant(ExpiryRequest("PT2H", True), NOW, version="2011")
    assert clamped.render(NOW, infinite="PT0S") == "PT1H"
    assert clamped.render(NOW + 600, infinite="PT0S") == "PT50M"  # remaining time
    assert Grant(None).render(NOW, infinite="PT0S") == "PT0S"
    assert Grant(None).render(NOW, infinite=None) is None
    assert Grant(NOW + 60, DATETIME).render(NOW, infinite=None) == format_datetime(NOW + 60)


def test_policy_validates_its_bounds():
    with pytest.raises(ValueError):
        ExpiryPolicy(min_seconds=10, max_seconds=5)
    with pytest.raises(ValueError):
        ExpiryPolicy(min_seconds=-1)


# -- through the manager -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["2004", "2011"])
def test_renew_is_computed_from_now_not_from_the_old_expiry(tmp_path, name):
    clock = FakeClock(NOW)
    h = Harness(tmp_path, clock=clock)
    try:
        sub = h.subscribe(name, expires="PT1H")
        stored = h.manager.store.get(sub.id)
        assert stored.expires == NOW + 3600
        clock.advance(1800)
        assert h.client(name).renew(sub, "PT1H") == "PT1H"
        assert h.manager.store.get(sub.id).expires == NOW + 1800 + 3600  # not NOW + 7200
        clock.advance(600)
        assert h.client(name).get_status(sub) == "PT50M"
    finally:
        h.close()


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_renew_without_expires_and_with_datetime(tmp_path, name):
    clock = FakeClock(NOW)
    h = Harness(tmp_path, clock=clock, settings={"max_expires": "PT2H"})
    try:
        sub = h.subscribe(name, expires="PT1H")
        h.client(name).renew(sub)  # absent: 2004 infinite -> max; 2011 source default -> max
        assert h.manager.store.get(sub.id).expires == NOW + 7200
        when = format_datetime(NOW + 900)
        assert h.client(name).renew(sub, when) == when
        assert h.manager.store.get(sub.id).expires_kind == DATETIME
        assert h.client(name).get_status(sub) == when
    finally:
        h.close()


def test_sweeper_expires_without_subscription_end(tmp_path):
    clock = FakeClock(NOW)
    h = Harness(tmp_path, clock=clock)
    try:
        sub = h.subscribe("2011", expires="PT10S", end_to="http://sink.test/end")
        forever = h.subscribe("2011", notify_path="/forever")
        clock.advance(5)
        assert h.manager.sweep() == 0
        clock.advance(6)
        # Past the expiry but before the sweep: no more notifications, no more status.
        h.publish(quote(1))
        h.drain()
        assert h.sink.at("/notify") == [] and len(h.sink.at("/forever")) == 1
        assert h.manager.sweep() == 1
        assert h.manager.store.get(sub.id).status is State.EXPIRED
        assert h.manager.store.get(forever.id).status is State.ACTIVE
        h.drain()
        assert h.sink.at("/end") == []  # expiry is not announced
        with pytest.raises(SoapFault) as unknown:
            h.client("2011").get_status(sub)
        assert unknown.value.subcode == V2011.q("UnknownSubscription")
        assert h.manager.sweep() == 0
    finally:
        h.close()


def test_leading_zeros_are_not_significant_digits():
    assert parse_duration("P" + "0" * 40 + "1D").seconds == 86400
    assert parse_duration("PT1.25S").seconds == Decimal("1.25")


@pytest.mark.parametrize("name", ["2004", "2011"])
@pytest.mark.parametrize("expires", ["P" + "9" * 5000 + "D", "9" * 5000 + "-01-01T00:00:00Z",
                                     "PT" + "9" * 60 + "S"], ids=["nines", "year", "seconds"])
def test_a_hostile_subscribe_expires_is_a_sender_fault_not_a_server_error(tmp_path, name,
                                                                            expires):
    h = Harness(tmp_path)
    try:
        with pytest.raises(SoapFault) as raised:
            h.subscribe(name, expires=expires)
        fault = raised.value
        assert fault.code.endswith("Sender") or fault.code.endswith("Client"), fault.code
        assert fault.subcode.endswith("InvalidExpirationTime" if name == "2004"
                                      else "UnsupportedExpirationValue")
    finally:
        h.close()
