"""Where the event source agrees to send notifications (NotifyTo, EndTo).

A subscriber chooses the address the source will POST to, which makes an event source a
request-forgery tool unless targets are checked. :class:`TargetPolicy` resolves the host
(every address it resolves to must pass) and refuses:

* link-local addresses (169.254.0.0/16, fe80::/10) and the cloud metadata endpoints
  (169.254.169.254, fd00:ec2::254, 100.100.100.200) -- always, whatever else is allowed;
* multicast, unspecified (0.0.0.0, ::), broadcast and reserved addresses -- always;
* private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) unless a CIDR in
  ``allow_private`` (``edn serve --allow-private``) contains the address;
* loopback (127/8, ::1) only when ``allow_loopback`` is off (it is on by default: the demo
  and the tests run on one machine).

IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry. Targets are checked
at Subscribe and again before each delivery (DNS answers change); answers are cached for
``cache_ttl`` seconds so a delivery does not pay a lookup. The check runs before the
transport resolves the name again, so a DNS server answering differently within that window
can still win a race; short TTLs narrow it, pinning the connection to the checked address
would close it.

The resolver is injectable (``socket.getaddrinfo`` by default) so tests never touch DNS.
"""
from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Callable, Iterable
from urllib.parse import urlsplit

__all__ = ["TargetRefused", "TargetPolicy", "Resolver"]

Resolver = Callable[..., list]

_ALWAYS_REFUSED = [ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10",  # link-local (cloud metadata addresses: _METADATA)
)]
_PRIVATE = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7",
)]
_METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")}


class TargetRefused(Exception):
    """The address may not be used as a notification target; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TargetPolicy:
    def __init__(self, *, allow_private: Iterable[str] = (), allow_loopback: bool = True,
                 resolver: Resolver | None = None, cache_ttl: float = 10.0,
                 schemes: Iterable[str] = ("http", "https"), clock=time.monotonic):
        try:
            self.allow_private = tuple(ipaddress.ip_network(c, strict=False) for c in allow_private)
        except ValueError as exc:
            raise ValueError(f"invalid --allow-private range: {exc}") from None
        self.allow_loopback = allow_loopback
        self.resolver = resolver or socket.getaddrinfo
        self.cache_ttl = cache_ttl
        self.schemes = frozenset(schemes)
        self._clock = clock
        self._cache: dict[tuple[str, int], tuple[float, tuple[str, ...] | TargetRefused]] = {}
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------------------
    def check(self, url: str) -> None:
        """Raise :class:`TargetRefused` unless ``url`` may receive notifications."""
        try:
            split = urlsplit(url)
            port = split.port
        except ValueError:
            raise TargetRefused(f"not a usable URL: {url!r}") from None
        if split.scheme.lower() not in self.schemes:
            raise TargetRefused(f"notifications are sent over {', '.join(sorted(self.schemes))}, "
                                f"not {split.scheme or 'a relative address'!r}")
        host = split.hostname
        if not host:
            raise TargetRefused(f"no host in {url!r}")
        port = port or (443 if split.scheme.lower() == "https" else 80)
        key = (host.lower(), port)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if isinstance(cached[1], TargetRefused):
                raise cached[1]
            return
        try:
            self._check_host(host, port)
        except TargetRefused as refused:
            self._remember(key, now, refused)
            raise
        self._remember(key, now, ())

    def check_address(self, address: str) -> None:
        """Judge one IP address (no resolution)."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip in _METADATA:
            raise TargetRefused(f"{ip} is a cloud metadata address")
        if any(ip in net for net in _ALWAYS_REFUSED) or ip.is_link_local:
            raise TargetRefused(f"{ip} is link-local")
        if ip.is_multicast:
            raise TargetRefused(f"{ip} is a multicast address")
        if ip.is_unspecified:
            raise TargetRefused(f"{ip} is the unspecified address")
        if ip.is_loopback:
            if not self.allow_loopback:
                raise TargetRefused(f"{ip} is a loopback address and loopback targets are refused")
            return
        if any(ip in net for net in self.allow_private if net.version == ip.version):
            return
        if any(ip in net for net in _PRIVATE if net.version == ip.version):
            raise TargetRefused(f"{ip} is a private address (allow its range with --allow-private)")
        if ip.is_reserved or (ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255")):
            raise TargetRefused(f"{ip} is a reserved address")
        if ip.is_private and not ip.is_global:
            # Documentation, benchmarking and other special ranges nobody should notify.
            raise TargetRefused(f"{ip} is a special-purpose address")

    # -- internals -------------------------------------------------------------------------
    def _check_host(self, host: str, port: int) -> None:
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            addresses = [host]
        except ValueError:
            try:
                infos = self.resolver(host, port, 0, socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise TargetRefused(f"cannot resolve {host!r}: {exc}") from None
            addresses = sorted({info[4][0] for info in infos})
            if not addresses:
                raise TargetRefused(f"{host!r} resolves to no address")
        for address in addresses:
            self.check_address(address)

    def _remember(self, key, now, outcome) -> None:
        if self.cache_ttl <= 0:
            return
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self.cache_ttl, outcome)
