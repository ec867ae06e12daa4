"""TCP options for every connection the framework opens or accepts.

**A cap on the retransmission backoff** (Linux ``TCP_RTO_MAX_MS``, kernel 6.15 and later).
When a segment is lost, TCP waits one retransmission timeout (RTO) before sending it again and
doubles the RTO at every further loss of it, up to 120 s by default. On a lossy link (the
fault campaign's 30% loss) a connection's RTO climbs to several seconds, and after the link
recovers, every request queued on that connection waits out the rest of that backoff: the
p99 from publication to notification of what was published in the 2 s after such a heal was
3.3 s; with the cap on the roles' and the sinks' sockets, 0.6 s (the lab: 20 ms links, 200
subscriptions, 20 events/s). A cap bounds how long a connection stays silent after its path
is back; the congestion window still shrinks on loss. The cap bounds the RTO itself too, not
only its backoff: on a path whose round trip nears a second (a satellite hop) segments would
be sent again needlessly, so raise it there (``--tcp-rto-max-ms``) or set 0.

The option is set on each connecting socket and on each listening socket (an accepted
connection inherits it from its listener). Where the kernel lacks it, nothing is set and
:func:`rto_cap_supported` says so; ``edn serve --tcp-rto-max-ms 0`` keeps the kernel's
default everywhere in that process.
"""
from __future__ import annotations

import errno
import socket
import sys

__all__ = ["DEFAULT_RTO_MAX_MS", "MIN_RTO_MAX_MS", "set_rto_max_ms", "rto_max_ms",
           "rto_cap_supported", "cap_retransmit_backoff", "client_socket_options", "connect"]

# linux/tcp.h; the Python socket module does not name it yet
_TCP_RTO_MAX_MS = getattr(socket, "TCP_RTO_MAX_MS", 44)
DEFAULT_RTO_MAX_MS = 1000
MIN_RTO_MAX_MS = 1000  # the kernel refuses less
_MAX_RTO_MAX_MS = 120_000  # and more

_configured_ms = DEFAULT_RTO_MAX_MS
_supported: bool | None = None


def set_rto_max_ms(value: int) -> None:
    """The cap this process puts on every TCP connection it opens or accepts from now on;
    0 keeps the kernel's default. Out of the kernel's range is a ValueError."""
    global _configured_ms
    if value != 0 and not MIN_RTO_MAX_MS <= value <= _MAX_RTO_MAX_MS:
        raise ValueError(f"the TCP retransmission cap must be 0 (the kernel's default) or "
                         f"{MIN_RTO_MAX_MS}-{_MAX_RTO_MAX_MS} ms, not {value}")
    _configured_ms = value


def rto_max_ms() -> int:
    return _configured_ms


def rto_cap_supported() -> bool:
    """Whether this kernel takes ``TCP_RTO_MAX_MS`` (probed once, on a socket never connected)."""
    global _supported
    if _supported is None:
        _supported = False
        if sys.platform.startswith("linux"):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                probe.setsockopt(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS, DEFAULT_RTO_MAX_MS)
                _supported = True
            except OSError as exc:
                if exc.errno not in (errno.ENOPROTOOPT, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
            finally:
                probe.close()
    return _supported


def cap_retransmit_backoff(sock) -> bool:
    """Put this process's cap on ``sock`` (a TCP socket, connecting or listening); whether
    it was set."""
    if _configured_ms == 0 or not rto_cap_supported():
        return False
    sock.setsockopt(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS, _configured_ms)
    return True


def client_socket_options() -> list[tuple[int, int, int]]:
    """The cap as urllib3 ``socket_options`` entries (empty where it is not set)."""
    if _configured_ms == 0 or not rto_cap_supported():
        return []
    return [(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS, _configured_ms)]


def connect(address: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to ``address`` (each of its addresses in turn), with TCP_NODELAY and
    the cap set before the handshake, so a lost SYN is retried within the cap too."""
    last_error: OSError | None = None
    # looked up at call time: gevent patches the socket module after the fork
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(address, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cap_retransmit_backoff(sock)
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
    raise last_error or OSError(f"no address for {address}")
