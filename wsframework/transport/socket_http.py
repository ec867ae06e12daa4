"""HTTP/1.1 written directly on sockets (:class:`LeanHttpTransport`): a blocking keep-alive
client for many small one-way POSTs, notification delivery.

Why not ``requests`` (:class:`~wsframework.transport.HttpTransport`): every POST through
requests/urllib3 builds a ``Request``, a ``PreparedRequest``, header dicts, a response object
and an ``HTTPResponse`` reader. This client writes the request head and body in one
``sendall`` (the head but its length built once per URL) and reads the status line, headers
and body itself. Measured by ``benchmarks/performance/delivery.py`` (``client_cpu_us_per_post``: 16
concurrent POSTs of a small envelope to the same sink, each client in its own process, on
this 2-core machine): requests 310-370 us of CPU per POST under gevent, this client 21-30
us, aiohttp 57-70 us in its own asyncio loop (httpx was not measured: not installed here).
In a source process delivering to that sink (``notifications_per_s``) the whole path,
publication and outbox included, went from about 370-430 us of CPU per notification with
requests to about 43-54 us.

Why not asyncio (aiohttp, httpx): besides its CPU per POST, the roles that deliver run under
gunicorn's gevent worker, which monkey-patches threads and sockets; an asyncio loop inside
that process must live in a real OS thread beside the gevent hub, and every hand-off between
them crosses threads. A blocking client run by a few workers per host is the same code under
real threads (tests, gthread) and under greenlets (gevent makes its sockets cooperative), with
no second event loop.

What it keeps from :class:`HttpTransport`:

* **The URL policy's address.** An :class:`~wsframework.urlpolicy.ApprovedUrl` is connected
  to at the approved address, never resolved again; the Host header and the TLS server name
  stay the URL's name. Credentials in a URL are never sent (the strict grammar refuses them).
  A plain URL is read with the same strict grammar (:func:`~wsframework.urlpolicy.parse_url`).
* **No redirects**: a 3xx is an answer like any other status.
* **Timeouts**: ``timeout = (connect, read)``; ``read`` bounds the whole answer (from the
  request's last byte to the answer's last), so a peer trickling one byte at a time cannot
  hold a worker longer than that.
* **Bounded answers**: headers over ``max_header_bytes``, a body over
  ``max_response_bytes`` (by Content-Length, chunks or until close) are a
  :class:`TransportError` and the connection is dropped. Chunked answers are read; an answer
  without Content-Length is read until the peer closes (and the connection is not reused);
  a duplicate, differing Content-Length, a bad chunk size or bytes after the answer drop the
  connection.
* **Pooled keep-alive connections per target** (scheme, address, port, TLS name): up to
  ``pool_size`` idle connections per target and ``max_idle`` in all; a reused connection the
  peer closed meanwhile (nothing of the answer arrived) is retried once on a new one.

Header values with CR, LF or NUL are refused (no header injection through an action URI).
"""
from __future__ import annotations

import ssl
import threading
import time
from typing import Sequence

from ..urlpolicy import ApprovedUrl, UrlRefused, parse_url
from .base import TransportError, TransportResponse
from ..tls import process_client_context
from . import tcp
from ..admission import waiting_on_peer

__all__ = ["LeanHttpTransport"]

_CRLF2 = b"\r\n\r\n"
_NO_BODY = frozenset({204, 304})
_FORBIDDEN_IN_HEADERS = ("\r", "\n", "\0")
_MAX_CACHED_HEADS = 4096


class _StaleConnection(Exception):
    """A reused connection failed before any byte of the answer arrived."""


class _Connection:
    __slots__ = ("sock", "buffer", "reused")

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.reused = False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class LeanHttpTransport:
    """SOAP one-way POSTs over HTTP/1.1 keep-alive connections (see the module docstring)."""

    def __init__(self, *, timeout: tuple[float, float] = (3.0, 10.0), pool_size: int = 16,
                 max_idle: int = 1024, max_response_bytes: int = 1024 * 1024,
                 max_header_bytes: int = 64 * 1024, ssl_context: ssl.SSLContext | None = None):
        if pool_size < 1 or max_idle < 0 or max_response_bytes < 0 or max_header_bytes < 64:
            raise ValueError("pool_size >= 1, max_idle >= 0, max_header_bytes >= 64")
        self.timeout = timeout
        self.pool_size = pool_size
        self.max_idle = max_idle
        self.max_response_bytes = max_response_bytes
        self.max_header_bytes = max_header_bytes
        self._ssl_context = ssl_context
        self._idle: dict[tuple, list[_Connection]] = {}
        self._idle_count = 0
        self._heads: dict[tuple, bytes] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.connections_opened = 0  # for tests and benchmarks: keep-alive reuse is visible

    # -- the Transport interface ----------------------------------------------------------
    def post(self, url: str, payload: bytes, content_type: str,
             soap_action: str | None = None) -> TransportResponse:
        with waiting_on_peer():  # no control slot is held while a peer answers
            return self._post_now(url, payload, content_type, soap_action)

    def _post_now(self, url: str, payload: bytes, content_type: str,
                  soap_action: str | None = None) -> TransportResponse:
        key, head, request = self._request(url, payload, content_type, soap_action)
        for _ in range(2):
            connection = self._take(key)
            if connection is None:
                connection = self._connect(key, url)
            try:
                response, keep = self._exchange(connection, request, head, payload, url)
            except _StaleConnection:
                connection.close()
                continue  # the peer closed an idle connection: once more, on a new one
            except BaseException:
                connection.close()
                raise
            if keep:
                self._give_back(key, connection)
            else:
                connection.close()
            return response
        raise TransportError(f"POST {url} failed: the connection was closed twice")

    def post_pipelined(self, requests: Sequence[tuple[str, bytes, str, str | None]]
                       ) -> list[TransportResponse | TransportError]:
        """See :meth:`_post_pipelined_now`."""
        with waiting_on_peer():  # no control slot is held while a peer answers
            return self._post_pipelined_now(requests)

    def _post_pipelined_now(self, requests: Sequence[tuple[str, bytes, str, str | None]]
                            ) -> list[TransportResponse | TransportError]:
        """Several POSTs ``(url, payload, content_type, soap_action)`` on one keep-alive
        connection, all written before the first answer is read (HTTP/1.1 pipelining, RFC
        9112 section 9.3.2): one round trip for all of them. Every URL must lead to the same
        connection (scheme, address, port, name). Answers are matched in order; when the
        connection fails or the peer closes it, each request not answered gets a
        TransportError (it may or may not have been acted on: the caller decides whether
        to send it again). Opt-in only: RFC 9112 advises against pipelining non-idempotent
        requests such as POST for that reason; a caller that delivers at least once with
        one MessageID per message tolerates it."""
        if not requests:
            return []
        built = [self._request(*request) for request in requests]
        key = built[0][0]
        if any(other[0] != key for other in built):
            raise ValueError("pipelined requests must share one connection")
        data = b"".join(request if request is not None else head + payload
                        for (_, head, request), (_, payload, _, _) in zip(built, requests))
        urls = [request[0] for request in requests]
        for _ in range(2):
            connection = self._take(key) or self._connect(key, urls[0])
            answers: list[TransportResponse | TransportError] = []
            try:
                reusable = self._exchange_many(connection, data, urls, answers)
            except _StaleConnection:
                connection.close()
                continue  # nothing was answered on an idle connection the peer closed
            except BaseException:
                connection.close()
                raise
            if reusable:
                self._give_back(key, connection)
            else:
                connection.close()
            return answers
        raise TransportError(f"POST {urls[0]} failed: the connection was closed twice")

    def _exchange_many(self, connection: _Connection, data: bytes, urls: list[str],
                       answers: list) -> bool:
        """Write every request, then read the answers in order into ``answers``; from the
        first that fails (or after an answer that closes the connection) each request left
        gets a TransportError. Returns whether the connection may be used again."""
        sock = connection.sock
        try:
            sock.settimeout(self.timeout[1])
            sock.sendall(data)
        except (OSError, ssl.SSLError) as exc:
            if connection.reused and isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                raise _StaleConnection() from exc
            answers.extend(TransportError(f"POST {url} failed sending: {exc}") for url in urls)
            return False
        for index, url in enumerate(urls):
            try:
                response, keep = self._read_response(
                    connection, time.monotonic() + self.timeout[1], url,
                    more=index + 1 < len(urls))
            except _StaleConnection:
                if index == 0:
                    raise
                failure = "the peer closed the connection"
            except TransportError as exc:
                failure = str(exc)
            except (OSError, ssl.SSLError, ValueError) as exc:
                failure = f"failed reading the answer: {exc}"
            else:
                answers.append(response)
                if keep:
                    continue
                index += 1  # answered, then closed: the rest are not
                failure = "the peer closed the connection"
            answers.extend(TransportError(f"POST {left}: not answered ({failure})")
                           for left in urls[index:])
            return False
        return True

    def _request(self, url: str, payload: bytes, content_type: str,
                 soap_action: str | None):
        """(connection key, head, head + payload or None when large) of one POST."""
        if isinstance(url, ApprovedUrl):
            parsed, address = url.parsed, url.address
        else:
            try:
                parsed = parse_url(url)
            except UrlRefused as refused:
                raise TransportError(f"POST {url} refused: {refused.reason}", unsent=True) from None
            address = str(parsed.ip) if parsed.ip is not None else parsed.host
        # The head but its length, built once per URL, type and action (a sink's
        # notifications share them).
        head_key = (url, content_type, soap_action)
        prefix = self._heads.get(head_key)
        if prefix is None:
            prefix = _request_prefix(parsed.target, parsed.host_header, content_type,
                                     soap_action)
            if len(self._heads) >= _MAX_CACHED_HEADS:
                self._heads.clear()
            self._heads[head_key] = prefix
        head = b"%sContent-Length: %d\r\n\r\n" % (prefix, len(payload))
        request = head + payload if len(payload) < 65536 else None
        return (parsed.scheme, address, parsed.port, parsed.host), head, request

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._idle_count = self._idle, {}, 0
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # -- the pool --------------------------------------------------------------------------
    def _take(self, key) -> _Connection | None:
        with self._lock:
            connections = self._idle.get(key)
            if not connections:
                return None
            connection = connections.pop()
            self._idle_count -= 1
            if not connections:
                del self._idle[key]
        connection.reused = True
        return connection

    def _give_back(self, key, connection: _Connection) -> None:
        with self._lock:
            connections = self._idle.setdefault(key, [])
            if len(connections) < self.pool_size and self._idle_count < self.max_idle:
                connections.append(connection)
                self._idle_count += 1
                return
            if not connections:
                del self._idle[key]
        connection.close()

    def _connect(self, key, url) -> _Connection:
        scheme, address, port, name = key
        try:
            sock = tcp.connect(address, port, self.timeout[0])
            if scheme == "https":
                context = self._ssl_context or process_client_context()
                sock = context.wrap_socket(sock, server_hostname=name)
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"POST {url} failed: cannot connect: {exc}", unsent=True) from exc
        self.connections_opened += 1
        return _Connection(sock)

    # -- one exchange ----------------------------------------------------------------------
    def _exchange(self, connection: _Connection, request, head, payload, url):
        sock = connection.sock
        read_timeout = self.timeout[1]
        try:
            sock.settimeout(read_timeout)
            if request is not None:
                sock.sendall(request)
            else:
                sock.sendall(head)
                sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError) as exc:
            if connection.reused:
                raise _StaleConnection() from exc
            raise TransportError(f"POST {url} failed sending: {exc}") from exc
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"POST {url} failed sending: {exc}") from exc
        deadline = time.monotonic() + read_timeout
        try:
            return self._read_response(connection, deadline, url)
        except TransportError:
            raise
        except _StaleConnection:
            raise
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise TransportError(f"POST {url} failed reading the answer: {exc}") from exc

    def _recv(self, connection: _Connection, deadline: float, url) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TransportError(f"POST {url}: no complete answer within {self.timeout[1]:g} s")
        sock = connection.sock
        sock.settimeout(remaining)
        try:
            return sock.recv(65536)
        except TimeoutError:  # socket.timeout
            raise TransportError(
                f"POST {url}: no complete answer within {self.timeout[1]:g} s") from None

    def _read_response(self, connection: _Connection, deadline: float, url,
                       more: bool = False):
        """One answer; ``more``: answers to further pipelined requests may follow it."""
        while True:  # skip interim 1xx answers
            status, headers, keep = self._read_head(connection, deadline, url)
            if status >= 200 or status == 101:
                break
        if status == 101:
            raise TransportError(f"POST {url}: the peer switched protocols")
        max_body = self.max_response_bytes
        length_text = headers.get("content-length")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if status in _NO_BODY:
            body = b""
        elif chunked:
            body = self._read_chunked(connection, deadline, url)
        elif length_text is not None:
            if not length_text.isdigit() or len(length_text) > 18:
                raise TransportError(f"POST {url}: bad Content-Length {length_text[:40]!r}")
            length = int(length_text)
            if length > max_body:
                raise TransportError(f"response from {url} exceeds {max_body} bytes")
            body = self._read_exactly(connection, length, deadline, url)
        else:  # until the peer closes; never reused
            keep = False
            parts = [connection.buffer]
            size = len(connection.buffer)
            connection.buffer = b""
            while size <= max_body:
                data = self._recv(connection, deadline, url)
                if not data:
                    break
                size += len(data)
                parts.append(data)
            if size > max_body:
                raise TransportError(f"response from {url} exceeds {max_body} bytes")
            body = b"".join(parts)
        if connection.buffer and not more:  # bytes after the answer: out of step
            keep = False
        return TransportResponse(status, headers.get("content-type"), body), keep

    def _read_head(self, connection: _Connection, deadline: float, url):
        buffer = connection.buffer
        first = True
        while True:
            end = buffer.find(_CRLF2)
            if end != -1:
                break
            if len(buffer) > self.max_header_bytes:
                raise TransportError(f"response headers from {url} exceed "
                                     f"{self.max_header_bytes} bytes")
            data = self._recv_first(connection, deadline, url) if first and not buffer \
                else self._recv(connection, deadline, url)
            first = False
            if not data:
                raise TransportError(f"POST {url}: the peer closed the connection mid-answer")
            buffer += data
        if end > self.max_header_bytes:
            raise TransportError(f"response headers from {url} exceed {self.max_header_bytes} bytes")
        connection.buffer = buffer[end + 4:]
        lines = buffer[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() \
                or len(parts[1]) != 3:
            raise TransportError(f"POST {url}: not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise TransportError(f"POST {url}: malformed header line {line[:80]!r}")
            name = name.lower()
            value = value.strip()
            if name in headers:
                if name == "content-length" and headers[name] != value:
                    raise TransportError(f"POST {url}: differing Content-Length headers")
                if name != "content-length":
                    headers[name] = headers[name] + ", " + value
                continue
            headers[name] = value
        connection_tokens = headers.get("connection", "").lower()
        if parts[0] == "HTTP/1.0":
            keep = "keep-alive" in connection_tokens
        else:
            keep = "close" not in connection_tokens
        return status, headers, keep

    def _recv_first(self, connection: _Connection, deadline: float, url) -> bytes:
        """The answer's first bytes: on a reused connection, a reset or an immediate close
        means the peer had closed it while idle (the request never reached the application
        on any server that closes only idle connections), so it is worth one more try."""
        try:
            data = self._recv(connection, deadline, url)
        except (ConnectionResetError, BrokenPipeError) as exc:
            if connection.reused:
                raise _StaleConnection() from exc
            raise
        if not data and connection.reused:
            raise _StaleConnection()
        return data

    def _read_exactly(self, connection: _Connection, length: int, deadline: float, url) -> bytes:
        buffer = connection.buffer
        if len(buffer) >= length:
            connection.buffer = buffer[length:]
            return buffer[:length]
        parts = [buffer]
        have = len(buffer)
        while have < length:
            data = self._recv(connection, deadline, url)
            if not data:
                raise TransportError(f"POST {url}: the peer closed the connection mid-answer")
            parts.append(data)
            have += len(data)
        data = b"".join(parts)
        connection.buffer = data[length:]
        return data[:length]

    def _read_line(self, connection: _Connection, deadline: float, url) -> bytes:
        buffer = connection.buffer
        while True:
            end = buffer.find(b"\r\n")
            if end != -1:
                connection.buffer = buffer[end + 2:]
                return buffer[:end]
            if len(buffer) > 4096:
                raise TransportError(f"POST {url}: a chunk line over 4096 bytes")
            data = self._recv(connection, deadline, url)
            if not data:
                raise TransportError(f"POST {url}: the peer closed the connection mid-answer")
            buffer += data

    def _read_chunked(self, connection: _Connection, deadline: float, url) -> bytes:
        parts = []
        size = 0
        while True:
            line = self._read_line(connection, deadline, url).split(b";", 1)[0].strip()
            if not line or len(line) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in line):
                raise TransportError(f"POST {url}: bad chunk size {line[:20]!r}")
            chunk = int(line, 16)
            if chunk == 0:
                break
            size += chunk
            if size > self.max_response_bytes:
                raise TransportError(f"response from {url} exceeds {self.max_response_bytes} bytes")
            parts.append(self._read_exactly(connection, chunk, deadline, url))
            if self._read_exactly(connection, 2, deadline, url) != b"\r\n":
                raise TransportError(f"POST {url}: a chunk without its CRLF")
        trailers = 0
        while self._read_line(connection, deadline, url):  # trailers, ignored
            trailers += 1
            if trailers > 100:
                raise TransportError(f"POST {url}: too many trailer lines")
        return b"".join(parts)


def _request_prefix(target: str, host: str, content_type: str,
                    soap_action: str | None) -> bytes:
    """The request line and headers up to (not including) Content-Length."""
    if content_type.startswith("text/xml"):
        action = soap_action or ""
        _check_header(action)
        fields = f'Content-Type: text/xml; charset=utf-8\r\nSOAPAction: "{action}"\r\n'
    elif soap_action:
        _check_header(soap_action)
        fields = f'Content-Type: application/soap+xml; charset=utf-8; action="{soap_action}"\r\n'
    else:
        fields = "Content-Type: application/soap+xml; charset=utf-8\r\n"
    text = f"POST {target} HTTP/1.1\r\nHost: {host}\r\n{fields}"
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise TransportError("a header value is not latin-1 text") from None


def _check_header(value: str) -> None:
    for bad in _FORBIDDEN_IN_HEADERS:
        if bad in value:
            raise TransportError("CR, LF or NUL in a header value")
