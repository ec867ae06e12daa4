"""One reading of every URL a service will contact on a peer's say-so.

A peer chooses addresses the service will POST to (NotifyTo, EndTo, ReplyTo, FaultTo), which
makes a service a request-forgery tool unless those addresses are checked, and checked the
way the HTTP client will read them. Two parsers disagree on odd URLs
(``http://169.254.169.254\\@127.0.0.1/``: urllib.parse sees host 127.0.0.1, urllib3 connects
to 169.254.169.254), and a name can resolve to one address for the guard and another for the
client (DNS rebinding). So :class:`UrlPolicy` reads a URL once, with a strict grammar that
refuses whatever two parsers could read differently, resolves the host once, judges every
address it resolves to, and returns an :class:`ApprovedUrl`: the URL plus the one address
the connection must go to. :class:`~wsframework.transport.HttpTransport` connects to exactly
that address, keeping the URL's name in the Host header and as the TLS server name.

Refused by the grammar (:func:`parse_url`):

* more than ``max_length`` characters (2,048 by default);
* control characters, whitespace, backslashes and any non-ASCII character (a URI is ASCII;
  an internationalized host must come IDNA-encoded, ``xn--...``);
* userinfo (``user:secret@host``): never forwarded as credentials, never ambiguous;
* an empty host, a percent-encoded host, an IPv6 zone, a port out of 1..65535 or not digits;
* a host whose last label is numeric but which is not a canonical dotted quad
  (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``): resolvers and browsers read
  these as IPv4 addresses, in ways that differ;
* schemes other than ``schemes`` (http and https).

Refused by address (:meth:`UrlPolicy.check_address`), whatever resolved to it:

* link-local (169.254.0.0/16, fe80::/10) and the cloud metadata endpoints (169.254.169.254,
  fd00:ec2::254, 100.100.100.200) -- always, whatever else is allowed;
* multicast, unspecified (0.0.0.0, ::), broadcast, reserved and other special-purpose
  addresses -- always;
* private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) unless a CIDR in
  ``allow_private`` contains the address;
* loopback (127/8, ::1) when ``allow_loopback`` is off.

Every refusal of a private or loopback address names the address and the setting that would
allow it (``allow_private``, given to ``edn serve`` as ``--allow-private CIDR``;
``allow_loopback``), so an operator knows what to change. :func:`private_ranges` reads and
checks the ranges an operator allows: a range must hold private addresses (a public address
needs no permission), and never link-local or loopback ones, which other rules govern.

IPv4-mapped IPv6 addresses (``[::ffff:127.0.0.1]``) are judged as the IPv4 address they
carry. Answers are cached for ``cache_ttl`` seconds (an approval keeps its pinned address for
that long). The resolver is injectable (``socket.getaddrinfo`` by default) so tests never
touch DNS.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from typing import Callable, Iterable

from .admission import waiting_on_peer
from .exceptions import WsFrameworkError

__all__ = ["UrlRefused", "UrlPolicy", "ApprovedUrl", "ParsedUrl", "parse_url", "Resolver",
           "DEFAULT_MAX_URL_LENGTH", "private_ranges", "MAX_PRIVATE_RANGES"]

Resolver = Callable[..., list]

DEFAULT_MAX_URL_LENGTH = 2048
MAX_PRIVATE_RANGES = 64  # ranges one service allows; a network needs a handful
_MAX_RANGE_TEXT = 64  # characters of one range ("ffff:...:ffff/128" is 43)

_ALWAYS_REFUSED = [ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10",  # link-local (cloud metadata addresses: _METADATA)
)]
_PRIVATE = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7",
)]
_LOOPBACK = [ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128")]
_METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")}
_DEFAULT_PORTS = {"http": 80, "https": 443}

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
_PORT = re.compile(r"[0-9]{1,5}")


class UrlRefused(WsFrameworkError):
    """The URL may not be contacted; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ParsedUrl:
    """A URL read by :func:`parse_url`: scheme and host lower-cased, the port made explicit,
    ``target`` the path and query to request (never empty, fragment dropped)."""

    __slots__ = ("scheme", "host", "port", "target", "ip")

    def __init__(self, scheme: str, host: str, port: int, target: str,
                 ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None):
        self.scheme, self.host, self.port, self.target, self.ip = scheme, host, port, target, ip

    @property
    def host_header(self) -> str:
        """The Host header (and the name in the authority) as a client would send it."""
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        return host if self.port == _DEFAULT_PORTS.get(self.scheme) else f"{host}:{self.port}"


class ApprovedUrl(str):
    """A URL the policy approved, with the address a connection to it must use.

    It is the URL text (so any transport can take it where it takes a URL); an HTTP
    transport that knows it connects to :attr:`address` instead of resolving the name again.
    """

    parsed: ParsedUrl
    address: str

    def __new__(cls, url: str, parsed: ParsedUrl, address: str):
        self = super().__new__(cls, url)
        self.parsed = parsed
        self.address = address
        return self

    @property
    def pinned_url(self) -> str:
        """The URL with the approved address in place of the name (what to connect to)."""
        ip = ipaddress.ip_address(self.address)
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        return f"{self.parsed.scheme}://{host}:{self.parsed.port}{self.parsed.target}"


def parse_url(url: str, *, max_length: int = DEFAULT_MAX_URL_LENGTH,
              schemes: Iterable[str] = ("http", "https")) -> ParsedUrl:
    """Read ``url`` with the strict grammar above; raise :class:`UrlRefused` otherwise."""
    if not isinstance(url, str):
        raise UrlRefused("a URL must be text")
    if len(url) > max_length:
        raise UrlRefused(f"URL of {len(url)} characters exceeds the limit of {max_length}")
    shown = url[:80]
    bad = _UNSAFE_CHARACTER.search(url)  # the first one, as a scan would find it
    if bad is not None:
        ch = bad.group()
        if ch <= " " or ch == "\x7f":
            raise UrlRefused(f"control character or whitespace in URL {shown!r}")
        if ch == "\\":
            raise UrlRefused(f"backslash in URL {shown!r}")
        raise UrlRefused(f"non-ASCII character in URL {shown!r} (IDNA-encode the host, "
                         "percent-encode the path)")
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise UrlRefused(f"not an absolute http(s) URL: {shown!r}")
    scheme = scheme.lower()
    allowed = frozenset(schemes)
    if scheme not in allowed:
        raise UrlRefused(f"only {', '.join(sorted(allowed))} URLs are contacted, not {scheme!r}")
    end = len(rest)
    for stop in "/?#":
        index = rest.find(stop)
        if index != -1:
            end = min(end, index)
    authority, target = rest[:end], rest[end:]
    target = target.split("#", 1)[0]
    if not target.startswith("/"):
        target = "/" + target
    if "@" in authority:
        raise UrlRefused(f"credentials (userinfo) in URL {shown!r} are refused")
    if "%" in authority:
        raise UrlRefused(f"percent-encoded host in URL {shown!r}")
    ip = None
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise UrlRefused(f"unterminated IPv6 literal in {shown!r}")
        literal, after = authority[1:close], authority[close + 1:]
        try:
            ip = ipaddress.IPv6Address(literal)
        except ValueError:
            raise UrlRefused(f"not an IPv6 address: [{literal}]") from None
        host = str(ip)
        if after and not after.startswith(":"):
            raise UrlRefused(f"unexpected text after the IPv6 literal in {shown!r}")
        port_text = after[1:] if after else None
    else:
        host, colon, port_text = authority.partition(":")
        port_text = port_text if colon else None
        host = host.lower()
        if not host:
            raise UrlRefused(f"no host in URL {shown!r}")
        ip = _host_ip(host, shown)
    if port_text is None:
        port = _DEFAULT_PORTS[scheme] if scheme in _DEFAULT_PORTS else None
        if port is None:
            raise UrlRefused(f"no port in URL {shown!r}")
    else:
        if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
            raise UrlRefused(f"port {port_text!r} out of range in URL {shown!r}")
        port = int(port_text)
    return ParsedUrl(scheme, host, port, target, ip)


#: control characters, white space, DEL, a backslash, anything beyond ASCII
_UNSAFE_CHARACTER = re.compile(r"[\x00-\x20\x7f-\U0010ffff\\]")


def _host_ip(host: str, shown: str):
    """The IPv4 address a host names literally, None for a name; refuse the ambiguous.
    Hosts accepted are remembered (:data:`KNOWN_HOSTS` of them): every subscription of a
    sink names the same one."""
    known = _known_hosts.get(host, _UNKNOWN)
    if known is not _UNKNOWN:
        return known
    ip = _checked_host_ip(host, shown)
    if len(_known_hosts) >= KNOWN_HOSTS:
        _known_hosts.clear()
    _known_hosts[host] = ip
    return ip


KNOWN_HOSTS = 4096
_known_hosts: dict[str, object] = {}
_UNKNOWN = object()


def _checked_host_ip(host: str, shown: str):
    labels = host.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        try:
            return ipaddress.IPv4Address(host)  # canonical dotted quad only (no leading 0s)
        except ValueError:
            raise UrlRefused(f"numeric host {host!r} is not a dotted-quad IPv4 address") from None
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlRefused(f"not a valid host name: {host!r} in {shown!r}")
    for label in labels:
        if label.startswith("xn--"):
            try:
                label.encode("ascii").decode("idna")
            except UnicodeError:
                raise UrlRefused(f"invalid IDNA label {label!r} in {shown!r}") from None
    return None


def _example_range(ip) -> str:
    """The /24 (IPv4) or /64 (IPv6) around ``ip``: the range a refusal suggests allowing."""
    return str(ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 64}", strict=False))


def private_ranges(values: "str | Iterable[str]", *, strict: bool = True) -> tuple[str, ...]:
    """The ranges (CIDRs, ``10.77.0.0/24``; a bare address is a /32 or /128) in ``values``: one
    text with ranges separated by commas, or several such texts. Each, normalized, once.

    Raises :class:`ValueError` naming the range for: text that is no IP network, more than
    :data:`MAX_PRIVATE_RANGES` ranges, and a range that allows nothing (no private address in
    it) or overlaps link-local or loopback addresses (always refused, resp. governed by
    ``allow_loopback``); the last three only when ``strict`` (what an operator gives; a
    :class:`UrlPolicy` built in code takes any range, and its other rules still apply)."""
    texts = [values] if isinstance(values, str) else list(values)
    found: list[str] = []
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"--allow-private: not text: {text!r}")
        found.extend(part.strip() for part in text.split(",") if part.strip())
        if len(found) > MAX_PRIVATE_RANGES:
            raise ValueError(f"--allow-private: more than {MAX_PRIVATE_RANGES} ranges")
    ranges = []
    for text in found:
        shown = text[:_MAX_RANGE_TEXT]
        if len(text) > _MAX_RANGE_TEXT:
            raise ValueError(f"--allow-private: invalid IP range {shown!r}... (too long)")
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"--allow-private: invalid IP range {shown!r} (a CIDR such as "
                             "10.77.0.0/24)") from None
        if strict:
            _check_allowable(net)
        ranges.append(str(net))
    return tuple(dict.fromkeys(ranges))


def _check_allowable(net) -> None:
    """Refuse a range an operator means to allow that could not mean what it says."""
    same = [n for n in _LOOPBACK + _ALWAYS_REFUSED + _PRIVATE if n.version == net.version]
    if any(net.overlaps(n) for n in same if n in _LOOPBACK):
        raise ValueError(f"--allow-private: {net} holds loopback addresses; those are "
                         "allowed by the setting allow_loopback, not by a range")
    if any(net.overlaps(n) for n in same if n in _ALWAYS_REFUSED):
        raise ValueError(f"--allow-private: {net} holds link-local addresses, which are "
                         "never contacted")
    if not any(net.overlaps(n) for n in same if n in _PRIVATE):
        raise ValueError(f"--allow-private: {net} holds no private address (public "
                         "addresses need no permission)")


class _Refusal:
    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class UrlPolicy:
    """Which URLs a service contacts on a peer's say-so, and at which address."""

    def __init__(self, *, allow_private: Iterable[str] = (), allow_loopback: bool = True,
                 resolver: Resolver | None = None, cache_ttl: float = 10.0,
                 max_length: int = DEFAULT_MAX_URL_LENGTH,
                 schemes: Iterable[str] = ("http", "https"), clock=time.monotonic):
        self.allow_private = tuple(ipaddress.ip_network(c, strict=False)
                                   for c in private_ranges(allow_private, strict=False))
        if max_length < 1:
            raise ValueError("max_length must be positive")
        self.allow_loopback = allow_loopback
        self.resolver = resolver or socket.getaddrinfo
        self.cache_ttl = cache_ttl
        self.max_length = max_length
        self.schemes = frozenset(schemes)
        self._clock = clock
        # (host, port) -> (until, the address to use, or _Refusal). A refusal is cached as its
        # reason, never as the exception: raising one instance again appends every request's
        # frames to its traceback (each refused Subscribe's whole message stayed reachable).
        self._cache: dict[tuple[str, int], tuple[float, "str | _Refusal"]] = {}
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------------------
    def approve(self, url: str) -> ApprovedUrl:
        """The URL with the address to connect to; raise :class:`UrlRefused` unless ``url``
        may be contacted."""
        parsed = parse_url(url, max_length=self.max_length, schemes=self.schemes)
        if parsed.ip is not None:
            self.check_address(str(parsed.ip))
            return ApprovedUrl(url, parsed, str(parsed.ip))
        key = (parsed.host, parsed.port)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if isinstance(cached[1], _Refusal):
                raise UrlRefused(cached[1].reason)
            return ApprovedUrl(url, parsed, cached[1])
        try:
            address = self._resolve_and_judge(parsed.host, parsed.port)
        except UrlRefused as refused:
            self._remember(key, now, _Refusal(refused.reason))
            raise
        self._remember(key, now, address)
        return ApprovedUrl(url, parsed, address)

    def check(self, url: str) -> None:
        """Raise :class:`UrlRefused` unless ``url`` may be contacted."""
        self.approve(url)

    def check_address(self, address: str) -> None:
        """Judge one IP address (no resolution)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise UrlRefused(f"not an IP address: {address!r}") from None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip in _METADATA:
            raise UrlRefused(f"{ip} is a cloud metadata address")
        if any(ip in net for net in _ALWAYS_REFUSED) or ip.is_link_local:
            raise UrlRefused(f"{ip} is link-local")
        if ip.is_multicast:
            raise UrlRefused(f"{ip} is a multicast address")
        if ip.is_unspecified:
            raise UrlRefused(f"{ip} is the unspecified address")
        if ip.is_loopback:
            if not self.allow_loopback:
                raise UrlRefused(f"{ip} is a loopback address and loopback targets are refused "
                                 "(setting allow_loopback: --set allow_loopback=true)")
            return
        if any(ip in net for net in self.allow_private if net.version == ip.version):
            return
        if any(ip in net for net in _PRIVATE if net.version == ip.version):
            raise UrlRefused(f"{ip} is a private address and its range is not allowed (allow "
                             f"it with --allow-private {_example_range(ip)}, the setting "
                             "allow_private)")
        if ip.is_reserved or (ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255")):
            raise UrlRefused(f"{ip} is a reserved address")
        if ip.is_private and not ip.is_global:
            # Documentation, benchmarking and other special ranges nobody should contact.
            raise UrlRefused(f"{ip} is a special-purpose address")

    # -- internals -------------------------------------------------------------------------
    def _resolve_and_judge(self, host: str, port: int) -> str:
        """Every address ``host`` resolves to must pass; the first is the one to use."""
        try:
            with waiting_on_peer():  # a name server may take seconds: no control slot held
                infos = self.resolver(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise UrlRefused(f"cannot resolve {host!r}: {exc}") from None
        addresses = list(dict.fromkeys(info[4][0] for info in infos))
        if not addresses:
            raise UrlRefused(f"{host!r} resolves to no address")
        for address in addresses:
            if "%" in address:  # a scoped (link-local) IPv6 answer
                raise UrlRefused(f"{host!r} resolves to a scoped address {address}")
            self.check_address(address)
        return addresses[0]

    def _remember(self, key, now, outcome) -> None:
        if self.cache_ttl <= 0:
            return
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + self.cache_ttl, outcome)
