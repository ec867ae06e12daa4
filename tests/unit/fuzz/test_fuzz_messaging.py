"""The SOAP/XML parser and the messaging layer of every role, through the WSGI application
the role runs under gunicorn (called in process): mutated seeds, arbitrary bodies, generated
envelopes and broken HTTP framing all get a SOAP answer, never HTML, never an unprescribed
500, and the roles keep answering."""
from __future__ import annotations

import io
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st
from lxml import etree

from benchmarks.robustness.fuzz import hostile_values, mutate
from tests.unit.fuzz.fuzzkit import FUZZ, call, check_answer, send
from wsframework import ns
from matchers.vocabulary import EDN
from wsframework.soap import parse_envelope

CONTENT_TYPES = st.sampled_from([
    "application/soap+xml", "text/xml", "application/soap+xml; charset=utf-8; action=\"urn:x\"",
    "text/xml; charset=utf-16", "text/html", "application/json", "", "application/soap+xml;;"])
PATHS = st.sampled_from(["/", "/admin", "/topics/stocks", "/topics/grid", "/topics/boxes",
                         "/subscriptions", "/topics/nosuch", "/topics/../admin", "/\x00"])
ROLES = st.sampled_from(["source", "dispatcher", "s0", "s1", "child"])


@FUZZ
@given(st.randoms(use_true_random=False), st.data())
def test_mutated_seeds_get_soap_answers(roles, rng, data):
    seed = data.draw(st.sampled_from(roles.seeds))
    message = mutate(rng, seed)
    check_answer(send(roles.apps[message.target], message), malformed=message.malformed)
    roles.still_answers()


@FUZZ
@given(ROLES, PATHS, CONTENT_TYPES, st.binary(max_size=3000))
def test_arbitrary_bodies_get_soap_faults(roles, role, path, content_type, body):
    check_answer(call(roles.apps[role], path, body, content_type=content_type or None))
    roles.still_answers()


TAGS = [ns.qname(n, local) for n in (ns.SOAP12, ns.SOAP11, ns.WSA10, ns.WSA2004, ns.WSE2011,
                                     ns.WSE2004, ns.ADMIN, EDN, "urn:quotes")
        for local in ("Envelope", "Header", "Body", "Action", "To", "MessageID", "ReplyTo",
                      "Address", "Subscribe", "Renew", "GetStatus", "Unsubscribe", "Delivery",
                      "NotifyTo", "Filter", "Expires", "Identifier", "AdminToken", "ListTopics",
                      "EventBatch", "Fault", "quote")]


def _element(draw_children):
    return st.builds(lambda tag, text, attrs, children: (tag, text, attrs, children),
                     st.sampled_from(TAGS), st.none() | st.text(max_size=40)
                     | st.randoms(use_true_random=False).map(hostile_values),
                     st.dictionaries(st.sampled_from(["Dialect", "mustUnderstand", "Topic", "id",
                                                      "BestEffort", "Mode"]),
                                     st.text(max_size=20), max_size=2),
                     draw_children)


ELEMENTS = st.recursive(_element(st.just([])), lambda inner: _element(st.lists(inner, max_size=4)),
                        max_leaves=25)


def _build(spec, parent=None):
    tag, text, attrs, children = spec
    element = etree.Element(tag) if parent is None else etree.SubElement(parent, tag)
    clean = "".join(c for c in (text or "") if c in "\t\n\r" or (" " <= c and not "\ud800" <= c <= "\udfff"
                                                                and c not in "\ufffe\uffff"))
    element.text = clean or None
    for name, value in attrs.items():
        element.set(name, "".join(c for c in value if " " <= c and not "\ud800" <= c <= "\udfff"
                                  and c not in "\ufffe\uffff"))
    for child in children:
        _build(child, element)
    return element


@FUZZ
@given(ROLES, PATHS, st.sampled_from(["application/soap+xml", "text/xml"]), ELEMENTS,
       st.lists(ELEMENTS, max_size=3), st.booleans())
def test_generated_envelopes_get_soap_answers(roles, role, path, content_type, body, headers,
                                              valid_token):
    """Envelope-shaped documents built from the SOAP, WS-Addressing, WS-Eventing, admin and
    EDN vocabularies, in any arrangement (sometimes with the right admin token)."""
    version = ns.SOAP12 if content_type.startswith("application") else ns.SOAP11
    envelope = etree.Element(ns.qname(version, "Envelope"))
    header = etree.SubElement(envelope, ns.qname(version, "Header"))
    for spec in headers:
        header.append(_build(spec))
    if valid_token:
        etree.SubElement(header, ns.qname(ns.ADMIN, "AdminToken")).text = "unit-token"
    etree.SubElement(envelope, ns.qname(version, "Body")).append(_build(body))
    check_answer(call(roles.apps[role], path, etree.tostring(envelope), content_type=content_type))
    roles.still_answers()


class BrokenStream:
    """A wsgi.input that fails the way gunicorn's body readers do on broken framing."""

    def __init__(self, prefix: bytes, error: Exception):
        self.data = io.BytesIO(prefix)
        self.error = error

    def read(self, n=-1):
        chunk = self.data.read(n if n is not None and n >= 0 else -1)
        if chunk:
            return chunk
        raise self.error


@FUZZ
@given(ROLES, st.data(), st.sampled_from([None, "", "-1", "abc", "99999999999999999999999",
                                          "1e3", " 5", "5, 5", "0"]),
       st.sampled_from([ValueError("Invalid chunk size"), OSError("connection reset"),
                        EOFError("no more data"), RuntimeError("framing"), None]))
def test_broken_framing_gets_a_sender_fault(roles, role, data, content_length, error):
    """What reaches the application when the HTTP framing is broken: a Content-Length that is
    absent, negative or not a number, or a body stream that raises halfway."""
    seed = data.draw(st.sampled_from([s for s in roles.seeds if s.target == role]))
    cut = data.draw(st.integers(0, len(seed.body)))
    stream = BrokenStream(seed.body[:cut], error) if error is not None else io.BytesIO(seed.body[:cut])
    headers = seed.http_headers()
    answer = call(roles.apps[role], seed.path, content_type=headers.get("Content-Type"),
                  soap_action=headers.get("SOAPAction"), content_length=content_length,
                  stream=stream)
    check_answer(answer)
    if error is not None and answer.status >= 400:
        assert answer.status < 500 or answer.status == 500
    roles.still_answers()


@FUZZ
@given(ROLES, st.sampled_from(["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"]),
       st.text(max_size=60).map(lambda t: "/" + t), st.text(max_size=40))
def test_other_methods_and_queries_never_get_html(roles, role, method, path, query):
    answer = call(roles.apps[role], path, method=method, content_type=None,
                  extra={"QUERY_STRING": query})
    check_answer(answer, method=method)
    assert answer.status != 500


@pytest.mark.parametrize("to", ["http://[::1/topics/stocks", "//q:quote[q:price > 3]",
                                "http://[fuzz]/topics/stocks"])
@pytest.mark.parametrize("role", ["source", "dispatcher", "s0"])
def test_a_wsa_to_that_is_no_url_gets_a_sender_fault(roles, role, to):
    seed = next(s for s in roles.seeds if s.target == role and s.kind in ("admin", "edn-wire"))
    root = etree.fromstring(seed.body)
    root.find(f".//{{{ns.WSA10}}}To").text = to
    answer = send(roles.apps[role], replace(seed, body=etree.tostring(root), mutation="wsa-to"))
    check_answer(answer)
    assert answer.status == 400, answer
    fault = parse_envelope(answer.body).fault()
    assert fault.subcodes[:2] == (f"{{{ns.WSA10}}}InvalidAddressingHeader",
                                  f"{{{ns.WSA10}}}InvalidAddress"), fault
