"""HttpTransport's sessions are shared by the requests that follow each other, whichever
thread (or gevent greenlet) makes them: one keep-alive connection serves them all, and the
sessions kept idle are bounded."""
from __future__ import annotations

import threading

from edn.sink import NotificationSink
from wsframework.transport import HttpTransport


def _post_from_new_thread(transport: HttpTransport, url: str, results: list) -> None:
    thread = threading.Thread(target=lambda: results.append(transport.post(url, b"<x/>", "text/xml").status))
    thread.start()
    thread.join(10)


def test_requests_from_one_thread_after_another_reuse_one_session_and_connection():
    with NotificationSink() as sink:
        transport = HttpTransport(timeout=(2.0, 5.0))
        results: list[int] = []
        for _ in range(20):
            _post_from_new_thread(transport, sink.url, results)
        assert results == [202] * 20
        (session,) = transport._idle
        manager = session.adapters["http://"].poolmanager
        (key,) = manager.pools.keys()
        pool = manager.pools[key]
        assert pool.num_connections == 1  # every request went over the first connection
        transport.close()
        assert transport._idle == []


def test_concurrent_requests_keep_at_most_pool_size_idle_sessions():
    with NotificationSink() as sink:
        transport = HttpTransport(timeout=(2.0, 5.0), pool_size=2)
        start = threading.Barrier(6)
        statuses: list[int] = []

        def post():
            start.wait(10)
            statuses.append(transport.post(sink.url, b"<x/>", "text/xml").status)

        threads = [threading.Thread(target=post) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert statuses == [202] * 6
        assert 1 <= len(transport._idle) <= 2
        transport.close()
