"""A small MQTT 3.1.1 client, enough to drive a broker from a benchmark: many subscriber
connections read by one thread, and one publisher whose QoS 1 PUBLISHes are acknowledged.
Packets are encoded and parsed by hand, as for STOMP: a client library's thread per
connection would be the slowest part of the measurement at 10,000 subscribers."""
from __future__ import annotations

import selectors
import socket
import struct
import threading
import time

CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK, DISCONNECT = 1, 2, 3, 4, 8, 9, 14
_SUBACK_FAILURE = 0x80


class MqttError(RuntimeError):
    pass


def _length(n: int) -> bytes:
    """The fixed header's Remaining Length: 7 bits a byte, the high bit saying more follow."""
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def packet(kind: int, flags: int, body: bytes) -> bytes:
    return bytes([kind << 4 | flags]) + _length(len(body)) + body


def connect_packet(client_id: str) -> bytes:
    # protocol "MQTT" level 4 (3.1.1), clean session, no keep-alive
    return packet(CONNECT, 0, _string("MQTT") + bytes([4, 0x02]) + struct.pack("!H", 0)
                  + _string(client_id))


def subscribe_packet(packet_id: int, filters: list[str], qos: int) -> bytes:
    return packet(SUBSCRIBE, 0x2, struct.pack("!H", packet_id)
                  + b"".join(_string(f) + bytes([qos]) for f in filters))


def publish_packet(topic: str, payload: bytes, *, qos: int = 0, packet_id: int = 0) -> bytes:
    body = _string(topic) + (struct.pack("!H", packet_id) if qos else b"") + payload
    return packet(PUBLISH, qos << 1, body)


def puback_packet(packet_id: int) -> bytes:
    return packet(PUBACK, 0, struct.pack("!H", packet_id))


def parse_publish(flags: int, body: bytes) -> tuple[str, int, bytes]:
    """(topic, packet id or 0, payload) of a PUBLISH's body."""
    (size,) = struct.unpack_from("!H", body)
    topic = body[2:2 + size].decode()
    at = 2 + size
    packet_id = 0
    if flags & 0x06:
        (packet_id,) = struct.unpack_from("!H", body, at)
        at += 2
    return topic, packet_id, body[at:]


class PacketReader:
    """Whole packets out of a byte stream fed in chunks: (kind, flags, body)."""

    def __init__(self):
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[int, int, bytes]]:
        buffer = self._buffer + chunk if self._buffer else chunk
        packets, at, end = [], 0, len(buffer)
        while at + 2 <= end:
            length, shift, cursor = 0, 0, at + 1
            while cursor < end:
                digit = buffer[cursor]
                length |= (digit & 0x7F) << shift
                shift += 7
                cursor += 1
                if not digit & 0x80:
                    break
                if shift > 21:
                    raise MqttError("a Remaining Length longer than 4 bytes")
            else:
                break  # the length itself is not all here yet
            if cursor + length > end:
                break
            first = buffer[at]
            packets.append((first >> 4, first & 0x0F, buffer[cursor:cursor + length]))
            at = cursor + length
        self._buffer = buffer[at:]
        return packets


def _open(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Subscribers:
    """One connection per subscriber, each holding one subscription of one or more topic
    filters at QoS 1; a single thread reads them all. ``on_message(subscriber, payload)``
    runs on that thread for every PUBLISH, which is then acknowledged."""

    def __init__(self, on_message, *, timeout: float = 30.0):
        self.on_message = on_message
        self.timeout = timeout
        self._selector = selectors.DefaultSelector()
        self._socks: list[socket.socket] = []
        self._suback = 0
        self.published = 0  # PUBLISHes read (only the reader thread writes it)
        self._cond = threading.Condition()
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, daemon=True, name="mqtt-subscribers")
        self._thread.start()

    def add(self, index: int, address: tuple[str, int], filters: list[str]) -> None:
        """Connect subscriber ``index`` and subscribe it; the CONNACK and SUBACK are read by
        the reader (:meth:`wait_subscribed`): a client need not wait for CONNACK to go on."""
        sock = _open(*address, self.timeout)
        sock.sendall(connect_packet(f"s{index}") + subscribe_packet(1, filters, 1))
        self._socks.append(sock)
        self._selector.register(sock, selectors.EVENT_READ, (index, PacketReader()))

    def wait_subscribed(self, count: int, timeout: float) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._suback >= count or self.error, timeout):
                raise TimeoutError(f"{self._suback} of {count} SUBACKs within {timeout:.0f} s")
        if self.error:
            raise MqttError(self.error)

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            if not self._selector.get_map():  # nothing registered yet: select would fail
                time.sleep(0.01)
                continue
            for key, _ in self._selector.select(0.1):
                sock, (index, reader) = key.fileobj, key.data
                try:
                    chunk = sock.recv(1 << 16)
                except OSError:
                    chunk = b""
                if not chunk:
                    self._selector.unregister(sock)
                    if not self._stop.is_set():
                        self._fail(f"the broker closed subscriber {index}'s connection")
                    continue
                for kind, flags, body in reader.feed(chunk):
                    self._handle(sock, index, kind, flags, body)

    def _handle(self, sock, index: int, kind: int, flags: int, body: bytes) -> None:
        if kind == PUBLISH:
            self.published += 1
            _, packet_id, payload = parse_publish(flags, body)
            self.on_message(index, payload)
            if packet_id:
                sock.sendall(puback_packet(packet_id))
        elif kind == SUBACK:
            if _SUBACK_FAILURE in body[2:]:
                self._fail(f"the broker refused subscriber {index}'s filters")
            with self._cond:
                self._suback += 1
                self._cond.notify_all()
        elif kind == CONNACK and body[1] != 0:
            self._fail(f"the broker refused subscriber {index}'s CONNECT with code {body[1]}")

    def _fail(self, reason: str) -> None:
        with self._cond:
            self.error = self.error or reason
            self._cond.notify_all()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self._socks:
            try:
                sock.close()
            except OSError:
                pass
        self._selector.close()


class Publisher:
    """One connection publishing at QoS 1; PUBACKs are counted by a reader thread
    (:meth:`wait_acknowledged`). At most 65,535 PUBLISHes are unacknowledged at once (their
    packet ids must differ)."""

    _IDS = 65535

    def __init__(self, address: tuple[str, int], client_id: str, *, timeout: float = 30.0):
        self.sock = _open(*address, timeout)
        self.sock.sendall(connect_packet(client_id))
        self._reader = PacketReader()
        self._sent = self._acked = 0
        self._cond = threading.Condition()
        self.error: str | None = None
        kind, _, body = self._read_one()
        if kind != CONNACK or body[1] != 0:
            raise MqttError(f"the broker refused the publisher: packet {kind}, {body!r}")
        self.sock.settimeout(None)
        self._thread = threading.Thread(target=self._read_loop, daemon=True, name="mqtt-publisher")
        self._thread.start()

    def _read_one(self):
        while True:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise MqttError("the broker closed the publisher's connection")
            packets = self._reader.feed(chunk)
            if packets:
                return packets[0]

    def publish(self, topic: str, payload: bytes, timeout: float = 60.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._sent - self._acked < self._IDS, timeout):
                raise TimeoutError("no PUBACK for 65,535 PUBLISHes")
            self._sent += 1
            packet_id = self._sent % self._IDS + 1
        self.sock.sendall(publish_packet(topic, payload, qos=1, packet_id=packet_id))

    def wait_acknowledged(self, timeout: float) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._acked >= self._sent or self.error, timeout):
                raise TimeoutError(f"{self._acked} of {self._sent} PUBACKs within {timeout:.0f} s")
        if self.error:
            raise MqttError(self.error)

    def _read_loop(self) -> None:
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    break
                acked = sum(kind == PUBACK for kind, _, _ in self._reader.feed(chunk))
                if acked:
                    with self._cond:
                        self._acked += acked
                        self._cond.notify_all()
        except OSError:
            pass
        with self._cond:
            if self._acked < self._sent:
                self.error = "the broker closed the publisher's connection"
            self._cond.notify_all()

    def close(self) -> None:
        try:
            self.sock.sendall(packet(DISCONNECT, 0, b""))
        except OSError:
            pass
        self.sock.close()
        self._thread.join(10)
