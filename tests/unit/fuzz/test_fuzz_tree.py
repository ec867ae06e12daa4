"""A child dispatcher of a dispatch tree takes its parent's ``edn:EventBatch`` messages:
generated batches (positions, events, credentials) get SOAP answers, never HTML or an
unprescribed 500, route nothing unless credentialed and well-formed, and the child keeps
answering."""
from __future__ import annotations

from hypothesis import given, strategies as st
from lxml import etree

from benchmarks.robustness.fuzz import hostile_values
from route_manager import protocol
from route_manager.workloads.grid_xml import event_element
from tests.support.eventing import TOKEN
from tests.unit.fuzz.fuzzkit import CHILD, FUZZ, call, check_answer
from wsframework import ns
from matchers.vocabulary import EDN
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import contracts
from wsframework.exceptions import SENDER
from wsframework.soap import SoapVersion, build_envelope, parse_envelope

POSITION = (st.sampled_from(["1", "0", "-1", "2", "99999999999999999999999", "1e3", "",
                             " 7 ", "\u00b2", "x" * 300])
            | st.integers(min_value=-5, max_value=2 ** 64).map(str)
            | st.randoms(use_true_random=False).map(hostile_values))
EVENTS = st.lists(st.one_of(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=3, max_size=3)
    .map(lambda values: event_element(values, 1)),
    st.builds(lambda text: _leaf(text), st.text(max_size=30))), max_size=8)


def _leaf(text):
    element = etree.Element("{urn:quotes}quote")
    element.text = "".join(c for c in text if c in "\t\n\r" or " " <= c < "\ud800")
    return element


@FUZZ
@given(st.none() | POSITION, st.none() | POSITION, EVENTS,
       st.sampled_from([TOKEN, None, "wrong"]), st.sampled_from(list(SoapVersion)))
def test_parent_batches_to_a_child_get_soap_answers(roles, parent, first_seq, events, token,
                                                    soap):
    body = etree.Element(protocol.EVENT_BATCH, nsmap={"edn": EDN})
    body.set("Topic", "grid")
    for name, value in ((protocol.BATCH_DISPATCHER, parent), (protocol.BATCH_FIRST_SEQ, first_seq)):
        if value is not None:
            body.set(name, "".join(c for c in value if c in "\t\n\r" or " " <= c < "\ud800"))
    body.extend(events)
    headers = request_headers(WsaVersion.WSA10, f"{CHILD}/topics/grid", EVENT_BATCH_ACTION)
    if token is not None:
        credential = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        credential.text = token
        headers.append(credential)
    before = roles.child.dispatcher.stats(False)["events_in"]
    answer = call(roles.apps["child"], "/topics/grid", build_envelope(soap, body, headers),
                  content_type=soap.content_type)
    check_answer(answer)
    fault = parse_envelope(answer.body).fault() if answer.body else None
    if token != TOKEN:
        assert fault is not None and fault.code == SENDER, answer
        assert roles.child.dispatcher.stats(False)["events_in"] == before
    roles.still_answers()
