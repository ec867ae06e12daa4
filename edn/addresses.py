"""Where a role listens and where its peers reach it: ``edn serve --host`` (the address the
socket binds, 127.0.0.1 by default) and ``--base-url`` (the address the role advertises: it
registers with it at a dispatcher, names it in subscription manager EPRs, and peers POST
to it).

Without ``--base-url`` the advertised address is ``http://HOST:PORT``, which only works
when HOST is an address others can reach. A wildcard bind (``0.0.0.0``, ``::``, an empty
host) listens everywhere but names no address: a role that advertised it would register as
``http://0.0.0.0:8081``, which no peer can ever reach. So :func:`advertised_base_url`
refuses a wildcard bind without ``--base-url``, and refuses a ``--base-url`` that is not a
plain ``http(s)://host:port``: no path (the role's paths start at ``/``), query, fragment or
credentials, no wildcard host, at most :data:`MAX_BASE_URL` characters. Errors are
:class:`AddressError` with a message for the operator. A role that advertises a loopback
address to a dispatcher or parent elsewhere is warned (:func:`loopback_warning`): that only
works when they run on the same machine.
"""
from __future__ import annotations

import ipaddress

from wsframework.urlpolicy import UrlRefused, parse_url

__all__ = ["AddressError", "MAX_BASE_URL", "WILDCARD_HOSTS", "advertised_base_url",
           "bind_address", "check_base_url", "is_wildcard", "loopback_warning", "url_host"]

MAX_BASE_URL = 256
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


class AddressError(ValueError):
    """A bind or advertised address that cannot work, and why."""


def is_wildcard(host: str) -> bool:
    """Whether binding ``host`` listens on every interface (so it names no one address)."""
    text = host.strip()
    if text in WILDCARD_HOSTS:
        return True
    try:
        return ipaddress.ip_address(text.strip("[]")).is_unspecified
    except ValueError:
        return False


def url_host(host: str) -> str:
    """``host`` as it goes in a URL's authority: an IPv6 literal in brackets."""
    text = host.strip("[]")
    try:
        return f"[{text}]" if ipaddress.ip_address(text).version == 6 else text
    except ValueError:
        return host


def bind_address(host: str, port: int) -> str:
    """gunicorn's ``bind`` for ``host`` and ``port`` (an IPv6 literal in brackets)."""
    return f"{url_host(host)}:{port}"


def advertised_base_url(host: str, port: int, base_url: str | None, *,
                        scheme: str = "http") -> str:
    """The base URL a role started with ``--host host --port port [--base-url base_url]``
    advertises (``scheme``: https when it serves TLS); :class:`AddressError` when it could
    not be reached, is malformed, or is plain HTTP for a role that serves TLS."""
    if not 0 < port < 65536:
        raise AddressError(f"--port {port}: a port from 1 to 65535")
    if base_url is None:
        if is_wildcard(host):
            raise AddressError(
                f"--host {host or repr(host)} listens on every interface and names no address "
                f"peers can reach: give the address they use with --base-url (for example "
                f"--base-url {scheme}://ADDRESS:{port}, ADDRESS this host's address on the network)")
        return f"{scheme}://{url_host(host)}:{port}"
    checked = check_base_url(base_url)
    # a plain role may be reached through a proxy that ends TLS in front of it; a role that
    # serves TLS itself is never reached over plain HTTP
    if scheme == "https" and not checked.lower().startswith("https://"):
        raise AddressError(f"--base-url {checked[:80]!r}: this role serves https "
                           f"(--tls-cert given), so its base URL starts with https://")
    return checked


def check_base_url(base_url: str) -> str:
    """``base_url`` without a trailing slash, if it is a plain ``http(s)://host[:port]``."""
    if len(base_url) > MAX_BASE_URL:
        raise AddressError(f"--base-url: {len(base_url)} characters, at most {MAX_BASE_URL}")
    shown = base_url[:80]
    try:
        parsed = parse_url(base_url, max_length=MAX_BASE_URL)
    except UrlRefused as refused:
        raise AddressError(f"--base-url: {refused.reason}") from None
    scheme_end = base_url.index("://") + 3
    rest = base_url[scheme_end:]
    authority, _, tail = rest.partition("/")
    if "?" in authority or "#" in authority or tail.strip("/") or "?" in tail or "#" in tail:
        raise AddressError(f"--base-url {shown!r}: only scheme, host and port (the role's "
                           f"paths start at /; no path, query or fragment)")
    if parsed.ip is not None and parsed.ip.is_unspecified:
        raise AddressError(f"--base-url {shown!r}: {parsed.ip} is no address a peer can "
                           f"reach; give the address of this host")
    return base_url.rstrip("/")


def _is_loopback(url: str) -> bool | None:
    """Whether ``url`` names a loopback host (None: cannot tell, e.g. a DNS name)."""
    try:
        parsed = parse_url(url)
    except UrlRefused:
        return None
    if parsed.ip is not None:
        return parsed.ip.is_loopback
    return True if parsed.host == "localhost" else None


def loopback_warning(base_url: str, upstreams) -> str | None:
    """A warning when ``base_url`` is a loopback address and one of ``upstreams`` (the
    dispatchers or parents a role registers with) is not: they would be given an address
    that reaches them only if they run on this machine."""
    if not _is_loopback(base_url):
        return None
    remote = [url for url in upstreams if _is_loopback(url) is False]
    if not remote:
        return None
    return (f"advertising {base_url}, a loopback address, to {', '.join(remote)}: it reaches "
            f"this role only from this machine; on a network give --host ADDRESS (or "
            f"--host 0.0.0.0 --base-url http://ADDRESS:PORT)")
