"""The lab's delay line where the kernel has no netem: a small program that takes packets from
netfilter queues (iptables ``-j NFQUEUE``) and lets each through after its link's delay.

It speaks the nfnetlink queue protocol itself (an ``AF_NETLINK`` socket; copy mode "meta",
so no payload is ever copied), so it needs nothing beyond iptables: no libnetfilter_queue,
no compiled extension. Each queue number is one direction of one link; its settings come
on stdin as JSON lines ``{"queue": 4, "delay_ms": 20, "jitter_ms": 5, "reorder": 0.0}``:

- every packet is held ``delay_ms`` plus a uniform draw in ``[-jitter_ms, +jitter_ms]``
  (netem's default distribution), so jitter reorders packets as it does under netem;
- with probability ``reorder`` a packet goes through at once (netem's ``reorder``).

It runs in the lab's bridge namespace (``ip netns exec``) and exits when stdin closes, so a
lab that dies takes its delay line with it. The lab binds queues with ``--queue-bypass``:
were this program gone, packets would pass undelayed rather than vanish.

Run: ``python -m benchmarks.lab.delayer QUEUE [QUEUE ...]``; it prints ``ready`` once every
queue is bound, and ``stats {...}`` (packets held and passed) when asked with ``{"stats": 1}``.
"""
from __future__ import annotations

import heapq
import json
import os
import random
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NETLINK_NO_ENOBUFS = 5
SOL_NETLINK = 270
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1
QUEUE_MAXLEN = 65_536  # packets one queue may hold (a 150 ms link at ~400,000 packets/s)
MAX_DELAY_MS = 60_000.0
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_NFGEN = struct.Struct("=BBH")  # nfgenmsg; res_id (the queue number) is big-endian


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, queue: int, attributes: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, 0, socket.htons(queue)) + attributes
    return _HEADER.pack(_HEADER.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def bind_message(queue: int, seq: int) -> list[bytes]:
    """The config messages that bind ``queue``, copy only metadata and size its backlog."""
    flags = NLM_F_REQUEST | NLM_F_ACK
    return [
        _message(NFQNL_MSG_CONFIG, queue, _attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)),
                 flags, seq),
        _message(NFQNL_MSG_CONFIG, queue, _attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
                 flags, seq + 1),
        _message(NFQNL_MSG_CONFIG, queue, _attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)),
                 flags, seq + 2),
    ]


def verdict_message(queue: int, packet_id: int) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue,
                    _attribute(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id)))


def parse_packets(data: bytes):
    """(queue, packet id) of every queued-packet message in one netlink read; raises
    OSError for an error answer (a refused bind)."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _flags, _seq, _pid = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size:
            break
        if kind == NLMSG_ERROR:
            (error,) = struct.unpack_from("=i", data, offset + _HEADER.size)
            if error:
                raise OSError(-error, os.strerror(-error))
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            queue = socket.ntohs(_NFGEN.unpack_from(data, offset + _HEADER.size)[2])
            at = offset + _HEADER.size + _NFGEN.size
            while at + 4 <= offset + length:
                size, attr = struct.unpack_from("=HH", data, at)
                if size < 4:
                    break
                if attr & 0x7FFF == NFQA_PACKET_HDR:
                    yield queue, struct.unpack_from("!I", data, at + 4)[0]
                    break
                at += size + (-size % 4)
        offset += length + (-length % 4)


class LinkDelay:
    """One direction of one link: how long its packets are held."""

    def __init__(self, delay_ms: float = 0.0, jitter_ms: float = 0.0, reorder: float = 0.0):
        for name, value in (("delay_ms", delay_ms), ("jitter_ms", jitter_ms)):
            if not 0.0 <= value <= MAX_DELAY_MS:
                raise ValueError(f"{name} must be in [0, {MAX_DELAY_MS:g}], got {value!r}")
        if jitter_ms > delay_ms:
            raise ValueError(f"jitter_ms ({jitter_ms!r}) cannot exceed delay_ms ({delay_ms!r})")
        if not 0.0 <= reorder <= 1.0:
            raise ValueError(f"reorder must be a probability in [0, 1], got {reorder!r}")
        self.delay = delay_ms / 1000.0
        self.jitter = jitter_ms / 1000.0
        self.reorder = reorder

    def hold(self, rng: random.Random) -> float:
        """Seconds to hold the next packet."""
        if self.reorder and rng.random() < self.reorder:
            return 0.0
        if self.jitter:
            return self.delay + rng.uniform(-self.jitter, self.jitter)
        return self.delay


def serve(queues: list[int], control=sys.stdin, out=sys.stdout, seed: int | None = None) -> None:
    """Bind ``queues``, then hold and release packets until ``control`` closes."""
    rng = random.Random(seed)
    links = {queue: LinkDelay() for queue in queues}
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 64 * 1024 * 1024)  # SO_RCVBUFFORCE (root)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
    sock.bind((0, 0))
    for k, queue in enumerate(queues):
        for message in bind_message(queue, 3 * k + 1):
            sock.send(message)
            for _ in parse_packets(sock.recv(65536)):  # the ACK (raises if refused)
                pass
    sock.setblocking(False)
    print("ready", file=out, flush=True)
    held: list[tuple[float, int, int, int]] = []  # (release at, order, queue, packet id)
    order = held_total = passed = 0
    control_fd = control.fileno()
    pending = b""
    while True:
        now = time.monotonic()
        due = []
        while held and held[0][0] <= now:
            _, _, queue, packet_id = heapq.heappop(held)
            due.append(verdict_message(queue, packet_id))
        if due:
            passed += len(due)
            for start in range(0, len(due), 512):
                _send_all(sock, b"".join(due[start:start + 512]))
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else 1.0
        readable, _, _ = select.select([sock, control_fd], [], [], timeout)
        if control_fd in readable:
            chunk = os.read(control_fd, 65536)
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                _apply(line, links, out, {"held": held_total, "passed": passed, "holding": len(held)})
        if sock in readable:
            while True:
                try:
                    data = sock.recv(1 << 20)
                except BlockingIOError:
                    break
                now = time.monotonic()
                for queue, packet_id in parse_packets(data):
                    link = links.get(queue)
                    wait = link.hold(rng) if link else 0.0
                    held_total += 1
                    order += 1
                    heapq.heappush(held, (now + wait, order, queue, packet_id))


def _send_all(sock: socket.socket, data: bytes) -> None:
    while True:
        try:
            sock.send(data)
            return
        except BlockingIOError:
            select.select([], [sock], [], 1.0)


def _apply(line: bytes, links: dict[int, LinkDelay], out, counters: dict) -> None:
    """One control line: new settings for a queue, or a request for the counters. A bad
    line is answered with ``error ...`` and changes nothing."""
    if not line.strip():
        return
    try:
        order = json.loads(line)
        if not isinstance(order, dict):
            raise ValueError("a control line is a JSON object")
        if order.get("stats"):
            print("stats " + json.dumps(counters), file=out, flush=True)
            return
        unknown = set(order) - {"queue", "delay_ms", "jitter_ms", "reorder"}
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}")
        queue = order["queue"]
        if queue not in links:
            raise ValueError(f"queue {queue!r} is not bound here")
        links[queue] = LinkDelay(float(order.get("delay_ms", 0.0)), float(order.get("jitter_ms", 0.0)),
                                 float(order.get("reorder", 0.0)))
        print(f"ok {queue}", file=out, flush=True)
    except (ValueError, KeyError, TypeError) as error:
        print(f"error {error}", file=out, flush=True)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    queues = [int(a) for a in args]
    if not queues or any(not 0 <= q < 65536 for q in queues):
        raise SystemExit("usage: python -m benchmarks.lab.delayer QUEUE [QUEUE ...] (0-65535)")
    try:
        os.nice(-10)  # a late delay line stretches every link: it goes before the roles it shapes
    except OSError:
        pass
    serve(queues)


if __name__ == "__main__":
    main()
