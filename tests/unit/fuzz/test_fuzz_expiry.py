"""Expires values, durations and dateTimes: the parsers answer a value or their own
invalid-input error (never Python's integer-conversion ValueError, an OverflowError or
anything else), and a Subscribe or Renew with any Expires gets a response or a Sender
fault."""
from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings, strategies as st

from benchmarks.robustness.fuzz import hostile_values
from matchers.schema.codecs import parse_datetime as parse_schema_datetime
from subscription_manager.client import subscribe_body
from subscription_manager.expiry import (Duration, ExpiryPolicy, ExpiryRequest, InvalidExpiry,
                                         ExpiryError, parse_datetime, parse_duration)
from subscription_manager.versions import VERSIONS
from tests.support.eventing import SINK
from tests.unit.fuzz.fuzzkit import FUZZ, call, check_answer
from wsframework.addressing import request_headers
from wsframework.exceptions import SENDER
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

DIGITS = st.text("0123456789", min_size=1, max_size=6000)
UNICODE_DIGITS = st.text("0123456789\u0660\u0669\u06f5\uff11\U0001d7d8", min_size=1, max_size=50)


def _number(draw_digits):
    return st.one_of(draw_digits, st.builds(lambda a, b: f"{a}.{b}", draw_digits, draw_digits))


DURATIONS = st.one_of(
    st.builds(lambda sign, parts: sign + "P" + "".join(parts), st.sampled_from(["", "-", "+"]),
              st.lists(st.builds(lambda n, u: n + u, _number(DIGITS | UNICODE_DIGITS),
                                 st.sampled_from(["Y", "M", "D", "T", "H", "S", "W", ""])),
                       max_size=6)),
    st.text(max_size=60),
    st.randoms(use_true_random=False).map(hostile_values),
)
DATETIMES = st.one_of(
    st.builds(lambda y, mo, d, h, mi, s, frac, tz: f"{y}-{mo}-{d}T{h}:{mi}:{s}{frac}{tz}",
              st.sampled_from(["2030", "-0001", "0000", "9999", "10000"]) | DIGITS,
              st.sampled_from(["01", "12", "13", "00", "1"]) | DIGITS,
              st.sampled_from(["01", "29", "31", "32"]) | DIGITS,
              st.sampled_from(["00", "23", "24", "25"]), st.sampled_from(["00", "59", "60"]),
              st.sampled_from(["00", "59", "60", "61"]),
              st.sampled_from(["", ".5", ".000000001"]) | DIGITS.map(lambda d: "." + d),
              st.sampled_from(["", "Z", "+14:00", "-14:00", "+14:01", "+99:99", "-00:00"])
              | DIGITS.map(lambda d: "+" + d)),
    st.text(max_size=60),
    st.randoms(use_true_random=False).map(hostile_values),
)


@settings(FUZZ, max_examples=300)
@given(DURATIONS)
def test_parse_duration_answers_a_duration_or_invalid_expiry(text):
    try:
        assert isinstance(parse_duration(text), Duration)
    except InvalidExpiry:
        pass


@settings(FUZZ, max_examples=300)
@given(DATETIMES)
def test_parse_datetime_answers_a_datetime_or_invalid_expiry(text):
    try:
        assert isinstance(parse_datetime(text), datetime)
    except InvalidExpiry:
        pass


@settings(FUZZ, max_examples=300)
@given(DATETIMES | st.text(max_size=200))
def test_schema_codec_parse_datetime_answers_micros_or_none(text):
    """:func:`matchers.schema.codecs.parse_datetime` (event and schema values): its invalid
    input is None."""
    value = parse_schema_datetime(text)
    assert value is None or isinstance(value, int)


@pytest.mark.parametrize("text", [
    "P" + "9" * 5000 + "D", "PT" + "9" * 5000 + "S", "P" + "0" * 5000 + "1D", "PT1." + "9" * 5000 + "S",
    "9" * 5000 + "-01-01T00:00:00Z", "2030-01-01T00:00:00." + "9" * 5000 + "Z",
    "2030-01-01T00:00:00+" + "9" * 5000, "0" * 5000 + "2030-01-01T00:00:00Z",
])
def test_integer_conversion_limit(text):
    """Python refuses int() of more than 4,300 digits with a ValueError; no parser lets it out."""
    for parse in (parse_duration, parse_datetime):
        try:
            parse(text)
        except InvalidExpiry:
            pass
    assert parse_schema_datetime(text) is None or isinstance(parse_schema_datetime(text), int)


@settings(FUZZ, max_examples=200)
@given(DURATIONS | DATETIMES, st.booleans(), st.sampled_from(["2004", "2011"]),
       st.sampled_from([None, 1.0, 3600.0]), st.booleans())
def test_expiry_policy_grants_or_raises_expiry_errors(text, best_effort, version, max_seconds,
                                                      accept_datetime):
    policy = ExpiryPolicy(min_seconds=1.0, max_seconds=max_seconds, accept_datetime=accept_datetime)
    try:
        policy.grant(ExpiryRequest(text, best_effort), 1_700_000_000.0, version=version)
    except ExpiryError:
        pass


def _clean(text):
    return "".join(c for c in text if c in "\t\n\r" or (" " <= c and not "\ud800" <= c <= "\udfff"
                                                       and c not in "\ufffe\uffff"))


@settings(FUZZ, max_examples=80)
@given(DURATIONS | DATETIMES, st.sampled_from(["2004", "2011"]), st.sampled_from([None, True, False]),
       st.sampled_from(list(SoapVersion)))
def test_subscribe_and_renew_with_any_expires(roles, text, version, best_effort, soap):
    v = VERSIONS[version]
    body = subscribe_body(v, SINK + "/expiring", expires=_clean(text), best_effort=best_effort)
    headers = request_headers(v.wsa, "http://es.test/topics/stocks", v.action("Subscribe"))
    answer = call(roles.apps["source"], "/topics/stocks", build_envelope(soap, body, headers),
                  content_type=soap.content_type, soap_action=f'"{v.action("Subscribe")}"')
    check_answer(answer)
    fault = parse_envelope(answer.body).fault()
    assert fault is None or fault.code == SENDER, (text, fault)
    # Renew of a recorded subscription with the same Expires
    seed = next(s for s in roles.by_kind["renew"] if s.target == "source"
                and v.namespace.encode() in s.body)
    from lxml import etree
    root = etree.fromstring(seed.body)
    for element in root.iter(v.q("Expires")):
        element.text = _clean(text)
    renewed = call(roles.apps["source"], seed.path, etree.tostring(root),
                   content_type=seed.http_headers()["Content-Type"],
                   soap_action=seed.http_headers().get("SOAPAction"))
    check_answer(renewed)
    roles.still_answers()
