"""The faults a campaign injects, each a begin and an end on a :class:`LabNetwork`.

- partitions of every link kind (both ways, and one way);
- link damage: loss, reordering, latency with jitter;
- a process paused (SIGSTOP) longer than every timeout, and ``kill -9`` with a restart;
- a host's clock an hour ahead or behind (the role restarted under Debian's
  ``faketime``; its monotonic clock is shifted too, which only moves its arbitrary base:
  libfaketime with ``FAKETIME_DONT_FAKE_MONOTONIC`` makes every absolute-deadline sleep
  fail with EINVAL);
- a full disk (the role's data directory is a small tmpfs, filled up, then emptied).

A fault may act while it holds (``during``): Subscribes that placement forwards, or an
``edn partition`` move, between two servers that cannot reach each other.
"""
from __future__ import annotations

import errno
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from route_manager import protocol
from subscription_manager.client import EventingClient
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault
from wsframework.transport import HttpTransport

from benchmarks.lab.edn_network import TOPIC, LabNetwork

FAKETIME_LIBRARY = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
DISK_MB = 48


@dataclass
class Fault:
    name: str
    kind: str
    begin: Callable[[LabNetwork], None]
    end: Callable[[LabNetwork], None]
    seconds: float = 10.0
    during: Callable[[LabNetwork], None] | None = None
    needs: tuple[str, ...] = field(default=())  # hosts it needs (the tree's child, s3)


def cut(a: str, b: str, *, one_way: bool = False, seconds: float = 10.0, during=None,
        kind: str = "partition") -> Fault:
    arrow = "->" if one_way else "<->"
    return Fault(f"cut {a}{arrow}{b}", kind if not one_way else "one-way partition",
                 lambda net: net.lab.cut(a, b, one_way=one_way), lambda net: net.lab.heal(),
                 seconds, during, needs=(a, b))


def damage(host: str, label: str, seconds: float = 10.0, **link) -> Fault:
    return Fault(f"{label} at {host}", "link damage",
                 lambda net: net.lab.damage(host, **link), lambda net: net.lab.repair(host),
                 seconds, needs=(host,))


def pause(name: str, seconds: float = 30.0) -> Fault:
    return Fault(f"SIGSTOP {name} {seconds:.0f} s", "pause",
                 lambda net: net.lab.pause(net.processes[name]),
                 lambda net: net.lab.resume(net.processes[name]), seconds, needs=(name,))


def kill(name: str, seconds: float = 5.0) -> Fault:
    """``kill -9``; the same role on the same data is started again at the end."""
    return Fault(f"kill -9 {name}", "kill -9",
                 lambda net: net.lab.kill(net.processes[name]),
                 lambda net: net.processes[name].start(), seconds, needs=(name,))


def clock(name: str, offset: str, seconds: float = 10.0) -> Fault:
    """The role restarted with its host's wall clock ``offset`` (``+1h``, ``-1h``), then
    restarted again on the true clock."""
    def begin(net):
        restart(net, name, {"LD_PRELOAD": FAKETIME_LIBRARY, "FAKETIME": offset,
                            "FAKETIME_NO_CACHE": "1"})

    return Fault(f"clock {offset} at {name}", "clock skew", begin,
                 lambda net: restart(net, name, None), seconds, needs=(name,))


def restart(net: LabNetwork, name: str, env: dict | None) -> None:
    process = net.processes[name]
    process.stop()
    process.env = env
    process.start()


def full_disk(name: str, seconds: float = 10.0) -> Fault:
    """The role's data directory (a tmpfs of its own, see :func:`disk_mount`) filled to the
    last byte by a ballast file; the end removes it."""
    def begin(net):
        ballast = Path(net.data_dirs[name]) / "ballast"
        block = b"\0" * (1 << 20)
        with open(ballast, "wb", buffering=0) as out:
            for size in (1 << 20, 4096):  # megabytes, then the last pages
                try:
                    while True:
                        out.write(block[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise

    def end(net):
        (Path(net.data_dirs[name]) / "ballast").unlink(missing_ok=True)

    def probe(net):
        """What a new Subscribe at the full server is answered (recorded in the notes)."""
        server = net.processes[name]
        try:
            handle = net.lab["subscriber"].run(lambda: EventingClient("2011").subscribe(
                f"{server.base_url}/topics/{TOPIC}", f"{net.sink.url}/full-disk",
                expires="PT1M"))
            # placed on a server with room (placement forwards it): a probe, ended at once
            at_full = handle.manager.address.startswith(server.base_url)
            net.disk_answers.append("accepted by the full server itself" if at_full
                                    else "accepted elsewhere")
            net.lab["subscriber"].run(lambda: EventingClient("2011").unsubscribe(handle))
        except SoapFault as fault:
            net.disk_answers.append(f"{fault.code}: {fault.reason}")
        except Exception as exc:
            net.disk_answers.append(f"{type(exc).__name__}: {exc}"[:300])

    return Fault(f"full disk at {name}", "full disk", begin, end, seconds, probe, needs=(name,))


def disk_mount(path: Path, megabytes: int = DISK_MB) -> Path:
    """A tmpfs of ``megabytes`` at ``path`` (root), for a role's data directory."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
                   check=True)
    return path


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def subscribe_during(count: int, at: str, seed: int):
    """Subscribes made at ``at`` while the fault holds (placement may forward them)."""
    def act(net: LabNetwork):
        net.pending_routes.append(net.subscribe(count, seed=seed, at=[at], wait_routed=False))
    return act


# seconds ``edn partition`` waits for the dispatcher's answer (its --timeout default)
PARTITION_TIMEOUT_S = 600.0


def repartition_during(net: LabNetwork) -> None:
    """``edn partition`` as the CLI sends it (its patience too): the dispatcher moves
    subscriptions between the servers; what it could not move, and why, is noted."""
    def call():
        transport = HttpTransport(timeout=(3.0, PARTITION_TIMEOUT_S))
        try:
            return AdminClient(net.roots[0].base_url, net.token, transport=transport).call(
                protocol.Repartition(Topic=TOPIC, Algorithm="kmeans"))
        finally:
            transport.close()
    try:
        response = net.lab["subscriber"].run(call)
    except Exception as exc:
        net.notes.append(f"repartition during the cut: {type(exc).__name__}: {exc}"[:300])
        return
    figures = {f.Name: f.Value for f in response.Figure or []}
    net.notes.append(f"repartition during the cut: moved {response.Moved}, not moved "
                     f"{figures.get('not_moved', 0)} ({figures.get('first_failure', 'no failure')})"
                     [:400])


def catalogue(tree: bool, quick: bool) -> list[Fault]:
    """Every fault, each alone, in the order the campaign runs them."""
    if quick:
        return [cut("s1", "subscriber", seconds=4), cut("publisher", "root1", seconds=4),
                damage("root1", "10% loss", loss=0.10, seconds=4),
                pause("s2", seconds=6), kill("s1", seconds=2),
                clock("s2", "+1h", seconds=4), full_disk("s2", seconds=4)]
    faults = [
        cut("root1", "s1"),
        cut("root1", "child"),
        cut("root1", "root2"),
        cut("publisher", "root1"),
        cut("s1", "subscriber"),
        cut("s1", "s2", during=subscribe_during(20, "s1", seed=101)),
        cut("s1", "s2", during=repartition_during),
        cut("s2", "subscriber", one_way=True),
        cut("subscriber", "s2", one_way=True),
        cut("root1", "s2", one_way=True),
        damage("root1", "5% loss", loss=0.05),
        damage("s1", "30% loss", loss=0.30),
        damage("s2", "25% reordering", delay_ms=20, reorder=0.25),
        damage("subscriber", "150 ms +-30 ms", delay_ms=150, jitter_ms=30),
        pause("s2", seconds=30),
        kill("s1"),
        kill("root1"),
        clock("s2", "+1h"),
        clock("s2", "-1h"),
    ]
    if tree:
        faults.append(full_disk("s3"))
    return [f for f in faults if tree or "child" not in f.needs and "s3" not in f.needs]
