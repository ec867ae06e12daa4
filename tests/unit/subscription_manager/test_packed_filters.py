"""A subscription's range filter is stored with its compiled rectangles, and a start loads
those instead of compiling the text; rows without a usable form (damaged, or from before the
column) are compiled, and every start answers as the first did. In process."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from matchers.ranges import RANGES_DIALECT
from matchers.vocabulary import MATCHER_RTREE_ENGINE
from route_manager.workloads.grid_xml import range_filter, schema_element
from subscription_manager.bulk_subscribe import SubscribeMany, parse_results, requests_element
from subscription_manager.client import EventingClient, subscribe_body
from tests.support.compiles import count_compiles
from tests.support.edn import (TOPIC, SingleSource, expected_notifications, random_boxes,
                               random_points)
from tests.support.eventing import SINK, TOKEN
from wsframework.admin import AdminClient

D = 3
N = 40
KEEP = {"keep_subscriptions_on_shutdown": "true"}  # a restart keeps them, as a server does


@pytest.fixture
def compiles(monkeypatch):
    return count_compiles(monkeypatch)


def _restart(source: SingleSource, while_stopped=None) -> None:
    """Stop ``source`` and start it again on the same data directory; in between,
    ``while_stopped(sqlite3 connection to its store)`` when given."""
    path = source.service.subscription_manager.store.store.path
    source.service.close()
    if while_stopped is not None:
        conn = sqlite3.connect(path)
        while_stopped(conn)
        conn.commit()
        conn.close()
    source.start()


@pytest.fixture
def source(tmp_path):
    made = SingleSource(tmp_path, D, KEEP)
    lo, hi = random_boxes(N, D, seed=3)
    for i in range(N):
        made.subscribe(lo[i], hi[i], i)
    made.boxes = lo, hi
    yield made
    made.close()


def _check_answers(source: SingleSource, first_id: int) -> None:
    points = random_points(60, D, seed=first_id)
    source.sink.messages.clear()
    source.publish(points, first_id=first_id)
    expected = expected_notifications(*source.boxes, points, first_id=first_id)
    assert expected  # the events meet some subscriptions
    assert source.received() == expected


def test_a_start_loads_the_stored_rectangles_without_compiling(source, compiles):
    stored = source.service.subscription_manager.store.store.query(
        "SELECT filter_packed FROM eventing_subscriptions")
    assert len(stored) == N and all(row[0] for row in stored)
    _restart(source)
    assert compiles == []
    _check_answers(source, first_id=1000)


@pytest.mark.sqlite_only("damages the rows through a SQLite connection of its own")
def test_rows_without_a_usable_form_are_compiled_at_a_start(source, compiles):
    def damage(conn):
        first, second = [row[0] for row in conn.execute(
            "SELECT id FROM eventing_subscriptions ORDER BY seq LIMIT 2")]
        conn.execute("UPDATE eventing_subscriptions SET filter_packed = X'00' WHERE id = ?",
                     (first,))
        conn.execute("UPDATE eventing_subscriptions SET filter_packed = NULL WHERE id = ?",
                     (second,))
    _restart(source, damage)
    assert len(compiles) == 2
    _check_answers(source, first_id=2000)


@pytest.mark.sqlite_only("a SQLite file from before the column existed")
def test_a_table_from_before_the_column_is_migrated_and_compiled_at_a_start(source, compiles):
    def drop_the_column(conn):
        conn.execute("ALTER TABLE eventing_subscriptions DROP COLUMN filter_packed")
        conn.execute("UPDATE schema_versions SET version = version - 1 "
                     "WHERE component = 'subscriptions'")
    _restart(source, drop_the_column)
    assert len(compiles) == N
    _check_answers(source, first_id=3000)
    source.subscribe(np.zeros(D), np.full(D, 10.0), N)  # the migrated table takes new forms
    assert source.service.subscription_manager.store.store.query(
        "SELECT COUNT(*) FROM eventing_subscriptions WHERE filter_packed IS NOT NULL")[0][0] == 1


def test_a_bulk_subscribe_stores_the_rectangles_too(tmp_path, compiles):
    source = SingleSource(tmp_path, D, KEEP)
    try:
        lo, hi = random_boxes(N, D, seed=4)
        admin = AdminClient("http://single.test", TOKEN, transport=source.transport)
        answers = parse_results(admin.call(SubscribeMany(Topic=TOPIC, Requests=requests_element(
            "2011", [subscribe_body("2011", f"{SINK}/n/{i}", expires="PT1H",
                                    filter=range_filter(lo[i], hi[i]), dialect=RANGES_DIALECT)
                     for i in range(N)]))).Results)
        assert len(answers) == N
        source.boxes = lo, hi
        compiles.clear()
        _restart(source)
        assert compiles == []
        _check_answers(source, first_id=4000)
    finally:
        source.close()


def test_a_start_gives_each_topic_the_forms_of_its_own_subscriptions(tmp_path, compiles):
    """Rows of two topics, interleaved in the store: each topic's engine gets its own rows'
    rectangles (the forms are read in one sequence and chosen per topic)."""
    source = SingleSource(tmp_path, D, KEEP)
    try:
        AdminClient("http://single.test", TOKEN, transport=source.transport).create_topic(
            "other", MATCHER_RTREE_ENGINE, schema_element(D))
        lo, hi = random_boxes(N, D, seed=5)
        client = EventingClient("2011", transport=source.transport)
        topics = [TOPIC if i % 3 else "other" for i in range(N)]
        for i, topic in enumerate(topics):
            client.subscribe(f"http://single.test/topics/{topic}", f"{SINK}/n/{i}",
                             filter=range_filter(lo[i], hi[i]), dialect=RANGES_DIALECT,
                             expires="PT1H")
        view = source.service.subscription_manager.view
        before = {sid: view.packed_filter(sid) for sid in view.subscriptions}
        assert len(before) == N and all(before.values())
        compiles.clear()
        _restart(source)
        view = source.service.subscription_manager.view
        assert compiles == []
        assert {sid: view.packed_filter(sid) for sid in view.subscriptions} == before
        held = {topic: set(view._matcher_for(view.topics.get(topic)).filter_ids())
                for topic in (TOPIC, "other")}
        for sid, subscription in view.subscriptions.items():
            assert sid in held[subscription.topic]
        assert sorted(map(len, held.values())) == sorted([topics.count("other"),
                                                          topics.count(TOPIC)])
    finally:
        source.close()
