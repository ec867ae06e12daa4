"""A lab of hosts on one machine, for tests and benchmarks that need a real network: each
host a network namespace with its own address, every link with its own delay, jitter, loss,
reordering and rate, changeable while traffic flows, and cuts (a pair of hosts, one
direction only, or a host from everyone).

Use::

    from benchmarks.lab import Lab, Link

    with Lab(["dispatcher", "server", "client"], link=Link(delay_ms=20, jitter_ms=5)) as lab:
        dispatcher = lab.serve("dispatcher", "dispatcher", "--allow-private", "10.77.0.0/24")
        server = lab.serve("server", "server", "--dispatcher", dispatcher.base_url, ...)
        sink = lab.sink("client")                      # a NotificationSink on 10.77.0.3
        lab["client"].run(EventingClient().subscribe, ...)  # any call, from inside a host
        lab.cut("server", "client"); ...; lab.heal()     # one_way=True: one direction only
        lab.damage("dispatcher", loss=0.05, delay_ms=50); lab.repair()
        lab.pause(server); ...; lab.resume(server)       # SIGSTOP / SIGCONT; lab.kill: -9

Hosts are named (or ``Lab(3)``: h1, h2, h3) and get addresses in order from the subnet
(10.77.0.0/24 by default: 10.77.0.1, .2, ...). A process role runs with
``lab.serve(host, role, *edn_serve_args)`` (``--host``, ``--port``, ``--data`` and
``--base-url http://ADDRESS:PORT`` are filled in) or any command with
``lab.start_process(host, argv, env=...)``. The test's own code reaches the lab from inside
a host with ``lab[host].run(function, *args)``: the machine's own namespace has no route
into the lab, by design.

How links are shaped (``lab.mechanism`` records the choice): netem where the kernel has it;
otherwise iptables in the bridge's namespace (random DROP for loss), the :mod:`.delayer`
program behind NFQUEUE for delay, jitter and reordering, and tbf (or a hashlimit policer)
for rate. Cuts are iptables DROP rules by bridge port and direction.

Needs: root, iproute2 (``ip netns``), iptables (Debian ``iptables``; ``.ci/setup`` installs
it). :func:`why_not_available` gives the reason a lab cannot run here, for a test's skip.

Cleans up: processes (SIGTERM, then ``kill -9``, always reaped), sinks, the delay line and
every namespace, which takes the veths, bridge, qdiscs and rules with it; on leaving the
``with`` block for any reason, on SIGTERM and SIGHUP (turned into SystemExit), at
interpreter exit, and, after a crash, at the next lab's start (namespaces named
``ednlab<pid>x<n>-*`` whose process is gone).
"""
from benchmarks.lab.hosts import Host, Lab
from benchmarks.lab.links import Link
from benchmarks.lab.roles import HostProcess, HostSink, LabServer
from benchmarks.lab.system import LabError, lab_namespaces, sweep, why_not_available

__all__ = ["Host", "HostProcess", "HostSink", "Lab", "LabError", "LabServer", "Link",
           "lab_namespaces", "sweep", "why_not_available"]
