"""The dispatcher's durable log on real processes: ``kill -9`` of the dispatcher (gunicorn
arbiter and worker) during a burst of publications, then a restart on the same data dir; every
event the dispatcher answered with success reaches every subscription it matches (at least
once: a server that does not skip replayed batches may deliver some twice)."""
from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
from requests import RequestException

from edn.localnet.network import LocalNetwork, wait_until
from tests.support.processes import ADMIN_TOKEN
from wsframework.transport import TransportError

D = 3
SERVERS = (("s1", "rtree", 1), ("s2", "random", 1))


@pytest.mark.parametrize("worker_class", ["gthread", "gevent"])
def test_kill_9_of_the_dispatcher_loses_no_acknowledged_event(tmp_path, worker_class):
    network = LocalNetwork(tmp_path, SERVERS, token=ADMIN_TOKEN, d=D, load_threshold=1000,
                           dispatcher_args=["--worker-class", worker_class])
    with network:
        network.create_topic()
        rng = np.random.default_rng(5)
        centres = rng.uniform(0, 10, size=(60, D))
        half = rng.uniform(1.0, 3.0, size=(60, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        points = np.round(rng.uniform(0, 10, size=(2000, D)), 3)
        stop = threading.Event()

        def burst():  # one event per request until the dispatcher stops answering
            for point in points:
                if stop.is_set():
                    return
                try:
                    network.publish(point[None, :])
                except (RequestException, TransportError, OSError):
                    return

        publisher = threading.Thread(target=burst)
        publisher.start()
        wait_until(lambda: len(network.published) >= 300 or not publisher.is_alive(), 60,
                   what="300 acknowledged publications")
        network.dispatcher.kill()
        stop.set()
        publisher.join(30)
        acknowledged = len(network.published)
        assert 300 <= acknowledged < len(points)
        network.dispatcher.start()
        expected = network.expected(0, acknowledged)
        wait_until(lambda: set(network.received(0, acknowledged)) >= set(expected), 60,
                   what=f"the {len(expected)} notifications of {acknowledged} acknowledged events")
        received = network.received(0, acknowledged)
        lost = set(expected) - set(received)
        assert not lost
        duplicates = sum(n - 1 for n in Counter(received).values())
        print(f"{worker_class}: {acknowledged} acknowledged events, {len(expected)} "
              f"notifications expected, 0 lost, {duplicates} duplicates")
