"""The range-aggregate table service (subscription_manager.stateful.table_service) and its role
(table_role), in process: updates through the table's topic, durability across a reopen, the
outbox sent in order and kept on failure, queries, refusals of bad updates with a Sender
fault, one owner of a store at a time, and the role's settings."""

from types import SimpleNamespace

import pytest
from lxml import etree

from matchers.range_aggregate import read_change
from subscription_manager.stateful.table_role import TableSettings, build_table
from subscription_manager.stateful.table_service import (
    InvalidTableUpdate, TableService, TableStore, TableStoreBusy, delete, parse_update, put,
    query)
from matchers.vocabulary import RANGE_AGGREGATE
from wsframework.addressing import WsaVersion, request_headers
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import Service, ServiceConfig
from wsframework.settings import SettingsError
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.xmlparse import DEFAULT_LIMITS

BASE = "http://table.test"
FIGURE_1 = {"t1": (100, 3), "t2": (20, 2), "t3": (30, 8), "t4": (40, 12), "t5": (50, 5),
            "t6": (70, 6), "t7": (70, 11)}


class FakePublisher:
    def __init__(self):
        self.sent, self.fail = [], False

    def publish(self, topic, event):
        self.send_batch(topic, [event])

    def send_batch(self, topic, events):
        if self.fail:
            raise ConnectionError("root down")
        self.sent.extend((topic, read_change(e)) for e in events)

    def close(self):
        pass


def open_table(tmp_path):
    return TableStore(tmp_path / "table.db", "stocks", "per", "risk", 0, 100)


@pytest.fixture
def running(tmp_path):
    service = Service(ServiceConfig(BASE, tmp_path / "svc", "token"), topic_admin=False)
    publisher = FakePublisher()
    table_service = TableService(service, open_table(tmp_path), publisher, "stocks-feed",
                                 retry_seconds=3600)
    yield service, table_service, publisher
    service.close()


def send(service, element):
    headers = request_headers(WsaVersion.WSA10, f"{BASE}/topics/stocks", PUBLISH_ACTION)
    return service.handle_request(build_envelope(SoapVersion.SOAP12, element, headers),
                                  path="/topics/stocks", content_type=SoapVersion.SOAP12.content_type)


def test_updates_through_the_topic_publish_figure_1s_changes(running):
    service, table_service, publisher = running
    for key, (x, y) in FIGURE_1.items():
        assert send(service, put(key, x, y)).status == 202
    publisher.sent.clear()
    assert send(service, put("t5", 50, 9)).status == 202
    seq = table_service.table.seq
    assert [(topic, change) for topic, change in publisher.sent if change[2] == "MIN"] == [
        ("stocks-feed", ("stocks", seq, "MIN", 9.0)), ("stocks-feed", ("stocks", seq, "MIN", 8.0)),
        ("stocks-feed", ("stocks", seq, "MIN", 6.0))]
    assert all(change[1] == seq for _, change in publisher.sent)
    outcome = send(service, query("MIN", 25, 60))
    answer = parse_envelope(outcome.body, DEFAULT_LIMITS).body
    assert answer.get("seq") == str(seq)
    assert answer.findtext(f"{{{RANGE_AGGREGATE}}}Result") == "8.0"
    empty = parse_envelope(send(service, query("MAX", 0, 1)).body,
                           DEFAULT_LIMITS).body
    assert empty.find(f"{{{RANGE_AGGREGATE}}}Result") is None


def test_the_table_and_its_outbox_survive_a_reopen(tmp_path):
    table = open_table(tmp_path)
    for key, (x, y) in FIGURE_1.items():
        table.apply(parse_update(put(key, x, y)))
    table.apply(parse_update(delete("t6")))
    waiting = [(seq, part) for seq, part, _ in table.pending(1000)]
    table.close()
    again = open_table(tmp_path)
    assert len(again) == 6 and again.seq == 8
    assert [(seq, part) for seq, part, _ in again.pending(1000)] == waiting
    assert again.result("MIN", 60, 95) == (8, 11.0) and again.result("MIN", 60, 100) == (8, 3.0)
    assert again.result("MAX", 0, 60) == (8, 12.0)
    again.close()
    with pytest.raises(ValueError):
        TableStore(tmp_path / "table.db", "stocks", "per", "beta", 0, 100)


def test_a_failed_send_keeps_the_changes_for_the_next_flush(running):
    service, table_service, publisher = running
    publisher.fail = True
    assert send(service, put("a", 10, 5)).status == 202   # durable though the feed is down
    assert publisher.sent == [] and len(table_service.table.pending(10)) == 2   # MIN and MAX
    publisher.fail = False
    assert table_service.flush() == 2
    assert [change[2:] for _, change in publisher.sent] == [("MIN", 5.0), ("MAX", 5.0)]
    assert table_service.table.pending(10) == []


def test_a_closed_service_sends_nothing_more(running, tmp_path):
    # After the worker's graceful stop closed it, a late flush (the retry loop, an update in
    # flight) touches neither the closed store nor the network; the changes wait in the store.
    service, table_service, publisher = running
    publisher.fail = True
    assert send(service, put("a", 10, 5)).status == 202
    publisher.fail = False
    service.close()
    assert table_service.flush() == 0 and publisher.sent == []
    again = open_table(tmp_path)
    assert [read_change(e)[2:] for _, _, e in again.pending(10)] == [("MIN", 5.0), ("MAX", 5.0)]
    again.close()


@pytest.mark.parametrize("element", [
    etree.Element("other"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="k", x="1"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="k", x="1", y="inf"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="k", x="1e999", y="1"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="k", x="1", y="1" * 65),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="", x="1", y="1"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Put", key="k" * 201, x="1", y="1"),
    etree.Element(f"{{{RANGE_AGGREGATE}}}Delete"),
])
def test_malformed_updates_are_refused(element):
    with pytest.raises(InvalidTableUpdate):
        parse_update(element)


@pytest.mark.parametrize("element", [put("k", 101, 1), put("t4", 41, 1), query("AVG", 1, 2),
                                     query("MIN", 5, 1), etree.Element("junk")])
def test_bad_updates_get_a_sender_fault_and_change_nothing(running, element):
    service, table_service, publisher = running
    send(service, put("t4", 40, 12))
    before = table_service.table.seq
    outcome = send(service, element)
    fault = parse_envelope(outcome.body, DEFAULT_LIMITS).body
    assert outcome.status == 400 and "Sender" in etree.tostring(fault).decode()
    assert table_service.table.seq == before
    assert table_service.table.result("MIN", 0, 100) == (before, 12.0)


def test_the_table_is_bounded(tmp_path):
    table = TableStore(tmp_path / "small.db", "stocks", "per", "risk", 0, 100, max_tuples=2)
    table.apply(parse_update(put("a", 1, 1)))
    table.apply(parse_update(put("b", 2, 2)))
    with pytest.raises(InvalidTableUpdate, match="most tuples"):
        table.apply(parse_update(put("c", 3, 3)))
    table.apply(parse_update(put("a", 1, 5)))      # updates still go in ...
    table.apply(parse_update(delete("b")))
    table.apply(parse_update(put("c", 3, 3)))      # ... and a delete makes room
    assert len(table) == 2 and table.result("MIN", 0, 100) == (table.seq, 3.0)


def test_one_process_owns_the_store_until_it_closes(tmp_path):
    # flock belongs to an open file: a second open in this process stands for a second worker
    first = open_table(tmp_path)
    first.apply(parse_update(put("a", 1, 1)))
    with pytest.raises(TableStoreBusy, match="another process"):
        open_table(tmp_path)
    with pytest.raises(TableStoreBusy):   # waiting a bounded time does not help a live owner
        TableStore(tmp_path / "table.db", "stocks", "per", "risk", 0, 100, owner_wait=0.2)
    assert first.apply(parse_update(put("b", 2, 0))) == 2   # the owner is undisturbed
    first.close()
    again = open_table(tmp_path)
    assert again.seq == 2 and again.result("MIN", 0, 100) == (2, 0.0)
    again.close()


def test_a_new_owner_waits_for_the_old_one_to_go(tmp_path, monkeypatch):
    # A restarted worker may start while its predecessor is still exiting: it waits (here the
    # predecessor goes during the first pause of the wait) instead of failing to boot.
    import time as real_time

    from subscription_manager.stateful import table_service
    old = open_table(tmp_path)
    old.apply(parse_update(put("a", 1, 7)))
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        old.close()
    monkeypatch.setattr(table_service, "time", SimpleNamespace(monotonic=real_time.monotonic,
                                                              sleep=pause))
    new = TableStore(tmp_path / "table.db", "stocks", "per", "risk", 0, 100, owner_wait=30)
    assert len(pauses) == 1 and new.result("MIN", 0, 100) == (1, 7.0)
    new.close()


def test_a_refused_table_releases_its_store(tmp_path):
    open_table(tmp_path).close()
    with pytest.raises(ValueError, match="holds table"):
        TableStore(tmp_path / "table.db", "other", "per", "risk", 0, 100)
    open_table(tmp_path).close()   # the refusal did not keep the lock


ROLE_SETTINGS = {"table": "stocks", "value": "per", "over": "risk", "low": "0", "high": "100",
                 "dispatcher": "http://root.test", "allow_private": []}


def role_config(tmp_path, **settings):
    return ServiceConfig(BASE, tmp_path / "role", "token", role="table",
                         settings={**ROLE_SETTINGS, **settings})


def test_the_table_role_serves_the_tables_topic(tmp_path):
    publisher = FakePublisher()
    service = build_table(role_config(tmp_path, feed="ticks", retry_seconds="3600"),
                          publisher=publisher, owner_wait=0)
    try:
        assert send(service, put("t4", 40, 12)).status == 202
        assert [(topic, change[2:]) for topic, change in publisher.sent] == [
            ("ticks", ("MIN", 12.0)), ("ticks", ("MAX", 12.0))]
        with pytest.raises(TableStoreBusy):   # a second worker on the same data directory
            build_table(role_config(tmp_path), publisher=FakePublisher(), owner_wait=0)
        assert send(service, put("t5", 50, 5)).status == 202   # the first one still serves
    finally:
        service.close()
    again = build_table(role_config(tmp_path), publisher=FakePublisher(), owner_wait=0)
    try:
        answer = parse_envelope(send(again, query("MIN", 0, 100)).body, DEFAULT_LIMITS).body
        assert (answer.get("seq"), answer.findtext(f"{{{RANGE_AGGREGATE}}}Result")) == (
            "2", "5.0")
    finally:
        again.close()


def test_the_table_roles_default_feed_and_dispatchers(tmp_path):
    settings = TableSettings.from_mapping({**ROLE_SETTINGS,
                                           "dispatcher": ["http://a.test/", "http://b.test"]})
    assert settings.feed_topic == "stocks-feed"
    assert settings.dispatcher == ("http://a.test", "http://b.test")
    assert build_table.settings == (TableSettings,) and build_table.single_worker


@pytest.mark.parametrize("change, reason", [
    ({"table": None}, "needs table"),
    ({"low": None, "high": None}, "needs low, high"),
    ({"dispatcher": ""}, "dispatcher"),
    ({"dispatcher": "ftp://root"}, "http"),
    ({"table": "a/b"}, "table is 1 to 100"),
    ({"feed": "../x"}, "feed is 1 to 100"),
    ({"low": "5", "high": "5"}, "low < high"),
    ({"high": "inf"}, "low < high"),
    ({"max_tuples": "0"}, "max_tuples"),
    ({"retry_seconds": "0"}, "retry_seconds"),
    ({"batch_max": "4097"}, "at most 4096"),
    ({"colour": "red"}, "unknown setting"),
])
def test_the_table_role_refuses_bad_settings(tmp_path, change, reason):
    settings = {k: v for k, v in {**ROLE_SETTINGS, **change}.items() if v is not None}
    with pytest.raises(SettingsError, match=reason):
        TableSettings.from_mapping(settings)
    with pytest.raises(SettingsError):
        build_table(ServiceConfig(BASE, tmp_path, "token", settings=settings),
                    publisher=FakePublisher())
