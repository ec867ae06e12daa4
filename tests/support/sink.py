"""A real HTTP notification sink on loopback that records what it receives.

Tests wait on a condition (``wait_for``) instead of sleeping.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from wsframework.soap import Envelope, parse_envelope
from wsframework.xmlparse import ParserLimits


@dataclass
class ReceivedMessage:
    path: str
    headers: dict
    body: bytes

    @property
    def envelope(self) -> Envelope:
        return parse_envelope(self.body, ParserLimits(max_bytes=64 * 1024 * 1024))


class HttpSink:
    def __init__(self, status: int = 202):
        self.status = status
        self.messages: list[ReceivedMessage] = []
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
                        sink.messages.append(ReceivedMessage(self.path, dict(self.headers), body))
                        sink._cond.notify_all()
                # Headers and (empty) body in one write: avoids the Nagle/delayed-ACK stall.
                self.wfile.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n".encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "HttpSink":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 10.0, path: str | None = None) -> list[ReceivedMessage]:
        """Block until at least ``count`` messages (to ``path`` if given) arrived."""
        def selected():
            return [m for m in self.messages if path is None or m.path == path]
        with self._cond:
            if not self._cond.wait_for(lambda: len(selected()) >= count, timeout):
                raise AssertionError(f"expected {count} messages at the sink, got {len(selected())}")
            return selected()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
