"""edn:NotifyWhen: parsing and refusals (both versions), the rule, and the source in process
(deliveries, GetStatus, L across a restart, concurrent events, events without a number)."""
from __future__ import annotations

import math
import re
import threading

import pytest
from hypothesis import given, settings, strategies as st
from lxml import etree

from subscription_manager.client import subscribe_body
from subscription_manager.messages import parse_subscribe
from subscription_manager.notify_when import (NotifyWhen, last_notified_of, notify_when_element,
                                              parse_notify_when)
from subscription_manager.versions import V2004, V2011
from tests.support.eventing import BASE, SINK, Harness, Q, quote
from wsframework import ns
from matchers.vocabulary import EDN
from wsframework.exceptions import MUST_UNDERSTAND, SENDER, SoapFault

VERSIONS = {"2004": V2004, "2011": V2011}
PRICE = "/q:quote/q:price"


def body_with(version, *extensions):
    body = subscribe_body(version, SINK + "/n")
    for extension in extensions:
        body.append(extension)
    return body


def condition(changed_by="5", tolerance=None, value=PRICE):
    return notify_when_element(value, changed_by, tolerance, namespaces={"q": Q})


# == parsing =================================================================================

@pytest.mark.parametrize("name", ["2004", "2011"])
def test_notify_when_parsed_in_both_versions(name):
    request = parse_subscribe(body_with(VERSIONS[name], condition("5", "1")), VERSIONS[name])
    nw = request.notify_when
    assert (nw.value, nw.changed_by, nw.relative, nw.tolerance) == (PRICE, 5.0, False, 1.0)
    assert ("q", Q) in nw.namespaces
    relative = parse_subscribe(body_with(VERSIONS[name], condition("2.5%", "1%")),
                               VERSIONS[name]).notify_when
    assert (relative.changed_by, relative.relative, relative.tolerance) == (2.5, True, 1.0)
    assert parse_subscribe(body_with(VERSIONS[name]), VERSIONS[name]).notify_when is None


def _element_with(children: dict[str, str | None]):
    element = etree.Element(ns.qname(EDN, "NotifyWhen"), nsmap={"edn": EDN, "q": Q})
    for local, text in children.items():
        etree.SubElement(element, ns.qname(EDN, local)).text = text
    return element


BAD = {
    "no Value": {"ChangedBy": "5"},
    "no ChangedBy": {"Value": PRICE},
    "empty Value": {"Value": " ", "ChangedBy": "5"},
    "Value too long": {"Value": "/q:quote/" + "q:a/" * 300 + "q:price", "ChangedBy": "5"},
    "regex in Value": {"Value": "re:test(/q:quote/q:symbol, '(a+)+$')", "ChangedBy": "5"},
    "Value syntax": {"Value": "/q:quote/[", "ChangedBy": "5"},
    "nested scan in Value": {"Value": "count(//*[count(//*) > 0])", "ChangedBy": "5"},
    "unknown prefix": {"Value": "/x:quote/x:price", "ChangedBy": "5"},
    "text": {"Value": PRICE, "ChangedBy": "five"},
    "infinite": {"Value": PRICE, "ChangedBy": "inf"},
    "nan": {"Value": PRICE, "ChangedBy": "nan"},
    "overflow": {"Value": PRICE, "ChangedBy": "1e400"},
    "too big": {"Value": PRICE, "ChangedBy": "1e16"},
    "negative": {"Value": PRICE, "ChangedBy": "-1"},
    "zero": {"Value": PRICE, "ChangedBy": "0"},
    "long number": {"Value": PRICE, "ChangedBy": "1" * 65},
    "underscore": {"Value": PRICE, "ChangedBy": "1_0"},
    "percent over 100": {"Value": PRICE, "ChangedBy": "150%"},
    "tolerance above delta": {"Value": PRICE, "ChangedBy": "5", "Tolerance": "6"},
    "negative tolerance": {"Value": PRICE, "ChangedBy": "5", "Tolerance": "-1"},
    "mixed forms": {"Value": PRICE, "ChangedBy": "5%", "Tolerance": "1"},
    "unknown child": {"Value": PRICE, "ChangedBy": "5", "Every": "PT1S"},
}


@pytest.mark.parametrize("name", ["2004", "2011"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_notify_when_is_an_invalid_message(name, case):
    version = VERSIONS[name]
    with pytest.raises(SoapFault) as info:
        parse_subscribe(body_with(version, _element_with(BAD[case])), version)
    fault = info.value
    assert fault.code == SENDER
    if version.is_2004:
        assert fault.subcodes == (version.q("InvalidMessage"),)


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_repeated_or_nested_parts_are_refused(name):
    version = VERSIONS[name]
    with pytest.raises(SoapFault, match="more than once"):
        parse_subscribe(body_with(version, condition(), condition()), version)
    nested = condition()
    etree.SubElement(nested[1], ns.qname(EDN, "Inner"))
    with pytest.raises(SoapFault, match="holds text"):
        parse_subscribe(body_with(version, nested), version)


@pytest.mark.parametrize("env", [ns.SOAP11, ns.SOAP12])
@pytest.mark.parametrize("name", ["2004", "2011"])
def test_unknown_extension_marked_must_understand_is_refused(name, env):
    version = VERSIONS[name]
    unknown = etree.Element("{urn:example:ext}Throttle", nsmap={"x": "urn:example:ext"})
    assert parse_notify_when(body_with(version, unknown), version) is None  # ignored unmarked
    unknown.set(ns.qname(env, "mustUnderstand"), "true")
    with pytest.raises(SoapFault) as info:
        parse_subscribe(body_with(version, unknown), version)
    assert info.value.code == MUST_UNDERSTAND
    assert "{urn:example:ext}Throttle" in info.value.reason
    unknown.set(ns.qname(env, "mustUnderstand"), "false")
    assert parse_subscribe(body_with(version, unknown), version).notify_when is None
    understood = condition()
    understood.set(ns.qname(env, "mustUnderstand"), "1")
    assert parse_subscribe(body_with(version, understood), version).notify_when is not None


# == the rule ================================================================================

def test_rule_examples():
    strict = NotifyWhen(PRICE, (("q", Q),), 5.0)
    assert strict.fires(None, 42.0)  # nothing notified yet
    assert [v for v in (95, 95.5, 100, 104.9, 105) if strict.fires(100.0, v)] == [95, 105]
    percent = NotifyWhen(PRICE, (("q", Q),), 10.0, relative=True)
    assert percent.fires(200.0, 180.0) and not percent.fires(200.0, 181.0)
    assert percent.fires(-200.0, -220.0) and not percent.fires(-200.0, -219.0)
    assert percent.fires(0.0, 0.0)  # delta is 0 at L = 0: every value differs "enough"
    tolerant = NotifyWhen(PRICE, (("q", Q),), 5.0, tolerance=1.0)
    assert tolerant.fires(120.5, 116.0)  # inside the "may" band: lo = ceil(115.5) = 116
    assert not tolerant.fires(120.5, 116.2) and not tolerant.must_notify(120.5, 116.0)
    assert tolerant.thresholds(120.2) == tolerant.thresholds(120.9) == (116, 125)  # grid of t
    tiny = NotifyWhen(PRICE, (("q", Q),), 1.0, tolerance=5e-324)  # a grid too fine: exact
    assert tiny.fires(1.0, 0.0) and not tiny.fires(0.0, 0.5) and tiny.fires(0.0, -1.0)


finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(last=finite, value=finite, delta=st.floats(1e-3, 1e4), share=st.floats(0, 1),
       relative=st.booleans())
def test_decision_lies_between_must_and_may(last, value, delta, share, relative):
    if relative:
        delta = min(delta, 100.0)
    nw = NotifyWhen(PRICE, (("q", Q),), delta, relative, delta * share)
    fires = nw.fires(last, value)
    assert not nw.must_notify(last, value) or fires
    assert not fires or nw.may_notify(last, value)


def test_value_of_reads_a_finite_number_or_none():
    nw = NotifyWhen(PRICE, (("q", Q),), 1.0)
    assert nw.value_of(etree.fromstring(quote("12.5"))) == 12.5
    for text in ("n/a", "", "NaN", "Infinity", "1e999"):
        assert nw.value_of(etree.fromstring(quote(text))) is None, text
    assert nw.value_of(etree.fromstring(b"<other/>")) is None
    assert NotifyWhen.from_json(nw.to_json()) == nw


# == the source, in process ==================================================================

@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": True})
    yield h
    h.close()


def prices(sink, path):
    return [float(re.search(rb"<q:price>(.*?)</q:price>", m[1]).group(1)) for m in sink.at(path)]


def expected(trace, nw: NotifyWhen):
    return nw.notified(trace)


def subscribe_nw(h, name, path, *parts, topic="stocks", filter=None):
    body = subscribe_body(name, SINK + path, filter=filter, namespaces={"q": Q})
    body.append(condition(*parts))
    return h.client(name).subscribe_raw(f"{BASE}/topics/{topic}", body)


def last_notified(h, name, sub):
    client = h.client(name)
    reply = client._manage(sub, "GetStatus", etree.Element(client.version.q("GetStatus")))
    return last_notified_of(reply.body)


TRACE = [100, 102, 104.5, 105, 99, 96, 95, 120.5, 116, 116.5, 111, 111]


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_source_notifies_exactly_what_the_rule_says(harness, name):
    strict = subscribe_nw(harness, name, "/strict", "5")
    tolerant = subscribe_nw(harness, name, "/tolerant", "5", "1")
    subscribe_nw(harness, name, "/relative", "4%")
    harness.subscribe(name, notify_path="/plain")
    assert last_notified(harness, name, strict) == (True, None)
    for price in TRACE:
        harness.publish(quote(price))
    harness.drain()
    nw = {p: parse_notify_when(body_with(V2011, condition(*a)), V2011)
          for p, a in (("/strict", ("5",)), ("/tolerant", ("5", "1")), ("/relative", ("4%",)))}
    for path, cond in nw.items():
        assert prices(harness.sink, path) == expected(TRACE, cond), path
    assert prices(harness.sink, "/strict") == [100, 105, 99, 120.5, 111]
    assert prices(harness.sink, "/tolerant") == [100, 105, 99, 120.5, 116, 111]  # 116: may
    assert len(harness.sink.at("/plain")) == len(TRACE)
    assert last_notified(harness, name, strict) == (True, 111.0)
    assert last_notified(harness, name, tolerant) == (True, 111.0)
    counters = harness.manager.counters
    assert counters["notify_when_notified"] == sum(len(expected(TRACE, c)) for c in nw.values())


def test_get_status_without_notify_when_has_no_extension(harness):
    sub = harness.subscribe("2011")
    assert last_notified(harness, "2011", sub) == (False, None)


def test_filter_decides_matching_first(harness):
    acme = subscribe_nw(harness, "2011", "/acme", "5", filter="/q:quote[@symbol='ACME']")
    for price, symbol in ((100, "ACME"), (200, "OTHER"), (103, "ACME"), (106, "ACME")):
        harness.publish(quote(price, symbol))
    harness.drain()
    assert prices(harness.sink, "/acme") == [100, 106]
    assert last_notified(harness, "2011", acme) == (True, 106.0)


def test_event_without_a_number_is_not_notified_and_counted(harness):
    sub = subscribe_nw(harness, "2011", "/nw", "5")
    for price in (100, "n/a", 120, "", 121):
        harness.publish(quote(price))
    harness.drain()
    assert prices(harness.sink, "/nw") == [100, 120]
    assert harness.manager.counters["notify_when_unnumbered"] == 2
    assert harness.manager.notify_state.last_value(harness.manager.store.active()[0].id) == (120.0, 2)
    assert last_notified(harness, "2011", sub) == (True, 120.0)


def test_last_value_survives_a_restart(tmp_path):
    first = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": True})
    sub = subscribe_nw(first, "2011", "/nw", "5")
    first.publish(quote(100))
    first.drain()
    first.close()
    second = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": True})
    try:
        for price in (103, 97, 94):  # 103 and 97 are within 5 of the L committed before
            second.publish(quote(price))
        second.drain()
        assert prices(second.sink, "/nw") == [94]
        assert last_notified(second, "2011", sub) == (True, 94.0)
    finally:
        second.close()


def test_two_workers_on_one_store_share_l(tmp_path):
    """Two managers on one data directory (two workers of one source): each decides against
    the L the other committed."""
    a = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": True})
    b = Harness(tmp_path, settings={"keep_subscriptions_on_shutdown": True})
    try:
        subscribe_nw(a, "2011", "/nw", "5")
        b.manager.sync()
        trace = [(a, 100), (b, 103), (a, 106), (b, 104), (b, 100), (a, 101), (b, 95)]
        for source, price in trace:
            source.manager.sync()
            source.publish(quote(price))
            source.drain()
        got = sorted(prices(a.sink, "/nw") + prices(b.sink, "/nw"))
        assert got == sorted([100, 106, 100, 95])
    finally:
        a.close()
        b.close()


def test_concurrent_events_do_not_both_see_the_old_l(harness):
    subscribe_nw(harness, "2011", "/nw", "5")
    harness.publish(quote(100))
    barrier = threading.Barrier(8)
    errors = []

    def publish():
        try:
            barrier.wait()
            harness.publish(quote(200))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=publish) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    harness.drain()
    assert not errors
    assert prices(harness.sink, "/nw") == [100, 200]  # one of the eight, not eight


def test_failed_transaction_leaves_l_and_the_index_unchanged(harness, monkeypatch):
    sub = subscribe_nw(harness, "2011", "/nw", "5")
    harness.publish(quote(100))
    outbox = harness.manager.outbox
    real = outbox.accept

    def failing(events, **kw):
        select = kw["select"]

        def then_fail(conn, index, ids):
            select(conn, index, ids)
            raise RuntimeError("disk full")
        return real(events, **{**kw, "select": then_fail})
    monkeypatch.setattr(outbox, "accept", failing)
    response = harness.publish(quote(150))
    assert response.status >= 400
    monkeypatch.setattr(outbox, "accept", real)
    assert last_notified(harness, "2011", sub) == (True, 100.0)
    harness.publish(quote(103))  # within 5 of the committed L: the index must agree
    harness.publish(quote(106))
    harness.drain()
    assert prices(harness.sink, "/nw") == [100, 106]


def test_subscription_rows_keep_the_condition(harness):
    subscribe_nw(harness, "2004", "/nw", "2%", "0.5%")
    stored = harness.manager.store.active()[0]
    assert stored.notify_when.relative and stored.notify_when.changed_by == 2.0
    assert math.isclose(stored.notify_when.tolerance, 0.5)


def test_housekeeping_drops_the_l_of_ended_subscriptions(harness):
    sub = subscribe_nw(harness, "2011", "/nw", "5")
    kept = subscribe_nw(harness, "2011", "/kept", "5")
    harness.publish(quote(100))
    harness.drain()
    ids = {s.notify_to.address: s.id for s in harness.manager.store.active()}
    harness.client("2011").unsubscribe(sub)
    harness.manager.housekeeping()
    assert harness.manager.notify_state.last_value(ids[SINK + "/nw"]) == (None, 0)
    assert harness.manager.notify_state.last_value(ids[SINK + "/kept"]) == (100.0, 0)
    assert last_notified(harness, "2011", kept) == (True, 100.0)


def test_without_a_durable_outbox_l_is_still_committed(tmp_path):
    h = Harness(tmp_path, settings={"durable_outbox": False})
    try:
        sub = subscribe_nw(h, "2011", "/nw", "5")
        for price in (100, 103, 106):
            h.publish(quote(price))
        h.drain()
        assert prices(h.sink, "/nw") == [100, 106]
        assert h.manager.outbox.pending() == 0  # nothing kept for the notifications
        assert last_notified(h, "2011", sub) == (True, 106.0)
    finally:
        h.close()
