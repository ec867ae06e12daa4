"""The lab itself: N hosts as network namespaces, each joined by a veth pair to one bridge
that lives in a namespace of its own, with shaped links, cuts, and roles run inside.

Nothing is made in the machine's own namespace: every interface, address, qdisc and rule
sits in the lab's namespaces, and traffic stays on the lab's subnet. :meth:`Lab.close`
(the context manager's exit, also on an exception, Ctrl-C or SIGTERM) stops every process,
closes the delay line and deletes every namespace, which takes the veths, the bridge, the
qdiscs and the rules with it. A lab that died without closing is swept by the next one.
"""
from __future__ import annotations

import atexit
import ipaddress
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.lab import links as rules
from benchmarks.lab import system
from benchmarks.lab.links import Cuts, Link
from benchmarks.lab.roles import HostProcess, HostSink, LabServer
from benchmarks.lab.system import LabError

_labs = itertools.count(1)
MAX_HOSTS = 200
FIRST_PORT = 8001


class Host:
    """One lab host: its name, address and namespace. :meth:`run` calls a function from a
    thread inside the host, so the sockets it opens (and the threads it starts) are there."""

    def __init__(self, name: str, index: int, address: str, netns: str):
        self.name = name
        self.index = index
        self.address = address
        self.netns = netns
        self.port = f"p{index}"  # its veth end at the bridge
        self._ports = itertools.count(FIRST_PORT)
        self._threads: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def run(self, function, *args, **kwargs):
        """``function(*args, **kwargs)`` inside the host; its result (or its exception)."""
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(4, thread_name_prefix=f"lab-{self.name}",
                                                   initializer=system.enter_netns,
                                                   initargs=(self.netns,))
        return self._threads.submit(function, *args, **kwargs).result()

    def start_thread(self, target, *args, name: str | None = None) -> threading.Thread:
        """A daemon thread running ``target(*args)`` inside the host (for long loops, such
        as a publisher, that would hold one of :meth:`run`'s few threads)."""
        return self.run(_started_thread, target, args, name or f"lab-{self.name}-task")

    def next_port(self) -> int:
        return next(self._ports)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.address})"


class Lab:
    """``hosts``: a count (hosts h1..hN) or the hosts' names. ``link``: every link's
    starting settings, both directions. ``mechanism``: "auto" (netem when the kernel has
    it, else nfqueue), "netem" or "nfqueue"."""

    def __init__(self, hosts: int | list[str] = 2, *, link: Link = Link(),
                 subnet: str = "10.77.0.0/24", mechanism: str = "auto", data_dir: str | None = None):
        names = [f"h{k}" for k in range(1, hosts + 1)] if isinstance(hosts, int) else list(hosts)
        network = ipaddress.ip_network(subnet)
        if not network.is_private or network.version != 4:
            raise ValueError(f"the lab's subnet must be a private IPv4 network, got {subnet}")
        if not 1 <= len(names) <= min(MAX_HOSTS, network.num_addresses - 3):
            raise ValueError(f"a lab on {subnet} has 1 to {min(MAX_HOSTS, network.num_addresses - 3)} "
                             f"hosts, got {len(names)}")
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise ValueError(f"host names must be distinct identifiers, got {names}")
        if mechanism not in ("auto", "netem", "nfqueue"):
            raise ValueError(f"mechanism is auto, netem or nfqueue, got {mechanism!r}")
        self.subnet = network
        self.wanted = mechanism
        self.base = link
        tag = f"{system.PREFIX}{os.getpid()}x{next(_labs)}"
        self.bridge_netns = f"{tag}-br"
        self.hosts: dict[str, Host] = {
            name: Host(name, k, str(network.network_address + k), f"{tag}-{name}")
            for k, name in enumerate(names, 1)}
        self.links: dict[tuple[str, str], Link] = {
            (name, d): link for name in names for d in rules.DIRECTIONS}
        self.cuts = Cuts()
        self.mechanism: dict[str, str | None] = {}
        self.processes: list = []
        self.sinks: list[HostSink] = []
        self._made: list[str] = []
        self._delayer: subprocess.Popen | None = None
        self._iptables: str | None = None
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix=f"{tag}-data-")
        self.data_dir = Path(data_dir or self._tmp.name)
        self._signals: dict[int, object] = {}
        self._lock = threading.RLock()
        self.closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "Lab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "Lab":
        """Build the lab (removing whatever it made if that fails); LabError says why not."""
        reason = system.why_not_available()
        if reason:
            raise LabError(reason)
        system.sweep()
        self._trap_signals()
        atexit.register(self.close)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        self._make_namespace(self.bridge_netns)
        system.run("ip", "-n", self.bridge_netns, "link", "add", "br0", "type", "bridge")
        system.run("ip", "-n", self.bridge_netns, "link", "set", "br0", "up")
        system.run("ip", "-n", self.bridge_netns, "link", "set", "lo", "up")
        for host in self.hosts.values():
            self._make_host(host)
        self._choose_mechanism()
        self._apply_all()

    def _make_namespace(self, name: str) -> None:
        system.run("ip", "netns", "add", name)
        self._made.append(name)
        # the lab speaks IPv4 on its own subnet only: no IPv6 autoconfiguration chatter
        system.run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                   netns=name, check=False)

    def _make_host(self, host: Host) -> None:
        self._make_namespace(host.netns)
        system.run("ip", "-n", self.bridge_netns, "link", "add", host.port, "type", "veth",
                   "peer", "name", "eth0", "netns", host.netns)
        system.run("ip", "-n", self.bridge_netns, "link", "set", host.port, "master", "br0", "up")
        system.run("ip", "-n", host.netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}",
                   "dev", "eth0")
        system.run("ip", "-n", host.netns, "link", "set", "eth0", "up")
        system.run("ip", "-n", host.netns, "link", "set", "lo", "up")

    def _choose_mechanism(self) -> None:
        """What shapes links here (recorded in ``self.mechanism``)."""
        first = next(iter(self.hosts.values()))
        self._iptables = system.iptables_command(self.bridge_netns)
        has_netem = system.qdisc_works(self.bridge_netns, first.port, "netem", "delay", "1ms")
        if self.wanted == "netem" and not has_netem:
            raise LabError("this kernel has no netem (tc qdisc ... netem: unknown qdisc kind)")
        if self.wanted == "nfqueue" or (self.wanted == "auto" and not has_netem):
            if self._iptables is None:
                raise LabError("no netem and no working iptables: the lab cannot shape links "
                               "(apt-get install iptables)")
            delay = "nfqueue"
            if system.qdisc_works(self.bridge_netns, first.port, *rules.tbf_args(100)):
                rate = "tbf"
            else:
                rate = "hashlimit"
        else:
            delay = rate = "netem"
        self.mechanism = {"delay": delay, "loss": "netem" if delay == "netem" else "iptables",
                          "rate": rate, "cuts": "iptables" if self._iptables else None,
                          "iptables": self._iptables}
        if self._iptables:
            system.run(self._iptables, "-w", "-N", rules.FILTER_CHAIN, netns=self.bridge_netns)
            system.run(self._iptables, "-w", "-A", "FORWARD", "-j", rules.FILTER_CHAIN, netns=self.bridge_netns)
            system.run("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", netns=self.bridge_netns)
        if delay == "nfqueue":
            for chain, hook in ((rules.DELAY_UP_CHAIN, "PREROUTING"), (rules.DELAY_DOWN_CHAIN, "POSTROUTING")):
                system.run(self._iptables, "-w", "-t", "mangle", "-N", chain, netns=self.bridge_netns)
                system.run(self._iptables, "-w", "-t", "mangle", "-A", hook, "-j", chain,
                           netns=self.bridge_netns)
            self._start_delayer()

    def _start_delayer(self) -> None:
        queues = [rules.queue_number(h.index, d) for h in self.hosts.values() for d in rules.DIRECTIONS]
        self._delayer = subprocess.Popen(
            ["ip", "netns", "exec", self.bridge_netns, sys.executable, "-m", "benchmarks.lab.delayer",
             *map(str, queues)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            start_new_session=True, cwd=Path(__file__).resolve().parents[2])
        if self._delayer.stdout.readline().strip() != "ready":
            raise LabError(f"the delay line did not start (exit {self._delayer.poll()})")

    def close(self) -> None:
        """Remove everything the lab made; safe to call twice and after a failed start."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for process in reversed(self.processes):
            try:
                process.stop(5)
            except Exception:
                _quietly(process.kill)
        for sink in self.sinks:
            _quietly(sink.stop)
        for host in self.hosts.values():
            _quietly(host.close)
        if self._delayer is not None:
            _quietly(self._delayer.stdin.close)
            try:
                self._delayer.wait(5)
            except subprocess.TimeoutExpired:
                _quietly(lambda: os.killpg(self._delayer.pid, signal.SIGKILL))
                _quietly(lambda: self._delayer.wait(5))
        for name in reversed(self._made):
            _quietly(lambda: system.remove_namespace(name))
        self._restore_signals()
        atexit.unregister(self.close)
        if self._tmp is not None:
            _quietly(self._tmp.cleanup)

    def _trap_signals(self) -> None:
        """SIGTERM and SIGHUP unwind like Ctrl-C (so ``with Lab()`` cleans up) when nobody
        else handles them; only the main thread may install handlers."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                self._signals[sig] = signal.signal(sig, _raise_exit)

    def _restore_signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in self._signals.items():
                signal.signal(sig, previous)
        self._signals.clear()

    # -- hosts and roles ---------------------------------------------------------------------
    def __getitem__(self, name: str) -> Host:
        return self.host(name)

    def host(self, name: str | Host) -> Host:
        if isinstance(name, Host):
            return name
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host {name!r} in this lab (hosts: {', '.join(self.hosts)})") from None

    def start_process(self, host: str | Host, argv, **options) -> HostProcess:
        """Start a command in ``host`` (see :class:`HostProcess`); stopped at close."""
        process = HostProcess(self.host(host), argv, **options).start()
        self.processes.append(process)
        return process

    def serve(self, host: str | Host, role: str, *args: str, port: int | None = None,
              name: str | None = None, data_dir: Path | None = None, **options) -> LabServer:
        """``edn serve ROLE`` in ``host``, healthy on return; stopped at close. Its data
        lives in the lab's data directory unless ``data_dir`` says where (a small mount, say)."""
        host = self.host(host)
        port = port or host.next_port()
        server = LabServer(host, role, port=port, extra_args=args,
                           data_dir=data_dir or self.data_dir / f"{host.name}-{name or role}-{port}",
                           **options)
        self.processes.append(server)
        return server.start()

    def sink(self, host: str | Host, **options) -> HostSink:
        """A notification sink listening in ``host``; stopped at close."""
        host = self.host(host)
        sink = host.run(lambda: HostSink(host, **options).start())
        self.sinks.append(sink)
        return sink

    def pause(self, process) -> None:
        process.pause()

    def resume(self, process) -> None:
        process.resume()

    def kill(self, process) -> None:
        process.kill()

    # -- links and cuts ----------------------------------------------------------------------
    def damage(self, host: str | Host, direction: str = "both", **changes) -> None:
        """Change ``host``'s link settings (``delay_ms``, ``jitter_ms``, ``loss``,
        ``reorder``, ``rate_mbit``) in one or both directions, at once."""
        host = self.host(host)
        directions = rules.DIRECTIONS if direction == "both" else (direction,)
        if any(d not in rules.DIRECTIONS for d in directions):
            raise ValueError(f"direction is up, down or both, got {direction!r}")
        changed = {(host.name, d): self.links[host.name, d].changed(**changes) for d in directions}
        with self._lock:
            self.links.update(changed)
            self._apply_links(changed)

    def repair(self, host: str | Host | None = None) -> None:
        """Links back to the lab's starting settings (one host's, or every host's)."""
        names = [self.host(host).name] if host is not None else list(self.hosts)
        with self._lock:
            changed = {(n, d): self.base for n in names for d in rules.DIRECTIONS}
            self.links.update(changed)
            self._apply_links(changed)

    def cut(self, a: str | Host, b: str | Host, *, one_way: bool = False) -> None:
        """Drop traffic between ``a`` and ``b`` (``one_way``: only from ``a`` to ``b``)."""
        a, b = self.host(a).name, self.host(b).name
        if a == b:
            raise ValueError("a cut joins two different hosts")
        pairs = {(a, b)} if one_way else {(a, b), (b, a)}
        with self._lock:
            self.cuts = Cuts(self.cuts.pairs | pairs, self.cuts.isolated)
            self._apply_filter()

    def isolate(self, host: str | Host) -> None:
        """Cut ``host`` from every other host."""
        with self._lock:
            self.cuts = Cuts(self.cuts.pairs, self.cuts.isolated | {self.host(host).name})
            self._apply_filter()

    def heal(self) -> None:
        """Remove every cut (link damage stays: see :meth:`repair`)."""
        with self._lock:
            self.cuts = Cuts()
            self._apply_filter()

    def _apply_all(self) -> None:
        with self._lock:
            self._apply_links(dict(self.links))

    def _apply_links(self, changed: dict[tuple[str, str], Link]) -> None:
        if any(link.shaped for link in changed.values()) and self.mechanism.get("delay") is None:
            raise LabError("this lab cannot shape links here (no netem, no iptables)")
        for (name, direction), link in changed.items():
            host = self.hosts[name]
            netns, device = ((host.netns, "eth0") if direction == "up" else (self.bridge_netns, host.port))
            if self.mechanism["delay"] == "netem":
                args = rules.netem_args(link) if link.shaped else None
            elif self.mechanism["rate"] == "tbf":
                args = rules.tbf_args(link.rate_mbit) if link.rate_mbit is not None else None
            else:
                args = None
            if args:
                system.run("tc", "-n", netns, "qdisc", "replace", "dev", device, "root", *args)
            else:
                system.run("tc", "-n", netns, "qdisc", "del", "dev", device, "root", check=False)
            if self._delayer is not None:
                self._tell_delayer({"queue": rules.queue_number(host.index, direction),
                                    "delay_ms": link.delay_ms, "jitter_ms": link.jitter_ms,
                                    "reorder": link.reorder})
        if self._delayer is not None:
            for chain, chain_rules in rules.delay_rules(self._ports(), self._indexes(), self.links).items():
                self._replace_chain(chain, chain_rules, table="mangle")
        self._apply_filter()

    def _apply_filter(self) -> None:
        if self._iptables is None:
            if self.cuts.pairs or self.cuts.isolated:
                raise LabError("cuts need iptables (apt-get install iptables)")
            return
        self._replace_chain(rules.FILTER_CHAIN, rules.filter_rules(
            self._ports(), self.cuts, self.links, loss=self.mechanism["loss"] == "iptables",
            hashlimit=self.mechanism["rate"] == "hashlimit"))

    def _replace_chain(self, chain: str, chain_rules: list[list[str]], table: str = "filter") -> None:
        """Swap a chain's rules in one ``iptables-restore`` transaction."""
        lines = [f"*{table}", f"-F {chain}", *(f"-A {chain} " + " ".join(r) for r in chain_rules), "COMMIT", ""]
        restore = self._iptables + "-restore"
        done = subprocess.run(["ip", "netns", "exec", self.bridge_netns, restore, "-w", "--noflush"],
                              input="\n".join(lines), capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise LabError(f"{restore} of {chain}: {done.stderr.strip()}")

    def _tell_delayer(self, order: dict) -> None:
        if self._delayer.poll() is not None:
            raise LabError(f"the delay line exited with {self._delayer.returncode}")
        self._delayer.stdin.write(json.dumps(order) + "\n")
        self._delayer.stdin.flush()
        answer = self._delayer.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise LabError(f"the delay line refused {order}: {answer}")

    def delayer_stats(self) -> dict:
        """Packets the delay line held and passed (empty under netem)."""
        if self._delayer is None:
            return {}
        with self._lock:
            self._delayer.stdin.write('{"stats": 1}\n')
            self._delayer.stdin.flush()
            return json.loads(self._delayer.stdout.readline().split(" ", 1)[1])

    def _ports(self) -> dict[str, str]:
        return {name: host.port for name, host in self.hosts.items()}

    def _indexes(self) -> dict[str, int]:
        return {name: host.index for name, host in self.hosts.items()}

    def rules(self) -> str:
        """The bridge namespace's iptables rules (for a report or a failing test)."""
        if self._iptables is None:
            return ""
        return (system.run(self._iptables, "-S", netns=self.bridge_netns)
                + system.run(self._iptables, "-t", "mangle", "-S", netns=self.bridge_netns))


def _started_thread(target, args, name) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()  # a thread starts in its creator's network namespace: this host's
    return thread


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _quietly(action) -> None:
    try:
        action()
    except Exception:
        pass
