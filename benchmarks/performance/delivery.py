"""Notification delivery at its limit: notifications/s of one real source process to a sink
that can take them, beside the sink's own ceiling and the requests client's figure.

Call :func:`run` (``edn bench eventpath`` does). Figures:

* ``sink_ceiling_per_s`` -- POSTs/s the :class:`~edn.sink.FastSink` (an asyncio server in its
  own process) answers when one gevent process blasts it with
  :class:`~wsframework.transport.LeanHttpTransport` from ``blast_concurrency`` greenlets,
  doing nothing else: the most a delivering process with this client can get through to
  it; measured before each delivery round (the median of three, all in
  ``sink_ceiling_per_s_rounds``), so both share the machine's state. The blaster, not the
  sink, is the limit there: ``sink_cpu_us_per_post`` is the sink's own CPU per POST meanwhile and ``sink_cpu_bound_per_s`` what a whole core of it would take
  (1e6 / that). Two blaster processes on this 2-core machine got less, not more (three
  busy processes on two cores);
* ``notifications_per_s`` -- ``edn serve source`` (gunicorn, one gevent worker: one server
  process, the same :class:`~subscription_manager.manager.SubscriptionManager` delivery
  path as the EDN server role) with ``subscriptions`` subscriptions that all match every
  event, ``events`` events published one by one: notifications counted at the sink divided
  by the time from the first publication until the sink has them all; the median of three
  rounds on one source (all three in ``notifications_per_s_rounds``). Every notification
  went through the durable outbox (a row each, committed before the publisher's answer);
* ``source_cpu_us_per_notification`` -- the source process's CPU (user + system) over that
  time, per notification;
* ``notifications_per_s_requests`` / ``source_cpu_us_per_notification_requests`` -- the same
  run with ``delivery_client=requests`` and 8 delivery workers (requests/urllib3 through the
  service's HttpTransport on 8 threads, the alternative the lean client is measured against),
  side by side in this run, with fewer events (``events_requests``); ``speedup`` is the ratio;
* ``client_cpu_us_per_post`` -- CPU per POST of the candidate clients blasting the sink with
  the same concurrency, each in its own process: ``lean`` (gevent greenlets, as in the
  source), ``requests`` (gevent greenlets), ``aiohttp`` (asyncio, when installed): why the
  lean client was chosen.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from edn.sink import FastSink

from .eventing import ADMIN_TOKEN, SourceProcess

_PAYLOAD = (b'<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Header/>'
            b'<s:Body><q:quote xmlns:q="urn:quotes"><q:price>1</q:price></q:quote></s:Body>'
            b"</s:Envelope>")


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _worker_pid(arbiter_pid: int) -> int:
    """The gunicorn worker under ``arbiter_pid`` (the process that delivers)."""
    with open(f"/proc/{arbiter_pid}/task/{arbiter_pid}/children") as listing:
        children = listing.read().split()
    return int(children[0]) if children else arbiter_pid


# -- the blaster: one client, N POSTs, C concurrent, in its own process ----------------------

def _blast_main(argv: list[str]) -> None:
    """``client url n concurrency`` -> prints JSON {per_s, cpu_us_per_post}. Run with gevent
    patched first for lean/requests (see :func:`_blast`)."""
    import resource
    client, url, n, concurrency = argv[0], argv[1], int(argv[2]), int(argv[3])
    per_worker = n // concurrency

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    if client == "aiohttp":
        import asyncio

        import aiohttp

        async def blast():
            connector = aiohttp.TCPConnector(limit_per_host=concurrency)
            headers = {"Content-Type": "application/soap+xml; charset=utf-8"}
            async with aiohttp.ClientSession(connector=connector) as session:
                async def worker():
                    for _ in range(per_worker):
                        async with session.post(url + "/n", data=_PAYLOAD, headers=headers) as r:
                            await r.read()
                            assert r.status == 202
                await worker()  # warm: one connection
                c0, t0 = cpu(), time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(concurrency)))
                return time.perf_counter() - t0, cpu() - c0
        elapsed, used = asyncio.run(blast())
    else:
        from wsframework.transport import HttpTransport, LeanHttpTransport
        transport = LeanHttpTransport() if client == "lean" else HttpTransport()

        def worker(count: int) -> None:
            for _ in range(count):
                assert transport.post(url + "/n", _PAYLOAD, "application/soap+xml",
                                      "urn:a").status == 202
        worker(min(per_worker, 200))  # warm
        threads = [threading.Thread(target=worker, args=(per_worker,))
                   for _ in range(concurrency)]
        c0, t0 = cpu(), time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed, used = time.perf_counter() - t0, cpu() - c0
    posts = per_worker * concurrency
    ended = time.time()
    print(json.dumps({"per_s": posts / elapsed, "cpu_us_per_post": used / posts * 1e6,
                      "posts": posts, "start": ended - elapsed, "end": ended}))


def _blast(client: str, url: str, n: int, concurrency: int, processes: int = 1) -> dict:
    """``processes`` blasters at once, ``n`` POSTs each; per_s is all their POSTs over the
    span from the first one's start to the last one's end."""
    prelude = "" if client == "aiohttp" else "from gevent import monkey; monkey.patch_all(); "
    code = (f"{prelude}import sys; from benchmarks.performance.delivery import _blast_main; "
            f"_blast_main(sys.argv[1:])")
    root = str(Path(__file__).resolve().parents[2])  # the checkout, so -c finds the package
    running = [subprocess.Popen([sys.executable, "-c", code, client, url, str(n),
                                 str(concurrency)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=root)
               for _ in range(processes)]
    results = []
    for proc in running:
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"the {client} blaster failed:\n{err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    posts = sum(r["posts"] for r in results)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {"per_s": posts / span, "posts": posts,
            "cpu_us_per_post": sum(r["cpu_us_per_post"] * r["posts"] for r in results) / posts}


def _have_aiohttp() -> bool:
    import importlib.util
    return importlib.util.find_spec("aiohttp") is not None


# -- the source delivering ------------------------------------------------------------------

def _delivery_run(sink: FastSink, client: str, subscriptions: int, events: int,
                  extra: dict[str, str] | None = None, rounds: int = 1,
                  before_round=None, source_args=()) -> list[dict]:
    """``rounds`` rounds of ``events`` publications on one source, each round timed until
    the sink has all its notifications; ``before_round()`` is called before each;
    ``source_args``: more ``edn serve source`` flags (``--tls-ca`` for an HTTPS sink)."""
    from lxml import etree

    from subscription_manager.client import EventingClient
    from wsframework.admin import AdminClient
    from wsframework.client import SoapClient
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.transport import HttpTransport

    data_dir = tempfile.mkdtemp(prefix="edn-bench-delivery-")
    settings = {"delivery_client": client, "delivery_queue_size": "200000",
                "delivery_retries": "1", "delivery_backoff": "0.05",
                "max_subscriptions_per_host": str(subscriptions + 10),
                "max_subscriptions_per_topic": str(subscriptions + 10),
                "max_subscriptions": str(subscriptions + 10), **(extra or {})}
    source = SourceProcess(data_dir, settings, source_args)
    try:
        source.wait_healthy()
        AdminClient(source.base_url, ADMIN_TOKEN).create_topic("rate")
        topic = source.base_url + "/topics/rate"
        errors: list[BaseException] = []

        def subscribe(part: range) -> None:
            transport = HttpTransport()
            eventing = EventingClient("2011", transport=transport)
            try:
                for n in part:
                    eventing.subscribe(topic, f"{sink.url}/n{n % 16}",
                                       filter="/q:quote[q:price >= 0]",
                                       namespaces={"q": "urn:quotes"})
            except BaseException as exc:
                errors.append(exc)
            finally:
                transport.close()
        threads = [threading.Thread(target=subscribe, args=(range(i, subscriptions, 4),))
                   for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        worker = _worker_pid(source.proc.pid)
        transport = HttpTransport(timeout=(3.0, 60.0))
        publisher = SoapClient(transport)
        notifications = subscriptions * events
        results = []
        for _ in range(rounds):
            if before_round is not None:
                before_round()
            expected = sink.count + notifications
            cpu0 = _process_cpu(worker)
            started = time.perf_counter()
            for i in range(events):
                event = etree.fromstring(f'<q:quote xmlns:q="urn:quotes"><q:price>{i}'
                                         f'</q:price></q:quote>')
                publisher.send(topic, PUBLISH_ACTION, event)
            published = time.perf_counter() - started
            sink.wait_for(expected, timeout=300)
            elapsed = time.perf_counter() - started
            cpu = _process_cpu(worker) - cpu0
            results.append({"per_s": notifications / elapsed, "seconds": elapsed,
                            "publish_seconds": published,
                            "cpu_us": cpu / notifications * 1e6})
        transport.close()
        return results
    finally:
        source.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def run(quick: bool = False) -> dict:
    subscriptions = 500 if quick else 1_000
    events = 10 if quick else 40
    old_events = 4 if quick else 10  # the requests path is ~10x slower: fewer events, same shape
    blast_posts = 10_000 if quick else 40_000
    concurrency = 16
    figures: dict = {}
    sink = FastSink().start()
    try:
        blasts = []

        def blast() -> None:  # the sink's ceiling, measured beside each delivery round
            cpu0 = sink.cpu_seconds
            result = _blast("lean", sink.url, blast_posts, concurrency)
            result["sink_cpu_us"] = (sink.cpu_seconds - cpu0) / (result["posts"] + 200) * 1e6
            blasts.append(result)

        rounds = _delivery_run(sink, "lean", subscriptions, events, rounds=3,
                               before_round=blast)
        new = sorted(rounds, key=lambda r: r["per_s"])[1]  # the median round
        ceiling = sorted(blasts, key=lambda r: r["per_s"])[1]
        figures["notifications_per_s"] = round(new["per_s"])
        figures["notifications_per_s_rounds"] = [round(r["per_s"]) for r in rounds]
        figures["sink_ceiling_per_s"] = round(ceiling["per_s"])
        figures["sink_ceiling_per_s_rounds"] = [round(r["per_s"]) for r in blasts]
        sink_cpu_us = sorted(r["sink_cpu_us"] for r in blasts)[1]
        figures["sink_cpu_us_per_post"] = round(sink_cpu_us, 1)
        figures["sink_cpu_bound_per_s"] = round(1e6 / sink_cpu_us)
        figures["blast_concurrency"] = concurrency
        clients = {"lean": ceiling["cpu_us_per_post"]}
        clients["requests"] = _blast("requests", sink.url, blast_posts // 10,
                                     concurrency)["cpu_us_per_post"]
        if _have_aiohttp():
            clients["aiohttp"] = _blast("aiohttp", sink.url, blast_posts // 4,
                                        concurrency)["cpu_us_per_post"]
        figures["client_cpu_us_per_post"] = {k: round(v, 1) for k, v in clients.items()}

        # the requests path on 8 delivery threads
        [old] = _delivery_run(sink, "requests", subscriptions, old_events,
                              {"delivery_workers": "8", "delivery_per_host": "8"})
        figures["source_cpu_us_per_notification"] = round(new["cpu_us"], 1)
        figures["notifications_per_s_requests"] = round(old["per_s"])
        figures["source_cpu_us_per_notification_requests"] = round(old["cpu_us"], 1)
        figures["speedup"] = round(new["per_s"] / old["per_s"], 2)
        figures["role"] = "source (edn serve source, gunicorn, 1 gevent worker)"
        figures["subscriptions"] = subscriptions
        figures["events"] = events
        figures["events_requests"] = old_events
        figures["notifications"] = subscriptions * events
        figures["delivery_seconds"] = round(new["seconds"], 2)
        figures["publish_seconds"] = round(new["publish_seconds"], 2)
    finally:
        sink.stop()
    return figures


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
