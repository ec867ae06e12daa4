"""A Spark standalone cluster: one master and its workers, started with pyspark's own launch
classes (``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker``,
the same classes a Spark distribution's ``sbin`` scripts start) and stopped afterwards.

::

    with StandaloneCluster(workers=2) as cluster:       # bound to 127.0.0.1
        ... edn profile --master cluster.master_url ...

Each process runs in a session of its own (a terminal's Ctrl-C reaches the caller, which
stops them in order: workers first, then the master), writes its log beside the cluster's
work directories, and binds only ``host``: the master's RPC and web UI ports, each worker's,
and the executors the workers launch (``SPARK_LOCAL_IP``). The master's REST submission
server is off. :meth:`StandaloneCluster.start` returns once the master reports every worker
alive, and :meth:`~StandaloneCluster.status` reads the master's JSON page.

Executors run Python as the driver says (``spark.pyspark.python``, by default the driver's
own interpreter: :mod:`.session`); on this machine that is this virtual environment, and on
other hosts it must exist at the same path (see docs/routing.md, "On a cluster").
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from wsframework.ports import free_port

from .session import QUIET_LOG4J2

__all__ = ["StandaloneCluster", "ClusterFailed", "spark_home"]

_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

# what every daemon reads (--properties-file): no REST submission server on its fixed port
# 6066, workers that clean the directories of finished applications
_PROPERTIES = """\
spark.master.rest.enabled false
spark.worker.cleanup.enabled true
spark.ui.showConsoleProgress false
"""

# the daemons say when they start, register and stop; the rest of Spark at WARN
_LOG4J2 = QUIET_LOG4J2 + """\
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker.Worker
logger.worker.level = info
"""


class ClusterFailed(RuntimeError):
    """The cluster did not come up; the message names the log to read."""


def spark_home() -> Path:
    """The pyspark installation, which carries Spark's jars and ``bin/spark-class``."""
    import pyspark
    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """One master and ``workers`` workers of ``cores`` cores and ``memory`` each, bound to
    ``host``; their logs and work directories under ``directory`` (default: a temporary
    one, removed by :meth:`stop` unless the cluster failed)."""

    def __init__(self, workers: int = 2, *, host: str = "127.0.0.1", cores: int = 1,
                 memory: str = "1g", directory: str | Path | None = None,
                 startup_timeout: float = 120.0):
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker of at least one core")
        self.workers, self.host, self.cores, self.memory = workers, host, cores, memory
        self.startup_timeout = startup_timeout
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="edn-spark-cluster-"))
        self.master_port = self.ui_port = 0
        self._processes: list[tuple[str, subprocess.Popen]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    # -- starting -----------------------------------------------------------------------------
    def __enter__(self) -> "StandaloneCluster":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop(keep_logs=exc_info[0] is not None)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "spark-defaults.conf").write_text(_PROPERTIES)
        (self.directory / "log4j2.properties").write_text(_LOG4J2)
        try:
            self.master_port, self.ui_port = free_port(self.host), free_port(self.host)
            self._launch("master", _MASTER_CLASS, "--host", self.host, "--port",
                         str(self.master_port), "--webui-port", str(self.ui_port))
            self._wait_for(lambda status: status.get("status") == "ALIVE", "the master")
            for k in range(self.workers):
                work = self.directory / f"worker-{k}"
                work.mkdir(exist_ok=True)
                self._launch(f"worker-{k}", _WORKER_CLASS, "--host", self.host,
                             "--webui-port", str(free_port(self.host)),
                             "--cores", str(self.cores), "--memory", self.memory,
                             "--work-dir", str(work), self.master_url)
            self._wait_for(lambda status: status.get("aliveworkers", 0) >= self.workers,
                           f"{self.workers} workers registered")
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def _launch(self, name: str, main_class: str, *arguments: str) -> None:
        home = spark_home()
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=self.host,
                   SPARK_LOG_DIR=str(self.directory), SPARK_WORKER_DIR=str(self.directory),
                   SPARK_NO_DAEMONIZE="1",
                   SPARK_DAEMON_JAVA_OPTS=f"-Dlog4j2.configurationFile="
                                          f"{(self.directory / 'log4j2.properties').as_uri()}")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        command = [str(home / "bin" / "spark-class"), main_class, *arguments,
                   "--properties-file", str(self.directory / "spark-defaults.conf")]
        with open(self.directory / f"{name}.log", "ab") as log:
            process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self._processes.append((name, process))

    def _wait_for(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise ClusterFailed(f"the Spark {name} exited ({process.returncode}) "
                                        f"before {what}: see {self.directory / name}.log")
            try:
                if ready(self.status(timeout=2.0)):
                    return
            except (OSError, ValueError):
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ClusterFailed(f"no {what} within {self.startup_timeout:.0f} s: see the "
                                    f"logs in {self.directory}")
            time.sleep(0.25)  # polling the master's page: it has no notification to wait on

    def status(self, timeout: float = 10.0) -> dict:
        """The master's JSON page: ``status``, ``aliveworkers``, ``cores``, the workers and
        the applications, active and completed."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=timeout) as answer:
            return json.loads(answer.read())

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, *, keep_logs: bool = False, grace: float = 30.0) -> None:
        """Stop every daemon: SIGTERM to each one's session (the JVM, and the executors a
        worker launched), workers first; SIGKILL to what is left after ``grace`` seconds,
        or at once if the wait is interrupted (a second Ctrl-C must not orphan the
        daemons, which a terminal's Ctrl-C never reaches). The temporary directory goes
        unless ``keep_logs``."""
        processes = [process for _, process in reversed(self._processes)]
        self._processes.clear()
        for process in processes:
            _signal_session(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        try:
            for process in processes:
                try:
                    process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for process in processes:
                _signal_session(process, signal.SIGKILL)  # whatever of a session is left
                process.wait()
        if self._own_directory and not keep_logs:
            import shutil
            shutil.rmtree(self.directory, ignore_errors=True)


def _signal_session(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
