"""A peer broker's own process: started in a session of its own with its output in a log,
ready once a probe connects, its CPU read over its process group, and stopped with the
group (SIGTERM, then SIGKILL for whatever is left)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from benchmarks.livenet import group_cpu_seconds


class BrokerProcess:
    """Subclasses set ``label`` and ``dir`` (created), and call :meth:`launch` from their
    ``start``."""

    label = "broker"
    dir: Path

    proc: subprocess.Popen | None = None
    log = None

    def launch(self, command: list[str], *, probe, refused: tuple, timeout: float,
               env: dict | None = None, interval: float = 0.2) -> None:
        """Start ``command`` and return once ``probe()`` connects; ``refused``: the
        exceptions that mean "not listening yet". Fails, with the log's end, if the process
        exits or does not listen within ``timeout`` s."""
        self.log = open(self.dir / "broker.log", "wb")
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}: "
                                   f"{(self.dir / 'broker.log').read_text()[-2000:]}")
            try:
                probe()
                return
            except refused:
                time.sleep(interval)
        self.stop()
        raise RuntimeError(f"{self.label} did not listen within {timeout} s")

    def cpu_seconds(self) -> float:
        return group_cpu_seconds(self.proc.pid)  # its own session: the group is the broker

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    pass
            try:  # whatever of the group is left (a JVM's or an Erlang VM's children)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        if self.log is not None:
            self.log.close()
            self.log = None
