"""``edn demo``: the main job, run on this machine with real processes on loopback.

The event distribution network (default): for each subscription partitioner, a dispatcher
and several subscription servers (gunicorn processes, SQLite), a notification sink, a few
thousand range subscriptions made by an operator's placed bulk subscribe at the servers (which
place each on the best server, as they place a Subscribe; ``--one-by-one``: one WS-Eventing
Subscribe each), events published at the dispatcher, and per partitioner the hit ratio, the
throughput and the exactness check against the ground truth: what a single event source would
deliver for the same filters and events. The random network is then re-partitioned offline
(bulk-loading R-tree) and measured again. Everything started is stopped.

``--standalone``: one event source instead: start ``edn serve source`` (gunicorn, SQLite), a local notification
sink, create a topic, subscribe through both WS-Eventing versions with XPath filters, publish
quote events, show the notifications, check them against the filters evaluated locally (the
ground truth), and stop everything (the source ends its subscriptions with
SubscriptionEnd/SourceShuttingDown, which the sink receives too).

``--console``: after the measurements the network (or the source) keeps running and the web
console's address and admin token are printed; Ctrl-C stops it (:mod:`edn.demo_console`).
"""
from __future__ import annotations

import random
import secrets
import tempfile
import time
from pathlib import Path

from lxml import etree

from wsframework.admin import AdminClient
from edn.localnet.processes import ServerProcess
from wsframework.publisher import publish
from edn.sink import NotificationSink

QUOTES_NS = "urn:example:quotes"

SUBSCRIPTIONS = [
    # (label, WS-Eventing version, XPath filter). A 2011 filter sees the event as its context
    # node; a 2004/08 filter sees the SOAP envelope around the notification (the submission's
    # XPath dialect), so it finds the event with // (or /s:Envelope/s:Body/q:quote).
    ("GE quotes", "2011", "/q:quote[q:symbol = 'GE']"),
    ("price above 60", "2004", "//q:quote[q:price > 60]"),
    ("cheap IBM", "2011", "/q:quote[q:symbol = 'IBM' and q:price < 40]"),
]


def quote(symbol: str, price: float) -> etree._Element:
    element = etree.Element(f"{{{QUOTES_NS}}}quote", nsmap={"q": QUOTES_NS})
    etree.SubElement(element, f"{{{QUOTES_NS}}}symbol").text = symbol
    etree.SubElement(element, f"{{{QUOTES_NS}}}price").text = f"{price:.2f}"
    return element


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(args) -> int:
    from edn.demo_console import stop_on_signals
    with stop_on_signals(getattr(args, "console", False)):
        if getattr(args, "standalone", False):
            return run_standalone(args)
        if getattr(args, "topology", "flat") == "tree":
            from edn.tree_demo import run_tree_demo
            return run_tree_demo(args)
        from edn.network_demo import run_network_demo
        return run_network_demo(args)


def run_standalone(args) -> int:
    from subscription_manager.client import EventingClient

    rng = random.Random(7)
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="edn-demo-") as tmp, NotificationSink() as sink:
        source = ServerProcess("source", data_dir=Path(tmp) / "source", admin_token=token,
                               port=args.port or None, workers=2)
        _say(f"starting an event source (gunicorn, 2 workers) at {source.base_url} ...")
        with source:
            admin = AdminClient(source.base_url, token)
            topic = admin.create_topic("stocks/quotes")
            _say(f"created topic {topic['name']} at {topic['address']} (matcher {topic['matcher']})")

            paths = {}
            for index, (label, version, xpath) in enumerate(SUBSCRIPTIONS):
                path = f"/sub{index}"
                EventingClient(version).subscribe(
                    topic["address"], sink.url + path, end_to=sink.url + path + "/end",
                    filter=xpath, namespaces={"q": QUOTES_NS}, expires="PT10M")
                paths[path] = (label, xpath)
                _say(f"subscribed '{label}' (WS-Eventing {version}): {xpath}")

            events = [quote(rng.choice(["GE", "IBM", "MSFT"]), rng.uniform(10, 100))
                      for _ in range(args.events)]
            expected = {path: sum(bool(e.xpath(xpath, namespaces={"q": QUOTES_NS})) for e in events)
                        for path, (_, xpath) in paths.items()}
            started = time.perf_counter()
            for event in events:
                publish(source.base_url, "stocks/quotes", event)
            _say(f"published {len(events)} quote events")
            for path, count in expected.items():
                sink.wait_for(count, timeout=30, path=path)
            elapsed = time.perf_counter() - started

            exact = True
            for path, (label, _) in paths.items():
                got = [m for m in sink.messages if m.path == path]
                exact &= len(got) == expected[path]
                _say(f"  {label:<16} expected {expected[path]:>3}  received {len(got):>3}")
                for message in got[:3]:
                    body = message.envelope.body
                    symbol = body.findtext(f"{{{QUOTES_NS}}}symbol") if body is not None else "?"
                    price = body.findtext(f"{{{QUOTES_NS}}}price") if body is not None else "?"
                    _say(f"      e.g. {symbol} at {price}")
            _say(f"all notifications delivered in {elapsed:.2f}s; exact match with local "
                 f"evaluation: {'yes' if exact else 'NO'}")
            if getattr(args, "console", False):
                from edn.demo_console import keep_running
                keep_running(source, token, {}, role="source")
            _say("stopping the source (graceful: subscriptions end with SourceShuttingDown) ...")
        ends = [m for m in sink.messages if m.path.endswith("/end")]
        _say(f"SubscriptionEnd messages received: {len(ends)} of {len(paths)}")
        _say("stopped everything the demo started")
        return 0 if exact else 1
