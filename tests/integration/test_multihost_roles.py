"""Roles as operators run them across hosts, with real ``edn serve`` processes on loopback:
a wildcard bind without ``--base-url`` stops before it serves, every role keeps gunicorn's
control socket in its own data directory, ``edn publish`` gets its event through a link that
loses the dispatcher's answer (a retry with the same MessageID, acknowledged without a
second publication), and ``edn latency measure`` writes the latency file from the servers'
own measurements. Every wait is on a condition."""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest
from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from route_manager.latency_matrix import load_latency
from route_manager.workloads.grid_xml import event_element
from tests.support.processes import ADMIN_TOKEN, ServerProcess, free_port

SERVERS = [(f"s{k}", "rtree", 1) for k in range(1, 4)]


def edn(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "edn.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, **(env or {})))


def test_a_wildcard_bind_without_base_url_refuses_to_start(tmp_path):
    result = edn("serve", "server", "--host", "0.0.0.0", "--port", str(free_port()),
                 "--data", str(tmp_path / "s"), "--dispatcher", "http://127.0.0.1:9")
    assert result.returncode != 0 and "--base-url" in result.stderr
    assert not (tmp_path / "s").exists()


def test_every_role_has_a_control_socket_of_its_own(tmp_path):
    home, runtime = tmp_path / "home", tmp_path / "runtime"
    home.mkdir(), runtime.mkdir()
    env = {"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    first = ServerProcess("source", data_dir=tmp_path / "a", env=env)
    second = ServerProcess("source", data_dir=tmp_path / "b", env=env)
    with first, second:
        for process in (first, second):
            path = process.data_dir / "gunicorn.ctl"
            wait_until(path.exists, 20, f"{path}")
            assert stat.S_ISSOCK(path.stat().st_mode)
            with socket.socket(socket.AF_UNIX) as client:  # its own arbiter listens there
                client.connect(str(path))
        assert not (home / ".gunicorn").exists() and list(runtime.iterdir()) == []


class AnswerLosingProxy:
    """A TCP relay to ``target`` port that loses the answer to the first request (the
    request reaches the dispatcher; the connection is closed once its answer starts to
    come back) and relays every later connection both ways."""

    def __init__(self, target: int):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(("127.0.0.1", self.target))
            lose = self.connections == 1
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, lose), daemon=True).start()

    @staticmethod
    def _pipe(source, sink, lose):
        try:
            while data := source.recv(65536):
                if lose:  # the answer arrived: drop it and the connection
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def close(self):
        self.listener.close()


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    net = LocalNetwork(tmp_path_factory.mktemp("multihost"), SERVERS, token=ADMIN_TOKEN, d=3)
    with net:
        net.create_topic()
        yield net


def test_publish_survives_a_lost_answer_and_the_root_publishes_once(network, tmp_path):
    before = network.dispatcher_stats()
    proxy = AnswerLosingProxy(network.dispatcher.port)
    event = tmp_path / "event.xml"
    event.write_bytes(etree.tostring(event_element(np.array([1.0, 2.0, 3.0]), 7)))
    try:
        result = edn("publish", "--at", f"http://127.0.0.1:{proxy.port}", "grid", str(event),
                     env={"EDN_ADMIN_TOKEN": ADMIN_TOKEN})
    finally:
        proxy.close()
    assert result.returncode == 0, result.stderr
    assert "HTTP 202" in result.stdout and "trying again" in result.stderr
    assert "publishes once" in result.stderr
    assert proxy.connections == 2
    after = network.dispatcher_stats()
    assert int(after["events_in"]) - int(before["events_in"]) == 1  # published once
    assert int(after["publish_duplicates"]) - int(before["publish_duplicates"]) == 1


def test_latency_measure_writes_the_server_to_server_file(network, tmp_path):
    wait_until(lambda: all(int(network.server_stats(name, "peers")["peers"]) == len(SERVERS) - 1
                           for name, _, _ in SERVERS), 60, "every server knowing its peers")
    for out in (tmp_path / "latency.json", tmp_path / "latency.csv"):
        result = edn("latency", "measure", "--at", network.dispatcher.base_url, "--out",
                     str(out), "--probes", "3", env={"EDN_ADMIN_TOKEN": ADMIN_TOKEN})
        assert result.returncode == 0, result.stderr
        matrix = load_latency(out)  # what edn serve --latency reads
        assert sorted(matrix.names) == [name for name, _, _ in SERVERS]
        off_diagonal = matrix.ms[~np.eye(len(SERVERS), dtype=bool)]
        assert np.all(off_diagonal > 0) and np.all(off_diagonal < 50)  # loopback round trips
        assert np.all(np.diag(matrix.ms) == 0)


def test_latency_measure_refuses_without_the_credential_and_writes_nothing(network, tmp_path):
    out = tmp_path / "latency.json"
    result = edn("latency", "measure", "--at", network.dispatcher.base_url, "--out", str(out),
                 "--admin-token", "wrong")
    assert result.returncode != 0 and "AccessDenied" in result.stderr and not out.exists()
    result = edn("latency", "measure", "--at", network.dispatcher.base_url, "--out",
                 str(tmp_path / "latency.txt"), "--admin-token", ADMIN_TOKEN)
    assert result.returncode != 0 and ".json or .csv" in result.stderr
