"""Ports for a process about to listen, chosen below the kernel's ephemeral range.

A port the kernel chose for ``bind(0)`` is one it also gives outgoing connections, so
between choosing it and the listener's bind a connection could take it (the listener then
fails with "Address already in use"). Worse, a client that keeps connecting to such a port
while nothing listens there can be given that very port as its own, and Linux then connects
the socket to itself. A port below the range is never given to a connection.
"""
from __future__ import annotations

import random
import socket

__all__ = ["free_port"]

_handed_out: set[int] = set()


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (Linux's default: 32768)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port a process can listen on at ``host``: free now, never handed out before in
    this process, and below the ephemeral range (when the range leaves room below it)."""
    low = _ephemeral_low()
    if low > 11_000:
        for _ in range(200):
            port = random.randrange(10_000, low)
            if port in _handed_out:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind((host, port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
