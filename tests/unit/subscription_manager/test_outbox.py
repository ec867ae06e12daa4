"""The durable outbox (subscription_manager.outbox): acceptance survives a crash, rows of dead
or silent processes are claimed once, retries persist, dead letters and their redelivery,
replayed EDN batches. In process, socket-free (tests.support.eventing / .edn)."""
from __future__ import annotations

import os
import threading
import time

import pytest
from lxml import etree

from route_manager import protocol
from subscription_manager import deadletters as dl
from subscription_manager.outbox import Outbox
from subscription_manager.process_owner import process_owner
from tests.support.edn import TOPIC, Network, event_element, server_url
from tests.support.eventing import TOKEN, FakeClock, Harness, RecordingSink, quote
from wsframework import ns
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.admin import contracts
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.soap import parse_envelope
from wsframework.store import Store

DEAD = "999999999:0"  # no such pid: a process that is gone
Q = {"q": "urn:quotes"}


def message_ids(sink: RecordingSink) -> list[str]:
    """The wsa:MessageID of every notification the sink accepted (2011: WSA 1.0)."""
    return sorted(env.header(ns.qname(ns.WSA10, "MessageID")).text for env in sink.envelopes())


def stored_message_ids(store: Store) -> list[str]:
    return sorted(r[0] for r in store.query("SELECT message_id FROM eventing_outbox"))


def crashed(h: Harness, owner: str = DEAD) -> None:
    """Make ``h`` a process that accepts and never delivers (its deliverer never runs)."""
    h.manager.outbox.fixed_owner = owner
    h.manager.deliverer.submit_many = lambda jobs: len(list(jobs))


def wait_until(predicate, timeout: float = 5.0) -> None:
    """Check ``predicate`` every 10 ms (a store row nobody signals) until it holds."""
    deadline = time.monotonic() + timeout
    stop = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        stop.wait(0.01)


def test_accepted_events_survive_a_process_that_never_delivered(tmp_path):
    sink = RecordingSink()
    first = Harness(tmp_path, sink=sink)
    for path in ("/a", "/b"):
        first.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path=path)
    crashed(first)
    for price in (5, 6, 7):
        assert first.publish(quote(price)).status == 202
    assert first.manager.outbox.pending() == 6
    ids = stored_message_ids(first.service.store)
    assert sink.messages == []
    # a new process on the same store claims the dead owner's rows at startup
    second = Harness(tmp_path, sink=sink)
    try:
        second.drain()
        assert len(sink.messages) == 6
        assert message_ids(sink) == ids  # the MessageIDs chosen at acceptance
        second.manager.outbox.flush()
        assert second.manager.outbox.pending() == 0
        assert second.service.store.query("SELECT COUNT(*) FROM eventing_outbox_events")[0][0] == 0
    finally:
        second.close()
        first.manager.deliverer.close(0)


def test_a_delivered_row_not_yet_deleted_at_a_crash_is_sent_again_with_its_message_id(tmp_path):
    # Delivered rows are deleted in batches (flush_size, or the next sweep): a kill -9 just
    # after delivery leaves them, and the next process sends them again. The deliverer is
    # idle by then, so an "idle" server may still owe such repeats; each keeps its MessageID
    # (docs/guarantees.md, Duplicates), which is what a sink, or a test, drops them by.
    sink = RecordingSink()
    first = Harness(tmp_path, sink=sink)
    first.subscribe("2011", filter="q:price > 1", namespaces=Q)
    first.manager.outbox.fixed_owner = DEAD  # its rows are a dead process's at the restart
    for price in (5, 6):
        first.publish(quote(price))
    first.drain()
    delivered = message_ids(sink)
    assert len(delivered) == 2 and first.manager.deliverer.stats()["pending"] == 0
    assert first.manager.outbox.pending() == 2  # delivered, not deleted yet
    first.manager.deliverer.close(0)  # killed: no flush
    second = Harness(tmp_path, sink=sink)
    try:
        second.drain()
        assert message_ids(sink) == sorted(delivered * 2)  # repeats, never a new MessageID
        second.manager.outbox.flush()
        assert second.manager.outbox.pending() == 0
    finally:
        second.close()


def test_rows_of_a_live_owner_are_claimed_only_after_its_lease_and_only_once(tmp_path):
    clock = FakeClock()
    sink = RecordingSink()
    a = Harness(tmp_path, sink=sink, clock=clock)
    b = Harness(tmp_path, sink=sink, clock=clock)
    a.subscribe("2011", filter="q:price > 1", namespaces=Q)
    crashed(a, owner=process_owner(1))  # alive (pid 1), silent from now on
    a.publish(quote(5))
    a.publish(quote(6))
    try:
        assert b.manager.recover_outbox() == 0  # a's heartbeat is fresh: not b's to take
        b.drain()
        assert sink.messages == []
        clock.advance(a.manager.settings.outbox_lease + 1)
        third = Outbox(b.service.store, clock=clock)
        third.fixed_owner = process_owner(os.getppid())
        claimed = [b.manager.outbox.claim(), third.claim()]
        assert sorted(claimed) == [0, 2]  # one UPDATE took them all; the other found none
        if claimed[0] == 0:  # b delivers them below
            b.manager.outbox.fixed_owner = third.fixed_owner
        b.manager.recover_outbox()
        b.drain()
        assert len(sink.messages) == 2
    finally:
        b.close()
        a.manager.deliverer.close(0)


def test_retries_persist_and_a_restart_does_not_reset_them(tmp_path):
    sink = RecordingSink(status=500)
    settings = {"delivery_retries": 5, "delivery_backoff": 3600, "delivery_backoff_max": 3600}
    first = Harness(tmp_path, sink=sink, settings=settings)
    first.subscribe("2011", filter="q:price > 1", namespaces=Q)
    first.manager.outbox.fixed_owner = DEAD
    first.publish(quote(5))
    store = first.service.store
    wait_until(lambda: store.query("SELECT attempts FROM eventing_outbox")[0][0] == 1)
    (row,) = store.query("SELECT attempts, next_attempt_at, created, last_error, first_attempt "
                         "FROM eventing_outbox")
    assert row["next_attempt_at"] >= row["created"] + 3600 - 1
    assert row["last_error"] == "HTTP 500" and row["first_attempt"] is not None
    first.manager.deliverer.close(0)
    second = Harness(tmp_path, sink=sink, settings=settings)
    try:
        # claimed, but its retry is an hour away: not tried early, count kept
        assert second.manager.outbox.pending() == 1
        assert sink.attempts == 1
        (row,) = store.query("SELECT attempts, owner FROM eventing_outbox")
        assert row["attempts"] == 1 and row["owner"] == second.manager.outbox.owner
    finally:
        second.manager.deliverer.close(0)


def test_dead_letters_keep_the_notification_and_redeliver_it_with_its_message_id(tmp_path):
    sink = RecordingSink(status=500)
    h = Harness(tmp_path, sink=sink, settings={"delivery_retries": 1,
                                               "end_subscription_on_dead_letter": False})
    try:
        sub = h.subscribe("2011", filter="q:price > 1", namespaces=Q)
        h.publish(quote(5))
        h.drain()
        assert sink.attempts == 2
        (letter,) = h.manager.outbox.dead_letters()
        assert letter.subscription_id == sub.id and letter.attempts == 2
        assert letter.reason == "HTTP 500" and letter.topic == "stocks" and letter.size > 0
        assert h.manager.outbox.pending() == 0
        counters = h.manager.counters
        assert counters["dead_letters"] == 1 and counters["outbox_dead_lettered"] == 1
        assert h.client("2011").get_status(sub)  # still active (setting false)
        assert h.manager.outbox.dead_letters(subscription="other") == []
        assert h.manager.outbox.redeliver([letter.id + 1000]) == []  # unknown: skipped
        sink.status = 202
        assert h.manager.outbox.redeliver([letter.id]) == [letter.id]
        assert h.manager.recover_outbox() == 1
        h.drain()
        assert message_ids(sink) == [letter.message_id]
        assert h.manager.outbox.dead_letter_count() == 0
    finally:
        h.close()


def test_a_dead_letter_ends_the_subscription_by_default(tmp_path):
    sink = RecordingSink(status=500)
    h = Harness(tmp_path, sink=sink, settings={"delivery_retries": 0})
    try:
        sub = h.subscribe("2011", filter="q:price > 1", namespaces=Q)
        h.publish(quote(5))
        h.drain()
        assert h.manager.outbox.dead_letter_count() == 1
        with pytest.raises(SoapFault):
            h.client("2011").get_status(sub)
    finally:
        h.close()


def test_too_old_notifications_are_dead_lettered_whatever_the_attempts(tmp_path):
    clock = FakeClock()
    sink = RecordingSink(status=500)
    h = Harness(tmp_path, sink=sink, clock=clock,
                settings={"delivery_retries": 50, "delivery_max_age": 60,
                          "end_subscription_on_dead_letter": False})
    try:
        h.subscribe("2011", filter="q:price > 1", namespaces=Q)
        clock.advance(-1000)  # accepted long ago, as seen from now
        h.publish(quote(5))
        clock.advance(1000)
        h.drain()
        (letter,) = h.manager.outbox.dead_letters()
        # one attempt may come before the clock moves on (the publication is answered once
        # on disk, and delivery starts at once): 50 retries allowed, at most 2 made
        assert letter.attempts <= 2 and "older than 60 s" in letter.reason
    finally:
        h.close()


def test_purge_by_ids_age_and_all(tmp_path):
    clock = FakeClock()
    store = Store(tmp_path / "s.sqlite")
    box = Outbox(store, clock=clock)
    rows = box.accept([("t", "urn:a", b"<e/>", ["s1", "s2", "s3"])])[0]
    for row in rows:
        box.dead_letter(row.id, topic="t", url="http://x", content_type="text/xml",
                        action="urn:a", payload=b"<p/>", reason="HTTP 500", attempts=3,
                        first_attempt=1.0, last_attempt=2.0)
        clock.advance(10)
    ids = [d.id for d in box.dead_letters()]
    assert box.dead_letters(limit=10 ** 9) == box.dead_letters()  # bounded, not refused
    assert box.dead_letters(limit=-5) == []
    assert box.purge([ids[0], 12345]) == 1
    assert box.purge(older_than=clock() - 15) == 1
    assert box.purge() == 1
    assert box.dead_letter_count() == 0
    assert store.query("SELECT COUNT(*) FROM eventing_outbox_events")[0][0] == 0


def test_a_replayed_position_is_skipped_in_the_transaction(tmp_path):
    box = Outbox(Store(tmp_path / "s.sqlite"))
    events = [("t", "urn:a", b"<e/>", ["s1"]), ("t", "urn:a", b"<f/>", ["s1"])]
    first = box.accept(events, dispatcher="d1", seqs=[1, 2])
    assert all(first) and box.position("d1") == 2
    again = box.accept(events + [("t", "urn:a", b"<g/>", ["s1"])], dispatcher="d1",
                       seqs=[1, 2, 3])
    assert again[:2] == [None, None] and again[2]
    assert box.position("d1") == 3 and box.position("d2") == 0
    assert box.pending() == 3


# -- EDN servers: batches ---------------------------------------------------------------------

def _batch(points, dispatcher=None, first_seq=None):
    batch = etree.Element(protocol.EVENT_BATCH)
    for index, point in enumerate(points):
        batch.append(event_element(point, index))
    if dispatcher is not None:
        batch.set(protocol.BATCH_DISPATCHER, dispatcher)
    if first_seq is not None:
        batch.set(protocol.BATCH_FIRST_SEQ, str(first_seq))
    return batch


def _token() -> etree._Element:
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = TOKEN
    return token


def _send(net, batch):
    """Post ``batch`` as the dispatcher does; a fault is raised, success is HTTP 202."""
    client = SoapClient(net.transport)
    address = f"{server_url(0)}/topics/{TOPIC}"
    payload = client.envelope(address, EVENT_BATCH_ACTION, batch, [_token()])
    response = net.transport.post(address, payload, client.soap_version.content_type,
                                  EVENT_BATCH_ACTION)
    if response.body:
        fault = parse_envelope(response.body).fault()
        if fault is not None:
            raise fault
    assert response.status == 202, response
    return response


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, ("local", "local", "local"))
    network.create_topic()
    network.subscribe(0, [0, 0, 0], [10, 10, 10], 0)
    yield network
    network.close()


def test_a_replayed_batch_is_acknowledged_without_matching_twice(net):
    _send(net, _batch([[1, 1, 1], [2, 2, 2]], "disp-1", 1))
    net.drain()
    assert len(net.sink.messages) == 2
    _send(net, _batch([[1, 1, 1], [2, 2, 2], [3, 3, 3]], "disp-1", 1))  # replay + one new
    net.drain()
    assert len(net.sink.messages) == 3
    assert net.manager(0).edn_counters["replayed_events_skipped"] == 2
    assert net.manager(0).outbox.position("disp-1") == 3
    _send(net, _batch([[4, 4, 4]]))  # without the attributes: applied as before
    net.drain()
    assert len(net.sink.messages) == 4


@pytest.mark.parametrize("dispatcher, first_seq", [
    ("d", None), (None, "1"), ("", "1"), ("x" * 201, "1"), ("d", "0"), ("d", "-3"),
    ("d", "1.5"), ("d", "9" * 40), ("d", "²"), ("d", " ")])
def test_malformed_batch_positions_are_sender_faults(net, dispatcher, first_seq):
    batch = _batch([[1, 1, 1]])
    if dispatcher is not None:
        batch.set(protocol.BATCH_DISPATCHER, dispatcher)
    if first_seq is not None:
        batch.set(protocol.BATCH_FIRST_SEQ, first_seq)
    with pytest.raises(SoapFault) as caught:
        _send(net, batch)
    assert caught.value.code == "Sender"
    net.drain()
    assert net.sink.messages == []


# -- admin: ListDeadLetters / RedeliverDeadLetters / PurgeDeadLetters ---------------------------

@pytest.fixture
def dead(tmp_path):
    """A source with two dead letters (a refusing sink; subscriptions kept)."""
    sink = RecordingSink(status=500)
    h = Harness(tmp_path, sink=sink, settings={"delivery_retries": 0,
                                               "end_subscription_on_dead_letter": False})
    h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path="/a")
    h.subscribe("2011", filter="q:price > 1", namespaces=Q, notify_path="/b")
    h.publish(quote(5))
    h.drain()
    yield h
    h.close()


def test_list_dead_letters_by_admin_message(dead):
    answer = dead.admin.call(dl.ListDeadLetters())
    assert answer.Total == 2 and len(answer.DeadLetter) == 2
    first = answer.DeadLetter[0]
    assert first.Reason == "HTTP 500" and first.Attempts == 1 and first.Topic == "stocks"
    assert first.Url.startswith("http://sink.test/") and first.Size > 0
    assert first.MessageId.startswith("urn:uuid:") and first.DeadAt.endswith("Z")
    one = dead.admin.call(dl.ListDeadLetters(Subscription=first.Subscription, Limit=1))
    assert [d.Id for d in one.DeadLetter] == [first.Id]
    assert dead.admin.call(dl.ListDeadLetters(Topic="nope")).DeadLetter in (None, [])


def test_redeliver_by_admin_message_keeps_the_message_id(dead):
    letters = dead.admin.call(dl.ListDeadLetters()).DeadLetter
    dead.sink.status = 202
    answer = dead.admin.call(dl.RedeliverDeadLetters(Id=[letters[0].Id, 99999]))
    assert answer.Redelivered == 1 and list(answer.Unknown) == [99999]
    dead.drain()
    assert message_ids(dead.sink) == [letters[0].MessageId]
    assert dead.admin.call(dl.RedeliverDeadLetters(All="true")).Redelivered == 1
    dead.drain()
    assert sorted(message_ids(dead.sink)) == sorted(d.MessageId for d in letters)
    assert dead.admin.call(dl.ListDeadLetters()).Total == 0


def test_purge_by_admin_message(dead):
    letters = dead.admin.call(dl.ListDeadLetters()).DeadLetter
    assert dead.admin.call(dl.PurgeDeadLetters(Id=[letters[0].Id, 424242])).Purged == 1
    assert dead.admin.call(dl.PurgeDeadLetters(OlderThan=3600)).Purged == 0
    assert dead.admin.call(dl.PurgeDeadLetters(OlderThan=0)).Purged == 1
    assert dead.admin.call(dl.PurgeDeadLetters(All="true")).Purged == 0


def _raw_admin(h: Harness, body: bytes, token: str | None = TOKEN):
    headers = b"" if token is None else (
        b'<adm:AdminToken xmlns:adm="%s">%s</adm:AdminToken>' % (ns.ADMIN.encode(), token.encode()))
    envelope = (b'<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope">'
                b'<env:Header>%s</env:Header><env:Body>%s</env:Body></env:Envelope>'
                % (headers, body))
    response = h.post("/admin", envelope)
    return response, parse_envelope(response.body).fault()


def _adm(element: str, inner: str = "") -> bytes:
    return f'<adm:{element} xmlns:adm="{ns.ADMIN}">{inner}</adm:{element}>'.encode()


@pytest.mark.parametrize("body", [
    _adm("ListDeadLetters", "<adm:Limit>1001</adm:Limit>"),
    _adm("ListDeadLetters", "<adm:Limit>99999999999999999999</adm:Limit>"),
    _adm("ListDeadLetters", "<adm:Limit>0</adm:Limit>"),
    _adm("ListDeadLetters", "<adm:Limit>-1</adm:Limit>"),
    _adm("ListDeadLetters", "<adm:Limit>ten</adm:Limit>"),
    _adm("ListDeadLetters", f"<adm:Topic>{'t' * 1001}</adm:Topic>"),
    _adm("RedeliverDeadLetters"),
    _adm("RedeliverDeadLetters", "<adm:Id>1</adm:Id><adm:All>true</adm:All>"),
    _adm("RedeliverDeadLetters", "<adm:All>yes</adm:All>"),
    _adm("RedeliverDeadLetters", "<adm:Id>-4</adm:Id>"),
    _adm("RedeliverDeadLetters", "<adm:Id>0</adm:Id>"),
    _adm("RedeliverDeadLetters", "<adm:Id>1</adm:Id>" * 1001),
    _adm("PurgeDeadLetters"),
    _adm("PurgeDeadLetters", "<adm:All>true</adm:All><adm:OlderThan>5</adm:OlderThan>"),
    _adm("PurgeDeadLetters", "<adm:OlderThan>-5</adm:OlderThan>"),
    _adm("PurgeDeadLetters", "<adm:Id>x</adm:Id>"),
])
def test_bad_dead_letter_requests_are_invalid_request_faults(dead, body):
    response, fault = _raw_admin(dead, body)
    assert response.status == 400
    assert fault.code == "Sender" and fault.subcode == contracts.FAULT_INVALID_REQUEST
    assert dead.manager.outbox.dead_letter_count() == 2


@pytest.mark.parametrize("token", [None, "guess"])
@pytest.mark.parametrize("body", [_adm("ListDeadLetters"), _adm("PurgeDeadLetters",
                                  "<adm:All>true</adm:All>"),
                                  _adm("RedeliverDeadLetters", "<adm:All>true</adm:All>")])
def test_dead_letter_messages_need_the_admin_credential(dead, body, token):
    response, fault = _raw_admin(dead, body, token)
    assert fault.subcode == contracts.FAULT_ACCESS_DENIED
    assert dead.manager.outbox.dead_letter_count() == 2


@pytest.mark.parametrize("role", ["source", "server"])
def test_the_admin_wsdl_describes_the_dead_letter_messages(tmp_path, role):
    from subscription_manager.server import build_server
    from subscription_manager.source import build_source
    from tests.support.eventing import TOKEN, fake_resolver
    from wsframework.service import ServiceConfig
    from wsframework.transport import InProcessTransport
    config = ServiceConfig(base_url="http://svc", data_dir=str(tmp_path), admin_token=TOKEN,
                           settings={"dispatcher": "http://dispatcher"} if role == "server" else {})
    build = build_source if role == "source" else build_server
    extra = {"start_background": False} if role == "server" else {}
    service = build(config, transport=InProcessTransport(), resolver=fake_resolver(),
                    start_sweeper=False, **extra)
    try:
        document = service.wsdl_for("/admin").decode()
        for operation in ("ListDeadLetters", "RedeliverDeadLetters", "PurgeDeadLetters",
                          "CreateTopic"):
            assert f'name="{operation}"' in document, operation
    finally:
        service.close()


def test_batched_message_ids_are_unique_version_4_uuid_urns():
    import uuid

    from subscription_manager.outbox import new_message_ids
    ids = new_message_ids(5000)
    assert len(set(ids)) == 5000 and new_message_ids(0) == []
    for message_id in ids:
        assert message_id.startswith("urn:uuid:")
        parsed = uuid.UUID(message_id[len("urn:uuid:"):])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == message_id[len("urn:uuid:"):]


def test_the_ids_accept_answers_are_the_rows_ids_after_rows_went(tmp_path):
    """The caller deletes and spills rows by these ids: on either backend they must name
    the rows just written, also after the newest rows were deleted (PostgreSQL's identity
    sequence would have gone on counting) and after a dead letter came back."""
    outbox = Outbox(Store(tmp_path / "o.db"))

    def check(accepted):
        stored = dict(outbox.store.query("SELECT id, message_id FROM eventing_outbox"))
        assert all(stored[a.id] == a.message_id for a in accepted)

    [first] = outbox.accept([("t", "a", b"<e/>", ["s1", "s2", "s3"])])
    check(first)
    with outbox.store.transaction() as conn:
        conn.execute("DELETE FROM eventing_outbox WHERE id >= ?", (first[1].id,))
    [second] = outbox.accept([("t", "a", b"<e/>", ["s4", "s5"])])
    check(second)
    assert [a.id for a in second] == [first[1].id, first[1].id + 1]


def test_an_owner_on_another_machine_is_judged_by_its_lease_alone():
    from subscription_manager.process_owner import MACHINE, owner_alive
    assert owner_alive(process_owner())  # this process
    assert not owner_alive(f"999999999:0@{MACHINE}")  # gone, here
    assert not owner_alive(DEAD)  # an owner named before machines were: local, gone
    assert owner_alive("999999999:0@another-host.1")  # not ours to tell: alive


def test_the_ids_of_several_events_accepted_at_once_name_their_rows(tmp_path):
    """One transaction, several events with subscribers (one without between them): the ids
    given out count on across the events, each naming its own row."""
    outbox = Outbox(Store(tmp_path / "o.db"))
    outbox.accept([("t", "a", b"<e/>", ["s0"])])  # rows before this transaction
    answers = outbox.accept([("t", "a", b"<e1/>", ["s1", "s2"]), ("t", "a", b"<e2/>", []),
                             ("t", "a", b"<e3/>", ["s3", "s4", "s5"])])
    rows = {row["id"]: (row["subscription_id"], row["message_id"]) for row in outbox.store.query(
        "SELECT id, subscription_id, message_id FROM eventing_outbox")}
    accepted = [a for answer in answers for a in answer]
    assert [a.subscription_id for a in accepted] == ["s1", "s2", "s3", "s4", "s5"]
    assert all(rows[a.id] == (a.subscription_id, a.message_id) for a in accepted)
    assert len({a.id for a in accepted}) == 5 and answers[1] == []
