"""Every connection the framework opens or accepts carries the process's cap on TCP's
retransmission backoff: the lean and the requests transports, gunicorn's listeners (each
accepted connection inherits its listener's) and the notification sinks."""
from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from edn.gunicorn import _cap_listeners_backoff
from edn.sink import NotificationSink
from wsframework.transport import HttpTransport, LeanHttpTransport, tcp

pytestmark = pytest.mark.skipif(not tcp.rto_cap_supported(),
                                reason="this kernel has no TCP_RTO_MAX_MS (Linux 6.15+)")

_OPTION = 44  # TCP_RTO_MAX_MS
_KERNEL_DEFAULT_MS = 120_000


def _cap(sock) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, _OPTION)


@pytest.fixture
def cap_2500():
    before = tcp.rto_max_ms()
    tcp.set_rto_max_ms(2500)
    yield
    tcp.set_rto_max_ms(before)


def test_the_lean_transport_and_the_sink_cap_both_ends(cap_2500):
    with NotificationSink() as sink:
        assert _cap(sink.server.socket) == 2500
        transport = LeanHttpTransport(timeout=(2.0, 5.0))
        assert transport.post(sink.url, b"<x/>", "text/xml").status == 202
        (connection,), = transport._idle.values()
        assert _cap(connection.sock) == 2500
        transport.close()


def test_the_requests_transport_caps_its_connections(cap_2500):
    with NotificationSink() as sink:
        transport = HttpTransport(timeout=(2.0, 5.0))
        assert transport.post(sink.url, b"<x/>", "text/xml").status == 202
        (session,) = transport._idle  # the one session the request used, given back
        manager = session.adapters["http://"].poolmanager
        pool = manager.pools[next(iter(manager.pools.keys()))]
        connection = pool.pool.get_nowait()
        assert _cap(connection.sock) == 2500
        assert connection.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)  # urllib3's own kept


def test_gunicorn_listeners_pass_the_cap_to_what_they_accept(cap_2500):
    listener = socket.create_server(("127.0.0.1", 0))
    unix = SimpleNamespace(FAMILY=socket.AF_UNIX, sock=None)  # no TCP option on a Unix socket
    try:
        _cap_listeners_backoff(SimpleNamespace(LISTENERS=[SimpleNamespace(FAMILY=socket.AF_INET, sock=listener),
                                                         unix]))
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                assert _cap(accepted) == 2500
                assert _cap(client) == _KERNEL_DEFAULT_MS  # made here without the framework
    finally:
        listener.close()
