"""A small STOMP 1.2 client over one socket, enough to drive a broker from a benchmark:
CONNECT, SUBSCRIBE (with a selector), SEND (with a receipt when asked) and a reader that
hands each MESSAGE frame's headers to a callback. Frames are parsed by hand: a client
library would be the slowest part of the measurement."""
from __future__ import annotations

import socket
import threading

_ESCAPES = {"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\\r"}
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", "\\c": ":", "\\r": "\r"}


def _escape(value: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        pair = value[i:i + 2]
        if pair in _UNESCAPES:
            out.append(_UNESCAPES[pair])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def frame(command: str, headers: dict, body: bytes = b"") -> bytes:
    head = "".join(f"{_escape(k)}:{_escape(str(v))}\n" for k, v in headers.items())
    return f"{command}\n{head}\n".encode() + body + b"\0"


class StompError(RuntimeError):
    pass


class StompConnection:
    """One connection. ``on_message(headers)`` runs on the reader thread for every MESSAGE;
    receipts are counted (:meth:`wait_receipts`)."""

    def __init__(self, host: str, port: int, *, on_message=None, timeout: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.on_message = on_message
        self._send_lock = threading.Lock()
        self._receipts = 0
        self._receipt_cond = threading.Condition()
        self.error: str | None = None
        self.sock.sendall(frame("CONNECT", {"accept-version": "1.2", "host": "localhost",
                                            "heart-beat": "0,0"}))
        self._buffer, self._at = b"", 0
        command, headers, _ = self._read_frame()
        if command != "CONNECTED":
            raise StompError(f"the broker answered {command}: {headers.get('message')}")
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name="stomp-reader")
        self._reader.start()

    def send(self, destination: str, headers: dict, body: bytes = b"", *,
             receipt: str | None = None) -> None:
        extra = {"receipt": receipt} if receipt is not None else {}
        data = frame("SEND", {"destination": destination, "content-length": len(body),
                              **headers, **extra}, body)
        with self._send_lock:
            self.sock.sendall(data)

    def subscribe(self, subscription_id: str, destination: str, *, selector: str | None = None,
                  prefetch: int = 1000, receipt: str | None = None) -> None:
        headers = {"id": subscription_id, "destination": destination, "ack": "auto",
                   "activemq.prefetchSize": prefetch}
        if selector:
            headers["selector"] = selector
        if receipt is not None:
            headers["receipt"] = receipt
        with self._send_lock:
            self.sock.sendall(frame("SUBSCRIBE", headers))

    def wait_receipts(self, count: int, timeout: float) -> None:
        """Wait until ``count`` receipts have come in all told."""
        with self._receipt_cond:
            if not self._receipt_cond.wait_for(
                    lambda: self._receipts >= count or self.error is not None, timeout):
                raise StompError(f"{self._receipts} of {count} receipts in {timeout} s")
        if self.error is not None:
            raise StompError(self.error)

    def close(self) -> None:
        try:
            with self._send_lock:
                self.sock.sendall(frame("DISCONNECT", {}))
        except OSError:
            pass
        self.sock.close()

    # -- reading --------------------------------------------------------------------------------
    def _fill(self) -> bool:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            return False
        # frames are read at an offset (slicing each off would copy the rest every time);
        # what was read is dropped here, once per chunk
        self._buffer = self._buffer[self._at:] + chunk
        self._at = 0
        return True

    def _read_frame(self):
        while True:
            parsed = self._take_frame()
            if parsed is not None:
                return parsed
            if not self._fill():
                raise StompError("the broker closed the connection")

    def _take_frame(self):
        buffer, at = self._buffer, self._at
        while at < len(buffer) and buffer[at] in b"\r\n":  # heart-beats between frames
            at += 1
        self._at = at
        end_of_head = buffer.find(b"\n\n", at)
        if end_of_head < 0:
            return None
        lines = buffer[at:end_of_head].decode().split("\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers.setdefault(_unescape(key), _unescape(value))
        start = end_of_head + 2
        if "content-length" in headers:
            end = start + int(headers["content-length"])
            if len(buffer) < end + 1:
                return None
        else:
            end = buffer.find(b"\0", start)
            if end < 0:
                return None
        self._at = end + 1
        return lines[0], headers, buffer[start:end]

    def _read_loop(self) -> None:
        try:
            while True:
                parsed = self._take_frame()
                if parsed is None:
                    if not self._fill():
                        break
                    continue
                command, headers, _ = parsed
                if command == "MESSAGE":
                    if self.on_message is not None:
                        self.on_message(headers)
                elif command == "RECEIPT":
                    with self._receipt_cond:
                        self._receipts += 1
                        self._receipt_cond.notify_all()
                elif command == "ERROR":
                    with self._receipt_cond:
                        self.error = headers.get("message", "ERROR")
                        self._receipt_cond.notify_all()
        except OSError:
            pass
