"""The EDN side of ``edn bench peers``: a dispatcher and 4 servers (R-tree partitioner) as
real processes, the subscriptions made in bulk (SubscribeMany, a quarter at each server; no
placement moves them), events published at the dispatcher in ``edn:EventBatch`` messages,
and every notification taken by a recording :class:`~edn.sink.FastSink` whose path names the
subscription. CPU is the dispatcher's and the servers' (not the sink's, not the publisher's).
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.livenet import bulk_subscribe, group_cpu_seconds
from edn.localnet.network import TOPIC, LocalNetwork, wait_until
from edn.sink import FastSink
from route_manager.publisher import Publisher
from route_manager.workloads.grid_xml import event_element

from .workload import Outcome, System, Workload, judge

_TOKEN = "bench-peers-token"
_SERVERS = 4
_EVENT_ID = re.compile(rb'id="(\d+)"')
_UNLIMITED = ["--set", "max_subscriptions=0", "--set", "max_subscriptions_per_topic=0",
              "--set", "max_subscriptions_per_host=0"]


class EdnSystem(System):
    name = "edn"

    def __init__(self, tmp: Path, work: Workload):
        self.work = work
        self.sink = FastSink(record=True).start()
        servers = [(f"s{k + 1}", "rtree", 1) for k in range(_SERVERS)]
        self.network = LocalNetwork(tmp / "edn", servers, token=_TOKEN, d=work.lo.shape[1],
                                    load_threshold=10 * work.n + 1, sink=self.sink)
        for server in self.network.servers.values():
            server.extra_args += _UNLIMITED
        self.next_id = 0

    def start(self) -> None:
        self.network.start()
        self.network.create_topic(TOPIC)

    def connect(self) -> None:
        self.publisher = Publisher([self.network.dispatcher.base_url])

    def close(self) -> None:
        self.network.close()
        self.sink.stop()

    def subscribe(self) -> None:
        work, servers = self.work, list(self.network.servers.values())
        for k, server in enumerate(servers):
            bulk_subscribe(server.base_url, _TOKEN, TOPIC, work.lo, work.hi,
                           lambda i: f"{self.sink.url}/n/{i}", range(k, work.n, len(servers)))

        def routed():
            figures = self.network.dispatcher_stats("server.")
            return sum(int(v) for key, v in figures.items() if key.endswith(".load")) == work.n
        wait_until(routed, timeout=300, what="route updates for every subscription")

    def _cpu(self) -> float:
        return sum(group_cpu_seconds(p.proc.pid)
                   for p in [self.network.dispatcher, *self.network.servers.values()])

    def run(self, mode: str, *, window: int, timeout: float) -> Outcome:
        """Publish every event of the workload: ``paced``, ``window`` events at a time, each
        window's deliveries awaited before the next; ``burst``, all at once from two
        clients. Event ids continue from the last run, so runs never mix."""
        work, sink = self.work, self.sink
        offset, self.next_id = self.next_id, self.next_id + work.m
        sent_at = np.zeros(work.m)
        before = sink.count
        cpu_before, started = self._cpu(), time.time()

        def send(indices):
            events = [event_element(work.points[k], offset + k) for k in indices]
            sent_at[indices] = time.time()
            self.publisher.send_batch(TOPIC, events)

        if mode == "paced":
            for first in range(0, work.m, window):
                last = min(work.m, first + window)
                send(list(range(first, last)))
                target = before + work.expected(0, last)
                if not sink.wait_count(target, timeout):
                    break
        else:
            threads = [threading.Thread(target=lambda part=part: [
                send(list(range(first, min(work.m, first + 50))))
                for first in range(part * 50, work.m, 100)]) for part in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sink.wait_count(before + work.expected(), timeout)
        seconds = time.time() - started
        cpu = self._cpu() - cpu_before
        subs, events, arrived = [], [], []
        for message in sink.messages[before:]:
            subs.append(int(message.path.rsplit("/", 1)[1]))
            events.append(int(_EVENT_ID.search(message.body).group(1)) - offset)
            arrived.append(message.at)
        return judge(work, np.array(subs), np.array(events), np.array(arrived), sent_at,
                     seconds=seconds, cpu_seconds=cpu)
