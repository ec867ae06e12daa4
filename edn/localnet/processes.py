"""Start and stop real ``edn serve`` processes (gunicorn), on loopback unless told another
address: used by ``edn demo``, the benchmarks and the integration tests. Readiness is a
condition (``GET /health``), not a sleep.

``host`` is the address the process binds and advertises; ``launcher`` is a command prefix
(the benchmarks' lab runs a role inside a network namespace with ``ip netns exec NAME``)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from wsframework.ports import free_port  # noqa: F401 (re-exported: its callers import it from here)

ADMIN_TOKEN = "integration-token"  # default for tests; the demo passes its own


@dataclass(frozen=True)
class TlsFiles:
    """A role's TLS files (``edn tls issue``): it serves HTTPS with them and calls its peers
    with them; ``client_auth`` as ``edn serve --tls-client-auth``."""
    cert: Path
    key: Path
    ca: Path
    client_auth: str | None = None

    def serve_args(self) -> list[str]:
        args = ["--tls-cert", str(self.cert), "--tls-key", str(self.key), "--tls-ca", str(self.ca)]
        return args + (["--tls-client-auth", self.client_auth] if self.client_auth else [])

    def requests_options(self) -> dict:
        return {"verify": str(self.ca), "cert": (str(self.cert), str(self.key))}


class ServerProcess:
    """One ``edn serve ROLE`` process. Waits on ``GET /health`` rather than sleeping."""

    def __init__(self, role: str, *, data_dir: Path, admin_token: str = ADMIN_TOKEN,
                 extra_args=(), port: int | None = None, workers: int = 1, env=None,
                 host: str = "127.0.0.1", launcher=(), tls: "TlsFiles | None" = None,
                 access: str | None = "open"):
        """``access``: ``edn serve --access`` (None: the role's default, closed). The demo,
        the benchmarks and the tests publish and subscribe without principals, so they ask
        for ``open`` explicitly, here."""
        self.role = role
        self.tls = tls
        self.access = access
        self.host = host
        self.launcher = list(launcher)
        self.data_dir = Path(data_dir)
        self.admin_token = admin_token
        self.extra_args = list(extra_args)
        self.port = port or free_port()
        self.workers = workers
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.stopped_here = False  # stop(), terminate() or kill() was called since start()
        self._log = tempfile.TemporaryFile()

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def command(self) -> list[str]:
        return [*self.launcher, sys.executable, "-m", "edn.cli", "serve", self.role, "--host", self.host,
                "--port", str(self.port), "--data", str(self.data_dir),
                # one argument: a token may start with '-' (token_urlsafe), which argparse
                # would read as an option
                f"--admin-token={self.admin_token}", "--workers", str(self.workers),
                *(self.tls.serve_args() if self.tls else ()),
                *(("--access", self.access) if self.access and "--access" not in self.extra_args
                  else ()), *self.extra_args]

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        env = dict(os.environ, **(self.env or {}))
        self.stopped_here = False
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.role} exited with {self.proc.returncode}:\n{self.log_text()}")
            if self.healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.role} did not become healthy in {timeout}s:\n{self.log_text()}")

    def healthy(self) -> bool:
        """Whether ``GET /health`` answers 200 (asked from this thread's network)."""
        options = self.tls.requests_options() if self.tls else {}
        try:
            return requests.get(self.base_url + "/health", timeout=1, **options).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful stop (SIGTERM to gunicorn's arbiter); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.stopped_here = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def terminate(self) -> None:
        """Begin a graceful stop (SIGTERM to gunicorn's arbiter) without waiting for it."""
        if self.proc is not None and self.proc.poll() is None:
            self.stopped_here = True
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """``kill -9`` of the whole process group (arbiter and workers)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stopped_here = True
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def restart(self, timeout: float = 30.0) -> "ServerProcess":
        self.stop()
        return self.start(timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            self.kill()


def stop_together(processes, timeout: float = 30.0) -> None:
    """Stop ``processes`` gracefully at once: each is sent SIGTERM, then all are waited for
    within one ``timeout`` (one after another, the shutdowns would add up); any still
    running then is killed."""
    processes = list(processes)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + timeout
    for process in processes:
        if process.proc is None:
            continue
        try:
            process.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
