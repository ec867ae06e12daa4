"""Which worker process of a server runs its network conversation (:mod:`.network`).

gunicorn may run several worker processes over one data directory; the one holding an
exclusive ``flock`` on ``DATA/edn-server.lock`` runs the threads. The kernel drops the lock
with the process, so when the holder dies another worker's next attempt takes over.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["Election"]


class Election:
    """Exclusive ``flock`` on a file: held by one process at a time, released by the kernel
    when the holder dies."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None
