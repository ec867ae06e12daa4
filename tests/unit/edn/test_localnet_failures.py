"""A local network that fails because one of its nodes went away says which node, its exit
code and the end of its log, instead of only the refused connection that followed (real
child processes: ``sh``, no sockets)."""
from __future__ import annotations

import subprocess

import pytest

from edn.localnet.network import LocalNetwork


class QuietSink:
    url = "http://127.0.0.1:9/unused"

    def stop(self):
        pass


def network(tmp_path) -> LocalNetwork:
    return LocalNetwork(tmp_path, [("s-a", "random", 1), ("s-b", "random", 2)], token="t",
                        sink=QuietSink())


def run_exiting(process, code: int, words: str) -> None:
    """Stand in for the node's process: one that prints ``words`` to its log and exits."""
    process.proc = subprocess.Popen(["sh", "-c", f"echo '{words}'; exit {code}"],
                                    stdout=process._log, stderr=subprocess.STDOUT)
    process.proc.wait(10)


def test_a_node_that_died_is_named_with_its_exit_code_and_log(tmp_path):
    net = network(tmp_path)
    run_exiting(net.servers["s-b"], 3, "Worker failed to boot.")
    refused = ConnectionRefusedError("connection refused")
    with pytest.raises(RuntimeError) as raised:
        net.__exit__(type(refused), refused, None)
    message = str(raised.value)
    assert message.startswith("s-b exited with 3 (then: ConnectionRefusedError")
    assert "Worker failed to boot." in message
    assert raised.value.__cause__ is refused


def test_nodes_stopped_or_killed_here_are_not_blamed(tmp_path):
    net = network(tmp_path)
    victim = net.servers["s-a"]
    victim.proc = subprocess.Popen(["sh", "-c", "sleep 30"], start_new_session=True)
    victim.kill()  # as a test does on purpose
    assert net.died_on_their_own() == []
    net.__exit__(ValueError, ValueError("the test's own failure"), None)  # nothing replaces it


def test_without_an_error_nothing_is_raised(tmp_path):
    net = network(tmp_path)
    run_exiting(net.servers["s-a"], 1, "gone")
    net.__exit__(None, None, None)
