"""``edn demo --console``: after its measurements the demo keeps its network (or, with
``--standalone``, its event source) running, prints where the web console is and the admin token to log in with, and waits; Ctrl-C (SIGINT) or
SIGTERM stops everything it started.

The demo's processes (gunicorn arbiters in sessions of their own, so a terminal's Ctrl-C does
not reach them) are stopped by the demo's ``with`` blocks as they unwind; that is why both
signals become a KeyboardInterrupt here, from the start of the demo (a SIGTERM during the
measurements unwinds the same way instead of killing the demo and orphaning its network), and
why a second signal is ignored once stopping has begun.
"""
from __future__ import annotations

import contextlib
import signal


def _say(text: str) -> None:
    print(text, flush=True)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_on_signals(enabled: bool = True):
    """While the block runs, SIGTERM unwinds it like Ctrl-C (the default SIGTERM would end
    the process without stopping its children); the previous handlers of both come back
    after."""
    if not enabled:
        yield
        return
    previous = {signal.SIGINT: signal.getsignal(signal.SIGINT),
                signal.SIGTERM: signal.signal(signal.SIGTERM, _interrupt)}
    try:
        yield
    finally:
        for signum, handler in previous.items():  # keep_running ignores both while stopping
            signal.signal(signum, handler)


def keep_running(entry, token: str, servers: dict, *, sink=None, others: dict | None = None,
                 role: str = "dispatcher") -> None:
    """Print the console address of ``entry`` (a :class:`ServerProcess`: the dispatcher, or
    the standalone demo's source), the token and every process started, then wait for SIGINT
    or SIGTERM. Returns normally then, with both signals ignored, so that the caller's
    ``with`` blocks stop everything undisturbed."""
    processes = {role: entry, **(others or {}), **servers}
    pids = [f"{name} {process.proc.pid}" for name, process in processes.items()]
    if sink is not None and getattr(sink, "proc", None) is not None:
        pids.append(f"sink {sink.proc.pid}")
    running = "the network keeps" if servers else f"the {role} keeps"
    try:  # a signal while these lines print (a reader may act on the first) stops the same way
        _say(f"\nweb console: {entry.base_url}/console")
        _say(f"admin token (log in with it): {token}")
        for name, process in servers.items():
            _say(f"  server {name}: {process.base_url}/console")
        _say(f"processes: {', '.join(pids)}")
        _say(f"{running} running; press Ctrl-C to stop everything the demo started")
        while True:
            signal.pause()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _say("stopping everything the demo started ...")
