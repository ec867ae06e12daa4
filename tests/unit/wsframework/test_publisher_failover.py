"""route_manager.publisher.Publisher (wsframework.publisher.FailoverPublisher with the EDN's
batches and LogFull): publishing over several roots with failover, against a socket-free
transport whose roots answer as each test says."""
from __future__ import annotations

import pytest
from lxml import etree

from matchers.vocabulary import EDN
from route_manager.protocol import EVENT_BATCH
from route_manager.publisher import Publisher
from wsframework import ns
from wsframework.exceptions import SENDER, SoapFault, receiver_fault, sender_fault
from wsframework.publisher import PUBLISH_ACTION, NoRootAnswered, PublishRefused
from wsframework.soap import SoapVersion, fault_envelope, parse_envelope
from wsframework.transport import TransportError, TransportResponse

A, B, C = "http://a.test", "http://b.test", "http://c.test"
LOG_FULL = ns.qname(EDN, "LogFull")


def _fault(version: SoapVersion, fault: SoapFault) -> TransportResponse:
    return TransportResponse(version.fault_status(fault), version.content_type,
                             fault_envelope(version, fault))


ANSWERS = {
    "ok": lambda v: TransportResponse(202, None, b""),
    "log-full": lambda v: _fault(v, receiver_fault("the log is full", LOG_FULL)),
    "sender": lambda v: _fault(v, sender_fault("no such topic")),
    "bad-gateway": lambda v: TransportResponse(502, "text/html", b"<html>bad gateway</html>"),
    "not-found": lambda v: TransportResponse(404, "text/html", b"<html>no</html>"),
}


class Roots:
    """A transport: each root answers (or fails) as ``behaviour[root]`` says; records every
    message as (root, wsa:MessageID, body)."""

    def __init__(self, version: SoapVersion = SoapVersion.SOAP12, **behaviour):
        self.version = version
        self.behaviour = {A: "ok", B: "ok", C: "ok", **behaviour}
        self.sent: list[tuple[str, str, etree._Element]] = []

    def post(self, url, payload, content_type, soap_action=None):
        root = next(r for r in self.behaviour if url.startswith(r + "/"))
        assert url == f"{root}/topics/stocks" and soap_action == PUBLISH_ACTION
        envelope = parse_envelope(payload)
        message_id = envelope.header(f"{{{ns.WSA10}}}MessageID").text
        self.sent.append((root, message_id, envelope.body))
        what = self.behaviour[root]
        if what == "refused":
            raise TransportError(f"POST {url} failed: connection refused", unsent=True)
        if what == "reset":
            raise TransportError(f"POST {url} failed: connection reset by peer")
        return ANSWERS[what](self.version)

    def roots(self):
        return [root for root, _, _ in self.sent]

    def close(self):
        pass


def event(n: int = 1) -> etree._Element:
    element = etree.Element("{urn:test}quote")
    element.text = str(n)
    return element


def test_one_root_that_answers_takes_everything():
    transport = Roots()
    publisher = Publisher([A, B + "/"], transport=transport)
    ack = publisher.publish("stocks", event())
    assert (ack.address, ack.status, ack.tried, ack.in_doubt) == (A, 202, 1, ())
    publisher.publish("stocks", event(2))
    assert transport.roots() == [A, A] and publisher.failovers == 0
    assert publisher.addresses == (A, B)


def test_a_root_that_refuses_connections_fails_over_with_the_same_message():
    transport = Roots(**{A: "refused"})
    publisher = Publisher([A, B, C], transport=transport)
    ack = publisher.publish("stocks", event(7))
    assert (ack.address, ack.tried, ack.in_doubt) == (B, 2, ())  # never connected: no doubt
    (_, first_id, first_body), (_, again_id, again_body) = transport.sent
    assert first_id == again_id == ack.message_id  # the same message, sent again
    assert etree.tostring(first_body) == etree.tostring(again_body)
    # publishing stays at the root that answered: the dead one costs nothing more
    publisher.publish("stocks", event(8))
    assert transport.roots() == [A, B, B]
    assert publisher.current == B and publisher.failovers == 1
    # it does not move back by itself when the first root answers again
    transport.behaviour[A] = "ok"
    publisher.publish("stocks", event(9))
    assert transport.roots()[-1] == B


def test_a_lost_answer_puts_the_root_in_doubt():
    transport = Roots(**{A: "reset"})
    ack = Publisher([A, B], transport=transport).publish("stocks", event())
    assert ack.address == B and ack.in_doubt == (A,)  # A may hold it too: at least once
    transport = Roots(**{A: "bad-gateway"})
    ack = Publisher([A, B], transport=transport).publish("stocks", event())
    assert ack.address == B and ack.in_doubt == (A,)


@pytest.mark.parametrize("version", [SoapVersion.SOAP12, SoapVersion.SOAP11])
def test_a_receiver_fault_such_as_log_full_fails_over(version):
    transport = Roots(version, **{A: "log-full"})
    publisher = Publisher([A, B], transport=transport, soap_version=version)
    ack = publisher.publish("stocks", event())
    assert ack.address == B and ack.in_doubt == ()  # refused: A holds nothing
    assert publisher.current == B


def test_a_sender_fault_is_the_callers_problem_and_never_fails_over():
    transport = Roots(**{A: "sender"})
    publisher = Publisher([A, B], transport=transport)
    with pytest.raises(SoapFault) as caught:
        publisher.publish("stocks", event())
    assert caught.value.code == SENDER
    assert transport.roots() == [A] and publisher.current == A


def test_an_http_error_without_a_fault_is_the_callers_problem_below_500():
    transport = Roots(**{A: "not-found"})
    publisher = Publisher([A, B], transport=transport)
    with pytest.raises(PublishRefused) as caught:
        publisher.publish("stocks", event())
    assert (caught.value.address, caught.value.status) == (A, 404)
    assert transport.roots() == [A]


def test_no_root_answering_names_each_and_keeps_the_current_root():
    transport = Roots(**{A: "refused", B: "log-full", C: "refused"})
    publisher = Publisher([A, B, C], transport=transport)
    with pytest.raises(NoRootAnswered) as caught:
        publisher.publish("stocks", event())
    assert [root for root, _ in caught.value.failures] == [A, B, C]
    assert "LogFull" in caught.value.failures[1][1]
    assert caught.value.unsent and caught.value.in_doubt == ()  # safe to send again
    assert isinstance(caught.value, TransportError) and publisher.current == A
    transport.behaviour[C] = "reset"
    with pytest.raises(NoRootAnswered) as caught:
        publisher.publish("stocks", event())
    assert not caught.value.unsent and caught.value.in_doubt == (C,)


def test_failover_goes_round_the_list_from_the_current_root():
    transport = Roots(**{A: "refused"})
    publisher = Publisher([A, B, C], transport=transport)
    publisher.publish("stocks", event())
    assert publisher.current == B
    transport.behaviour.update({B: "refused", C: "refused", A: "ok"})
    ack = publisher.publish("stocks", event())
    assert ack.address == A and ack.tried == 3
    assert transport.roots()[-3:] == [B, C, A] and publisher.failovers == 2


def test_a_sender_that_saw_an_old_root_fail_does_not_move_the_current_one_back():
    publisher = Publisher([A, B, C], transport=Roots())
    publisher._move(0, 2)  # one thread found A dead and C answering
    publisher._move(0, 1)  # another, which started at A too, found B answering
    assert publisher.current == C and publisher.failovers == 1


def test_a_batch_is_one_message_one_root_takes_whole():
    transport = Roots(**{A: "refused"})
    ack = Publisher([A, B], transport=transport).send_batch("stocks", [event(1), event(2)])
    assert ack.address == B
    for _, _, body in transport.sent:
        assert body.tag == EVENT_BATCH and body.get("Topic") == "stocks"
        assert [e.text for e in body] == ["1", "2"]


def test_a_publisher_needs_an_address():
    with pytest.raises(ValueError):
        Publisher([])
