"""Timing the network from this subscription server to its peers: the answer to the admin
message ``MeasureLatency {Target*, Probes?}`` (:mod:`route_manager.protocol`), from which
``edn latency measure`` builds the latency file of distance-aware placement and Kyra.

What is measured: the time a TCP connection to the peer's advertised address takes to be
established (``connect()`` returning: the SYN out, the SYN-ACK back), from this server's
process, ``Probes`` times in a row; the answer is the median in milliseconds. That is one
round trip on the path the server's own forwards take, without the peer's request handling
(its kernel completes the handshake before gunicorn accepts), so a busy peer does not look
far away. The peer's name is resolved once, before the timing.

Hostile by default: only peers this server knows (the names the dispatcher listed, with the
addresses it gave) are probed, never an address from the request; at most
``MAX_LATENCY_TARGETS`` names and ``MAX_LATENCY_PROBES`` connections per name; each
connection gets ``probe_timeout`` seconds and the whole request ``budget`` seconds, after
which the peers not yet measured are answered with an ``Error``. The admin endpoint checks
the credential before this code runs. A peer that cannot be reached is an ``Error`` in the
answer, not a fault: the other peers' figures still come back.
"""
from __future__ import annotations

import socket
import statistics
import time
from typing import Callable

from route_manager.protocol import (FAULT_UNKNOWN_SERVER, MAX_LATENCY_PROBES,
                                    MAX_LATENCY_TARGETS, LatencyInfo, MeasureLatencyResponse)
from wsframework.admission import waiting_on_peer
from wsframework.admin.contracts import FAULT_INVALID_REQUEST
from wsframework.exceptions import sender_fault
from wsframework.urlpolicy import UrlRefused, parse_url

__all__ = ["LatencyProbe", "DEFAULT_PROBES", "PROBE_TIMEOUT", "BUDGET"]

DEFAULT_PROBES = 5
PROBE_TIMEOUT = 2.0  # seconds one connection may take (two SYN retransmissions fit)
BUDGET = 30.0        # seconds one MeasureLatency may take in all


def resolve(host: str, port: int) -> tuple[int, tuple]:
    """(address family, socket address) of the first address ``host`` resolves to."""
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    return family, sockaddr


def timed_connect(family: int, sockaddr: tuple, timeout: float) -> float:
    """Seconds a TCP connection to ``sockaddr`` took to be established; OSError otherwise."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        started = time.perf_counter()
        sock.connect(sockaddr)
        return time.perf_counter() - started
    finally:
        sock.close()


class LatencyProbe:
    """Answers ``MeasureLatency`` for the server ``name``, whose peers' addresses
    ``address_of(name)`` gives (None: not a peer). ``resolve``, ``connect`` and ``clock``
    are injectable so that tests need no network and no time."""

    def __init__(self, name: str, address_of: Callable[[str], str | None], *,
                 resolve=resolve, connect=timed_connect, clock=time.monotonic,
                 probe_timeout: float = PROBE_TIMEOUT, budget: float = BUDGET):
        self.name = name
        self.address_of = address_of
        self._resolve = resolve
        self._connect = connect
        self._clock = clock
        self.probe_timeout = probe_timeout
        self.budget = budget

    def answer(self, request, message=None) -> MeasureLatencyResponse:
        """The admin operation: validate ``request``, then measure every target."""
        targets = list(dict.fromkeys(request.Target or ()))
        if not targets:
            raise sender_fault("MeasureLatency names no Target", FAULT_INVALID_REQUEST)
        if len(targets) > MAX_LATENCY_TARGETS:
            raise sender_fault(f"MeasureLatency names {len(targets)} targets; at most "
                               f"{MAX_LATENCY_TARGETS}", FAULT_INVALID_REQUEST)
        probes = request.Probes if request.Probes is not None else DEFAULT_PROBES
        if not 1 <= probes <= MAX_LATENCY_PROBES:  # the contract bounds it too
            raise sender_fault(f"Probes must be from 1 to {MAX_LATENCY_PROBES}",
                               FAULT_INVALID_REQUEST)
        addresses = {}
        for target in targets:
            address = None if target == self.name else self.address_of(target)
            if address is None and target != self.name:
                raise sender_fault(f"server {target[:128]!r} is no peer of {self.name!r} (it "
                                   "learns its peers from the dispatcher)", FAULT_UNKNOWN_SERVER)
            addresses[target] = address
        deadline = self._clock() + self.budget
        with waiting_on_peer():  # connects to the peers, for up to the budget: no control slot
            return MeasureLatencyResponse(Latency=[
                self._measure(target, addresses[target], probes, deadline)
                for target in targets])

    def _measure(self, target: str, address: str | None, probes: int,
                 deadline: float) -> LatencyInfo:
        if address is None:  # this server itself
            return LatencyInfo(Target=target, Ms="0")
        if self._clock() >= deadline:
            return LatencyInfo(Target=target, Error=f"not measured: the request's "
                                                    f"{self.budget:g} s ran out")
        try:
            parsed = parse_url(address)
            family, sockaddr = self._resolve(parsed.host, parsed.port)
        except (UrlRefused, OSError, UnicodeError) as exc:
            return LatencyInfo(Target=target, Error=f"cannot resolve {address[:200]}: {exc}")
        times, error = [], None
        for _ in range(probes):
            left = deadline - self._clock()
            if left <= 0:
                break
            try:
                times.append(self._connect(family, sockaddr, min(self.probe_timeout, left)))
            except OSError as exc:
                error = _reason(exc)
        if not times:
            return LatencyInfo(Target=target, Error=f"{address[:200]}: {error or 'no time left'}")
        return LatencyInfo(Target=target, Ms=f"{statistics.median(times) * 1000:.3f}")


def _reason(exc: OSError) -> str:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__

