"""``edn latency measure --at DISPATCHER --out FILE``: the latency file of distance-aware
placement and Kyra (``edn serve --latency FILE``, :mod:`route_manager.latency_matrix`),
measured from the live network instead of written by hand.

The dispatcher lists its subscription servers (``ListServers``); each server is asked, one
after another (so that no two measure at once), to time TCP connections to every other
(``MeasureLatency``, :mod:`subscription_manager.server.latency_probe`). Row i, column j of
the file is then the median round trip from server i to server j, in milliseconds, as
server i measured it on its own path to j's advertised address: server to server, not from
where this command runs. A pair that could not be measured makes the command fail, naming
it, and writes nothing (a file with a hole would mislead placement); the file is written
whole or not at all (a temporary file renamed over it).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

__all__ = ["add_latency", "measure_matrix", "LatencyMeasureError"]


class LatencyMeasureError(Exception):
    """Some pairs could not be measured; ``failures``: (from, to, why)."""

    def __init__(self, failures: Sequence[tuple[str, str, str]]):
        self.failures = tuple(failures)
        shown = "; ".join(f"{a} -> {b}: {why}" for a, b, why in self.failures[:10])
        more = f" (and {len(self.failures) - 10} more)" if len(self.failures) > 10 else ""
        super().__init__(f"{len(self.failures)} pair(s) not measured: {shown}{more}")


def add_latency(sub):
    p = sub.add_parser("latency", help="measure the server-to-server latency file")
    lsub = p.add_subparsers(dest="latency_command", required=True)
    m = lsub.add_parser(
        "measure", help="ask every server a dispatcher lists to time its round trips to the "
                        "others, and write the latency file (edn serve --latency FILE)")
    m.add_argument("--at", required=True, metavar="URL", help="the dispatcher's base URL")
    m.add_argument("--out", required=True, metavar="FILE",
                   help="the latency file to write: .json or .csv")
    m.add_argument("--probes", type=_probes, default=5, metavar="N",
                   help="connections timed per pair (default 5; the median is kept)")
    m.add_argument("--admin-token", default=None,
                   help="the network's admin credential (default $EDN_ADMIN_TOKEN)")
    m.set_defaults(func=cmd_latency_measure)


def _probes(text: str) -> int:
    from route_manager.protocol import MAX_LATENCY_PROBES
    if not (text.isascii() and text.isdigit() and len(text) <= 2
            and 1 <= int(text) <= MAX_LATENCY_PROBES):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a whole number from 1 to "
                                         f"{MAX_LATENCY_PROBES}")
    return int(text)


def _format_of(path: Path) -> str:
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("json", "csv"):
        raise SystemExit(f"edn latency measure: --out {path}: the name must end in .json or .csv")
    return fmt


def measure_matrix(servers: Sequence[tuple[str, str]], call: Callable, probes: int = 5):
    """The :class:`~route_manager.latency_matrix.LatencyMatrix` of ``servers`` ((name,
    address) pairs): ``call(address, request)`` sends a MeasureLatency to a server and returns
    its answer. :class:`LatencyMeasureError` names every pair that could not be measured."""
    from route_manager.latency_matrix import MAX_SERVERS, LatencyMatrix
    from route_manager.protocol import MAX_LATENCY_TARGETS, MeasureLatency
    from wsframework.exceptions import SoapFault
    from wsframework.transport import TransportError
    names = [name for name, _ in servers]
    if not names:
        raise LatencyMeasureError([("dispatcher", "servers", "it lists no server")])
    if len(names) > MAX_SERVERS or len(set(names)) != len(names):
        raise LatencyMeasureError([("dispatcher", "servers", f"{len(names)} servers (at most "
                                    f"{MAX_SERVERS}, each once)")])
    position = {name: i for i, name in enumerate(names)}
    ms = np.full((len(names), len(names)), np.nan)
    np.fill_diagonal(ms, 0.0)
    why: dict[tuple[int, int], str] = {}  # a pair not measured, and the reason given
    for i, (name, address) in enumerate(servers):
        others = [other for other in names if other != name]
        for start in range(0, len(others), MAX_LATENCY_TARGETS):
            chunk = others[start:start + MAX_LATENCY_TARGETS]
            try:
                answer = call(address, MeasureLatency(Target=chunk, Probes=probes))
            except (SoapFault, TransportError) as exc:
                why.update(((i, position[other]), str(exc)[:300]) for other in chunk)
                continue
            asked = set(chunk)
            for item in answer.Latency or ():
                if item.Target not in asked:
                    continue  # not asked: ignored
                j, value = position[item.Target], _ms(item.Ms)
                if value is None:
                    why[i, j] = (item.Error or f"no usable figure ({item.Ms!r:.40})")[:300]
                else:
                    ms[i, j] = value
    failures = [(names[i], names[j], why.get((i, j), "not answered"))
                for i, j in zip(*np.nonzero(np.isnan(ms)))]
    if failures:
        raise LatencyMeasureError(failures)
    return LatencyMatrix(tuple(names), ms)


def _ms(text: str | None) -> float | None:
    """A server's ``Ms`` figure, if it is a finite number of milliseconds in range."""
    from route_manager.latency_matrix import MAX_MS
    if text is None or len(text) > 32:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value <= MAX_MS else None  # NaN fails both comparisons


def cmd_latency_measure(args) -> int:
    from route_manager import protocol
    from route_manager.latency_matrix import LatencyFileError, format_latency, parse_latency
    from subscription_manager.server.latency_probe import BUDGET
    from wsframework.admin import AdminClient
    from wsframework.transport import HttpTransport

    from .admin_commands import admin_client
    out = Path(args.out)
    fmt = _format_of(out)
    dispatcher = admin_client(args)
    listed = dispatcher.call(protocol.ListServers()).Server or []
    servers = [(info.Name, info.Address) for info in listed]
    # a server answers once it has timed every peer: up to its budget
    transport = HttpTransport(timeout=(3.0, BUDGET + 10.0))
    try:
        matrix = measure_matrix(
            servers, lambda address, request: AdminClient(address, dispatcher.token,
                                                          transport=transport).call(request),
            args.probes)
    except LatencyMeasureError as exc:
        raise SystemExit(f"edn latency measure: {exc}; nothing written") from None
    finally:
        transport.close()
    text = format_latency(matrix, fmt)
    try:
        parse_latency(text, fmt)  # what edn serve --latency will read (e.g. names it refuses)
    except LatencyFileError as exc:
        raise SystemExit(f"edn latency measure: not a usable latency file: {exc}; "
                         "nothing written") from None
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, out)
    print(f"wrote {out}: {len(matrix.names)} servers, round trips server to server "
          f"(median of {args.probes} TCP connects each), "
          f"{np.nanmax(matrix.ms) if len(matrix.names) > 1 else 0:.3f} ms at most")
    return 0
