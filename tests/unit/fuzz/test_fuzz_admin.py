"""Admin and EDN-wire messages with the right credential and generated contents, and with
odd credentials: every answer is a response or a Sender fault, never a Receiver fault for
the request's own contents, an unprescribed 500 or an exception."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from lxml import etree

from benchmarks.robustness.fuzz import hostile_values
from route_manager import protocol
from tests.support.eventing import TOKEN
from tests.unit.fuzz.fuzzkit import FUZZ, call, check_answer
from wsframework import ns
from matchers.vocabulary import MATCHER_BRUTE_FORCE, MATCHER_RTREE_ENGINE, MATCHER_RTREE_ROUTE_SET
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import contracts
from wsframework.admin.codec import render
from wsframework.admin.registry import action_for
from wsframework.exceptions import RECEIVER, SENDER
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

ROLES = st.sampled_from(["source", "dispatcher", "s0", "s1", "child"])
TEXT = (st.text(max_size=80) | st.randoms(use_true_random=False).map(hostile_values)
        | st.sampled_from(["stocks", "grid", "boxes", "s0", "s1", "fuzz", "a/b", "..", ""]))
NUMBER = st.integers(-2**70, 2**70) | st.sampled_from([0, 1, 2**31 - 1, 2**31, -1])
ANY_XML = st.sampled_from([
    "<x/>", '<edn:Summary xmlns:edn="urn:wsframework:edn"/>',
    '<edn:Summary xmlns:edn="urn:wsframework:edn"><edn:Box lo="1 2" hi="0"/></edn:Summary>',
    '<edn:Subscriptions xmlns:edn="urn:wsframework:edn" Topic="grid"><edn:Subscription/></edn:Subscriptions>',
    '<edn:Schema xmlns:edn="urn:wsframework:edn"><edn:Attribute name="x0" type="number" '
    'xpath="x0" min="5" max="1"/></edn:Schema>',
    '<edn:Schema xmlns:edn="urn:wsframework:edn"><edn:Attribute name="x" type="zzz"/></edn:Schema>',
    "<a>" * 200 + "</a>" * 200])


VALID_SCHEMA = ('<edn:Schema xmlns:edn="urn:wsframework:edn" xmlns:e="urn:edn-demo:events">'
                '<edn:Attribute name="x0" type="number" xpath="e:x0" min="0" max="10"/></edn:Schema>')
INVALID_OPTIONS = ["<x/>", '<edn:Schema xmlns:edn="urn:wsframework:edn"><edn:Attribute name="x0" '
                   'type="number" xpath="x0" min="5" max="1"/></edn:Schema>',
                   '<edn:Schema xmlns:edn="urn:wsframework:edn"><edn:Attribute name="x" type="zzz"/>'
                   '</edn:Schema>']


def _clean(text):
    return "".join(c for c in str(text) if c in "\t\n\r" or (" " <= c and not "\ud800" <= c <= "\udfff"
                                                            and c not in "\ufffe\uffff"))


def _element(text: str | None):
    return None if text is None else etree.fromstring(text)


# Operations that change who routes where (RegisterServer, MoveSubscriptions, Repartition,
# DeleteTopic/DeleteRoute, Configure) are fuzzed too: the roles are this module's own.
CONTRACTS = st.one_of(
    st.builds(lambda n, m, o: contracts.CreateTopic(Name=_clean(n), Matcher=m, Options=_element(o)),
              TEXT, st.none() | st.sampled_from([ns.MATCHER_XPATH, MATCHER_RTREE_ENGINE,
                                                  MATCHER_BRUTE_FORCE, "urn:nope"]),
              # and options that are no valid edn:Schema (the test at the bottom pins their fault)
              st.none() | st.just(VALID_SCHEMA) | st.sampled_from(INVALID_OPTIONS)),
    st.builds(lambda n: contracts.DeleteTopic(Name=_clean(n)), st.sampled_from(["fuzz", "nosuch", "x" * 300])),
    st.builds(lambda p: contracts.ListTopics(Prefix=_clean(p)), TEXT),
    st.builds(lambda p: contracts.GetStats(Prefix=_clean(p)), TEXT),
    st.builds(lambda k, v: contracts.Configure(Setting=[contracts.Figure(Name=_clean(k), Value=_clean(v))]),
              st.sampled_from(["nosuch", "precision", "delivery_retries", "max_body", ""]) | TEXT, TEXT),
    st.builds(lambda s, r, g, l, x: protocol.UpdateSummary(Server=_clean(s), Route=_clean(r), Generation=g,
                                                            Load=l, Summary=_element(x)),
              TEXT, TEXT, NUMBER, NUMBER, ANY_XML),
    st.builds(lambda s, a, r, l: protocol.PeerUpdate(Server=_clean(s), Address=_clean(a), Route=_clean(r),
                                                     Load=l), TEXT, TEXT, TEXT, NUMBER),
    st.builds(lambda t: protocol.ExportSubscriptions(Topic=_clean(t)), TEXT),
    st.builds(lambda t, x: protocol.ImportSubscriptions(Topic=_clean(t), Subscriptions=_element(x)),
              TEXT, ANY_XML),
    st.builds(lambda t, a: protocol.Repartition(Topic=_clean(t), Algorithm=_clean(a)), TEXT, TEXT),
    st.builds(lambda t, a, i: protocol.MoveSubscriptions(Topic=_clean(t), Target=_clean(a),
                                                         Id=[_clean(x) or "x" for x in i]),
              TEXT, TEXT, st.lists(TEXT, min_size=1, max_size=3)),
    st.builds(lambda n, a, k: protocol.RegisterServer(Name=_clean(n), Address=_clean(a),
                                                      Kind=None if k is None else _clean(k)),
              st.sampled_from(["fuzz-peer", "zz"]) | TEXT, st.sampled_from(["http://fuzz.test", "x"]) | TEXT,
              st.none() | st.sampled_from(["server", "dispatcher", "router", ""]) | TEXT),
    st.builds(lambda p: protocol.ListServers(Prefix=_clean(p)), TEXT),
    st.builds(lambda n, m: protocol.CreateRoute(Name=_clean(n), Matcher=m), TEXT,
              st.none() | st.sampled_from([MATCHER_RTREE_ROUTE_SET, "urn:nope"])),
)


def _rendered(contract):
    """The contract's element, or None when the client-side codec refuses the values (then
    the raw element is built by hand below, as a hostile client would)."""
    try:
        return render(contract)
    except Exception:
        return None


def _admin_envelope(body, token, soap):
    name = etree.QName(body)
    headers = request_headers(WsaVersion.WSA10, "http://x/admin", action_for(name.localname, name.namespace))
    if token is not None:
        element = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        element.text = token
        headers.append(element)
    return build_envelope(soap, body, headers)


@settings(FUZZ, max_examples=120)
@given(ROLES, CONTRACTS, st.sampled_from(list(SoapVersion)), st.data())
def test_admin_messages_with_generated_contents(roles, role, contract, soap, data):
    body = _rendered(contract)
    if body is None:  # a value the codec will not render: send the fields as text anyway
        body = etree.Element(ns.qname(ns.ADMIN, type(contract).get_type_name()))
        for field in data.draw(st.lists(TEXT, max_size=3)):
            etree.SubElement(body, ns.qname(ns.ADMIN, "Name")).text = _clean(field)
    answer = call(roles.apps[role], "/admin", _admin_envelope(body, TOKEN, soap),
                  content_type=soap.content_type)
    check_answer(answer)
    fault = parse_envelope(answer.body).fault() if answer.body else None
    if fault is not None and fault.code == RECEIVER:
        # a Receiver fault is only for what went wrong on the service's side, with a reason
        assert "internal error" not in fault.reason, fault
    roles.still_answers()


@FUZZ
@given(ROLES, st.sampled_from([None, "", " " + TOKEN, TOKEN + " ", TOKEN + "\n", "\t" + TOKEN,
                               TOKEN + "\u00a0", "\u2003" + TOKEN, TOKEN.upper(), TOKEN[:-1],
                               TOKEN + TOKEN, "x" * 10_000]) | TEXT,
       st.sampled_from(["ListTopics", "CreateTopic", "DeleteTopic", "GetStats", "RegisterServer"]))
def test_wrong_credentials_are_refused_as_the_senders(roles, role, token, operation):
    if token == TOKEN:
        return
    body = etree.Element(ns.qname(ns.ADMIN, operation))
    etree.SubElement(body, ns.qname(ns.ADMIN, "Name")).text = "stocks"
    answer = call(roles.apps[role], "/admin", _admin_envelope(body, None if token is None else _clean(token),
                                                               SoapVersion.SOAP12))
    check_answer(answer)
    fault = parse_envelope(answer.body).fault()
    assert fault is not None and fault.code == SENDER, answer
    assert fault.subcode == contracts.FAULT_ACCESS_DENIED, fault


@pytest.mark.parametrize("role,matcher", [("source", MATCHER_RTREE_ENGINE),
                                          ("source", MATCHER_BRUTE_FORCE),
                                          ("dispatcher", None)])
@pytest.mark.parametrize("options", INVALID_OPTIONS, ids=["not-a-schema", "min-above-max", "bad-type"])
def test_invalid_matcher_options_are_the_senders_fault(roles, role, matcher, options):
    body = render(contracts.CreateTopic(Name="badoptions", Matcher=matcher,
                                        Options=etree.fromstring(options)))
    answer = call(roles.apps[role], "/admin", _admin_envelope(body, TOKEN, SoapVersion.SOAP12))
    fault = parse_envelope(answer.body).fault()
    assert fault is not None and fault.code == SENDER, answer
    assert answer.status == 400
