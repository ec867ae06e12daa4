"""Range-aggregate subscriptions end to end on real processes: a dispatcher and two
subscription servers (``edn serve``), the table service (``edn serve table``, its own
gunicorn process), a notification sink.
MIN and MAX subscriptions over random risk ranges subscribe with the range-aggregate dialect
(half at each server, one in four through WS-Eventing 2004/08), each then queries the table
service for its initial result; a random sequence of inserts, updates and deletes goes to the
table's topic (while idle, slowloris and slow-body connections stay open against it), and half
way the table service is killed (-9, arbiter and worker) and restarted on its store. Each
subscriber's notifications, kept by ``seq`` above its initial one, are exactly the changes of
its result that recomputation after every update gives.

A second test measures the table role alone under slow clients (``edn bench slowclients``'
hostile connections and probes): it keeps answering updates and health checks, and refuses a
body over ``--max-body`` with a SOAP fault.

Every wait is on a condition, never a fixed sleep.
"""
from __future__ import annotations

import random

import requests
from lxml import etree

from benchmarks.robustness import slowclients
from edn.localnet.network import LocalNetwork, wait_until
from edn.localnet.processes import ServerProcess, free_port
from matchers.range_aggregate import RANGE_AGGREGATE_DIALECT, feed_schema, read_change
from subscription_manager.client import EventingClient
from subscription_manager.stateful.range_min_table import recompute
from subscription_manager.stateful.table_service import delete, put, query
from tests.support.processes import ADMIN_TOKEN
from matchers.vocabulary import RANGE_AGGREGATE
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION, publish
from wsframework.soap import SoapVersion, build_envelope

TABLE, FEED = "stocks", "stocks-feed"
LOW, HIGH = 0.0, 100.0
CHANGE = f"{{{RANGE_AGGREGATE}}}Change"


def table_role(data, dispatcher: str, *extra: str) -> ServerProcess:
    """``edn serve table`` on a free port, its settings as an operator would give them."""
    settings = {"table": TABLE, "value": "per", "over": "risk", "low": LOW, "high": HIGH,
                "feed": FEED}
    args = ["--dispatcher", dispatcher, "--log-level", "warning", *extra]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    return ServerProcess("table", data_dir=data, admin_token=ADMIN_TOKEN, extra_args=args)


def hostile_clients(table: ServerProcess) -> "slowclients._Hostiles":
    """Idle, slowloris and slow-body connections held open against the table (a trickle
    thread feeds the slow ones until ``close()``)."""
    hostiles = slowclients._Hostiles(table.port, f"/topics/{TABLE}")
    hostiles.open(idle=50, slowloris=10, slow_bodies=3)
    assert hostiles.refused == 0
    return hostiles


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
        table = table_role(tmp_path / "table", network.dispatcher.base_url).start()
        hostiles = hostile_clients(table)   # they hold greenlets, not the table
        try:
            updates = random_updates(160, rng)
            preload, rest = updates[:30], updates[30:]
            for key, x, y in preload:   # before anyone subscribes: initial results come from Query
                publish(table.base_url, TABLE, put(key, x, y) if y is not None else delete(key))

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
                answer = soap.call(f"{table.base_url}/topics/{TABLE}", RANGE_AGGREGATE + "/Query",
                                      query(function, x1, x2)).body
                result = answer.findtext(f"{{{RANGE_AGGREGATE}}}Result")
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
                    hostiles.close()
                    table.start()
                    hostiles = hostile_clients(table)
                publish(table.base_url, TABLE, put(key, x, y) if y is not None else delete(key))
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
            assert table.alive()
        finally:
            hostiles.close()
            table.stop()
            table.kill()


def test_the_table_role_keeps_serving_under_slow_clients(tmp_path):
    # No network behind it: the dispatcher's port is closed, so every change stays in the
    # outbox, and updates are still acknowledged (they are durable before the answer).
    table = table_role(tmp_path / "table", f"http://127.0.0.1:{free_port()}",
                       "--max-body", "65536").start()
    keys = iter(range(10**6))
    client = SoapClient(slowclients._transport())

    def update() -> bool:
        status = client.send(f"{table.base_url}/topics/{TABLE}", PUBLISH_ACTION,
                             put(f"k{next(keys)}", 50.0, 1.0))
        return status == 202

    try:
        row = slowclients._measure_target(
            slowclients._Target("table", table, f"/topics/{TABLE}", update),
            idle=200, slowloris=20, slow_bodies=5, probes=40, probe_budget_s=30.0)
        print(f"\ntable role under slow clients: {row}")
        assert row["idle_connections"] == 200 and row["slowloris"] == 20, row
        assert row["slow_bodies"] == 5 and row["server_alive"], row
        assert row["failed"] == 0 and row["baseline_failed"] == 0, row
        assert row["answered"] == row["probes"] == 40, row
        assert row["p95_ms"] is not None and row["p95_ms"] < 1000, row

        # A body over --max-body is refused with a SOAP fault, and nothing is applied.
        big = put("big", 1.0, 1.0)
        big.set("pad", "x" * 70_000)
        headers = request_headers(WsaVersion.WSA10, f"{table.base_url}/topics/{TABLE}",
                                  PUBLISH_ACTION)
        body = build_envelope(SoapVersion.SOAP12, big, headers)
        answer = requests.post(f"{table.base_url}/topics/{TABLE}", data=body, timeout=10,
                               headers={"Content-Type": SoapVersion.SOAP12.content_type})
        assert 400 <= answer.status_code < 500 and b"Fault" in answer.content, answer.status_code
        outcome = client.call(f"{table.base_url}/topics/{TABLE}", RANGE_AGGREGATE + "/Query",
                              query("MIN", 0.0, 2.0)).body
        assert outcome.find(f"{{{RANGE_AGGREGATE}}}Result") is None   # "big" never went in
        assert int(outcome.get("seq")) == next(keys)   # every acknowledged update counted
    finally:
        client.transport.close()
        table.stop()
        table.kill()
