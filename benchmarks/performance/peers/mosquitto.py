"""Mosquitto (the Debian ``mosquitto`` package) as a peer of ``edn bench peers``: topic
routing only, the floor of what a broker does for a range subscription.

An event is published to the topic of its grid cell (``g/<cell>/<cell>/<cell>/<cell>``,
:mod:`.grid`) and a subscription is one MQTT connection subscribed to the topic filters that
cover its box's cells (``+`` where it spans an attribute): the broker routes by cell and the
consumer drops what its box does not hold, counted after that filter. One connection per
subscription, since MQTT replaces a client's subscription to the same filter and the cells
are few. QoS 1 both ways: the publisher's PUBLISH is acknowledged by the broker, and each
delivery by the subscriber. Mosquitto keeps messages in memory (its persistence is a
periodic snapshot, with no sync before an acknowledgement), so it runs in one kind only,
``nonpersistent``. Its queues are unbounded, so that a burst is held, not dropped. CPU is
the broker's process.
"""
from __future__ import annotations

import resource
import shutil
import time
from pathlib import Path

from edn.localnet.processes import free_port

from .broker_process import BrokerProcess
from .broker_system import BrokerSystem
from .grid import topic, topic_filters
from .mqtt import MqttError, Publisher, Subscribers
from .workload import Workload

SERVER = "mosquitto"
# subscriber connections per listening port: loopback connections to one port are bounded
# by the ephemeral port range (about 28,000)
_PER_LISTENER = 20_000
_SPARE_DESCRIPTORS = 1_000


def _executable() -> str:
    return shutil.which(SERVER) or "/usr/sbin/mosquitto"  # sbin: not on every user's PATH


def missing() -> str | None:
    if not Path(_executable()).exists():
        return "Mosquitto is not installed (apt-get install mosquitto)"
    return None


def _allow_descriptors(count: int) -> None:
    """Raise this process's descriptor limit (inherited by the broker) to ``count``: the
    hard limit too when this process may (root). Fails with the reason when it cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= count:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, max(hard, count)))
    except (ValueError, OSError) as exc:
        raise RuntimeError(f"{count} descriptors are needed and the limit is {soft}/{hard} "
                           f"({exc})") from exc


class Broker(BrokerProcess):
    label = "Mosquitto"

    def __init__(self, tmp: Path, listeners: int):
        self.dir = tmp / "mosquitto"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in range(listeners)]
        lines = ["per_listener_settings false", "allow_anonymous true", "persistence false",
                 # unbounded queues: a burst is held for a slow subscriber, never dropped
                 "max_queued_messages 0", "max_queued_bytes 0", "set_tcp_nodelay true",
                 "log_dest stderr", "log_type error", "log_type warning"]
        lines += [f"listener {port} 127.0.0.1" for port in self.ports]
        self.config = self.dir / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 30.0) -> "Broker":
        self.launch([_executable(), "-c", str(self.config)], refused=(OSError, MqttError),
                    timeout=timeout, interval=0.05,
                    probe=lambda: Publisher(self.address(-1), "probe", timeout=1.0).close())
        return self

    def address(self, k: int) -> tuple[str, int]:
        return "127.0.0.1", self.ports[k % len(self.ports)]


class MosquittoSystem(BrokerSystem):
    def __init__(self, tmp: Path, work: Workload, *, subscribe_timeout: float = 600.0):
        super().__init__()
        self.name = "mosquitto_nonpersistent"
        self.work = work
        self.subscribe_timeout = subscribe_timeout
        self.broker = Broker(tmp / self.name, listeners=max(1, -(-work.n // _PER_LISTENER)))
        self.subscribers: Subscribers | None = None
        self.publisher: Publisher | None = None

    def start(self) -> None:
        _allow_descriptors(self.work.n + _SPARE_DESCRIPTORS)
        self.broker.start()

    def subscribe(self) -> None:
        work = self.work
        # the exact filter in plain floats: this thread reads every delivery, and numpy's
        # per-call cost would make the client the bound, not the broker
        lo, hi = work.lo.tolist(), work.hi.tolist()

        def on_message(i: int, payload: bytes) -> None:
            event_id, *point = payload.split()
            if all(a <= float(x) <= b for a, x, b in zip(lo[i], point, hi[i])):
                self.received.append((i, int(event_id), time.time()))

        self.subscribers = Subscribers(on_message)
        started = time.monotonic()
        for i in range(work.n):
            self.subscribers.add(i, self.broker.address(i), topic_filters(work.lo[i], work.hi[i]))
            if i % 1000 == 999 and time.monotonic() - started > self.subscribe_timeout:
                raise TimeoutError(f"{i + 1} of {work.n} subscribers connected in "
                                   f"{self.subscribe_timeout:.0f} s")
        self.subscribers.wait_subscribed(work.n, max(1.0, started + self.subscribe_timeout
                                                     - time.monotonic()))

    def connect(self) -> None:
        self.publisher = Publisher(self.broker.address(0), "publisher")

    def close(self) -> None:
        for client in (self.publisher, self.subscribers):
            if client is not None:
                client.close()
        self.broker.stop()

    def publish(self, k: int, event_id: int) -> None:
        point = self.work.points[k]
        payload = f"{event_id} " + " ".join(f"{v:.3f}" for v in point)
        self.publisher.publish(topic(point), payload.encode())

    def confirm(self, timeout: float) -> None:
        self.publisher.wait_acknowledged(timeout)

    def cpu_seconds(self) -> float:
        return self.broker.cpu_seconds()

    def routed(self) -> int:
        return self.subscribers.published if self.subscribers is not None else 0
