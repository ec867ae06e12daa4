"""Precise eventing errors are answered once, at the edge, with the fault each version names."""
from __future__ import annotations

import pytest

from subscription_manager.exceptions import RefusedEndpoint, RefusedFilter, UnknownSubscription
from subscription_manager.expiry import (ExpiryPolicy, ExpiryRequest, InvalidExpiry,
                                         UngrantableExpiry, UnsupportedExpiryType)
from subscription_manager.versions import V2004, V2011
from wsframework.exceptions import RECEIVER, SENDER
from wsframework.faults import fault_for
from wsframework.matching import InvalidFilter, UnsupportedDialect


def _shape(fault):
    return fault.code, fault.subcodes, fault.reason, fault.action


@pytest.mark.parametrize("version", [V2004, V2011], ids=lambda v: v.name)
def test_each_error_is_the_versions_fault(version):
    faults = version.faults
    cases = [
        (UnknownSubscription(version, "abc", "Renew"), faults.unknown_subscription("Renew")),
        (UnknownSubscription(version, None, "GetStatus"), faults.unknown_subscription("GetStatus")),
        (RefusedEndpoint(version, "http://10.0.0.1/", "private"),
         faults.unusable_epr("refused endpoint http://10.0.0.1/: private")),
        (RefusedFilter(version, UnsupportedDialect("urn:x", ["urn:a", "urn:b"])),
         faults.filtering_requested_unavailable("urn:x", ["urn:a", "urn:b"])),
        (RefusedFilter(version, InvalidFilter("empty filter")), faults.empty_filter()),
        (RefusedFilter(version, InvalidFilter("syntax")), faults.cannot_process_filter("syntax")),
    ]
    for exc, expected in cases:
        assert _shape(fault_for(exc)) == _shape(expected)
    detail = fault_for(cases[3][0]).detail
    assert [d.text for d in detail] == ["urn:a", "urn:b"]


@pytest.mark.parametrize("version, text, policy, error, subcode", [
    ("2004", "PT0S", ExpiryPolicy(), InvalidExpiry, "InvalidExpirationTime"),
    ("2011", "-PT5S", ExpiryPolicy(), InvalidExpiry, "UnsupportedExpirationValue"),
    ("2011", "PT0S", ExpiryPolicy(max_seconds=60), UngrantableExpiry, "UnsupportedExpirationValue"),
    ("2004", "2030-01-01T00:00:00Z", ExpiryPolicy(accept_datetime=False), UnsupportedExpiryType,
     "UnsupportedExpirationType"),
])
def test_a_refused_grant_says_its_version_and_gets_its_fault(version, text, policy, error,
                                                               subcode):
    with pytest.raises(error) as raised:
        policy.grant(ExpiryRequest(text), 1_700_000_000.0, version=version)
    assert raised.value.version == version
    fault = fault_for(raised.value)
    namespace = (V2004 if version == "2004" else V2011).namespace
    assert fault.code == SENDER and fault.subcodes == (f"{{{namespace}}}{subcode}",)
    assert fault.reason == str(raised.value)


def test_renewing_an_unknown_2004_subscription_is_the_receivers_fault():
    fault = fault_for(UnknownSubscription(V2004, "abc", "Renew"))
    assert fault.code == RECEIVER and fault.subcode.endswith("UnableToRenew")


_HOSTILE_EXPIRES = {
    "5000 nines of days": "P" + "9" * 5000 + "D",
    "5000 nines of seconds": "PT" + "9" * 5000 + "S",
    "5000-digit year": "9" * 5000 + "-01-01T00:00:00Z",
    "huge seconds": "PT" + "9" * 40 + "S",
    "huge fraction": "PT1." + "9" * 5000 + "S",
    "zero-padded years": "P" + "0" * 100 + "99999Y",
    "five-digit year": "10000-01-01T00:00:00Z",
}


@pytest.mark.parametrize("text", list(_HOSTILE_EXPIRES.values()), ids=list(_HOSTILE_EXPIRES))
@pytest.mark.parametrize("version, subcode", [("2004", "InvalidExpirationTime"),
                                              ("2011", "UnsupportedExpirationValue")])
def test_hostile_expires_values_are_the_senders_fault_in_both_versions(text, version, subcode):
    # Python refuses int() of more than 4,300 digits; the lengths are bounded before that.
    with pytest.raises(InvalidExpiry) as raised:
        ExpiryPolicy().grant(ExpiryRequest(text), 1_700_000_000.0, version=version)
    fault = fault_for(raised.value)
    namespace = (V2004 if version == "2004" else V2011).namespace
    assert fault.code == SENDER and fault.subcodes == (f"{{{namespace}}}{subcode}",)
    assert len(fault.reason) < 200  # the hostile value is not echoed back in full


def test_a_refused_endpoint_fault_does_not_echo_a_huge_address():
    huge = "http://sink.test/" + "a" * 3_500_000
    fault = fault_for(RefusedEndpoint(V2011, huge, "URL too long"))
    assert len(fault.reason) < 300 and fault.reason.endswith("...: URL too long")
