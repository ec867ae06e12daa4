"""``edn bench tls``: what TLS costs, side by side with plain HTTP in one run.

* ``live_events_per_s_plain`` / ``_tls`` / ``live_tls_ratio`` -- the live network
  (:mod:`benchmarks.livenet`: a dispatcher, servers with imported range subscriptions,
  closed-loop publishers, summaries at 0.5) with every hop plain, then with every hop over
  mutual TLS (member certificates from ``edn tls issue``; publishers over HTTPS too). Goal:
  TLS at least 0.8x plain.
* ``notifications_per_s_plain`` / ``_https`` / ``notifications_https_ratio`` -- one source
  delivering to a fast sink over HTTP and over HTTPS (:mod:`.delivery`'s round, alternated,
  medians). Goal: HTTPS at least 0.7x.
* ``handshakes_per_10k_notifications`` -- TLS connections the HTTPS sink accepted per
  10,000 notifications: connections are reused, not one per notification.
* ``handshake_p50_ms`` (and p95) -- a client's full mutual-TLS handshake to a role (the
  source under gevent, the dispatcher under buffered gthread), beside ``tcp_connect_p50_ms``.
* ``slow_handshakes`` -- per role, ``stalled`` sockets stalled mid-handshake (half send
  nothing, half the start of a ClientHello), and the p95 of ``GET /health`` over an
  established TLS connection meanwhile, beside the same probes with no stalled socket.
  Goal: at most 50 ms.

``--quick`` shrinks every part (a smoke test; its figures mean little).
"""
from __future__ import annotations

import shutil
import socket
import ssl
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from edn.localnet.network import NetworkPki
from edn.localnet.processes import ServerProcess
from edn.sink import FastSink
from wsframework import progress

from ..livenet import Setup, live_events_per_s
from .delivery import _delivery_run

PRECISION = 0.5
STALLED_CLIENT_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # its first bytes


def _log(text: str) -> None:
    progress.write(text)


def _percentile(values, q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if len(values) else None


# -- the live network ---------------------------------------------------------------------------

def live(quick: bool, pki_dir: Path) -> dict:
    base = (replace(Setup.quick(), servers=2, per_server=300) if quick
            else Setup(servers=6, per_server=5_000))
    setup = replace(base, link_mbps=10_000.0, warmup=0.5 if quick else 3.0,
                    seconds=1.0 if quick else 6.0, publishers=4)
    plain = live_events_per_s(setup, PRECISION, log=_log)
    _log(f"  live, plain: {plain} events/s")
    tls = live_events_per_s(setup, PRECISION, log=_log, tls_dir=pki_dir)
    _log(f"  live, mutual TLS on every hop: {tls} events/s")
    return {"live_events_per_s_plain": plain, "live_events_per_s_tls": tls,
            "live_tls_ratio": round(tls / plain, 3) if plain else None,
            "live_servers": setup.servers, "live_subscriptions_per_server": setup.per_server}


# -- one source's notifications -------------------------------------------------------------

def notifications(quick: bool, issuer: NetworkPki) -> dict:
    subscriptions, events, rounds = (100, 10, 1) if quick else (1_000, 30, 3)
    files = issuer.member("sink")
    plain_sink = FastSink().start()
    https_sink = FastSink(tls=(str(files.cert), str(files.key))).start()
    plain, https, handshakes = [], [], []
    try:
        for _ in range(rounds):  # alternated: the machine's noise falls on both alike
            plain += _delivery_run(plain_sink, "lean", subscriptions, events)
            before = https_sink.connections
            https += _delivery_run(https_sink, "lean", subscriptions, events,
                                   source_args=["--tls-ca", str(issuer.ca)])
            handshakes.append((https_sink.connections - before) / (subscriptions * events) * 1e4)
    finally:
        plain_sink.stop()
        https_sink.stop()
    plain_rate = float(np.median([r["per_s"] for r in plain]))
    https_rate = float(np.median([r["per_s"] for r in https]))
    _log(f"  notifications/s: plain {plain_rate:.0f}, https {https_rate:.0f}")
    return {"notifications_per_s_plain": round(plain_rate),
            "notifications_per_s_https": round(https_rate),
            "notifications_https_ratio": round(https_rate / plain_rate, 3),
            "notifications_rounds_plain": [round(r["per_s"]) for r in plain],
            "notifications_rounds_https": [round(r["per_s"]) for r in https],
            "handshakes_per_10k_notifications": round(float(np.median(handshakes)), 1),
            "notifications_cpu_us_plain": round(float(np.median([r["cpu_us"] for r in plain])), 1),
            "notifications_cpu_us_https": round(float(np.median([r["cpu_us"] for r in https])), 1)}


# -- handshakes ---------------------------------------------------------------------------------

def _client(issuer: NetworkPki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(issuer.ca))
    files = issuer.member("bench-client")
    context.load_cert_chain(str(files.cert), str(files.key))
    return context


def _handshake_times(port: int, context: ssl.SSLContext, n: int) -> tuple[list, list]:
    tcp, tls = [], []
    for _ in range(n):
        started = time.perf_counter()
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        connected = time.perf_counter()
        with context.wrap_socket(raw, server_hostname="127.0.0.1"):
            done = time.perf_counter()
        tcp.append((connected - started) * 1e3)
        tls.append((done - started) * 1e3)
    return tcp, tls


class _TlsProbe:
    """``GET /health`` over one kept-alive TLS connection, timed."""

    def __init__(self, port: int, context: ssl.SSLContext):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")

    def get(self) -> float:
        started = time.perf_counter()
        self.sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += self.sock.recv(65536)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"health answered {head[:40]!r}")
        return (time.perf_counter() - started) * 1e3

    def close(self) -> None:
        self.sock.close()


def _probe_p95(port: int, context: ssl.SSLContext, probes: int) -> float:
    probe = _TlsProbe(port, context)
    try:
        return _percentile([probe.get() for _ in range(probes)], 95)
    finally:
        probe.close()


def handshakes(quick: bool, issuer: NetworkPki, base: Path) -> dict:
    n, stalled_count, probes = (30, 200, 30) if quick else (300, 2_000, 200)
    context = _client(issuer)
    out: dict = {"handshake": {}, "slow_handshakes": {}}
    for role in ("source", "dispatcher"):
        process = ServerProcess(role, data_dir=base / f"hs-{role}",
                                tls=issuer.member(f"hs-{role}", client_auth="optional"),
                                extra_args=["--log-level", "error"])
        with process:
            tcp, tls = _handshake_times(process.port, context, n)
            out["handshake"][role] = {"tcp_connect_p50_ms": _percentile(tcp, 50),
                                      "handshake_p50_ms": _percentile(tls, 50),
                                      "handshake_p95_ms": _percentile(tls, 95)}
            baseline = _probe_p95(process.port, context, probes)
            stalled = []
            try:
                for k in range(stalled_count):
                    sock = socket.create_connection(("127.0.0.1", process.port), timeout=10)
                    if k % 2:
                        sock.sendall(STALLED_CLIENT_HELLO)
                    stalled.append(sock)
                under = _probe_p95(process.port, context, probes)
                alive = process.healthy()
            finally:
                for sock in stalled:
                    sock.close()
            out["slow_handshakes"][role] = {"stalled": stalled_count, "baseline_p95_ms": baseline,
                                            "p95_ms": under, "alive": alive}
        _log(f"  {role}: handshake {out['handshake'][role]}, stalled {out['slow_handshakes'][role]}")
    source = out["handshake"]["source"]
    out["handshake_p50_ms"] = source["handshake_p50_ms"]
    out["tcp_connect_p50_ms"] = source["tcp_connect_p50_ms"]
    return out


def run(quick: bool = False) -> dict:
    base = Path(tempfile.mkdtemp(prefix="edn-bench-tls-"))
    try:
        issuer = NetworkPki(base / "pki")
        figures = {"benchmark": "tls"}
        with progress.progress("tls", total=3, unit="part") as bar:
            figures.update(handshakes(quick, issuer, base))
            bar.advance()
            figures.update(notifications(quick, issuer))
            bar.advance()
            figures.update(live(quick, base / "pki"))
            bar.advance()
        return figures
    finally:
        shutil.rmtree(base, ignore_errors=True)
