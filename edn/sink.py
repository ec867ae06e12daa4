"""A notification sink: a small real HTTP server that records the SOAP messages posted to it.

Used by ``edn demo``, the benchmarks and the integration tests. Callers wait on a condition
(:meth:`NotificationSink.wait_for`) rather than sleeping.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from wsframework.soap import Envelope, parse_envelope
from wsframework.xmlparse import ParserLimits

_LIMITS = ParserLimits(max_bytes=64 * 1024 * 1024)


@dataclass
class ReceivedMessage:
    path: str
    headers: dict
    body: bytes

    @property
    def envelope(self) -> Envelope:
        return parse_envelope(self.body, _LIMITS)


class NotificationSink:
    """Records every POST (when ``status`` < 300); ``status`` can be changed to make the sink
    refuse deliveries, and ``keep_bodies=False`` only counts (for benchmarks)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, status: int = 202,
                 keep_bodies: bool = True):
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

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="notification-sink")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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

    def wait_until(self, predicate, timeout: float = 10.0) -> bool:
        """Block until ``predicate()`` (called under the sink's lock, after each message) is
        true or ``timeout`` passes; returns its last value."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
