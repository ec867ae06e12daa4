"""A notification sink: a small real HTTP server that records the SOAP messages posted to it.

Used by ``edn demo``, the benchmarks and the integration tests. Callers wait on a condition
(:meth:`NotificationSink.wait_for`) rather than sleeping.

:class:`NotificationSink` (http.server, a thread per connection) records what it gets and
takes a few thousand POSTs/s; :class:`FastSink` (an asyncio server in its own process)
counts, and with ``record=True`` also keeps each POST's path and body, and takes tens of
thousands (``benchmarks/performance/delivery.py`` measures its ceiling). Both have ``count``,
``messages`` and :meth:`wait_count`, so ``edn demo``'s network can use either. Both cap TCP's
retransmission backoff on the connections they accept (:mod:`wsframework.transport.tcp`), as
a subscriber host should: after a lossy link recovers, their answers resume within a second.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from edn.addresses import is_wildcard, url_host
from wsframework.soap import Envelope, parse_envelope
from wsframework.xmlparse import ParserLimits
from wsframework.transport.tcp import cap_retransmit_backoff

_LIMITS = ParserLimits(max_bytes=64 * 1024 * 1024)


@dataclass
class ReceivedMessage:
    path: str
    headers: dict
    body: bytes
    at: float = field(default_factory=time.time)  # when it arrived (wall clock)

    @property
    def envelope(self) -> Envelope:
        return parse_envelope(self.body, _LIMITS)


def _quiet_handle_error(self, request, client_address) -> None:
    if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
        ThreadingHTTPServer.handle_error(self, request, client_address)


def sink_url(host: str, port: int, advertised_host: str | None = None, *,
             scheme: str = "http") -> str:
    """The URL subscribers name for a sink bound to ``host``: ``advertised_host`` when given,
    else the bound address; a wildcard bind (``0.0.0.0``, ``::``) names no address a
    server could reach, so it needs ``advertised_host``."""
    name = advertised_host or host
    if is_wildcard(name):
        raise ValueError(f"a sink bound to {host!r} listens on every interface: give the "
                         "address servers reach it at (advertised_host)")
    return f"{scheme}://{url_host(name)}:{port}"


class NotificationSink:
    """Records every POST (when ``status`` < 300); ``status`` can be changed to make the sink
    refuse deliveries, and ``keep_bodies=False`` only counts (for benchmarks).
    ``advertised_host``: the address in :attr:`url` (default: the bound ``host``).
    ``ssl_context``: serve HTTPS with it (a server context; each connection's handshake runs
    in its own thread)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, status: int = 202,
                 keep_bodies: bool = True, advertised_host: str | None = None,
                 ssl_context=None):
        self.host = host
        self.scheme = "https" if ssl_context is not None else "http"
        self.advertised_host = advertised_host
        self.status = status
        self.keep_bodies = keep_bodies
        self.messages: list[ReceivedMessage] = []
        self.count = 0
        self._cond = threading.Condition()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status = sink.status
                if status < 300:
                    with sink._cond:
                        sink.count += 1
                        if sink.keep_bodies:
                            sink.messages.append(ReceivedMessage(self.path, dict(self.headers), body))
                        sink._cond.notify_all()
                # Status line, headers and (empty) body in one write: a split write stalls
                # ~40 ms per request on Nagle + delayed ACK.
                self.wfile.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode())

            def log_message(self, *args):
                pass

        server_class = ThreadingHTTPServer
        if ":" in host:  # an IPv6 literal binds an AF_INET6 socket
            server_class = type("ThreadingHTTPServer6", (ThreadingHTTPServer,),
                                {"address_family": socket.AF_INET6})
        # a client that hangs up mid-request (a cut link, a killed server) is not an error
        # worth a traceback
        members = {"handle_error": _quiet_handle_error}
        if ssl_context is not None:
            def finish_request(server, request, client_address):
                request.settimeout(10)  # a stalled handshake ends this thread, not the sink
                request = ssl_context.wrap_socket(request, server_side=True)
                request.settimeout(None)
                server.RequestHandlerClass(request, client_address, server)
            members["finish_request"] = finish_request
        server_class = type("QuietServer", (server_class,), members)
        self.server = server_class((host.strip("[]"), port), Handler)
        self.server.daemon_threads = True
        cap_retransmit_backoff(self.server.socket)  # inherited by every connection it accepts
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="notification-sink")

    @property
    def url(self) -> str:
        return sink_url(self.host, self.port, self.advertised_host, scheme=self.scheme)

    def start(self) -> "NotificationSink":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 10.0, path: str | None = None) -> list[ReceivedMessage]:
        """Block until at least ``count`` messages (to ``path`` if given) arrived; raises
        AssertionError on timeout."""
        def selected():
            return [m for m in self.messages if path is None or m.path == path]

        def enough():
            return (len(selected()) if self.keep_bodies else self.count) >= count

        with self._cond:
            if not self._cond.wait_for(enough, timeout):
                got = len(selected()) if self.keep_bodies else self.count
                raise AssertionError(f"expected {count} messages at the sink, got {got}")
            return selected()

    def wait_count(self, count: int, timeout: float = 10.0) -> bool:
        """Block until the sink has counted ``count`` messages or ``timeout`` passes."""
        return self.wait_until(lambda: self.count >= count, timeout)

    def wait_until(self, predicate, timeout: float = 10.0) -> bool:
        """Block until ``predicate()`` (called under the sink's lock, after each message) is
        true or ``timeout`` passes; returns its last value."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# == a sink that can take well over 10,000 notifications/s ==================================

class _CountingProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive (pipelining too) for the fast sink: every POST is answered 202
    and counted; ``GET /count`` answers the count, ``GET /wait?n=N&t=T`` answers it once
    the count reaches N or after T seconds. Headers and body of each answer go in one
    write (and all answers to what one read brought, in one write). With an answer delay
    (``state.answer_delay``, seconds), the answers to POSTs are written that much later, in
    order: a sink across a link with that round trip, as a client sees it (the count
    moves when the POST arrives)."""

    def __init__(self, state: "_SinkState", counted: bool = True):
        self.state = state
        self.counted = counted  # the control port's connections are not notifications'
        self.buffer = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        if self.counted:
            self.state.connections += 1

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        answers = []
        state = self.state
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end == -1:
                if len(buffer) > 65536:
                    self.transport.close()
                    return
                break
            head = buffer[:end]
            length = 0
            marker = head.lower().find(b"\ncontent-length:")
            if marker != -1:
                stop = head.find(b"\r", marker + 1)
                try:
                    length = int(head[marker + 16:stop if stop != -1 else len(head)])
                except ValueError:
                    self.transport.close()
                    return
                if not 0 <= length <= _MAX_BODY:  # a body it would wait for forever
                    self.transport.close()
                    return
            if len(buffer) < end + 4 + length:
                break
            body = buffer[end + 4:end + 4 + length] if state.record is not None else b""
            buffer = buffer[end + 4 + length:]
            if head.startswith(b"POST "):
                state.count += 1
                if state.record is not None:
                    state.record.append((head.split(b" ", 2)[1], body, time.time()))
                answers.append(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
            elif head.startswith(b"GET /messages"):
                answers.append(self._messages(head))
            elif head.startswith(b"GET /wait"):
                self._wait(head)
            elif head.startswith(b"GET /connections"):
                answers.append(_text_answer(str(state.connections)))
            else:
                answers.append(_text_answer(str(state.count)))
        self.buffer = buffer
        if answers:
            if state.answer_delay > 0:
                asyncio.get_running_loop().call_later(state.answer_delay, self._write_late,
                                                      b"".join(answers))
            else:
                self.transport.write(b"".join(answers))
        if state.waiters:
            state.wake()

    def _write_late(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    def _messages(self, head: bytes) -> bytes:
        """The recorded POSTs from number ``from`` on, each as ``<path length> <body
        length> <arrival, microseconds of the wall clock>\n<path><body>``."""
        query = head.split(b" ", 2)[1].partition(b"?")[2].decode("latin-1")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        records = self.state.record or []
        start = params.get("from", "0")
        parts = []
        for path, body, at in records[int(start) if start.isdigit() else 0:]:
            parts.append(b"%d %d %d\n%s%s" % (len(path), len(body), int(at * 1e6), path, body))
        payload = b"".join(parts)
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)

    def _wait(self, head: bytes) -> None:
        query = head.split(b" ", 2)[1].partition(b"?")[2].decode("latin-1")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        want = int(params.get("n", "0"))
        timeout = float(params.get("t", "10"))
        loop = asyncio.get_running_loop()
        transport = self.transport
        state = self.state

        def answer():
            if not transport.is_closing():
                transport.write(_text_answer(str(state.count)))

        if state.count >= want:
            answer()
            return
        handle = loop.call_later(timeout, lambda: state.waiters.pop(key, None) and answer())
        key = object()
        state.waiters[key] = (want, answer, handle)


_MAX_BODY = 64 * 1024 * 1024  # bytes of one POST the fast sink takes


class _SinkState:
    def __init__(self, record: bool = False, answer_delay: float = 0.0):
        self.count = 0
        self.connections = 0  # accepted on the notification port (with TLS: handshakes)
        self.answer_delay = answer_delay
        self.waiters: dict = {}
        self.record: list | None = [] if record else None  # (path, body) of each POST

    def wake(self) -> None:
        for key, (want, answer, handle) in list(self.waiters.items()):
            if self.count >= want:
                del self.waiters[key]
                handle.cancel()
                answer()


def _text_answer(text: str) -> bytes:
    body = text.encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body), body)


MAX_ANSWER_DELAY_MS = 10_000  # the longest answer delay the fast sink takes


def serve_fast(host: str = "127.0.0.1", port: int = 0, ready=print, record: bool = False,
               answer_delay: float = 0.0, ssl_context=None) -> None:
    """Run the fast sink in this process until it is killed; ``ready(port, control_port)``
    is called once it listens. ``record``: keep every POST's path and body (``GET
    /messages``); ``answer_delay``: seconds each POST's answer is held (a simulated round
    trip); ``ssl_context``: notifications come over HTTPS, and the count and the other GETs
    are answered on a second, plain port on loopback (``control_port``; else the same)."""
    async def main():
        state = _SinkState(record, answer_delay)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _CountingProtocol(state), host, port,
                                          backlog=1024, ssl=ssl_context)
        for listener in server.sockets:
            cap_retransmit_backoff(listener)
        data_port = control_port = server.sockets[0].getsockname()[1]
        servers = [server]
        if ssl_context is not None:
            control = await loop.create_server(lambda: _CountingProtocol(state, counted=False),
                                               "127.0.0.1", 0)
            control_port = control.sockets[0].getsockname()[1]
            servers.append(control)
        ready(data_port, control_port)
        await asyncio.gather(*(s.serve_forever() for s in servers))
    asyncio.run(main())


class FastSink:
    """A counting notification sink in its own process (an asyncio server: one core, no
    thread per connection), for benchmarks that need a sink faster than the delivery they
    measure. It keeps no bodies; :attr:`count`, :meth:`wait_for` and :attr:`cpu_seconds`
    read it from outside."""

    def __init__(self, host: str = "127.0.0.1", *, record: bool = False,
                 advertised_host: str | None = None, port: int = 0, answer_delay_ms: int = 0,
                 tls: tuple[str, str] | None = None):
        """``advertised_host``: the address in ``url`` (default: ``host``); ``port``: 0 for
        any free one; ``answer_delay_ms``: each POST's answer is held that long (a link's
        round trip as the delivering client sees it); ``tls``: (certificate, key) files to
        take notifications over HTTPS with (the counts stay plain HTTP on loopback)."""
        if not 0 <= answer_delay_ms <= MAX_ANSWER_DELAY_MS:
            raise ValueError(f"answer_delay_ms must be 0..{MAX_ANSWER_DELAY_MS}")
        self.host = host
        self.advertised_host = advertised_host  # the address in url (default: host)
        self.port = port
        self.record = record
        self.answer_delay_ms = answer_delay_ms
        self.tls = tls
        self.control_port = port
        self.proc: subprocess.Popen | None = None
        self._fetched: list[ReceivedMessage] = []

    @property
    def url(self) -> str:
        return sink_url(self.host, self.port, self.advertised_host,
                        scheme="https" if self.tls else "http")

    def start(self) -> "FastSink":
        tls_args = ["--tls-cert", str(self.tls[0]), "--tls-key", str(self.tls[1])] if self.tls else []
        self.proc = subprocess.Popen([sys.executable, "-m", "edn.sink", "--fast", "--host",
                                      self.host, "--port", str(self.port),
                                      "--answer-delay-ms", str(self.answer_delay_ms), *tls_args]
                                     + (["--record"] if self.record else []),
                                     stdout=subprocess.PIPE, text=True,
                                     # its own session: a terminal's Ctrl-C goes to the demo,
                                     # which stops the sink itself (no second traceback)
                                     start_new_session=True)
        line = self.proc.stdout.readline()  # blocks until the server listens
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the fast sink did not start: {line!r}")
        self.port, self.control_port = (int(p) for p in line.split()[1:3])
        return self

    @property
    def connections(self) -> int:
        """Connections accepted on the notification port (over TLS: handshakes)."""
        return self._get("/connections", 10.0)

    def _control_host(self) -> str:
        return "127.0.0.1" if self.tls else self.host

    def _get(self, path: str, timeout: float) -> int:
        connection = http.client.HTTPConnection(self._control_host(), self.control_port,
                                                timeout=timeout)
        try:
            connection.request("GET", path)
            return int(connection.getresponse().read())
        finally:
            connection.close()

    @property
    def count(self) -> int:
        return self._get("/count", 10.0)

    @property
    def messages(self) -> list[ReceivedMessage]:
        """Every POST recorded so far (``record=True``), oldest first; fetched from the sink
        process once each."""
        connection = http.client.HTTPConnection(self._control_host(), self.control_port,
                                                timeout=60)
        try:
            connection.request("GET", f"/messages?from={len(self._fetched)}")
            data = connection.getresponse().read()
        finally:
            connection.close()
        at = 0
        while at < len(data):
            line_end = data.index(b"\n", at)
            path_length, body_length, arrival = (int(x) for x in data[at:line_end].split())
            path_end = line_end + 1 + path_length
            self._fetched.append(ReceivedMessage(data[line_end + 1:path_end].decode("latin-1"),
                                                 {}, data[path_end:path_end + body_length],
                                                 arrival / 1e6))
            at = path_end + body_length
        return list(self._fetched)

    def wait_count(self, count: int, timeout: float = 10.0) -> bool:
        """Block until the sink has counted ``count`` POSTs or ``timeout`` passes."""
        return self._get(f"/wait?n={count}&t={timeout}", timeout + 10.0) >= count

    def wait_for(self, count: int, timeout: float = 10.0) -> int:
        """Block until the sink has counted ``count`` POSTs; AssertionError on timeout."""
        got = self._get(f"/wait?n={count}&t={timeout}", timeout + 10.0)
        if got < count:
            raise AssertionError(f"expected {count} messages at the sink, got {got}")
        return got

    @property
    def cpu_seconds(self) -> float:
        """CPU time (user + system) the sink process has used."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="a counting notification sink")
    parser.add_argument("--fast", action="store_true", help="the asyncio sink (counts only)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", action="store_true", help="keep paths and bodies")
    parser.add_argument("--answer-delay-ms", type=int, default=0,
                        help="hold each POST's answer this many milliseconds (a simulated "
                             f"round trip; 0..{MAX_ANSWER_DELAY_MS})")
    parser.add_argument("--tls-cert", default=None, help="serve notifications over HTTPS with it")
    parser.add_argument("--tls-key", default=None, help="its key")
    args = parser.parse_args(argv)
    if not args.fast:
        parser.error("only --fast runs as a command")
    if not 0 <= args.answer_delay_ms <= MAX_ANSWER_DELAY_MS:
        parser.error(f"--answer-delay-ms must be 0..{MAX_ANSWER_DELAY_MS}, "
                     f"not {args.answer_delay_ms}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0..65535, not {args.port}")
    context = None
    if args.tls_cert or args.tls_key:
        from wsframework.tls import ServerTls, TlsConfigError, server_context
        try:
            context = server_context(ServerTls(args.tls_cert, args.tls_key))
        except (TlsConfigError, TypeError) as exc:
            parser.error(f"--tls-cert and --tls-key: {exc}")
    serve_fast(args.host, args.port,
               ready=lambda port, control: print(f"PORT {port} {control}", flush=True),
               record=args.record, answer_delay=args.answer_delay_ms / 1000.0,
               ssl_context=context)


if __name__ == "__main__":
    main()
