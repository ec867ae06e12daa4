"""Range-aggregate subscriptions end to end on real processes: a dispatcher and two
subscription servers (``edn serve``), the table service
(``python -m subscription_manager.richer.table_service``, its own process), a notification sink.
MIN and MAX subscriptions over random risk ranges subscribe with the range-aggregate dialect
(half at each server, one in four through WS-Eventing 2004/08), each then queries the table
service for its initial result; a random sequence of inserts, updates and deletes goes to the
table's topic (while another client holds a connection open, sending nothing), and half way
the table service is killed (-9) and restarted on its store. Each
subscriber's notifications, kept by ``seq`` above its initial one, are exactly the changes of
its result that recomputation after every update gives.

Every wait is on a condition, never a fixed sleep.
"""
from __future__ import annotations

import random
import socket
import subprocess
import sys

import requests
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from edn.localnet.processes import free_port
from matchers.range_aggregate import RANGE_AGGREGATE_DIALECT, feed_schema, read_change
from subscription_manager.client import EventingClient
from subscription_manager.richer.aggregate import recompute
from subscription_manager.richer.table_service import delete, put, query
from tests.support.processes import ADMIN_TOKEN
from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import publish

TABLE, FEED = "stocks", "stocks-feed"
LOW, HIGH = 0.0, 100.0
CHANGE = f"{{{ns.RANGE_AGGREGATE}}}Change"


class TableProcess:
    def __init__(self, data, dispatcher: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "subscription_manager.richer.table_service",
                     "--port", str(self.port), "--data", str(data), "--table", TABLE,
                     "--value", "per", "--over", "risk", "--low", str(LOW), "--high", str(HIGH),
                     "--dispatcher", dispatcher, "--feed", FEED]
        self.log = open(data.parent / f"{data.name}.log", "ab")
        self.process = None

    def start(self):
        self.process = subprocess.Popen(self.args, stdout=self.log, stderr=self.log)

        def healthy():
            try:
                return requests.get(f"{self.url}/health", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        wait_until(healthy, 30, what="the table service")
        return self

    def kill(self):
        self.process.kill()
        self.process.wait(30)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def random_updates(n: int, rng: random.Random):
    """(key, x, y or None) with x fixed per key; deletes only of keys that exist, so each
    update is applied (and numbered) by the table."""
    live: dict[str, float] = {}
    out, next_key = [], 0
    for _ in range(n):
        roll = rng.random()
        if not live or roll < 0.3:
            key, next_key = f"k{next_key}", next_key + 1
            live[key] = float(rng.randrange(0, 101))   # shared columns happen
            out.append((key, live[key], float(rng.randrange(0, 50))))
        elif roll < 0.45:
            key = rng.choice(sorted(live))
            out.append((key, live.pop(key), None))
        else:
            key = rng.choice(sorted(live))
            out.append((key, live[key], float(rng.randrange(0, 50))))
    return out


def test_range_aggregates_through_the_edn_match_recomputation(tmp_path):
    rng = random.Random(11)
    servers = [("s1", "local", 1), ("s2", "local", 1)]
    with LocalNetwork(tmp_path / "net", servers, token=ADMIN_TOKEN) as network:
        AdminClient(network.dispatcher.base_url, ADMIN_TOKEN).create_topic(
            FEED, None, feed_schema("per", "risk", LOW, HIGH).to_element())
        wait_until(lambda: all(network.hosts_topic(s, FEED) for s in network.servers.values()),
                   what="the feed topic on every server")
        table = TableProcess(tmp_path / "table", network.dispatcher.base_url).start()
        try:
            # a client that connects and sends nothing holds one thread, not the service
            idle = socket.create_connection(("127.0.0.1", table.port))
            updates = random_updates(160, rng)
            preload, rest = updates[:30], updates[30:]
            for key, x, y in preload:   # before anyone subscribes: initial results come from Query
                publish(table.url, TABLE, put(key, x, y) if y is not None else delete(key))

            subscriptions = []
            names = list(network.servers)
            for k in range(16):
                x1 = float(rng.randrange(0, 100))
                x2 = min(HIGH, x1 + float(rng.randrange(0, 40)))
                function = "MIN" if k % 2 == 0 else "MAX"
                server = network.servers[names[k % 2]]
                client = EventingClient("2004" if k % 4 == 3 else "2011")
                network.handles.append(client.subscribe(
                    f"{server.base_url}/topics/{FEED}", f"{network.sink.url}/n/{k}",
                    filter=f"{function}(per) WHERE risk IN [{x1!r}, {x2!r}]",
                    dialect=RANGE_AGGREGATE_DIALECT, expires="PT1H"))
                subscriptions.append((function, x1, x2))
            network.wait_routed()
            soap = SoapClient()
            initial = []
            for function, x1, x2 in subscriptions:
                answer = soap.call(f"{table.url}/topics/{TABLE}", ns.RANGE_AGGREGATE + "/Query",
                                      query(function, x1, x2)).body
                result = answer.findtext(f"{{{ns.RANGE_AGGREGATE}}}Result")
                initial.append((int(answer.get("seq")), None if result is None else float(result)))

            state = {}
            for key, x, y in preload:
                if y is None:
                    state.pop(key, None)
                else:
                    state[key] = (x, y)
            seq0 = initial[0][0]
            assert seq0 == len(preload) and all(s == seq0 for s, _ in initial)
            current = [recompute(state, x1, x2, 1 if f == "MIN" else -1)
                       for f, x1, x2 in subscriptions]
            assert [r for _, r in initial] == current   # the Query's answers
            expected: dict[int, dict[int, float | None]] = {k: {} for k in range(len(subscriptions))}
            for n, (key, x, y) in enumerate(rest):
                if n == len(rest) // 2:   # kill -9 the table service, restart it on its store
                    table.kill()
                    table.start()
                publish(table.url, TABLE, put(key, x, y) if y is not None else delete(key))
                if y is None:
                    state.pop(key)
                else:
                    state[key] = (x, y)
                for k, (f, x1, x2) in enumerate(subscriptions):
                    now = recompute(state, x1, x2, 1 if f == "MIN" else -1)
                    if now != current[k]:
                        expected[k][seq0 + n + 1] = now
                        current[k] = now

            def received():
                got: dict[int, dict[int, float | None]] = {k: {} for k in expected}
                for message in list(network.sink.messages):
                    k = int(message.path.rsplit("/", 1)[1])
                    change = etree.fromstring(message.body).find(f".//{CHANGE}")
                    name, seq, function, result = read_change(change)
                    assert name == TABLE and function == subscriptions[k][0]
                    if seq > initial[k][0]:
                        assert got[k].get(seq, result) == result   # a redelivery says the same
                        got[k][seq] = result
                return got

            total = sum(len(v) for v in expected.values())
            assert total > 40, "the update sequence should change results often"
            wait_until(lambda: sum(len(v) for v in received().values()) >= total, 60,
                       what="every change at the sink")
            wait_until(network.quiet, 60, what="an idle network")
            print(f"\n{len(updates)} updates, {total} result changes to {len(subscriptions)} "
                  f"subscribers, {len(network.sink.messages)} notifications received")
            assert received() == expected
            idle.close()
        finally:
            table.stop()
