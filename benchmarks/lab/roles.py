"""Processes and services inside a lab host.

- :class:`HostProcess`: any command, run with ``ip netns exec`` in its own session, with its
  own environment; it can be paused (SIGSTOP), resumed, killed (``kill -9``) and is always
  reaped.
- :class:`LabServer`: an ``edn serve ROLE`` process (the project's own
  :class:`~edn.localnet.processes.ServerProcess`) bound to the host's address, advertising
  ``http://ADDRESS:PORT``, its health asked from inside the host.
- :class:`HostSink`: the project's :class:`~edn.sink.NotificationSink`, listening on the
  host's address (built from a thread inside the host's namespace).

Signals go to the whole process group, so a gunicorn arbiter and its workers pause and die
together.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile

from edn.localnet.processes import ServerProcess
from edn.sink import NotificationSink


def _signal_group(proc: subprocess.Popen | None, sig: int) -> None:
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass


class Pausable:
    """Pause, resume and ``kill -9`` for anything holding a ``proc`` (a Popen)."""

    proc: subprocess.Popen | None
    paused = False

    def pause(self) -> None:
        """SIGSTOP to the process group: it keeps its sockets and answers nothing."""
        _signal_group(self.proc, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        _signal_group(self.proc, signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """``kill -9`` of the group, then reaped."""
        _signal_group(self.proc, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)
        self.paused = False


class HostProcess(Pausable):
    """One command in one host. ``env`` adds to (or, with ``inherit_env=False``, replaces)
    this process's environment."""

    def __init__(self, host, argv, *, env: dict | None = None, inherit_env: bool = True,
                 cwd: str | None = None):
        self.host = host
        self.argv = [str(a) for a in argv]
        self.env = {**(os.environ if inherit_env else {}), **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.TemporaryFile()

    def start(self) -> "HostProcess":
        ip = shutil.which("ip") or "ip"  # found here: ``env`` may have no PATH
        self.proc = subprocess.Popen([ip, "netns", "exec", self.host.netns, *self.argv],
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.env, cwd=self.cwd, start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (after SIGCONT, so a paused one hears it), then ``kill -9`` after
        ``timeout``; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.resume()
            _signal_group(self.proc, signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def log_text(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")


class LabServer(Pausable, ServerProcess):
    """``edn serve ROLE`` in a lab host: ``--host ADDRESS --base-url http://ADDRESS:PORT``."""

    def __init__(self, host, role: str, *, data_dir, port: int, extra_args=(), **options):
        super().__init__(role, data_dir=data_dir, port=port, host=host.address,
                         launcher=["ip", "netns", "exec", host.netns],
                         extra_args=["--base-url", f"http://{host.address}:{port}", *extra_args],
                         **options)
        self.lab_host = host

    def healthy(self) -> bool:
        return self.lab_host.run(ServerProcess.healthy, self)

    def stop(self, timeout: float = 30.0) -> int | None:
        self.resume()  # a stopped arbiter would not hear SIGTERM
        return super().stop(timeout)


class HostSink(NotificationSink):
    """A notification sink listening on a lab host's address."""

    def __init__(self, host, port: int = 0, **options):
        self.address = host.address
        super().__init__(host=host.address, port=port, **options)

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"
