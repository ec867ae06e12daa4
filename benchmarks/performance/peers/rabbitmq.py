"""RabbitMQ (the Debian ``rabbitmq-server`` package) as a peer of ``edn bench peers``: its
headers exchange, which matches equality only.

A range subscription cannot be said to a headers exchange, so each becomes a queue bound
once per grid cell its box touches (``x-match: all`` on the event's cell numbers ``c0`` ..
``c3``; :mod:`.grid`), and the consumer drops what its box does not hold:
the broker routes by cell, the client filters exactly. Deliveries are counted after that
filter (checked against the oracle). Kinds, as for ActiveMQ: ``persistent`` (durable
queues, persistent messages, a publisher confirm once on disk) and ``nonpersistent``
(transient queues and messages, still confirmed). CPU is the broker's process group.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from edn.localnet.processes import free_port

from .broker_process import BrokerProcess
from .broker_system import BrokerSystem
from .grid import cell, cells, inside
from .workload import Workload

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
_CONSUMER_CONNECTIONS = 4


def missing() -> str | None:
    if not SERVER.exists():
        return f"RabbitMQ is not installed ({SERVER} is missing: apt-get install rabbitmq-server)"
    try:
        import pika  # noqa: F401
    except ImportError:
        return "no pika (pip install pika) to drive RabbitMQ"
    return None


def _within(deadline: float, allowed: float, started: float, done: int, total: int) -> None:
    """TimeoutError once past ``deadline``, or as soon as the pace so far (after 5 s) says
    ``total`` would not be bound by then: a size the broker cannot take costs seconds, not
    the whole allowance."""
    now = time.monotonic()
    projected = (now - started) / done * total
    if now > deadline or (now - started > 5 and started + projected > deadline):
        raise TimeoutError(f"{done} of {total} queues bound in {now - started:.0f} s: all "
                           f"{total} would take about {projected:.0f} s, over {allowed:.0f} s")


class Broker(BrokerProcess):
    label = "RabbitMQ"

    def __init__(self, tmp: Path):
        self.dir = tmp / "rabbitmq"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, dist = free_port(), free_port()
        # an Erlang port mapper of its own, on a port of its own: stopped with the broker,
        # and never one another Erlang node on this machine relies on
        self.epmd_port = free_port()
        (self.dir / "rabbitmq.conf").write_text(
            f"loopback_users = none\nlisteners.tcp.default = {self.port}\n")
        (self.dir / "enabled_plugins").write_text("[].\n")
        self.env = dict(os.environ, HOME=str(self.dir), RABBITMQ_NODENAME=f"bench{self.port}@localhost",
                        RABBITMQ_NODE_PORT=str(self.port), RABBITMQ_DIST_PORT=str(dist),
                        RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
                        RABBITMQ_LOG_BASE=str(self.dir / "log"),
                        RABBITMQ_CONFIG_FILE=str(self.dir / "rabbitmq"),
                        RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "enabled_plugins"),
                        RABBITMQ_PID_FILE=str(self.dir / "pid"),
                        ERL_EPMD_PORT=str(self.epmd_port))

    def parameters(self):
        import pika
        return pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0,
                                         credentials=pika.PlainCredentials("guest", "guest"))

    def start(self, timeout: float = 60.0) -> "Broker":
        import pika
        self.launch([str(SERVER)], env=self.env, refused=(pika.exceptions.AMQPConnectionError,),
                    timeout=timeout,
                    probe=lambda: pika.BlockingConnection(self.parameters()).close())
        return self

    def stop(self) -> None:
        super().stop()
        if self.proc is not None and shutil.which("epmd"):  # it daemonized out of the group
            subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"], env=self.env,
                           capture_output=True, timeout=30)
        shutil.rmtree(self.dir / "mnesia", ignore_errors=True)


class RabbitMqSystem(BrokerSystem):
    def __init__(self, tmp: Path, work: Workload, kind: str, *, subscribe_timeout: float = 600.0):
        super().__init__()
        self.name = f"rabbitmq_{kind}"
        self.work = work
        self.kind = kind
        self.subscribe_timeout = subscribe_timeout
        self.broker = Broker(tmp / self.name)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._routed = [0] * _CONSUMER_CONNECTIONS

    def start(self) -> None:
        self.broker.start()

    def subscribe(self) -> None:
        import pika
        work, durable = self.work, self.kind == "persistent"
        started = time.monotonic()
        deadline = started + self.subscribe_timeout
        connection = pika.BlockingConnection(self.broker.parameters())
        channel = connection.channel()
        channel.exchange_declare("grid", exchange_type="headers", durable=durable)
        for i in range(work.n):
            channel.queue_declare(f"s{i}", durable=durable)
            for c in cells(work.lo[i], work.hi[i]):
                channel.queue_bind(f"s{i}", "grid", arguments={
                    "x-match": "all", **{f"c{j}": b for j, b in enumerate(c)}})
            if i % 100 == 99:
                _within(deadline, self.subscribe_timeout, started, i + 1, work.n)
        connection.close()
        ready = threading.Barrier(_CONSUMER_CONNECTIONS + 1)
        for k in range(_CONSUMER_CONNECTIONS):
            thread = threading.Thread(target=self._consume, args=(k, range(k, work.n, _CONSUMER_CONNECTIONS), ready),
                                      daemon=True, name=f"rabbitmq-consumer-{k}")
            thread.start()
            self._threads.append(thread)
        ready.wait(max(1.0, deadline - time.monotonic()))

    def _consume(self, k: int, mine: range, ready: threading.Barrier) -> None:
        import pika
        work = self.work
        connection = pika.BlockingConnection(self.broker.parameters())
        channel = connection.channel()

        def on_message(_channel, method, properties, _body, i=None):
            self._routed[k] += 1  # each consumer thread counts in a slot of its own
            headers = properties.headers
            point = np.array([float(headers[f"x{j}"]) for j in range(work.lo.shape[1])])
            if inside(work.lo[i], work.hi[i], point):
                self.received.append((i, int(headers["eid"]), time.time()))

        for i in mine:
            channel.basic_consume(f"s{i}", lambda *a, i=i: on_message(*a, i=i), auto_ack=True)
        ready.wait()
        while not self._stop.is_set():
            connection.process_data_events(time_limit=0.05)
        connection.close()

    def connect(self) -> None:
        import pika
        self.publisher = pika.BlockingConnection(self.broker.parameters())
        self.channel = self.publisher.channel()
        self.channel.confirm_delivery()
        self.properties = pika.BasicProperties

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        if getattr(self, "publisher", None) is not None:
            try:
                self.publisher.close()
            except Exception:
                pass
        self.broker.stop()

    def publish(self, k: int, event_id: int) -> None:
        point = self.work.points[k]
        headers = {**{f"c{j}": cell(v) for j, v in enumerate(point)},
                   **{f"x{j}": f"{v:.3f}" for j, v in enumerate(point)}, "eid": event_id}
        # confirmed: the call returns once the broker has it (on disk, when persistent)
        self.channel.basic_publish("grid", "", b"", self.properties(
            headers=headers, delivery_mode=2 if self.kind == "persistent" else 1))

    def cpu_seconds(self) -> float:
        return self.broker.cpu_seconds()

    def routed(self) -> int:
        return sum(self._routed)
