"""Errors are translated once, at the edge, through one registry."""
import logging

import pytest
from lxml import etree

from wsframework import faults
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.messaging import MessageFilter, MessagingLayer
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework import ns


class Precise(Exception):
    pass


class MorePrecise(Precise):
    pass


SUBCODE = ns.qname("urn:test", "Precise")


@pytest.fixture
def registered():
    faults.register_translation(Precise, lambda exc: sender_fault(f"precise: {exc}", SUBCODE))
    yield
    faults.unregister_translation(Precise)
    faults.unregister_translation(MorePrecise)


def test_a_soap_fault_is_itself():
    fault = sender_fault("x")
    assert faults.fault_for(fault) is fault


def test_registered_exception_and_subclasses_translate(registered):
    assert faults.fault_for(Precise("a")).subcode == SUBCODE
    assert faults.fault_for(MorePrecise("b")).reason == "precise: b"


def test_most_specific_registration_wins(registered):
    faults.register_translation(MorePrecise, lambda exc: sender_fault("more"))
    assert faults.fault_for(MorePrecise()).reason == "more"
    assert faults.fault_for(Precise()).reason == "precise: "


def test_conflicting_registration_is_refused(registered):
    with pytest.raises(ValueError):
        faults.register_translation(Precise, lambda exc: sender_fault("other"))
    with pytest.raises(TypeError):
        faults.register_translation(SoapFault, lambda exc: exc)


def test_unexpected_error_is_logged_once_with_traceback_and_hides_insides(caplog):
    with caplog.at_level(logging.ERROR):
        fault = faults.fault_for(KeyError("secret-internal-key"))
    assert fault.code == "Receiver" and "secret" not in fault.reason
    records = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(records) == 1 and records[0].exc_info is not None


def _call(layer, exc):
    def handler(message):
        raise exc
    layer.route("boom", MessageFilter(action="urn:boom"), handler)
    request = build_envelope(SoapVersion.SOAP12, etree.Element("{urn:test}x"),
                             [_action("urn:boom")])
    outcome = layer.handle(request, content_type="application/soap+xml")
    return outcome, parse_envelope(outcome.body)


def _action(value):
    element = etree.Element(ns.qname(ns.WSA10, "Action"))
    element.text = value
    return element


def test_the_messaging_edge_uses_the_registry(registered):
    outcome, envelope = _call(MessagingLayer(), MorePrecise("edge"))
    assert outcome.status == 400
    text = etree.tostring(envelope.body).decode()
    assert "precise: edge" in text and "Precise" in text


def test_the_messaging_edge_answers_unexpected_errors_as_receiver(caplog):
    with caplog.at_level(logging.ERROR):
        outcome, envelope = _call(MessagingLayer(), ZeroDivisionError("internal"))
    assert outcome.status == 500
    assert "internal" not in etree.tostring(envelope.body).decode()
    assert sum(1 for r in caplog.records if r.exc_info) == 1
