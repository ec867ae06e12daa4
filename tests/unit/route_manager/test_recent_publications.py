"""A root dispatcher acknowledges a publisher's retry of a message it accepted already
without routing it again (route_manager.dispatcher.recent_publications): the table on its
own, with an injected clock, then a dispatcher in process; and a root refuses to register a
server under a wildcard address, which no peer could reach."""
from __future__ import annotations

import threading

import pytest

from route_manager.dispatcher.recent_publications import (DUPLICATE, MAX_MESSAGE_ID,
                                                          RecentPublications, StillInProgress)
from tests.unit.route_manager.test_dispatcher import (DISPATCHER, event, network, register,  # noqa: F401
                                                       schema, update)
from wsframework.client import SoapClient
from wsframework.exceptions import RECEIVER, SoapFault
from wsframework.publisher import PUBLISH_ACTION


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_an_accepted_message_is_a_duplicate_within_the_window_only():
    clock = Clock()
    recent = RecentPublications(window=60, clock=clock)
    claim = recent.begin("grid", "urn:uuid:1")
    recent.finish(claim, accepted=True)
    assert recent.begin("grid", "urn:uuid:1") is DUPLICATE and recent.duplicates == 1
    assert recent.begin("other", "urn:uuid:1") is not DUPLICATE  # per topic
    clock.now += 61
    assert recent.begin("grid", "urn:uuid:1") not in (None, DUPLICATE)  # forgotten


def test_a_refused_message_is_routed_again_when_retried():
    recent = RecentPublications()
    recent.finish(recent.begin("grid", "urn:uuid:1"), accepted=False)
    assert recent.begin("grid", "urn:uuid:1") not in (None, DUPLICATE)


def test_messages_it_cannot_recognize_are_never_remembered():
    recent = RecentPublications()
    assert recent.begin("grid", None) is None and recent.begin("grid", "") is None
    assert recent.begin("grid", "x" * (MAX_MESSAGE_ID + 1)) is None
    assert RecentPublications(window=0).begin("grid", "urn:uuid:1") is None
    recent.finish(None, True)  # nothing to finish
    assert len(recent) == 0


def test_the_table_is_bounded_oldest_forgotten_first():
    recent = RecentPublications(capacity=3)
    for k in range(5):
        recent.finish(recent.begin("grid", f"urn:uuid:{k}"), accepted=True)
    assert len(recent) == 3
    assert recent.begin("grid", "urn:uuid:4") is DUPLICATE
    assert recent.begin("grid", "urn:uuid:0") is not DUPLICATE


def test_a_retry_that_overtakes_the_first_request_waits_for_its_outcome():
    recent = RecentPublications(wait=5)
    first = recent.begin("grid", "urn:uuid:1")
    answers = []
    retry = threading.Thread(target=lambda: answers.append(recent.begin("grid", "urn:uuid:1")))
    retry.start()
    recent.finish(first, accepted=True)
    retry.join(5)
    assert answers == [DUPLICATE]
    table = RecentPublications(wait=0)  # still routing, and no time to wait
    table.begin("grid", "urn:uuid:2")
    with pytest.raises(StillInProgress):
        table.begin("grid", "urn:uuid:2")


def test_two_retries_of_a_refused_message_route_it_once():
    recent = RecentPublications(wait=5)
    first = recent.begin("grid", "urn:uuid:1")
    answers, lock = [], threading.Condition()

    def retry():
        answer = recent.begin("grid", "urn:uuid:1")
        with lock:
            answers.append(answer)
            lock.notify_all()
    retries = [threading.Thread(target=retry) for _ in range(2)]
    for thread in retries:
        thread.start()
    recent.finish(first, accepted=False)  # the first request failed (say, LogFull)
    with lock:  # one retry takes the message over; the other waits for its outcome
        assert lock.wait_for(lambda: len(answers) == 1, 5)
        owner = answers[0]
    assert owner not in (None, DUPLICATE)
    recent.finish(owner, accepted=True)
    for thread in retries:
        thread.join(5)
    assert answers[1] is DUPLICATE


def test_an_accepted_message_older_than_the_window_is_new_again_wherever_it_is_kept():
    clock = Clock()
    recent = RecentPublications(window=60, clock=clock)
    young = recent.begin("grid", "urn:uuid:young")  # begun first, accepted last
    recent.finish(recent.begin("grid", "urn:uuid:old"), accepted=True)
    clock.now += 50
    recent.finish(young, accepted=True)
    clock.now += 20  # "old" is past the window, though "young" stands before it
    assert recent.begin("grid", "urn:uuid:old") not in (None, DUPLICATE)
    assert recent.begin("grid", "urn:uuid:young") is DUPLICATE


@pytest.mark.parametrize("bad", [{"window": -1}, {"capacity": 0}, {"wait": -1}])
def test_bad_bounds_are_refused(bad):
    with pytest.raises(ValueError):
        RecentPublications(**bad)


def _routed(network):  # noqa: F811
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    update(admin, "s1", 1, [0, 0], [10, 10])
    return service, transport, servers


def test_a_dispatcher_routes_a_retried_message_once(network):  # noqa: F811
    service, transport, servers = _routed(network)
    client = SoapClient(transport)
    for _ in range(3):  # the first request and two retries with its MessageID
        assert client.send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, event(1, 1),
                           message_id="urn:uuid:retried") == 202
    client.send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, event(2, 2))  # another message
    assert service.dispatcher.forwarder.drain(5)
    assert servers.events["s1"] == [(1.0, 1.0), (2.0, 2.0)]
    stats = service.dispatcher.stats()
    assert stats["events_in"] == 2 and stats["publish_duplicates"] == 2


def test_a_message_still_being_routed_is_a_receiver_fault_for_its_retry(network):  # noqa: F811
    service, transport, _ = _routed(network)
    service.dispatcher.recent.wait = 0
    service.dispatcher.recent.begin("grid", "urn:uuid:busy")  # a first request in progress
    with pytest.raises(SoapFault) as caught:
        SoapClient(transport).send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, event(1, 1),
                                   message_id="urn:uuid:busy")
    assert caught.value.code == RECEIVER and "still being published" in caught.value.reason


@pytest.mark.parametrize("address", ["http://0.0.0.0:8081", "http://[::]:8081"])
def test_a_server_advertising_a_wildcard_address_is_refused_at_registration(network, address):  # noqa: F811
    from route_manager import protocol
    from wsframework.admin import contracts
    service, admin, transport, servers, _ = network
    with pytest.raises(SoapFault) as caught:
        admin.call(protocol.RegisterServer(Name="s3", Address=address))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert "--base-url" in caught.value.reason
