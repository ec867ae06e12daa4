"""The gthread worker reads each request whole in its main loop before a thread takes it
(:class:`edn.gunicorn.RequestsBufferedBeforeThreads`): idle, slowloris and slow-body
connections hold no thread; one that never sends a whole request is closed at its deadline."""
from __future__ import annotations

import collections
import selectors
import socket

import pytest
from gunicorn.config import Config
from gunicorn.workers.gthread import TConn

from edn.gunicorn import RequestsBufferedBeforeThreads, request_buffered

HEAD = b"POST /topics/t HTTP/1.1\r\nHost: x\r\nContent-Type: application/soap+xml\r\n"


@pytest.mark.parametrize("data, whole", [
    (b"", False),
    (b"GET /health HTTP/1.1\r\nHost: x\r\n", False),              # head not ended
    (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", True),           # no body
    (HEAD + b"Content-Length: 5\r\n\r\nabc", False),
    (HEAD + b"Content-Length: 5\r\n\r\nabcde", True),
    (HEAD + b"content-length:5\r\n\r\nabcde", True),               # any case, no space
    (HEAD + b"Content-Length: x\r\n\r\n", True),                  # gunicorn refuses it
    (HEAD + b"Content-Length: 65536\r\nExpect: 100-continue\r\n\r\n", True),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", False),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", True),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", True),
    (HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n", False),
    # framing gunicorn refuses goes to it at once, whatever follows
    (HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n<s:E", True),
    (HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", True),
    (HEAD + b"Transfer-Encoding: gzip\r\n\r\nabc", True),
    (HEAD + b"Transfer-Encoding: chunked, gzip\r\n\r\nabc", True),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 2000, False),
])
def test_request_buffered(data, whole):
    assert request_buffered(data) is whole


def test_oversized_heads_and_bodies_go_to_a_thread_as_they_are():
    assert request_buffered(b"GET / HTTP/1.1\r\nX: " + b"a" * 100, limit=64)
    assert request_buffered(HEAD + b"Content-Length: 999999\r\n\r\n" + b"a" * 100, limit=64)


class _ThreadWorkerStub:
    """What the mixin needs of gunicorn's ThreadWorker, without its loop or threads."""

    def __init__(self, keepalive=30):
        self.cfg = Config()
        self.cfg.set("keepalive", keepalive)
        self.poller = selectors.DefaultSelector()
        self.keepalived_conns = collections.deque()
        self.nr_conns = 0
        self.enqueued = []
        self.pending_murdered = 0
        self.alive = True

    def init_process(self):
        pass

    def enqueue_req(self, conn):
        self.enqueued.append(conn)

    def murder_pending(self):
        self.pending_murdered += 1

    def handle(self, conn):
        conn.init()
        return next(conn.parser)


class Worker(RequestsBufferedBeforeThreads, _ThreadWorkerStub):
    pass


@pytest.fixture
def worker():
    w = Worker()
    w.init_process()
    yield w
    w.poller.close()


def _connect(worker):
    ours, theirs = socket.socketpair()
    worker.nr_conns += 1
    conn = TConn(worker.cfg, ours, ("127.0.0.1", 1), ("127.0.0.1", 2))
    worker._edn_wait(conn)
    return conn, theirs


def _pump(worker):
    for key, _ in worker.poller.select(timeout=0.2):
        key.data(key.fileobj)


def test_a_thread_takes_a_connection_only_once_its_request_is_whole(worker):
    conn, client = _connect(worker)
    try:
        client.sendall(HEAD + b"Content-Length: 5\r\n\r\nab")
        _pump(worker)
        assert worker.enqueued == [] and conn.edn_waiting
        client.sendall(b"cde")
        _pump(worker)
        assert worker.enqueued == [conn] and conn.data_ready and not conn.edn_waiting
        request = worker.handle(conn)  # in the thread: the parser reads the buffered bytes
        assert request.path == "/topics/t" and request.body.read() == b"abcde"
    finally:
        client.close()
        conn.close()


def test_a_connection_without_a_whole_request_is_closed_at_its_deadline(worker):
    slow, slow_client = _connect(worker)
    idle, idle_client = _connect(worker)
    try:
        slow_client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")
        _pump(worker)
        worker.murder_pending()
        assert worker.nr_conns == 2 and worker.pending_murdered == 1
        for conn in (slow, idle):
            conn.edn_deadline = 0.0
        worker.murder_pending()
        assert worker.nr_conns == 0 and worker.enqueued == []
        assert slow_client.recv(10) == b"" and idle_client.recv(10) == b""  # closed
        assert not worker._edn_waiting
    finally:
        slow_client.close()
        idle_client.close()


def test_a_peer_that_leaves_without_a_byte_is_forgotten(worker):
    conn, client = _connect(worker)
    client.close()
    _pump(worker)
    _pump(worker)
    assert worker.nr_conns == 0 and worker.enqueued == []


def test_a_peer_that_stops_mid_request_gets_a_thread_to_answer_it(worker):
    # the parser then finds the request truncated and the worker answers a SOAP 400
    conn, client = _connect(worker)
    try:
        client.sendall(b"POST / HTTP/1.1\r\nContent-Length: 50\r\n\r\n<a")
        client.shutdown(socket.SHUT_WR)
        _pump(worker)
        _pump(worker)
        assert worker.enqueued == [conn] and worker.nr_conns == 1
    finally:
        client.close()


def test_kept_alive_connections_buffer_their_next_request_too(worker):
    ours, client = socket.socketpair()
    try:
        conn = TConn(worker.cfg, ours, ("127.0.0.1", 1), ("127.0.0.1", 2))
        worker.nr_conns = 1
        worker.keepalived_conns.append(conn)
        worker.poller.register(ours, selectors.EVENT_READ, None)
        client.sendall(b"GET /health HTTP/1.1\r\n")  # readable, but not whole
        worker.on_client_socket_readable(conn, ours)
        _pump(worker)
        assert worker.enqueued == [] and not worker.keepalived_conns
        client.sendall(b"Host: x\r\n\r\n")
        _pump(worker)
        assert worker.enqueued == [conn]
    finally:
        client.close()
        ours.close()


def test_a_stopping_worker_still_reads_a_request_under_way_then_closes_by_the_linger(worker):
    """A SIGHUP reload or a stop: a request still arriving is answered, not reset; nothing
    waits past the linger, so gunicorn's graceful stop never waits out a 30 s deadline."""
    import time

    from edn.gunicorn import STOP_LINGER_S
    arriving, arriving_client = _connect(worker)
    idle, idle_client = _connect(worker)
    try:
        arriving_client.sendall(HEAD + b"Content-Length: 5\r\n\r\nab")
        _pump(worker)
        worker.alive = False
        before = time.monotonic()
        worker.murder_pending()
        assert worker.nr_conns == 2  # neither closed at once
        for conn in (arriving, idle):
            assert conn.edn_deadline <= time.monotonic() + STOP_LINGER_S
            assert conn.edn_deadline >= before + STOP_LINGER_S - 0.5
        arriving_client.sendall(b"cde")
        _pump(worker)
        assert worker.enqueued == [arriving]  # a thread answers it
        idle.edn_deadline = 0.0  # the linger is over
        worker.murder_pending()
        assert worker.nr_conns == 1 and idle_client.recv(10) == b""
    finally:
        arriving_client.close()
        idle_client.close()
