"""Which process owns an outbox row: ``pid:start-time@machine``.

Every worker of a service shares its store; a row belongs to the process that accepted (or
claimed) it. The start time (from /proc) tells a reused pid from the process that died, so
a sweep can take the rows of a dead owner at once instead of waiting for its lease. The
machine (this boot of this kernel, and the pid namespace) tells an owner whose pid means
something here from one on another host sharing the store (PostgreSQL): that one is judged
by its heartbeat's lease alone.
"""
from __future__ import annotations

import os

__all__ = ["process_owner", "owner_alive"]


def _process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), or '' where
    /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        return data[data.rindex(b")") + 2:].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return ""


def _machine() -> str:
    """Where pids mean the same: this boot of the kernel and this pid namespace."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip().replace("-", "")[:12]
        return f"{boot_id}.{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


MACHINE = _machine()


def process_owner(pid: int | None = None) -> str:
    """This (or ``pid``'s) process as an outbox owner: ``pid:start@machine``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_process_start(pid)}@{MACHINE}"


def owner_alive(owner: str) -> bool:
    """Whether the process ``owner`` names still runs (same pid, same start time), as far
    as this machine can tell: an owner on another machine counts as alive (its lease
    decides). An owner without a machine is from before machines were named: local."""
    owner, _, machine = owner.partition("@")
    if machine and machine != MACHINE:
        return True
    pid_text, _, start = owner.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not start or _process_start(pid) == start
