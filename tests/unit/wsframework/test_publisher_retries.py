"""wsframework.publisher.FailoverPublisher's retries (``attempts``, ``backoff``), against a socket-free transport whose answers
each test scripts; the pauses go to a recording sleep."""
from __future__ import annotations

import pytest
from lxml import etree

from wsframework import ns
from wsframework.exceptions import SoapFault, receiver_fault, sender_fault
from wsframework.publisher import MAX_ATTEMPTS, FailoverPublisher, NoRootAnswered
from wsframework.soap import SoapVersion, fault_envelope, parse_envelope
from wsframework.transport import TransportError, TransportResponse

A, B = "http://a.test", "http://b.test"
V = SoapVersion.SOAP12


class Script:
    """A transport answering each POST with the next item of ``answers``: "ok", "lost"
    (sent, answer lost), "refused" (never sent), "busy" (a Receiver fault), "sender"."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sent: list[tuple[str, str]] = []  # (root, wsa:MessageID)

    def post(self, url, payload, content_type, soap_action=None):
        envelope = parse_envelope(payload)
        root = url.split("/topics/")[0]
        self.sent.append((root, envelope.header(f"{{{ns.WSA10}}}MessageID").text))
        what = self.answers.pop(0)
        if what == "lost":
            raise TransportError(f"POST {url} failed: read timed out")
        if what == "refused":
            raise TransportError(f"POST {url} failed: connection refused", unsent=True)
        if what in ("busy", "sender"):
            fault = (receiver_fault("still publishing") if what == "busy"
                     else sender_fault("no such topic"))
            return TransportResponse(V.fault_status(fault), V.content_type,
                                     fault_envelope(V, fault))
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def publisher(transport, roots=(A,), **options):
    pauses: list[float] = []
    options.setdefault("attempts", 3)
    return FailoverPublisher(list(roots), transport=transport, sleep=pauses.append,
                             **options), pauses


def event() -> etree._Element:
    return etree.fromstring(b"<q xmlns='urn:test'>1</q>")


def test_one_root_whose_answer_was_lost_gets_the_same_message_again_after_a_pause():
    transport = Script("lost", "ok")
    pub, pauses = publisher(transport)
    ack = pub.publish("stocks", event())
    assert [root for root, _ in transport.sent] == [A, A]
    assert {mid for _, mid in transport.sent} == {ack.message_id}  # the same MessageID
    assert pauses == [0.5] and ack.tried == 2 and ack.address == A
    assert ack.in_doubt == (A,)  # it may have taken the first one (a root that dedups did not)


def test_retries_are_bounded_and_back_off_doubling_to_the_cap():
    transport = Script(*["refused"] * 5)
    pub, pauses = publisher(transport, attempts=5, backoff=0.5, max_backoff=1.5)
    with pytest.raises(NoRootAnswered) as caught:
        pub.publish("stocks", event())
    assert len(transport.sent) == 5 and len({mid for _, mid in transport.sent}) == 1
    assert pauses == [0.5, 1.0, 1.5, 1.5]
    assert caught.value.unsent and len(caught.value.failures) == 5


def test_each_round_goes_over_every_root_and_pauses_only_between_rounds():
    transport = Script("refused", "busy", "refused", "ok")
    pub, pauses = publisher(transport, roots=(A, B))
    ack = pub.publish("stocks", event())
    assert [root for root, _ in transport.sent] == [A, B, A, B]
    assert pauses == [0.5] and ack.address == B and ack.in_doubt == ()
    assert len({mid for _, mid in transport.sent}) == 1


def test_a_root_in_doubt_is_named_once_however_often_it_was_tried():
    pub, _ = publisher(Script("lost", "lost", "lost"))
    with pytest.raises(NoRootAnswered) as caught:
        pub.publish("stocks", event())
    assert caught.value.in_doubt == (A,) and not caught.value.unsent


def test_the_callers_problem_is_never_retried():
    transport = Script("sender")
    pub, pauses = publisher(transport)
    with pytest.raises(SoapFault):
        pub.publish("stocks", event())
    assert len(transport.sent) == 1 and pauses == []


def test_one_attempt_is_the_default_and_each_message_has_its_own_id():
    transport = Script("refused", "ok")
    pub = FailoverPublisher(A, transport=transport, sleep=pytest.fail)
    with pytest.raises(NoRootAnswered):
        pub.publish("stocks", event())
    pub.publish("stocks", event())
    assert transport.sent[0][1] != transport.sent[1][1]


@pytest.mark.parametrize("options", [
    {"attempts": 0}, {"attempts": MAX_ATTEMPTS + 1}, {"attempts": 2.0}, {"attempts": True},
    {"backoff": -1}, {"backoff": float("nan")}, {"max_backoff": float("inf")},
    {"backoff": 301}])
def test_bad_retry_options_are_refused(options):
    with pytest.raises(ValueError):
        FailoverPublisher(A, transport=Script(), **options)
