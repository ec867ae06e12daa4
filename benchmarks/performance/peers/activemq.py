"""ActiveMQ Classic (the Debian ``activemq`` package) as a peer of ``edn bench peers``.

The broker runs as its own JVM with a configuration written here: one STOMP connector, JMX
off, KahaDB syncing its journal to disk before a persistent send is acknowledged (the EDN
answers a publication once its log is on disk: ``--durable-sync full``), and virtual topics
that are selector-aware (a consumer queue only takes the messages its selector matches).

A subscription is a STOMP SUBSCRIBE whose JMS selector is the range filter
(``x0 >= 1.250 AND x0 <= 4.000 AND ...``; numeric literals always with a decimal point, as
STOMP headers are strings the broker converts). Two ways, as a user would pick:

* ``persistent``: each subscription a queue ``Consumer.s<i>.VirtualTopic.grid`` of a virtual
  topic; events sent persistent, each with a receipt (the broker answers once the message is
  on disk);
* ``nonpersistent``: each subscription a topic subscriber; events sent non-persistent, with
  a receipt.

The subscriptions are spread over a few consumer connections; each MESSAGE frame names its
subscription and carries the event's index as a header. CPU is the broker JVM's.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from edn.localnet.processes import free_port

from .stomp import StompConnection
from .broker_process import BrokerProcess
from .broker_system import BrokerSystem
from .workload import Workload

JAR = Path("/usr/share/activemq/bin/activemq.jar")
_CONSUMER_CONNECTIONS = 4
_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bench"
          dataDirectory="{data}" persistent="true" advisorySupport="false">
    <destinationInterceptors>
      <virtualDestinationInterceptor>
        <virtualDestinations>
          <virtualTopic name="VirtualTopic.>" prefix="Consumer.*." selectorAware="true"/>
        </virtualDestinations>
      </virtualDestinationInterceptor>
    </destinationInterceptors>
    <persistenceAdapter>
      <kahaDB directory="{data}/kahadb" enableJournalDiskSyncs="true"/>
    </persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>
      <storeUsage><storeUsage limit="8 gb"/></storeUsage>
      <tempUsage><tempUsage limit="4 gb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


def missing() -> str | None:
    """Why ActiveMQ cannot run here (None: it can)."""
    if not JAR.exists():
        return f"ActiveMQ is not installed ({JAR} is missing: apt-get install activemq)"
    if shutil.which("java") is None:
        return "no java for ActiveMQ"
    return None


def selector(lo: np.ndarray, hi: np.ndarray) -> str:
    return " AND ".join(f"x{j} >= {a:.3f} AND x{j} <= {b:.3f}" for j, (a, b) in enumerate(zip(lo, hi)))


class Broker(BrokerProcess):
    label = "ActiveMQ"

    def __init__(self, tmp: Path, heap_mb: int = 2048):
        self.dir = tmp / "activemq"
        (self.dir / "conf").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        data = self.dir / "data"
        (self.dir / "conf" / "activemq.xml").write_text(_CONFIG.format(data=data, port=self.port))
        self.command = [
            "java", f"-Xms{heap_mb}M", f"-Xmx{heap_mb}M",
            "-Dorg.apache.activemq.filter.ComparisonExpression.CONVERT_STRING_EXPRESSIONS=true",
            "-Dactivemq.home=/usr/share/activemq", f"-Dactivemq.base={self.dir}",
            f"-Dactivemq.conf={self.dir / 'conf'}", f"-Dactivemq.data={data}",
            "-jar", str(JAR), "start", f"xbean:file:{self.dir / 'conf' / 'activemq.xml'}"]

    def start(self, timeout: float = 60.0) -> "Broker":
        self.launch(self.command, refused=(OSError,), timeout=timeout,
                    probe=lambda: StompConnection("127.0.0.1", self.port, timeout=2).close())
        return self


class ActiveMqSystem(BrokerSystem):
    """One broker, the workload's subscriptions made once in the way ``kind`` names."""

    def __init__(self, tmp: Path, work: Workload, kind: str, *, subscribe_timeout: float = 600.0):
        super().__init__()
        self.name = f"activemq_{kind}"
        self.subscribe_timeout = subscribe_timeout
        self.work = work
        self.kind = kind
        self.broker = Broker(tmp / self.name)
        self.destination = ("/topic/VirtualTopic.grid" if kind == "persistent" else "/topic/grid")
        self.persistent = "true" if kind == "persistent" else "false"

    def start(self) -> None:
        self.broker.start()

    def connect(self) -> None:
        self.publisher = StompConnection("127.0.0.1", self.broker.port)
        self.receipts = 0

    def close(self) -> None:
        for connection in getattr(self, "consumers", []):
            connection.close()
        if getattr(self, "publisher", None) is not None:
            self.publisher.close()
        self.broker.stop()

    def _on_message(self, headers: dict) -> None:
        self.received.append((int(headers["subscription"][1:]), int(headers["eid"]), time.time()))

    def subscribe(self) -> None:
        work = self.work
        deadline = time.monotonic() + self.subscribe_timeout  # sending them counts too
        self.consumers = [StompConnection("127.0.0.1", self.broker.port, on_message=self._on_message)
                          for _ in range(_CONSUMER_CONNECTIONS)]
        for i in range(work.n):
            destination = (f"/queue/Consumer.s{i}.VirtualTopic.grid" if self.kind == "persistent"
                           else "/topic/grid")
            connection = self.consumers[i % len(self.consumers)]
            connection.subscribe(f"s{i}", destination, selector=selector(work.lo[i], work.hi[i]),
                                 receipt=f"s{i}")
            if i % 1000 == 999 and time.monotonic() > deadline:
                raise TimeoutError(f"{i + 1} of {work.n} subscriptions sent in "
                                   f"{self.subscribe_timeout:.0f} s")
        for k, connection in enumerate(self.consumers):
            connection.wait_receipts(len(range(k, work.n, len(self.consumers))),
                                     max(0.0, deadline - time.monotonic()))

    def publish(self, k: int, event_id: int) -> None:
        headers = {f"x{j}": f"{v:.3f}" for j, v in enumerate(self.work.points[k])}
        self.receipts += 1
        self.publisher.send(self.destination, {**headers, "eid": event_id,
                                               "persistent": self.persistent},
                            receipt=str(self.receipts))

    def confirm(self, timeout: float) -> None:
        self.publisher.wait_receipts(self.receipts, timeout)

    def cpu_seconds(self) -> float:
        return self.broker.cpu_seconds()
