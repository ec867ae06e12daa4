"""What a worker keeps per request stays bounded (issue 12, "memory under hostile traffic"):
lxml's per-thread name dictionary is renewed, a cached target refusal does not collect every
request's frames, and a finished thread's (greenlet's) SQLite connection is closed."""
from __future__ import annotations

import copy
import gc
import sqlite3
import threading
import uuid

import pytest
from lxml import etree

from wsframework import xmlparse
from wsframework.store import IDLE_CONNECTIONS, Store, release_connections
from wsframework.urlpolicy import UrlPolicy, UrlRefused


# == lxml's name dictionary ======================================================================

def _fresh_names_document(n: int = 20) -> bytes:
    names = "".join(f"<n{uuid.uuid4().hex[:10]} a{uuid.uuid4().hex[:6]}='1'/>" for _ in range(n))
    return f"<e:root xmlns:e='urn:{uuid.uuid4().hex}'>{names}</e:root>".encode()


def test_the_threads_parser_is_renewed_and_documents_of_old_dictionaries_still_work(monkeypatch):
    monkeypatch.setattr(xmlparse, "_RENEW_PARSES", 5)

    def run(out):
        kept, parsers = [], []
        for _ in range(23):
            kept.append(xmlparse.parse_xml(_fresh_names_document()))
            parser = xmlparse._thread_state_dict()[xmlparse._STATE_KEY].parser
            if parser not in parsers:
                parsers.append(parser)
        # documents from several dictionaries meet: moves, copies, new children, XPath
        first, last = kept[0], kept[-1]
        last.append(first[0])
        last.append(copy.deepcopy(kept[7]))
        first.append(etree.Element("{urn:x}added"))
        found = etree.XPath("count(//*)")(last)
        out.append((len(parsers), etree.tostring(last).count(b"<"), found, first[-1].tag))

    out: list = []
    thread = threading.Thread(target=run, args=(out,))  # a thread of its own: state starts empty
    thread.start()
    thread.join()
    parsers, tags, found, added = out[0]
    assert parsers == 5  # 23 parses, renewed every 5
    assert found == 1 + 20 + 1 + 21 and added == "{urn:x}added"
    gc.collect()


def test_a_thread_renews_after_a_byte_budget_too(monkeypatch):
    monkeypatch.setattr(xmlparse, "_RENEW_BYTES", 2000)
    seen = []
    for _ in range(12):  # about 870 bytes each: a new parser every third parse
        xmlparse.parse_xml(_fresh_names_document(30))
        parser = xmlparse._thread_state_dict()[xmlparse._STATE_KEY].parser
        if parser not in seen:
            seen.append(parser)
    assert len(seen) >= 3


def test_the_parser_still_refuses_what_it_refused():
    with pytest.raises(xmlparse.XmlRejected):
        xmlparse.parse_xml(b"<!DOCTYPE x [<!ENTITY a 'b'>]><x>&a;</x>")
    with pytest.raises(xmlparse.XmlRejected):
        xmlparse.parse_xml(b"<a><b></a>")


# == cached target refusals ======================================================================

def test_a_cached_refusal_is_a_new_exception_each_time():
    def resolver(host, port, *args):
        raise OSError("no such host")

    policy = UrlPolicy(resolver=resolver, cache_ttl=60)
    raised = []
    for _ in range(50):
        try:
            policy.check("http://nowhere.example/n")
        except UrlRefused as refused:
            raised.append(refused)
    assert len({id(e) for e in raised}) == 50
    assert len({e.reason for e in raised}) == 1

    def depth(exc):
        n, tb = 0, exc.__traceback__
        while tb is not None:
            n, tb = n + 1, tb.tb_next
        return n
    # re-raising one cached instance grew its traceback by every caller's frames
    assert depth(raised[-1]) == depth(raised[1])


# == SQLite connections per thread / greenlet =====================================================

@pytest.mark.sqlite_only("SQLite's connection per thread (PostgreSQL's come from a bounded pool)")
def test_a_finished_threads_connection_is_kept_for_the_next_up_to_a_bound_then_closed(tmp_path):
    store = Store(tmp_path / "s.db")
    store.generation("x")  # the creating thread's own connection
    conns, ready = [], threading.Barrier(IDLE_CONNECTIONS + 4)

    def work():
        conns.append(store.connection())
        ready.wait(10)  # all at once: each needs a connection of its own
        store.generation("x")

    threads = [threading.Thread(target=work) for _ in range(IDLE_CONNECTIONS + 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert len({id(c) for c in conns}) == IDLE_CONNECTIONS + 4
    assert len(store._all) == 1 and len(store._idle) == IDLE_CONNECTIONS
    closed = [c for c in conns if c not in store._idle]
    assert len(closed) == 4  # past the bound: closed, not kept
    for conn in closed:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")

    # threads one after another reuse a kept connection instead of opening one each
    reused = []
    for _ in range(20):
        thread = threading.Thread(target=lambda: reused.append(store.connection()))
        thread.start()
        thread.join()
    assert {id(c) for c in reused} <= {id(c) for c in conns}
    assert len(store._idle) == IDLE_CONNECTIONS

    # a thread that left a transaction open gives no connection back
    def leave_open():
        store.connection().execute("BEGIN")

    thread = threading.Thread(target=leave_open)
    thread.start()
    thread.join()
    gc.collect()
    assert len(store._idle) == IDLE_CONNECTIONS - 1
    assert not any(c.in_transaction for c in store._idle)
    assert store.generation("x") == 0
    kept = list(store._idle)
    store.close()
    assert len(store._all) == 0 and len(store._idle) == 0
    for conn in kept:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")


@pytest.mark.sqlite_only("SQLite's connection per thread (PostgreSQL's come from a bounded pool)")
def test_threads_that_live_on_after_a_request_hand_their_connection_back(tmp_path):
    """Like a gevent worker's greenlets of idle keep-alive clients: alive, between requests."""
    store = Store(tmp_path / "s.db")
    store.generation("x")
    answered, leave = threading.Barrier(41), threading.Event()

    def keep_alive_client():
        store.generation("x")  # a request ...
        release_connections()  # ... answered
        answered.wait(10)
        leave.wait(10)  # the client keeps its connection open

    threads = [threading.Thread(target=keep_alive_client) for _ in range(40)]
    for thread in threads:
        thread.start()
    try:
        answered.wait(10)
        assert len(store._all) == 1  # the creating thread's own only
        assert 1 <= len(store._idle) <= IDLE_CONNECTIONS
    finally:
        leave.set()
        for thread in threads:
            thread.join()


@pytest.mark.sqlite_only("SQLite's connection per thread (PostgreSQL's come from a bounded pool)")
def test_the_wsgi_edge_hands_a_requests_connections_back_once_it_is_answered(tmp_path):
    from wsframework.service import Service, ServiceConfig
    from wsframework.transport import InProcessTransport
    from wsframework.wsgi import WsgiApplication

    service = Service(ServiceConfig(base_url="http://edn.example", data_dir=tmp_path,
                                    admin_token="t0ken"), transport=InProcessTransport())
    try:
        application = WsgiApplication(service)
        stores = [s for s in _all_stores() if getattr(s, "path", "").startswith(str(tmp_path))]
        assert stores
        held = []

        def request():
            for store in stores:
                store.generation("x")
            answer = application({"REQUEST_METHOD": "GET", "PATH_INFO": "/health",
                                  "wsgi.input": None}, lambda status, headers: None)
            assert answer
            held.append(sum(getattr(store._local, "holder", None) is not None for store in stores))

        thread = threading.Thread(target=request)
        thread.start()
        thread.join()
        assert held == [0]
    finally:
        service.close()


def _all_stores():
    from wsframework import store as store_module
    return list(store_module._stores)
