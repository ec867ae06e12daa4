"""The lab's few contacts with the operating system: running ``ip``/``tc``/``iptables``,
entering a network namespace from a thread, finding what the kernel can do, and sweeping up
what a crashed lab left behind.

Every namespace a lab makes is named ``PREFIX<pid>x<n>-<what>``; a namespace with that
prefix whose owning process is gone is a leftover and :func:`sweep` removes it (its
processes killed first), with the lab's data directory (``<tmp>/PREFIX<pid>x<n>-data-*``). Namespaces of a live lab, in this process or another, are left alone.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

PREFIX = "ednlab"
NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
_OWNED = re.compile(rf"^{PREFIX}(\d+)x\d+-")
_libc = ctypes.CDLL(None, use_errno=True)


class LabError(RuntimeError):
    """A lab could not be built or changed; the message says which command and why."""


def run(*argv: str, netns: str | None = None, check: bool = True, timeout: float = 30.0) -> str:
    """Run a command (inside ``netns`` when given); its output, or LabError naming it."""
    command = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LabError(f"{' '.join(command)}: {error}") from None
    if check and done.returncode != 0:
        raise LabError(f"{' '.join(command)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def enter_netns(name: str) -> None:
    """Move the calling thread (only it) into network namespace ``name``: sockets it opens
    from now on, and threads it starts, live there."""
    fd = os.open(NETNS_DIR / name, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {name}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def why_not_available() -> str | None:
    """None when this process can build a lab; otherwise the reason (for a test's skip)."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, veth pairs, iptables)"
    if shutil.which("ip") is None:
        return "the lab needs iproute2's `ip` (apt-get install iproute2)"
    probe = f"{PREFIX}{os.getpid()}x0-probe"
    try:
        run("ip", "netns", "add", probe)
    except LabError as error:
        return f"`ip netns add` does not work here: {error}"
    run("ip", "netns", "del", probe, check=False)
    return None


def lab_namespaces() -> list[str]:
    """Every lab-made namespace on this machine (any owner)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(PREFIX))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_inside(netns: str) -> None:
    """``kill -9`` every process living in ``netns`` (continued first, so stopped ones die)."""
    for pid in run("ip", "netns", "pids", netns, check=False).split():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(int(pid), sig)
            except (ProcessLookupError, ValueError):
                pass


def remove_namespace(netns: str) -> None:
    kill_inside(netns)
    run("ip", "netns", "del", netns, check=False)


def _orphaned(name: str) -> bool:
    owner = _OWNED.match(name)
    return bool(owner) and int(owner.group(1)) != os.getpid() and not _alive(int(owner.group(1)))


def sweep() -> list[str]:
    """Remove the namespaces (and temporary data directories) of labs whose process is
    gone; returns their names."""
    removed = []
    for name in lab_namespaces():
        if _orphaned(name):
            remove_namespace(name)
            removed.append(name)
    scratch = Path(tempfile.gettempdir())
    for data in scratch.glob(f"{PREFIX}*-data-*"):
        if data.is_dir() and _orphaned(data.name):
            shutil.rmtree(data, ignore_errors=True)
            removed.append(str(data))
    return removed


def iptables_command(netns: str) -> str | None:
    """The iptables that works in ``netns`` (the nft one first, then legacy), or None."""
    for candidate in ("iptables", "iptables-nft", "iptables-legacy"):
        if shutil.which(candidate) and not _fails(candidate, "-S", netns=netns):
            return candidate
    return None


def qdisc_works(netns: str, device: str, *args: str) -> bool:
    """Whether ``tc qdisc replace dev DEVICE root ARGS`` works here (then removed)."""
    if shutil.which("tc") is None or _fails("tc", "qdisc", "replace", "dev", device, "root", *args,
                                            netns=netns):
        return False
    run("tc", "qdisc", "del", "dev", device, "root", netns=netns, check=False)
    return True


def _fails(*argv: str, netns: str) -> bool:
    try:
        run(*argv, netns=netns)
    except LabError:
        return True
    return False
