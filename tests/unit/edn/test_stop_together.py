"""Stopping a group of role processes: every one is signalled before any is waited for,
within one deadline, and one that does not stop in time is killed (real child processes:
``sh``, no sockets)."""
from __future__ import annotations

import signal
import subprocess
import time

from edn.localnet.processes import ServerProcess, stop_together


class Shell(ServerProcess):
    """A child process that, on SIGTERM, runs ``on_term`` (a shell command list)."""

    def __init__(self, tmp_path, on_term: str):
        super().__init__("source", data_dir=tmp_path)
        script = f"trap '{on_term}' TERM; echo ready; while true; do sleep 0.05; done"
        self.proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE,
                                     start_new_session=True)
        assert self.proc.stdout.readline() == b"ready\n"  # the trap is set


def test_a_group_stops_in_about_the_time_of_its_slowest_member(tmp_path):
    group = [Shell(tmp_path, "sleep 1; exit 0") for _ in range(4)]
    started = time.monotonic()
    stop_together(group, timeout=20)
    elapsed = time.monotonic() - started
    assert [p.proc.returncode for p in group] == [0] * 4
    assert elapsed < 3.5  # together: about 1 s, not 4 x 1 s


def test_a_member_that_ignores_sigterm_is_killed_at_the_deadline(tmp_path):
    stubborn, quick = Shell(tmp_path, ""), Shell(tmp_path, "exit 0")
    stop_together([stubborn, quick], timeout=0.5)
    assert quick.proc.returncode == 0
    assert stubborn.proc.returncode == -signal.SIGKILL
