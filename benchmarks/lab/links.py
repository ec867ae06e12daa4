"""What a lab link does to its packets, and the kernel configuration that makes it so.

Each host has one link to the lab's bridge, with two directions: ``up`` (from the host) and
``down`` (to the host). A packet from host A to host B crosses A's up and B's down, so two
hosts whose links both delay 20 ms see 40 ms one way and 80 ms round trips.

Everything here is pure: :class:`Link` validates settings, and the functions turn the lab's
state (links, cuts) into ``tc`` arguments and iptables rules that :mod:`.hosts` applies.
Two ways to shape a link, chosen at run time by what the kernel has:

- ``netem``: delay, jitter, loss, reordering and rate on the egress of each end of the veth
  pair (the host's end for ``up``, the bridge's end for ``down``);
- ``nfqueue`` (kernels without netem): loss by ``iptables -m statistic`` in the bridge's
  namespace, delay, jitter and reordering by :mod:`.delayer` behind ``-j NFQUEUE``, rate by
  ``tc tbf`` on the same egresses (or an iptables ``hashlimit`` policer without tbf).

Cuts are always iptables DROP rules in the bridge's namespace, by bridge port and direction.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

MAX_DELAY_MS = 60_000.0
MAX_RATE_MBIT = 100_000.0
DIRECTIONS = ("up", "down")
FILTER_CHAIN = "LAB_FILTER"  # filter FORWARD: cuts, then loss (and rate by hashlimit)
DELAY_UP_CHAIN = "LAB_DELAY_UP"  # mangle PREROUTING: packets entering the bridge
DELAY_DOWN_CHAIN = "LAB_DELAY_DOWN"  # mangle POSTROUTING: packets leaving it


@dataclass(frozen=True)
class Link:
    """One direction of a link. ``loss`` and ``reorder`` are probabilities (0.05 = 5%);
    ``reorder`` sends that share of packets at once, past the delayed ones (netem's sense);
    ``rate_mbit`` caps the bandwidth (None: uncapped)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    reorder: float = 0.0
    rate_mbit: float | None = None

    def __post_init__(self):
        for name in ("delay_ms", "jitter_ms", "loss", "reorder"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not 0.0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"delay_ms must be in [0, {MAX_DELAY_MS:g}], got {self.delay_ms!r}")
        if not 0.0 <= self.jitter_ms <= self.delay_ms:
            raise ValueError(f"jitter_ms must be in [0, delay_ms={self.delay_ms:g}], got {self.jitter_ms!r}")
        for name in ("loss", "reorder"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a probability in [0, 1], got {getattr(self, name)!r}")
        if self.reorder and not self.delay_ms:
            raise ValueError("reorder needs a delay to overtake (set delay_ms too)")
        if self.rate_mbit is not None and (
                isinstance(self.rate_mbit, bool) or not isinstance(self.rate_mbit, (int, float))
                or not 0.001 <= self.rate_mbit <= MAX_RATE_MBIT):
            raise ValueError(f"rate_mbit must be in [0.001, {MAX_RATE_MBIT:g}] or None, "
                             f"got {self.rate_mbit!r}")

    def changed(self, **changes) -> "Link":
        """This link with some settings changed (validated like a new one)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"unknown link setting(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    @property
    def delays(self) -> bool:
        return bool(self.delay_ms or self.jitter_ms or self.reorder)

    @property
    def shaped(self) -> bool:
        return self != Link()


@dataclass(frozen=True)
class Cuts:
    """Blocked traffic: ``pairs`` of (from host, to host) and ``isolated`` hosts."""

    pairs: frozenset = frozenset()
    isolated: frozenset = frozenset()


def _ms(value: float) -> str:
    return f"{value:g}ms"


def netem_args(link: Link) -> list[str]:
    """``tc qdisc replace dev DEV root`` + these, for one direction under netem."""
    args = ["netem", "limit", "100000"]
    if link.delays:
        args += ["delay", _ms(link.delay_ms)]
        if link.jitter_ms:
            args.append(_ms(link.jitter_ms))
    if link.loss:
        args += ["loss", f"{link.loss * 100:g}%"]
    if link.reorder:
        args += ["reorder", f"{link.reorder * 100:g}%"]
    if link.rate_mbit is not None:
        args += ["rate", f"{link.rate_mbit * 1000:g}kbit"]
    return args


def tbf_args(rate_mbit: float) -> list[str]:
    """A token bucket at ``rate_mbit`` with 10 ms of burst (at least three full frames) and
    a queue of 200 ms beyond which packets drop, as a router's would."""
    burst = max(int(rate_mbit * 1e6 / 8 * 0.010), 3 * 1514)
    return ["tbf", "rate", f"{rate_mbit * 1000:g}kbit", "burst", str(burst), "latency", "200ms"]


def queue_number(index: int, direction: str) -> int:
    """The NFQUEUE number of one direction of host ``index``'s link."""
    return 2 * index + DIRECTIONS.index(direction)


def filter_rules(ports: dict[str, str], cuts: Cuts, links: dict[tuple[str, str], Link], *,
                 loss: bool, hashlimit: bool) -> list[list[str]]:
    """The rules of FILTER_CHAIN (``-A CHAIN`` left out): DROP for every cut, then, when the
    loss or rate is not netem's, random DROP by link direction and hashlimit policers.
    ``ports``: host name -> its bridge port; ``links``: (host, direction) -> Link."""
    rules = []
    for host in sorted(cuts.isolated):
        rules.append(["-m", "physdev", "--physdev-in", ports[host], "-j", "DROP"])
        rules.append(["-m", "physdev", "--physdev-out", ports[host], "-j", "DROP"])
    for source, target in sorted(cuts.pairs):
        rules.append(["-m", "physdev", "--physdev-in", ports[source], "--physdev-out", ports[target],
                      "-j", "DROP"])
    for (host, direction), link in sorted(links.items()):
        match = ["-m", "physdev", "--physdev-in" if direction == "up" else "--physdev-out", ports[host]]
        if loss and link.loss:
            rules.append([*match, "-m", "statistic", "--mode", "random", "--probability",
                          f"{link.loss:.6f}", "-j", "DROP"])
        if hashlimit and link.rate_mbit is not None:
            kbytes = max(1, round(link.rate_mbit * 1000 / 8))
            rules.append([*match, "-m", "hashlimit", "--hashlimit-above", f"{kbytes}kb/s",
                          "--hashlimit-burst", f"{max(kbytes // 100, 16)}kb",
                          "--hashlimit-name", f"{ports[host]}{direction}", "-j", "DROP"])
    return rules


def delay_rules(ports: dict[str, str], indexes: dict[str, int],
                links: dict[tuple[str, str], Link]) -> dict[str, list[list[str]]]:
    """The rules of the two delay chains: every direction that delays goes to its queue
    (``--queue-bypass``: without the delay line its packets pass undelayed)."""
    chains: dict[str, list[list[str]]] = {DELAY_UP_CHAIN: [], DELAY_DOWN_CHAIN: []}
    for (host, direction), link in sorted(links.items()):
        if not link.delays:
            continue
        up = direction == "up"
        chains[DELAY_UP_CHAIN if up else DELAY_DOWN_CHAIN].append(
            ["-m", "physdev", "--physdev-in" if up else "--physdev-out", ports[host],
             "-j", "NFQUEUE", "--queue-num", str(queue_number(indexes[host], direction)),
             "--queue-bypass"])
    return chains
