"""Server CPU per forwarded event copy: a subscription server's ``edn:EventBatch`` path in
process, from its WSGI application to the durable outbox.

The throughput benchmark's server side, with no sockets and no other process: one server
holding ``per_server`` narrow range subscriptions in d = 8 (imported in bulk), and the
64-event ``edn:EventBatch`` messages the dispatcher's durable log sends (``Dispatcher`` and
``FirstSeq`` marks, the network's credential), posted through the service's WSGI
application. Events are matched exactly (range filters; ``symbols`` adds an ``@sym``
equality no box carries, so candidates get the XPath check); they match few subscriptions,
so the server does almost no notification work (notifications go to an in-process sink that
drops them).

Two servers holding the same subscriptions are measured alternately in one run, both
through the server's one publication path
(:meth:`~subscription_manager.manager.SubscriptionManager.publish_many`): ``new`` with the
topic on the R-tree engine (the default), ``cell_bitmap`` on the cell-bitmap engine.
``server_cpu_us_per_copy`` is ``time.process_time`` per event received (medians over
rounds). It is compared with :data:`BASELINE`, the same figure recorded on a named commit
and machine (``reference_cpu_us_per_copy``, ``reference_over_new``: above 1 is faster than
the baseline); the comparison means something only at the recorded configuration (the
default sizes, ``baseline_applies``) and on a machine like the recorded one.
"""
from __future__ import annotations

import io
import logging
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from lxml import etree

from benchmarks.livenet import (D, TOPIC, Setup, event_workload, narrow_rectangles,
                               range_subscriptions)
from route_manager.forwarding.batch import batch_envelope
from route_manager.workloads.grid_xml import event_element, schema_element
from wsframework import ns
from matchers.vocabulary import MATCHER_CELL_BITMAP, MATCHER_RTREE_ENGINE
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.transport.base import TransportResponse
from wsframework.wsgi import WsgiApplication

__all__ = ["run", "BASELINE"]

#: ``server_cpu_us_per_copy`` at the default sizes (10,000 subscriptions, d = 8, 64-event
#: batches, 7 rounds), by ``symbols``: measured at commit a98da7d on 2026-11-26, on a 2-core
#: "Intel(R) Xeon(R) Processor" virtual machine shared with other jobs (load about 2).
BASELINE = {"commit": "a98da7d", "date": "2026-11-26",
            "machine": "2-core Intel Xeon VM, shared (load ~2)",
            "server_cpu_us_per_copy": {False: 70.59, True: 53.94}}

_TOKEN = "serverpath-token"
_DISPATCHER = "http://dispatcher.invalid"
_SINK = "http://sink.invalid"


def _null_sink(url, payload, content_type, soap_action=None):
    return TransportResponse(202, b"", "")


def _public(host, port, family=0, type=0, proto=0, flags=0):
    import socket
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]


def build(data_dir: Path, lo: np.ndarray, hi: np.ndarray, symbols: np.ndarray | None,
          name: str, engine: str = MATCHER_RTREE_ENGINE):
    """A server service on an in-process transport holding one subscription per row, its
    topic matched by ``engine``."""
    from subscription_manager.server import build_server
    from subscription_manager.server.moves import subscriptions_element
    from wsframework.service import ServiceConfig
    from wsframework.transport import InProcessTransport

    transport = InProcessTransport()
    transport.mount(_SINK, _null_sink)
    transport.sent = _Discard()  # the transport records what it sent: not here
    url = f"http://{name}.invalid"
    config = ServiceConfig(url, data_dir, _TOKEN, role="server",
                           settings={"dispatcher": _DISPATCHER, "name": name})
    service = build_server(config, transport=transport, resolver=_public, start_sweeper=False,
                           start_background=False)
    manager = service.subscription_manager
    options = etree.Element(ns.qname(ns.ADMIN, "Options"), nsmap={"adm": ns.ADMIN})
    options.append(schema_element(D))
    manager.topics.create(TOPIC, engine, options)
    now = time.time()
    chunk = 5000
    for start in range(0, len(lo), chunk):
        rows = range(start, min(start + chunk, len(lo)))
        subscriptions = range_subscriptions(lo, hi, rows, _SINK, symbols=symbols,
                                            created=now)
        manager.mover.import_(TOPIC, subscriptions_element(TOPIC, subscriptions))
    return service


class _Discard(list):
    def append(self, item) -> None:
        pass


def batches(points: np.ndarray, symbols: np.ndarray | None, batch: int, address: str,
            first_seq: int) -> list[bytes]:
    """``edn:EventBatch`` envelopes as the dispatcher's durable log sends them."""
    from wsframework.soap import SoapVersion
    out = []
    seq = first_seq
    for start in range(0, len(points) - batch + 1, batch):
        events = []
        for k in range(start, start + batch):
            event = event_element(points[k], k)
            if symbols is not None:
                event.set("sym", f"S{int(symbols[k])}")
            events.append(etree.tostring(event))
        out.append(batch_envelope(SoapVersion.SOAP12, address, TOPIC, events, _TOKEN,
                                  dispatcher=_DISPATCHER, first_seq=seq))
        seq += batch
    return out


def post(app: WsgiApplication, path: str, payload: bytes) -> str:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "",
               "CONTENT_TYPE": f'application/soap+xml; charset=utf-8; '
                               f'action="{EVENT_BATCH_ACTION}"',
               "CONTENT_LENGTH": str(len(payload)), "REMOTE_ADDR": "127.0.0.1",
               "wsgi.input": io.BytesIO(payload)}
    status = []
    app(environ, lambda line, headers: status.append(line))
    return status[0]


def run(quick: bool = False, *, per_server: int | None = None, batch: int = 64,
        rounds: int | None = None, symbols: bool = False, profile: str | None = None) -> dict:
    """Figures: ``server_cpu_us_per_copy`` (topic on the R-tree engine),
    ``reference_cpu_us_per_copy`` (:data:`BASELINE`'s figure) and their ratio,
    ``cell_bitmap_cpu_us_per_copy`` (topic on the cell-bitmap engine);
    ``matches_per_event``. ``profile``: write a cProfile of the R-tree server's measured
    batches to that file."""
    setup = Setup()
    baseline_applies = not quick and per_server in (None, setup.per_server) and batch == 64 \
        and rounds in (None, 7)
    n = per_server or (2000 if quick else setup.per_server)
    rounds = rounds or (3 if quick else 7)
    events_per_round = 64 * (8 if quick else 32)
    lo, hi = narrow_rectangles(n, setup.half_width, setup.seed)
    rng = np.random.default_rng(setup.seed + 3)
    subscription_symbols = rng.integers(0, setup.symbols, n) if symbols else None
    points, event_symbols = event_workload(setup, events_per_round, setup.seed + 1)
    if not symbols:
        event_symbols = None
    scratch = Path(tempfile.mkdtemp(prefix="edn-serverpath-"))
    services = {}
    # the in-process servers have no dispatcher to send route updates to: not news
    quiet = logging.getLogger("subscription_manager.server.network")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        for kind, engine in (("new", MATCHER_RTREE_ENGINE),
                             ("cell_bitmap", MATCHER_CELL_BITMAP)):
            services[kind] = build(scratch / kind, lo, hi, subscription_symbols,
                                   kind.replace("_", "-"), engine)
        apps = {kind: WsgiApplication(service) for kind, service in services.items()}
        path = f"/topics/{TOPIC}"
        seq = {kind: 1 for kind in services}
        cpu = {kind: [] for kind in services}
        profiler = None
        if profile:
            import cProfile
            profiler = cProfile.Profile()

        def one_round(kind: str, measured: bool) -> None:
            payloads = batches(points, event_symbols, batch, services[kind].base_url, seq[kind])
            seq[kind] += len(payloads) * batch
            app = apps[kind]
            if profiler is not None and kind == "new" and measured:
                profiler.enable()
            started = time.process_time()
            for payload in payloads:
                status = post(app, path, payload)
                if not status.startswith("2"):
                    raise RuntimeError(f"the server answered {status}")
            spent = time.process_time() - started
            if profiler is not None and kind == "new" and measured:
                profiler.disable()
            if measured:
                cpu[kind].append(spent / (len(payloads) * batch))

        for kind in services:  # warm up: caches, first summary cuts
            one_round(kind, False)
        order = list(services)
        for r in range(rounds):
            for kind in (order if r % 2 == 0 else order[::-1]):
                one_round(kind, True)
        for service in services.values():
            service.subscription_manager.deliverer.drain(10)
        if profiler is not None:
            profiler.dump_stats(profile)
        new = float(np.median(cpu["new"])) * 1e6
        old = BASELINE["server_cpu_us_per_copy"][bool(symbols)]
        bitmap = float(np.median(cpu["cell_bitmap"])) * 1e6
        manager = services["new"].subscription_manager
        received = manager.edn_counters.get("events_received", 0)
        inside = ((lo[None] <= points[:, None]) & (hi[None] >= points[:, None])).all(axis=2)
        if symbols:
            inside &= subscription_symbols[None, :] == event_symbols[:, None]
        used = events_per_round - events_per_round % batch
        # exactness: every server queued the notifications brute force finds, every round
        expected = int(inside[:used].sum()) * (rounds + 1)
        queued = {kind: service.subscription_manager.outbox.stats()["outbox_accepted"]
                  for kind, service in services.items()}
        return {
            "server_cpu_us_per_copy": round(new, 2),
            "reference_cpu_us_per_copy": round(old, 2),
            "reference_over_new": round(old / new, 2) if new else None,
            "baseline": f"{BASELINE['commit']} on {BASELINE['date']}, {BASELINE['machine']}",
            "baseline_applies": baseline_applies,
            "cell_bitmap_cpu_us_per_copy": round(bitmap, 2),
            "subscriptions": n, "d": D, "batch": batch, "rounds": rounds,
            "events_per_round": events_per_round - events_per_round % batch,
            "events_received": received,
            "matches_per_event": round(float(inside.sum()) / len(points), 4),
            "notifications_expected": expected,
            "exact": all(count == expected for count in queued.values()),
            "symbols": symbols,
        }
    finally:
        for service in services.values():
            service.close()
        shutil.rmtree(scratch, ignore_errors=True)
        quiet.setLevel(level)


if __name__ == "__main__":  # python -m benchmarks.performance.serverpath [--quick] [--symbols] [--profile F]
    import argparse
    import json
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--symbols", action="store_true")
    parser.add_argument("--profile")
    parser.add_argument("--rounds", type=int)
    args = parser.parse_args()
    print(json.dumps(run(args.quick, symbols=args.symbols, profile=args.profile,
                         rounds=args.rounds), indent=1))
