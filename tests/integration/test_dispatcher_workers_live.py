"""A root dispatcher of two gunicorn workers with its durable log on PostgreSQL: each worker
logs in a lane of its own. ``kill -9`` of one worker (gunicorn starts another, which takes
the lane back), then, with a server down so that both lanes owe it copies, ``kill -9`` of the
whole dispatcher and a restart with one worker, which takes lane 0 and adopts the others
that owe copies: every event the dispatcher acknowledged reaches every subscription it
matches. A throwaway cluster
is started for the module and stopped after it."""
from __future__ import annotations

import os
import threading
import signal
import time
from collections import Counter

import numpy as np
import pytest

from benchmarks.postgres_cluster import PostgresCluster, unavailable_reason
from edn.localnet.network import LocalNetwork, stats, wait_until
from tests.support.processes import ADMIN_TOKEN

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=str(unavailable_reason()))

D = 3
SERVERS = (("s1", "rtree", 1), ("s2", "random", 1))
SCHEMA = "root_live"


@pytest.fixture(scope="module")
def cluster():
    with PostgresCluster() as running:
        yield running


def _workers(arbiter: int) -> list[int]:
    with open(f"/proc/{arbiter}/task/{arbiter}/children") as listing:
        return [int(pid) for pid in listing.read().split()]


def _owed(cluster, database: str, schema: str) -> int:
    """Events the lane in ``schema`` still holds (with an undelivered copy)."""
    return int(cluster.psql(f"SELECT count(*) FROM {schema}.edn_log_event", database))


def _owing_lanes(cluster, database: str) -> list[str]:
    """The schemas of the lanes made so far that still hold events."""
    made = cluster.psql("SELECT table_schema FROM information_schema.tables WHERE "
                        f"table_name = 'edn_log_event' AND table_schema LIKE '{SCHEMA}%'",
                        database).split()
    return sorted(lane for lane in made if _owed(cluster, database, lane) > 0)


def test_two_workers_lose_nothing_acknowledged_across_kill_9(tmp_path, cluster):
    database = cluster.create_database("workers")
    store = ["--store", cluster.url("workers"), "--store-schema", SCHEMA]
    network = LocalNetwork(tmp_path, SERVERS, token=ADMIN_TOKEN, d=D, load_threshold=1000,
                           dispatcher_args=[*store, "--set", "lane_sweep_interval=0.5"])
    network.dispatcher.workers = 2
    with network:
        network.create_topic()
        rng = np.random.default_rng(11)
        centres = rng.uniform(0, 10, size=(40, D))
        half = rng.uniform(1.0, 3.0, size=(40, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))

        def publish(n):
            network.publish(np.round(rng.uniform(0, 10, size=(n, D)), 3), batch=1, threads=8)

        publish(300)
        arbiter = network.dispatcher.proc.pid
        first, second = _workers(arbiter)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: len(_workers(arbiter)) == 2 and first not in _workers(arbiter), 30,
                   what="gunicorn's replacement of the killed worker")
        wait_until(network.dispatcher.healthy, 30, what="the dispatcher answering")
        publish(300)
        network.servers["s2"].stop()  # both lanes now keep s2's copies
        # gunicorn gives each connection to whichever worker accepts first, and one worker
        # may take every connection of many rounds; pausing each worker in turn (SIGSTOP, far
        # inside gunicorn's 60 s worker timeout) makes the other one log a round, again until
        # both lanes owe copies. (The replacement takes the lowest lane no live session
        # holds: lane 0 once PostgreSQL has let the killed worker's hold go, else a new one.)
        deadline = time.monotonic() + 120
        while len(_owing_lanes(cluster, database)) < 2:
            assert time.monotonic() < deadline, "one worker logged every round"
            for worker in _workers(arbiter):
                os.kill(worker, signal.SIGSTOP)
                try:
                    publish(100)
                finally:
                    os.kill(worker, signal.SIGCONT)
        lanes = _owing_lanes(cluster, database)
        network.dispatcher.kill()
        network.dispatcher.workers = 1
        network.dispatcher.start()
        network.servers["s2"].start()
        acknowledged = len(network.published)
        expected = network.expected(0, acknowledged)
        wait_until(lambda: set(network.received(0, acknowledged)) >= set(expected), 90,
                   what=f"the {len(expected)} notifications of {acknowledged} acknowledged events")
        received = network.received(0, acknowledged)
        assert not set(expected) - set(received)
        figures = stats(network.dispatcher.base_url, ADMIN_TOKEN, "log.")
        assert int(figures["log.lane"]) == 0
        adopted = [lane for lane in lanes if lane != SCHEMA]  # lane 0 is the new worker's own
        assert int(figures["log.lane_adoptions"]) == len(adopted) >= 1
        wait_until(lambda: all(_owed(cluster, database, lane) == 0 for lane in adopted), 30,
                   what="the adopted lanes delivered")
        duplicates = sum(n - 1 for n in Counter(received).values())
        print(f"{acknowledged} acknowledged events, {len(expected)} notifications expected, "
              f"0 lost, {duplicates} duplicates")


def test_two_hosts_of_one_root_share_its_state_and_the_survivor_delivers_the_lost_ones_log(
        tmp_path, cluster):
    """Two dispatcher processes standing for two hosts, one schema: the publisher publishes
    through both and fails over to the second when the first is killed; the first is not
    brought back, and the second adopts its lane and delivers what it had acknowledged."""
    cluster.create_database("hosts")
    store = ["--store", cluster.url("hosts"), "--store-schema", "root_hosts",
             "--set", "lane_sweep_interval=0.5"]
    network = LocalNetwork(tmp_path, SERVERS, token=ADMIN_TOKEN, d=D, load_threshold=1000,
                           roots=2, dispatcher_args=store)
    with network:
        network.create_topic()
        rng = np.random.default_rng(12)
        centres = rng.uniform(0, 10, size=(60, D))
        half = rng.uniform(0.5, 2.0, size=(60, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        first_host, second_host = network.roots
        acks, result = [], {}

        def publish():
            try:
                result["range"] = network.publish(
                    np.round(rng.uniform(0, 10, size=(1500, D)), 3), batch=10, threads=2,
                    on_ack=lambda rows, ack: acks.append(
                        (ack.address, [e for e, _ in rows], ack.in_doubt)))
            except BaseException as exc:  # reported by the test, not lost in the thread
                result["error"] = exc

        network.servers["s2"].stop()  # the first host's lane owes s2 its copies when it dies
        publisher = threading.Thread(target=publish)
        publisher.start()
        wait_until(lambda: len(acks) >= 30, what="publishing at the first host")
        first_host.kill()
        publisher.join(120)
        assert not publisher.is_alive() and "error" not in result, result.get("error")
        assert any(address == second_host.base_url for address, _, _ in acks)
        network.servers["s2"].start()
        first, last = result["range"]
        expected = network.wait_delivered(first, last, timeout=120)
        received = network.received(first, last)
        doubtful = {str(e) for _, ids, doubt in acks if doubt for e in ids}
        certain = lambda pairs: [p for p in pairs if p[1] not in doubtful]  # noqa: E731
        assert certain(received) == certain(expected)  # nothing lost, nothing twice
        assert set(received) == set(expected)
        figures = stats(second_host.base_url, ADMIN_TOKEN, "log.")
        assert int(figures["log.lane_adoptions"]) == 1
        print(f"{len(network.published)} acknowledged events, {len(expected)} notifications, "
              f"0 lost, {len(doubtful)} events in doubt")
