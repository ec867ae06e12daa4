"""A throwaway PostgreSQL cluster in a directory: made with ``initdb``, served by ``pg_ctl``
on a Unix socket in that directory (and TCP if asked), stopped and deleted after. Used by the
tests (every store-backed test on PostgreSQL too), ``edn bench storage`` and the lab's
host-loss check. PostgreSQL refuses to run as root: as root the cluster runs as the
``postgres`` user that Debian's package makes.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["PostgresCluster", "postgres_binaries", "run_checked", "unavailable_reason"]

def postgres_binaries() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres`` (the newest version)."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(Path("/").glob("usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                        else 0)
    return candidates[-1].parent if candidates else None


def unavailable_reason() -> str | None:
    """Why a cluster cannot run here, or None."""
    if postgres_binaries() is None:
        return "PostgreSQL is not installed (.ci/setup installs Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a postgres user to run the cluster as"
    return None


def run_checked(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


class PostgresCluster:
    """``with PostgresCluster() as cluster: cluster.url("db")``."""

    def __init__(self, directory: str | Path | None = None, *, port: int = 5432,
                 listen: str = "", settings: dict[str, str] | None = None,
                 runner: list[str] | None = None):
        """``listen``: TCP addresses (empty: the Unix socket only); ``settings``: lines of
        postgresql.conf; ``runner``: a command prefix to run the server under (the lab's
        ``ip netns exec HOST``)."""
        self.bin = postgres_binaries()
        if self.bin is None:
            raise RuntimeError(unavailable_reason())
        self._owned = directory is None
        self.root = Path(directory or tempfile.mkdtemp(prefix="edn-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.port = port
        self.listen = listen
        self.settings = dict(settings or {})
        self.runner = list(runner or [])
        self.user = "postgres"
        self.running = False

    # -- running as the postgres user when root ------------------------------------------
    def _as_owner(self, command: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return command
        return ["runuser", "-u", "postgres", "--", *command]

    def own_directory(self) -> None:
        """Give the cluster's directory to the user the server runs as (``postgres`` as root):
        before ``initdb``, or before a base backup is written into it."""
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            for path in [self.root, *self.root.rglob("*")]:
                os.chown(path, account.pw_uid, account.pw_gid)

    def init(self) -> "PostgresCluster":
        self.root.mkdir(parents=True, exist_ok=True)
        self.own_directory()
        run_checked(self._as_owner([str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user,
                             "--auth=trust", "-E", "UTF8", "--no-instructions"]))
        self.configure({
            "listen_addresses": f"'{self.listen}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "fsync": "on", "synchronous_commit": "on",
            "max_connections": "200", "shared_buffers": "64MB",
            **self.settings})
        if self.listen:
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write("host all all 0.0.0.0/0 trust\nhost replication all 0.0.0.0/0 trust\n")
        return self

    def configure(self, settings: dict[str, str]) -> None:
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = {value}\n")

    def start(self) -> "PostgresCluster":
        try:
            run_checked(self.runner + self._as_owner(
                [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
                 "-w", "-t", "60", "start"]))
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from None
        self.running = True
        return self

    def stop(self, mode: str = "fast") -> None:
        if self.running:
            subprocess.run(self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data),
                                           "-m", mode, "-w", "stop"]), capture_output=True)
            self.running = False

    def psql(self, statement: str, database: str = "postgres") -> str:
        return run_checked(self._as_owner([str(self.bin / "psql") if (self.bin / "psql").exists()
                                    else "psql", "-h", str(self.socket_dir), "-p",
                                    str(self.port), "-U", self.user, "-d", database, "-Atc",
                                    statement]))

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, database: str = "postgres", *, host: str | None = None,
            schema: str | None = None) -> str:
        """A ``postgresql://`` URL of a database here: by the Unix socket, or ``host``."""
        where = host or ""
        query = {} if host else {"host": str(self.socket_dir)}
        if schema:
            query["schema"] = schema
        text = "&".join(f"{k}={v}" for k, v in query.items())
        return (f"postgresql://{self.user}@{where}:{self.port}/{database}"
                + (f"?{text}" if text else ""))

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.root / "log").read_text().splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        self.stop("immediate")
        if self._owned:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PostgresCluster":
        return self.init().start()

    def __exit__(self, *exc) -> None:
        self.close()
