"""One quiet SparkSession per run (NOTES: PySpark 4 local mode, ~3-10 s to start).

* **Local by default** (``local[*]``); ``master`` may name a standalone or cluster master,
  passed to Spark unchanged.
* **Loopback only** in local mode, and with a standalone master on loopback
  (:mod:`.cluster`): ``spark.driver.host`` and ``spark.driver.bindAddress`` are 127.0.0.1
  and the web UI is off, so nothing listens beyond loopback.  (With a master on another
  host the driver must be reachable by the executors: set those with ``conf``.)
* **Quiet**: the JVM's log goes through a log4j2 configuration at WARN (ERROR for the
  noisy loggers) written next to the run, and the JVM's own stdout/stderr (the startup
  banner, "Using incubator modules", native-library warnings) go to a log file instead of
  the terminal; the console progress bar is off.  :func:`progress` prints our own one-line
  progress reports on stderr.
* **Python workers** run this interpreter (``PYSPARK_PYTHON``, unless already set), so the
  executors import the same numpy, rtree and this package.  For a remote master this
  package's code is shipped as a zip (``addPyFile``); its dependencies must be installed
  on the executors.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import zipfile
from pathlib import Path
from typing import Iterator

__all__ = ["progress", "spark_session", "is_local"]

#: Spark's log at WARN, ERROR for its noisiest loggers (log4j2 properties)
QUIET_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.netty.name = io.netty
logger.netty.level = error
logger.blockmanager.name = org.apache.spark.storage.BlockManager
logger.blockmanager.level = error
"""

_PACKAGES = ("spark_jobs", "route_manager", "matchers", "wsframework", "subscription_manager", "wsdl")


def progress(text: str, *, prefix: str = "edn") -> None:
    """One progress line on stderr (above the progress bar, on a terminal)."""
    from wsframework.progress import write
    write(f"[{prefix} {time.strftime('%H:%M:%S')}] {text}")


def is_local(master: str) -> bool:
    return master.startswith("local")


def _on_loopback(master: str) -> bool:
    """Whether ``master`` is a standalone master on this machine's loopback (its executors
    then reach the driver there too)."""
    if not master.startswith("spark://") or "," in master:  # (several masters: a quorum)
        return False
    host = urllib.parse.urlsplit(master).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost: resolved elsewhere, not assumed here
        return False


def _code_zip(directory: Path) -> Path:
    root = Path(__file__).resolve().parents[2]
    target = directory / "edn-code.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in _PACKAGES:
            for path in (root / package).rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(root))
    return target


@contextlib.contextmanager
def spark_session(master: str = "local[*]", *, app_name: str = "edn", conf: dict | None = None,
                  log_dir: str | Path | None = None, cores: int | None = None) -> Iterator:
    """A SparkSession for the length of the ``with`` block (stopped afterwards).

    ``log_dir``: where the JVM's log goes (default: a temporary directory, kept when the
    block raises so the log can be read; its path is printed then)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise RuntimeError("a SparkContext is already running in this process: one per run")
    directory = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="edn-spark-"))
    directory.mkdir(parents=True, exist_ok=True)
    log4j = directory / "log4j2.properties"
    log4j.write_text(QUIET_LOG4J2)
    jvm_log = directory / "spark-jvm.log"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = is_local(master)
    java_options = f"-Dlog4j2.configurationFile={log4j.as_uri()} -Dlog4j2.level=WARN"
    settings = {
        "spark.app.name": app_name,
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": java_options,
        "spark.log.level": "WARN",
        "spark.python.worker.reuse": "true",
        "spark.sql.shuffle.partitions": str(max(2, cores or os.cpu_count() or 2)),
        # results are numpy arrays per task: allow a few hundred MB to come back
        "spark.driver.maxResultSize": "2g",
    }
    loopback = local or _on_loopback(master)
    if loopback:
        settings.update({"spark.driver.host": "127.0.0.1",
                         "spark.driver.bindAddress": "127.0.0.1",
                         "spark.blockManager.bindAddress": "127.0.0.1"})
    settings.update(conf or {})
    spark_conf = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        spark_conf.set(key, value)
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.perf_counter()
    ok = False
    with open(jvm_log, "ab") as log:
        gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": log, "stderr": log})
        session = None
        try:
            context = SparkContext(conf=spark_conf, gateway=gateway)
            context.setLogLevel("WARN")
            if not local:
                context.addPyFile(str(_code_zip(directory)))
            session = SparkSession(context)
            session.edn_start_seconds = time.perf_counter() - started  # type: ignore[attr-defined]
            session.edn_log_dir = directory  # type: ignore[attr-defined]
            yield session
            ok = True
        finally:
            try:
                if session is not None:
                    session.stop()
                elif SparkContext._active_spark_context is not None:
                    SparkContext._active_spark_context.stop()
            finally:
                _end_gateway(gateway)
                if not ok:
                    progress(f"Spark's log: {jvm_log}")
    if ok and log_dir is None:
        shutil.rmtree(directory, ignore_errors=True)


def _end_gateway(gateway) -> None:
    """Close the py4j gateway and end the JVM this run started (so that a later run in the
    same process starts a fresh one)."""
    from pyspark import SparkContext

    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()  # the JVM exits when its stdin closes
        try:
            proc.wait(timeout=15)
        except Exception:
            proc.kill()
            proc.wait(timeout=5)
    SparkContext._gateway = None
    SparkContext._jvm = None
