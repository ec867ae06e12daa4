"""Every WS-Eventing message and fault of both versions, in process (no sockets)."""
from __future__ import annotations

import pytest
from lxml import etree

from subscription_manager.client import subscribe_body
from subscription_manager.versions import V2004, V2011
from tests.support.eventing import BASE, SINK, Harness, quote
from wsframework import ns
from wsframework.addressing import EndpointReference, WsaVersion, request_headers
from wsframework.exceptions import RECEIVER, SENDER, SoapFault
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

VERSIONS = {"2004": V2004, "2011": V2011}
SOAPS = [SoapVersion.SOAP11, SoapVersion.SOAP12]


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, settings={"max_expires": "P1D"})
    yield h
    h.close()


def raw_call(harness, version, path, action, body, *, soap=SoapVersion.SOAP12, wsa=None,
             extra_headers=()):
    """Send an eventing request by hand; return the reply envelope (fault or not)."""
    wsa = wsa or version.wsa
    headers = request_headers(wsa, BASE + path, action) + list(extra_headers)
    response = harness.post(path, build_envelope(soap, body, headers), soap)
    return response, parse_envelope(response.body) if response.body else None


def fault_of(callable_):
    with pytest.raises(SoapFault) as info:
        callable_()
    return info.value


# == success paths ===========================================================================

@pytest.mark.parametrize("soap", SOAPS, ids=["soap11", "soap12"])
@pytest.mark.parametrize("name", ["2004", "2011"])
def test_subscribe_renew_status_unsubscribe(harness, name, soap):
    version = VERSIONS[name]
    client = harness.client(name, soap)
    sub = client.subscribe(f"{BASE}/topics/stocks", SINK + "/notify", expires="PT1H")
    assert sub.manager.address == BASE + "/subscriptions"
    assert sub.id and len(sub.id) >= 32
    identifier = sub.manager.reference_parameters[0]
    assert identifier.tag == version.identifier_tag
    if version is V2004:
        assert identifier.text.startswith("urn:uuid:")  # wse:Identifier is an anyURI
    assert sub.expires == "PT1H"
    assert client.get_status(sub) in ("PT1H", "PT59M59S", "PT59M59.999S") or \
        client.get_status(sub).startswith("PT59M")
    assert client.renew(sub, "PT2H") == "PT2H"
    client.unsubscribe(sub)
    fault = fault_of(lambda: client.get_status(sub))
    assert fault.subcode == version.q("UnknownSubscription" if version is V2011 else "InvalidMessage")


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_reply_actions_and_relates_to(harness, name):
    version = VERSIONS[name]
    body = subscribe_body(version, SINK + "/n", expires="PT1H")
    response, reply = raw_call(harness, version, "/topics/stocks", version.action("Subscribe"), body)
    assert response.status == 200
    action = reply.header(version.wsa.q("Action"))
    assert action.text == version.action("SubscribeResponse")
    assert reply.header(version.wsa.q("RelatesTo")) is not None
    assert reply.body.tag == version.q("SubscribeResponse")
    manager = EndpointReference.from_element(reply.body.find(version.q("SubscriptionManager")),
                                             version.wsa)
    for operation, response_name in (("GetStatus", "GetStatusResponse"),
                                     ("Renew", "RenewResponse"),
                                     ("Unsubscribe", "UnsubscribeResponse")):
        op_body = etree.Element(version.q(operation), nsmap={"wse": version.namespace})
        headers = request_headers(version.wsa, manager, version.action(operation))
        response = harness.post("/subscriptions", build_envelope(SoapVersion.SOAP12, op_body, headers))
        reply = parse_envelope(response.body)
        assert response.status == 200, reply.fault()
        assert reply.header(version.wsa.q("Action")).text == version.action(response_name)
        if operation == "Unsubscribe":
            # 2004/08 answers an empty body; 2011 a wse:UnsubscribeResponse element.
            if version is V2004:
                assert reply.body is None
            else:
                assert reply.body.tag == version.q("UnsubscribeResponse")
        else:
            assert reply.body.tag == version.q(response_name)


@pytest.mark.parametrize("name", ["2004", "2011"])
@pytest.mark.parametrize("marked", [True, False])
def test_identifier_accepted_with_or_without_is_reference_parameter(harness, name, marked):
    version = VERSIONS[name]
    sub = harness.subscribe(name, expires="PT1H")
    identifier = etree.fromstring(etree.tostring(sub.manager.reference_parameters[0]))
    if marked:
        identifier.set(version.wsa.q("IsReferenceParameter"), "true")
    body = etree.Element(version.q("GetStatus"), nsmap={"wse": version.namespace})
    headers = request_headers(version.wsa, BASE + "/subscriptions", version.action("GetStatus"))
    response = harness.post("/subscriptions",
                            build_envelope(SoapVersion.SOAP12, body, headers + [identifier]))
    assert response.status == 200
    assert parse_envelope(response.body).body.tag == version.q("GetStatusResponse")


def test_2004_infinite_grant_omits_expires_and_2011_answers_pt0s(tmp_path):
    h = Harness(tmp_path)  # no max_expires: subscriptions may live forever
    try:
        sub2004 = h.subscribe("2004")
        assert sub2004.expires is None
        assert h.client("2004").get_status(sub2004) is None
        sub2011 = h.subscribe("2011")
        assert sub2011.expires == "PT0S"
        assert h.client("2011").get_status(sub2011) == "PT0S"
        assert h.subscribe("2011", expires="PT0S").expires == "PT0S"
    finally:
        h.close()


def test_2011_expiry_bounds_best_effort(harness):
    fault = fault_of(lambda: harness.subscribe("2011", expires="P2D"))
    assert fault.subcode == V2011.q("UnsupportedExpirationValue") and fault.code == SENDER
    assert harness.subscribe("2011", expires="P2D", best_effort=True).expires == "P1D"
    assert harness.subscribe("2004", expires="P2D").expires == "P1D"  # 2004 clamps
    fault = fault_of(lambda: harness.subscribe("2011", expires="PT0S"))
    assert fault.subcode == V2011.q("UnsupportedExpirationValue")
    assert harness.subscribe("2011", expires="PT0S", best_effort=True).expires == "P1D"
    granted = harness.subscribe("2011", expires="2999-01-01T00:00:00Z", best_effort=True).expires
    assert granted.endswith("Z") and granted < "2999"  # dateTime asked, dateTime granted


def test_datetime_expiry_is_answered_as_datetime(harness):
    sub = harness.subscribe("2011", expires="2030-01-01T00:00:00Z", best_effort=True)
    assert sub.expires.endswith("Z")


# == faults, table-driven ====================================================================

def _sub(name, **options):
    options.setdefault("expires", "PT1H")
    notify = options.pop("notify", SINK + "/n")
    return subscribe_body(VERSIONS[name], notify, **options)


# (id, version, body factory, settings, code, subcode local name or None, detail local names)
SUBSCRIBE_FAULTS = [
    ("2004-mode", "2004", lambda: _sub("2004", mode="urn:other:mode"), {}, SENDER,
     "DeliveryModeRequestedUnavailable", ["SupportedDeliveryMode"]),
    ("2011-format", "2011", lambda: _sub("2011", format="urn:other:format"), {}, SENDER,
     "DeliveryFormatRequestedUnavailable", ["SupportedDeliveryFormat"] * 2),
    ("2004-no-notifyto", "2004", lambda: _sub("2004", notify=None), {}, SENDER,
     "InvalidMessage", []),
    ("2011-no-notifyto", "2011", lambda: _sub("2011", notify=None), {}, SENDER,
     "NoDeliveryMechanismEstablished", []),
    ("2004-bad-expiry", "2004", lambda: _sub("2004", expires="soon"), {}, SENDER,
     "InvalidExpirationTime", []),
    ("2011-bad-expiry", "2011", lambda: _sub("2011", expires="soon"), {}, SENDER,
     "UnsupportedExpirationValue", []),
    ("2004-zero", "2004", lambda: _sub("2004", expires="PT0S"), {}, SENDER,
     "InvalidExpirationTime", []),
    ("2004-past", "2004", lambda: _sub("2004", expires="2001-01-01T00:00:00Z"), {}, SENDER,
     "InvalidExpirationTime", []),
    ("2011-past", "2011", lambda: _sub("2011", expires="2001-01-01T00:00:00Z"), {}, SENDER,
     "UnsupportedExpirationValue", []),
    ("2011-negative", "2011", lambda: _sub("2011", expires="-PT5M"), {}, SENDER,
     "UnsupportedExpirationValue", []),
    ("2004-datetime-refused", "2004", lambda: _sub("2004", expires="2030-01-01T00:00:00Z"),
     {"accept_datetime": "false"}, SENDER, "UnsupportedExpirationType", []),
    ("2011-datetime-refused", "2011", lambda: _sub("2011", expires="2030-01-01T00:00:00Z"),
     {"accept_datetime": "false"}, SENDER, "UnsupportedExpirationType", []),
    ("2004-dialect", "2004", lambda: _sub("2004", filter="x", dialect="urn:no:such"), {}, SENDER,
     "FilteringRequestedUnavailable", None),
    ("2011-dialect", "2011", lambda: _sub("2011", filter="x", dialect="urn:no:such"), {}, SENDER,
     "FilteringRequestedUnavailable", None),
    ("2004-bad-xpath", "2004", lambda: _sub("2004", filter="/q:quote["), {}, SENDER,
     "InvalidMessage", []),
    ("2011-bad-xpath", "2011", lambda: _sub("2011", filter="/q:quote["), {}, SENDER,
     "CannotProcessFilter", []),
    ("2011-bad-xpath20", "2011", lambda: _sub("2011", filter="/z:a", dialect=ns.XPATH20_DIALECT_2011),
     {}, SENDER, "CannotProcessFilter", []),
    ("2004-empty-filter", "2004", lambda: _sub("2004", filter=""), {}, SENDER, "InvalidMessage", []),
    ("2011-empty-filter", "2011", lambda: _sub("2011", filter="  "), {}, SENDER, "EmptyFilter", []),
    ("2004-link-local-notifyto", "2004", lambda: _sub("2004", notify="http://169.254.169.254/x"),
     {}, SENDER, "InvalidMessage", []),
    ("2011-link-local-notifyto", "2011", lambda: _sub("2011", notify="http://169.254.169.254/x"),
     {}, SENDER, "UnusableEPR", []),
    ("2011-private-endto", "2011", lambda: _sub("2011", end_to="http://10.1.2.3/end"), {}, SENDER,
     "UnusableEPR", []),
    # URLs two parsers read differently, credentials, overlong URLs (wsframework.urlpolicy)
    ("2011-userinfo-notifyto", "2011",
     lambda: _sub("2011", notify="http://user:secret@sink.test/n"), {}, SENDER, "UnusableEPR", []),
    ("2004-userinfo-endto", "2004", lambda: _sub("2004", end_to="http://u:p@sink.test/end"), {},
     SENDER, "InvalidMessage", []),
    ("2011-backslash-notifyto", "2011",
     lambda: _sub("2011", notify="http://169.254.169.254\\@127.0.0.1:8080/"), {}, SENDER,
     "UnusableEPR", []),
    ("2011-long-notifyto", "2011", lambda: _sub("2011", notify="http://sink.test/" + "a" * 3000),
     {}, SENDER, "UnusableEPR", []),
    ("2011-long-notifyto-limit", "2011", lambda: _sub("2011", notify="http://sink.test/" + "a" * 90),
     {"max_url_length": "100"}, SENDER, "UnusableEPR", []),
    ("2011-numeric-loopback-notifyto", "2011", lambda: _sub("2011", notify="http://2130706433/"),
     {}, SENDER, "UnusableEPR", []),
    ("2011-bad-best-effort", "2011",
     lambda: _with_attribute(_sub("2011"), "Expires", "BestEffort", "maybe"), {}, SENDER, None, []),
]


def _with_attribute(body, child, name, value):
    element = body.find("{*}" + child)
    element.set(name, value)
    return body


@pytest.mark.parametrize("soap", SOAPS, ids=["soap11", "soap12"])
@pytest.mark.parametrize("case", SUBSCRIBE_FAULTS, ids=[c[0] for c in SUBSCRIBE_FAULTS])
def test_subscribe_faults(tmp_path, case, soap):
    _, name, body, settings, code, subcode, detail = case
    version = VERSIONS[name]
    h = Harness(tmp_path, settings=settings)
    try:
        response, reply = raw_call(h, version, "/topics/stocks", version.action("Subscribe"),
                                   body(), soap=soap)
        fault = reply.fault()
        assert fault is not None, etree.tostring(reply.body)
        assert response.status == (500 if soap is SoapVersion.SOAP11 else 400)
        if soap is SoapVersion.SOAP12 or subcode is None:
            assert fault.code == code
        assert fault.subcode == (version.q(subcode) if subcode else None)
        assert reply.header(version.wsa.q("Action")).text == version.fault_action
        if detail is None:  # FilteringRequestedUnavailable lists the topic's dialects
            listed = {d.text for d in fault.detail}
            assert {d.tag for d in fault.detail} == {version.q("SupportedDialect")}
            assert {version.default_dialect, ns.ACTION_DIALECT_DPWS11} <= listed
        else:
            assert [etree.QName(d).localname for d in fault.detail] == detail
        assert h.manager.store.count() == 0  # nothing was stored
    finally:
        h.close()


def test_unknown_topic_is_destination_unreachable(harness):
    for name in ("2004", "2011"):
        version = VERSIONS[name]
        _, reply = raw_call(harness, version, "/topics/nope", version.action("Subscribe"),
                            _sub(name))
        fault = reply.fault()
        assert fault.subcode == version.wsa.q("DestinationUnreachable")
        assert reply.header(version.wsa.q("Action")).text == version.wsa.fault_action


def test_publication_to_unknown_topic_is_destination_unreachable(harness):
    response = harness.publish(quote(1), topic="nope")
    assert parse_envelope(response.body).fault().subcode == ns.qname(ns.WSA10, "DestinationUnreachable")


# 2004/08 eventing with WSA 1.0 (the DPWS pairing) is served: see test_dpws_pairing.py
@pytest.mark.parametrize("body_version,wsa", [(V2011, WsaVersion.WSA2004)])
def test_mixing_addressing_versions_is_refused(harness, body_version, wsa):
    _, reply = raw_call(harness, body_version, "/topics/stocks", body_version.action("Subscribe"),
                        _sub(body_version.name), wsa=wsa)
    fault = reply.fault()
    assert fault.code == SENDER
    assert fault.subcode == wsa.invalid_header_fault
    assert harness.manager.store.count() == 0


def test_eventing_request_without_addressing_is_refused(harness):
    response = harness.post("/topics/stocks", build_envelope(SoapVersion.SOAP12, _sub("2011")),
                            action=V2011.action("Subscribe"))
    fault = parse_envelope(response.body).fault()
    assert fault.subcode == WsaVersion.WSA10.header_required_fault


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_wrong_action_for_body_is_action_not_supported(harness, name):
    version = VERSIONS[name]
    _, reply = raw_call(harness, version, "/topics/stocks", version.action("Renew"), _sub(name))
    assert reply.fault().subcode == version.wsa.q("ActionNotSupported")
    renew = etree.Element(version.q("Renew"), nsmap={"wse": version.namespace})
    _, reply = raw_call(harness, version, "/topics/stocks", version.action("Renew"), renew)
    assert reply.fault().subcode == version.wsa.q("ActionNotSupported")


UNKNOWN = [("2004", "Renew", RECEIVER, "UnableToRenew"),
           ("2004", "GetStatus", SENDER, "InvalidMessage"),
           ("2004", "Unsubscribe", SENDER, "InvalidMessage"),
           ("2011", "Renew", SENDER, "UnknownSubscription"),
           ("2011", "GetStatus", SENDER, "UnknownSubscription"),
           ("2011", "Unsubscribe", SENDER, "UnknownSubscription")]


@pytest.mark.parametrize("name,operation,code,subcode", UNKNOWN)
@pytest.mark.parametrize("identifier", ["nonexistent-0000", None, "bad id with spaces"])
def test_unknown_subscription_faults(harness, name, operation, code, subcode, identifier):
    version = VERSIONS[name]
    extra = []
    if identifier is not None:
        element = etree.Element(version.identifier_tag)
        element.text = identifier
        extra.append(element)
    body = etree.Element(version.q(operation), nsmap={"wse": version.namespace})
    _, reply = raw_call(harness, version, "/subscriptions", version.action(operation), body,
                        extra_headers=extra)
    fault = reply.fault()
    assert (fault.code, fault.subcode) == (code, version.q(subcode))
    assert reply.header(version.wsa.q("Action")).text == version.fault_action


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_identifier_of_the_other_version_is_unknown(harness, name):
    other = "2011" if name == "2004" else "2004"
    sub = harness.subscribe(other, expires="PT1H")
    version = VERSIONS[name]
    element = etree.Element(version.identifier_tag)
    element.text = sub.id
    body = etree.Element(version.q("GetStatus"), nsmap={"wse": version.namespace})
    _, reply = raw_call(harness, version, "/subscriptions", version.action("GetStatus"), body,
                        extra_headers=[element])
    assert reply.fault().subcode == version.q(
        "UnknownSubscription" if name == "2011" else "InvalidMessage")


def test_renew_and_unsubscribe_after_unsubscribe_are_unknown(harness):
    client = harness.client("2011")
    sub = harness.subscribe("2011", expires="PT1H")
    client.unsubscribe(sub)
    for call in (lambda: client.renew(sub, "PT1H"), lambda: client.unsubscribe(sub)):
        assert fault_of(call).subcode == V2011.q("UnknownSubscription")


@pytest.mark.parametrize("name,subcode", [("2004", "InvalidExpirationTime"),
                                          ("2011", "UnsupportedExpirationValue")])
def test_renew_with_bad_expiry_keeps_subscription(harness, name, subcode):
    client = harness.client(name)
    sub = harness.subscribe(name, expires="PT1H")
    assert fault_of(lambda: client.renew(sub, "never")).subcode == VERSIONS[name].q(subcode)
    assert client.get_status(sub)  # still there, unchanged


def test_soap11_fault_code_is_the_subcode(harness):
    version = V2004
    _, reply = raw_call(harness, version, "/topics/stocks", version.action("Subscribe"),
                        _sub("2004", mode="urn:x"), soap=SoapVersion.SOAP11)
    faultcode = reply.body.find("faultcode").text
    prefix, local = faultcode.split(":")
    assert local == "DeliveryModeRequestedUnavailable"
    assert reply.body.find("faultcode").nsmap[prefix] == ns.WSE2004

