"""The dispatcher's durable log (route_manager.forwarding.log): every copy is committed before
the publisher's answer, a server's position advances only on a 2xx of its batch, a dispatcher
re-created on the same data dir resends the unacknowledged copies with the same seqs, and the
bounds refuse (edn:LogFull) or drop the oldest, counted."""
import threading

import pytest

from route_manager.dispatcher import build_dispatcher
from route_manager.protocol import (BATCH_DISPATCHER, BATCH_FIRST_SEQ, EVENT_BATCH,
                                    FAULT_LOG_FULL)
from route_manager.forwarding import EventLog, LogFull, ServerChannel
from tests.unit.route_manager.test_dispatcher import (DISPATCHER, EV, TOKEN, event, register,
                                                       schema, update)
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.exceptions import RECEIVER, SoapFault
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import ServiceConfig
from wsframework.settings import SettingsError
from wsframework.soap import parse_envelope
from wsframework.store import Store
from wsframework.transport import InProcessTransport, TransportError, TransportResponse


class Servers:
    """Fake servers recording every batch (attributes and events); each answers ``status[name]``
    (default 202), or raises when it is in ``down``; ``gate`` holds every request."""

    def __init__(self):
        self.batches: list[tuple[str, str, int, list[float]]] = []
        self.status: dict[str, int] = {}
        self.down: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()
        self.cond = threading.Condition()
        self.posts = 0

    def endpoint(self, name):
        def handle(url, payload, content_type, action):
            assert self.gate.wait(5)
            with self.cond:
                self.posts += 1
                self.cond.notify_all()
            if name in self.down:
                raise TransportError("connection refused")
            body = parse_envelope(payload).body
            assert body.tag == EVENT_BATCH
            status = self.status.get(name, 202)
            if status < 300:
                with self.cond:
                    self.batches.append((name, body.get(BATCH_DISPATCHER),
                                         int(body.get(BATCH_FIRST_SEQ)),
                                         [float(e.findtext(f"{{{EV}}}x")) for e in body]))
                    self.cond.notify_all()
            return TransportResponse(status, None, b"")
        return handle

    def received(self, name):
        """(seq, x) of every event ``name`` acknowledged, in order."""
        return [(first + i, x) for n, _, first, xs in self.batches if n == name
                for i, x in enumerate(xs)]

    def wait_posts(self, count):
        with self.cond:
            assert self.cond.wait_for(lambda: self.posts >= count, 5)


@pytest.fixture
def net(tmp_path):
    transport = InProcessTransport()
    servers = Servers()
    for name in ("s1", "s2"):
        transport.mount(f"http://{name}.test", servers.endpoint(name))
    started = []

    def start(data="d", **settings):
        service = build_dispatcher(ServiceConfig(DISPATCHER, tmp_path / data, TOKEN,
                                                 role="dispatcher", settings=settings),
                                   transport=transport)
        transport.mount(DISPATCHER, service)
        started.append(service)
        return service

    yield transport, servers, start
    for service in started:
        service.close()


def setup_routes(service, transport):
    admin = AdminClient(DISPATCHER, TOKEN, transport=transport)
    admin.create_topic("grid", None, schema())
    register(admin, "s1"), register(admin, "s2")
    update(admin, "s1", 1, [0, 0], [5, 5])
    update(admin, "s2", 1, [4, 4], [10, 10])


def publish(transport, xs):
    client = SoapClient(transport)
    for x in xs:
        client.send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, event(x, x))


def stored_copies(store):
    """(server, seq) of the copies a restart would resend: named by a stored event, above
    the stored position of their server."""
    acked = {r[0]: r[1] for r in store.query("SELECT server, acked FROM edn_log_position")}
    out = []
    for (copies,) in store.query("SELECT copies FROM edn_log_event ORDER BY id"):
        for part in copies.split():
            server, _, seq = part.rpartition(":")
            if int(seq) > acked.get(server, 0):
                out.append((server, int(seq)))
    return out


def logged(service):
    return stored_copies(service.store)


@pytest.mark.parametrize("group", ["true", "false"])
def test_copies_are_logged_before_the_reply_and_deleted_on_2xx(net, group):
    transport, servers, start = net
    service = start(log_group_commit=group)
    assert service.dispatcher.event_log.group_commit == (group == "true")
    setup_routes(service, transport)
    servers.gate.clear()  # no server answers: whatever is durable was written before the reply
    publish(transport, [1, 4.5, 9])
    assert logged(service) == [("s1", 1), ("s1", 2), ("s2", 1), ("s2", 2)]
    servers.gate.set()
    assert service.dispatcher.forwarder.drain(5)
    assert service.dispatcher.event_log.events == 0  # delivered; the rows go with the next write
    service.dispatcher.event_log.flush_acks()
    assert logged(service) == []
    assert servers.received("s1") == [(1, 1.0), (2, 4.5)]
    assert servers.received("s2") == [(1, 4.5), (2, 9.0)]
    ids = {d for _, d, _, _ in servers.batches}
    assert len(ids) == 1 and ids == {service.dispatcher.event_log.dispatcher_id}
    stats = service.dispatcher.stats()
    assert stats["log.events"] == 0 and stats["server.s1.lag"] == 0 and stats["log.on"] == 1


def test_position_advances_only_on_2xx(net):
    transport, servers, start = net
    service = start()
    setup_routes(service, transport)
    servers.status["s1"] = 500
    publish(transport, [1, 2])
    servers.wait_posts(2)  # s1 answered 500 at least once (s1 and s2 posted)
    assert [row for row in logged(service) if row[0] == "s1"] == [("s1", 1), ("s1", 2)]
    assert service.dispatcher.stats()["server.s1.lag"] == 2
    servers.status["s1"] = 202
    assert service.dispatcher.forwarder.drain(5)
    service.dispatcher.event_log.flush_acks()
    assert logged(service) == [] and servers.received("s1") == [(1, 1.0), (2, 2.0)]


def test_a_new_dispatcher_on_the_same_store_resends_unacknowledged_copies_with_their_seqs(net):
    transport, servers, start = net
    service = start()
    setup_routes(service, transport)
    servers.down.add("s1")
    publish(transport, [1, 2, 3])
    dispatcher_id = service.dispatcher.event_log.dispatcher_id
    assert service.dispatcher.forwarder.channels["s2"].drain(5)
    # The crash: the process ends without closing; its channels keep failing meanwhile.
    crashed = Store(service.store.path)
    assert stored_copies(crashed) \
        == [("s1", 1), ("s1", 2), ("s1", 3)]
    old_channel = service.dispatcher.forwarder.channels["s1"]
    service.dispatcher.forwarder.remove("s1")  # the old process sends nothing more:
    old_channel.close(timeout=5)  # (its sender may be mid-retry: dead processes do not retry)
    service.dispatcher.event_log.close()  # and its end releases the log
    servers.down.clear()
    restarted = start()
    assert restarted.dispatcher.event_log.dispatcher_id == dispatcher_id
    assert restarted.dispatcher.forwarder.drain(5)
    assert servers.received("s1") == [(1, 1.0), (2, 2.0), (3, 3.0)]
    publish(transport, [4])
    assert restarted.dispatcher.forwarder.drain(5)
    assert servers.received("s1")[-1] == (4, 4.0)  # seqs continue after the replayed ones
    restarted.dispatcher.event_log.flush_acks()
    assert logged(restarted) == []


def test_an_empty_data_dir_is_another_dispatcher(net):
    transport, servers, start = net
    first, second = start("a"), start("b")
    assert first.dispatcher.event_log.dispatcher_id != second.dispatcher.event_log.dispatcher_id


def test_a_full_log_refuses_with_log_full_and_logs_nothing(net):
    transport, servers, start = net
    service = start(log_max_events="3")
    setup_routes(service, transport)
    servers.gate.clear()
    publish(transport, [1, 4.5])  # 3 copies
    with pytest.raises(SoapFault) as info:
        publish(transport, [2])
    assert info.value.code == RECEIVER and info.value.subcode == FAULT_LOG_FULL
    assert len(logged(service)) == 3 and service.dispatcher.stats()["log.refused"] == 1
    servers.gate.set()
    assert service.dispatcher.forwarder.drain(5)
    publish(transport, [2])  # room again once delivered
    assert service.dispatcher.forwarder.drain(5)
    assert [x for _, x in servers.received("s1")] == [1.0, 4.5, 2.0]


def test_a_second_process_does_not_take_a_log_held_by_another(tmp_path):
    first = EventLog(Store(tmp_path / "s.db"))
    with pytest.raises(RuntimeError, match="another process holds the log.*a lane of its own"):
        EventLog(Store(tmp_path / "s.db"))
    first.close()
    EventLog(Store(tmp_path / "s.db")).close()


def test_bytes_and_age_bounds(tmp_path):
    now = [1000.0]
    log = EventLog(Store(tmp_path / "s.db"), max_bytes=10, max_age=60, clock=lambda: now[0])
    log.append([("t", b"12345", ["s1"])])
    with pytest.raises(LogFull, match="log_max_bytes"):
        log.append([("t", b"123456", ["s1"])])
    log.acknowledge("s1", 1, 1, 5)
    assert log.append([("t", b"1", ["s1"])])[0].seq == 2
    assert log.figures()["log.bytes"] == 1


def test_a_server_that_never_comes_back_does_not_stop_publication_its_old_copies_expire(tmp_path):
    now = [1000.0]
    log = EventLog(Store(tmp_path / "s.db"), max_age=60, clock=lambda: now[0])
    discarded = []
    log.on_drop = lambda rows: discarded.extend((server, seq) for _, server, seq, _ in rows)
    log.append([("t", b"a", ["live", "dead"]), ("t", b"b", ["live", "dead"])])
    log.acknowledge("live", 2, 2, 2)
    now[0] += 61  # "dead" never acknowledged: its copies are older than log_max_age
    [fresh] = [c for c in log.append([("t", b"c", ["live", "dead"])]) if c.server == "dead"]
    assert fresh.seq == 3  # accepted, never refused: age is no reason to stop the network
    assert discarded == [("dead", 1), ("dead", 2)]
    figures = log.figures()
    assert figures["log.expired"] == 2 and figures["log.refused"] == 0
    assert log.copies() == [("live", 3), ("dead", 3)]
    log.close()
    # the expiry is durable: a restarted log does not bring the expired copies back
    again = EventLog(Store(tmp_path / "s.db"), max_age=60, clock=lambda: now[0])
    assert again.copies() == [("live", 3), ("dead", 3)]


def test_drop_oldest_makes_room_counted_and_leaves_the_channel(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store, max_events=2, policy="drop-oldest")

    class Held:
        def post(self, *args):
            raise TransportError("down")

    channel = ServerChannel("s1", "http://s1", Held(), event_log=log, backoff=(5, 5))
    log.on_drop = lambda rows: channel.discard_through(max(seq for _, _, seq, _ in rows))
    for n in range(4):
        log.append([("t", b"<e>%d</e>" % n, ["s1"])],
                   lambda per_server: channel.offer_logged(per_server["s1"]))
    assert [seq for _, seq in stored_copies(store)] == [3, 4]
    assert log.dropped == 2 and channel.stats.dropped >= 1
    channel.close(timeout=0)


@pytest.mark.parametrize("settings", [{"log_max_events": "0"}, {"log_max_bytes": "-1"},
                                      {"log_max_age": "0"}, {"log_full": "block"},
                                      {"durable_log": "maybe"}])
def test_bad_log_settings_are_refused(net, settings):
    transport, servers, start = net
    with pytest.raises(SettingsError):
        start(**settings)


def test_without_the_log_batches_carry_no_seq_and_nothing_is_written(net):
    transport, servers, start = net
    service = start(durable_log="false")
    setup_routes(service, transport)
    seen = []
    transport.mount("http://s1.test", lambda url, payload, ct, action: (
        seen.append(parse_envelope(payload).body.get(BATCH_FIRST_SEQ)),
        TransportResponse(202, None, b""))[1])
    publish(transport, [1])
    assert service.dispatcher.forwarder.drain(5)
    assert seen == [None] and service.dispatcher.event_log is None
    assert service.dispatcher.stats()["log.on"] == 0


def _first_then_five_behind_it(log, release, first_append, other_append) -> None:
    """``first_append`` in a thread until it commits (its offer waits for ``release``), then
    five ``other_append(n)`` threads queued behind it; released, all end."""
    first = threading.Thread(target=first_append)
    first.start()
    with log._group:
        assert log._group.wait_for(lambda: log._committing, 5)
    others = [threading.Thread(target=other_append, args=(n,)) for n in range(5)]
    for thread in others:
        thread.start()
    with log._group:
        assert log._group.wait_for(lambda: len(log._pending) == 5, 5)
    release.set()
    for thread in [first] + others:
        thread.join(5)


def test_concurrent_appends_are_committed_together_with_consecutive_seqs(tmp_path):
    log = EventLog(Store(tmp_path / "s.db"))
    release = threading.Event()
    offered = []

    def offer(per_server):
        for c in [c for copies in per_server.values() for c in copies]:
            offered.append((c.server, c.seq, c.event))
            if c.event == b"first":
                assert release.wait(5)  # the first committer holds its commit open

    _first_then_five_behind_it(
        log, release, lambda: log.append([("t", b"first", ["s1"])], offer),
        lambda n: log.append([("t", b"%d" % n, ["s1", "s2"])], offer))
    assert log.commits == 2  # the first alone, then the five waiting ones in one transaction
    assert [seq for server, seq, _ in offered if server == "s1"] == list(range(1, 7))
    assert [seq for server, seq, _ in offered if server == "s2"] == list(range(1, 6))
    stored = [(c.server, c.seq, c.event) for server in ("s1", "s2") for c in log.pending(server)]
    assert stored == sorted(offered)
    assert log.store.query("SELECT count(*) FROM edn_log_event")[0][0] == 6  # each event once


@pytest.mark.sqlite_only("SQLite's group fdatasync (PostgreSQL's commit returns flushed)")
def test_every_caller_of_a_group_commit_waits_for_its_sync_before_answering(tmp_path):
    """The five callers committed by another's transaction owe that commit's sync: each
    thread's make_changes_durable syncs (or finds synced) the commit holding its events."""
    from wsframework.store import make_changes_durable
    store = Store(tmp_path / "s.db", durability="full")
    log = EventLog(store)
    release = threading.Event()
    owed = {}

    def offer(per_server):
        if any(c.event == b"first" for copies in per_server.values() for c in copies):
            assert release.wait(5)

    def append(name, event):
        log.append([("t", event, ["s1"])], offer)
        owed[name] = store.last_commit()
        make_changes_durable()
        owed[name + " after"] = store.last_commit()

    _first_then_five_behind_it(log, release, lambda: append("first", b"first"),
                               lambda n: append(f"t{n}", b"%d" % n))
    assert log.commits == 2
    assert all(owed[f"t{n}"] == owed["t0"] > owed["first"] > 0 for n in range(5))
    assert all(owed[f"{name} after"] == 0 for name in ["first"] + [f"t{n}" for n in range(5)])
    assert store.group_sync._synced >= owed["t0"]


@pytest.mark.sqlite_only("the failure is injected with a SQLite trigger")
def test_a_failed_commit_logs_nothing_and_keeps_the_seqs(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store)
    log.append([("t", b"a", ["s1"])])
    store.executescript("CREATE TRIGGER refuse BEFORE INSERT ON edn_log_event "
                        "BEGIN SELECT RAISE(ABORT, 'disk full'); END;")
    with pytest.raises(Exception, match="disk full"):
        log.append([("t", b"b", ["s1", "s2"])])
    store.executescript("DROP TRIGGER refuse")
    assert log.events == 1 and log.append([("t", b"c", ["s1"])])[0].seq == 2


def test_the_channel_holds_a_window_and_reads_the_rest_back_from_the_log(tmp_path):
    log = EventLog(Store(tmp_path / "s.db"))
    sent, deepest = [], [0]
    gate = threading.Event()

    class Server:
        def post(self, url, payload, content_type, action=None):
            assert gate.wait(5)
            body = parse_envelope(payload).body
            first = int(body.get(BATCH_FIRST_SEQ))
            sent.extend((first + i, e.text) for i, e in enumerate(body))
            return TransportResponse(202, None, b"")

    channel = ServerChannel("s1", "http://s1", Server(), event_log=log, capacity=3, batch_max=2)

    def offer(per_server):
        for c in per_server["s1"]:
            channel.offer_logged([c])
            deepest[0] = max(deepest[0], len(channel._queue))
    for n in range(10):
        log.append([("t", b"<e>%d</e>" % n, ["s1"])], offer)
    assert deepest[0] <= 3 and log.events == 10
    gate.set()
    assert channel.drain(5)
    assert sent == [(n + 1, str(n)) for n in range(10)] and log.events == 0
    channel.close()


def test_acknowledgements_are_written_with_the_next_append_or_when_flushed(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store)
    log.append([("t", b"a", ["s1"]), ("t", b"b", ["s1"]), ("t", b"c", ["s2"])])
    log.acknowledge("s1", 2, 2, 2)
    assert log.events == 1  # counted as delivered at once; their bytes go when written
    assert [c.seq for c in log.pending("s1")] == []  # and never replayed from here on
    rows = lambda: stored_copies(store)
    assert len(rows()) == 3  # not yet written: no transaction of its own
    log.append([("t", b"d", ["s2"])])  # written in this append's transaction
    assert rows() == [("s2", 1), ("s2", 2)]
    assert store.query("SELECT acked FROM edn_log_position WHERE server='s1'")[0][0] == 2
    log.acknowledge("s2", 2, 2, 2)
    log.close()  # closing writes what is pending
    assert rows() == [] and EventLog(store).events == 0


def test_a_lost_acknowledgement_replays_copies_the_server_skips(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store)
    log.append([("t", b"a", ["s1"]), ("t", b"b", ["s1"])])
    log.acknowledge("s1", 2, 2, 2)  # then the process dies before writing it
    log._lockfile.close()
    again = EventLog(store)
    assert [c.seq for c in again.pending("s1")] == [1, 2]  # sent again (at least once) ...
    assert again.append([("t", b"c", ["s1"])])[0].seq == 3  # ... and seqs never repeat


def test_dropping_the_oldest_never_counts_a_delivered_copy_twice(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store, max_events=3, policy="drop-oldest")
    log.append([("t", b"a", ["s1"]), ("t", b"b", ["s1"]), ("t", b"c", ["s1"])])
    log.acknowledge("s1", 1, 1, 1)
    log.append([("t", b"d", ["s1"]), ("t", b"e", ["s1"])])  # no room: drops undelivered 2 and 3
    assert log.dropped == 2  # seq 1 was delivered: written, not dropped
    assert [seq for _, seq in stored_copies(store)] == [4, 5]
    assert log.events == 2 and log.bytes == 2


def test_an_event_is_stored_once_and_goes_with_its_last_copy(tmp_path):
    store = Store(tmp_path / "s.db")
    log = EventLog(store)
    log.append([("t", b"<e/>", ["s1", "s2", "s3"]), ("t", b"<f/>", ["s2"])])
    assert store.query("SELECT count(*) FROM edn_log_event")[0][0] == 2
    assert (log.events, log.bytes) == (4, 8)  # copies, bytes of the events stored
    log.acknowledge("s1", 1, 1, 4)
    log.acknowledge("s2", 2, 2, 8)
    log.flush_acks()
    assert store.query("SELECT count(*) FROM edn_log_event")[0][0] == 1  # <e/> waits for s3
    assert (log.events, log.bytes) == (1, 4)
    assert [(c.server, c.seq, c.event) for c in log.pending("s3")] == [("s3", 1, b"<e/>")]
    log.acknowledge("s3", 1, 1, 4)
    log.flush_acks()
    assert store.query("SELECT count(*) FROM edn_log_event")[0][0] == 0 and log.bytes == 0


@pytest.mark.sqlite_only("an older SQLite layout")
def test_a_log_written_one_row_per_copy_is_moved_to_the_two_tables(tmp_path):
    store = Store(tmp_path / "s.db")
    store.executescript(
        "CREATE TABLE edn_log (id INTEGER PRIMARY KEY, server TEXT NOT NULL, seq INTEGER NOT "
        "NULL, topic TEXT NOT NULL, event BLOB NOT NULL, created REAL NOT NULL, "
        "UNIQUE(server, seq));"
        "INSERT INTO edn_log VALUES (1, 's1', 1, 't', X'3C612F3E', unixepoch());"
        "INSERT INTO edn_log VALUES (2, 's2', 1, 't', X'3C612F3E', unixepoch());")
    log = EventLog(store)
    assert [(c.server, c.seq, c.event) for c in log.pending("s1") + log.pending("s2")] == [
        ("s1", 1, b"<a/>"), ("s2", 1, b"<a/>")]
    assert (log.events, log.bytes) == (2, 8)
    assert log.append([("t", b"<b/>", ["s1"])])[0].seq == 2


@pytest.mark.sqlite_only("an older SQLite layout")
def test_a_log_with_copy_rows_naming_events_is_moved_to_event_rows(tmp_path):
    store = Store(tmp_path / "s.db")
    store.executescript(
        "CREATE TABLE edn_log_event (id INTEGER PRIMARY KEY, topic TEXT NOT NULL, event BLOB "
        "NOT NULL, created REAL NOT NULL);"
        "CREATE TABLE edn_log (id INTEGER PRIMARY KEY, server TEXT NOT NULL, seq INTEGER NOT "
        "NULL, event_id INTEGER NOT NULL, UNIQUE(server, seq));"
        "INSERT INTO edn_log_event VALUES (7, 't', X'3C612F3E', unixepoch());"
        "INSERT INTO edn_log_event VALUES (8, 't', X'3C622F3E', unixepoch());"  # no copy left
        "INSERT INTO edn_log VALUES (1, 's1', 4, 7);"
        "INSERT INTO edn_log VALUES (2, 's2', 9, 7);")
    log = EventLog(store)
    assert log.copies() == [("s1", 4), ("s2", 9)] and (log.events, log.bytes) == (2, 4)
    assert [c.event for c in log.pending("s2")] == [b"<a/>"]
    assert log.append([("t", b"<c/>", ["s1", "s2"])])[0].seq in (5, 10)
