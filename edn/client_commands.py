"""The ``edn`` commands of an event source's clients and of the demonstration: publish an
event (``edn publish``, with failover over root dispatchers), subscribe an endpoint
(``edn subscribe``), print what a sink receives (``edn sink``), run the demo (``edn demo``)."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

__all__ = ["add_publish", "add_subscribe", "add_sink", "add_demo"]


def add_publish(sub):
    p = sub.add_parser("publish", help="send one event document to a topic")
    p.add_argument("--at", required=True, action="append", metavar="URL",
                   help="the service's base URL; repeatable (root dispatchers): sent to the "
                        "first, and to the next when one does not take it (failover)")
    p.add_argument("topic")
    p.add_argument("file", help="XML event document ('-' for standard input)")
    p.add_argument("--soap11", action="store_true", help="send SOAP 1.1 (default 1.2)")
    p.add_argument("--connect-timeout", type=_seconds, default=3.0, metavar="SECONDS",
                   help="seconds to connect to a root before trying the next (default 3: "
                        "longer than TCP's first SYN retransmission, 1 s)")
    p.add_argument("--timeout", type=_seconds, default=10.0, metavar="SECONDS",
                   help="seconds to wait for a root's answer before trying the next")
    p.add_argument("--attempts", type=_attempts, default=3, metavar="N",
                   help="rounds over the roots before giving up (default 3; 1..20), the "
                        "same message (wsa:MessageID) each time, pausing 0.5 s, 1 s, 2 s... "
                        "between rounds; a root dispatcher acknowledges a repeat of a message "
                        "it accepted without publishing it again")
    p.set_defaults(func=cmd_publish)


MAX_SECONDS = 300.0


def _seconds(text: str) -> float:
    """A timeout in seconds: a finite number above 0 and at most :data:`MAX_SECONDS`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text[:40]!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise argparse.ArgumentTypeError(f"{text[:40]}: seconds above 0, at most {MAX_SECONDS:g}")
    return value


def _attempts(text: str) -> int:
    from wsframework.publisher import MAX_ATTEMPTS
    if not (text.isascii() and text.isdigit() and 1 <= int(text[:3]) <= MAX_ATTEMPTS
            and len(text) <= 3):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a whole number from 1 to {MAX_ATTEMPTS}")
    return int(text)


def cmd_publish(args) -> int:
    from route_manager.publisher import Publisher
    from wsframework.soap import SoapVersion
    from wsframework.xmlparse import parse_xml
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    version = SoapVersion.SOAP11 if args.soap11 else SoapVersion.SOAP12
    with Publisher(args.at, soap_version=version, connect_timeout=args.connect_timeout,
                   read_timeout=args.timeout, attempts=args.attempts) as publisher:
        ack = publisher.publish(args.topic, parse_xml(data))
    print(f"published to {args.topic} at {ack.address}: HTTP {ack.status}")
    if ack.address in ack.in_doubt:
        print(f"(an earlier answer of {ack.address} was lost; it acknowledged the repeat, "
              "the same wsa:MessageID, which a root dispatcher publishes once)", file=sys.stderr)
    others = [root for root in ack.in_doubt if root != ack.address]
    if others:
        print(f"(the answer of {', '.join(others)} was lost: it may have published "
              "the event too)", file=sys.stderr)
    return 0


def add_subscribe(sub):
    p = sub.add_parser("subscribe", help="subscribe a notification endpoint to a topic (WS-Eventing)")
    p.add_argument("--at", required=True, help="base URL of a source or subscription server")
    p.add_argument("topic")
    p.add_argument("--notify-to", default=None,
                   help="URL that receives the notifications (required without --from-file)")
    p.add_argument("--end-to", default=None, help="URL that receives SubscriptionEnd")
    p.add_argument("--filter", default=None, help="filter expression")
    p.add_argument("--dialect", default=None,
                   help="xpath (default), xpath2, ranges, range-aggregate, or a dialect URI")
    p.add_argument("--prefix", action="append", default=[], metavar="P=URI",
                   help="namespace prefix used by the filter (repeatable)")
    p.add_argument("--expires", default="PT1H", help="xs:duration or xs:dateTime")
    p.add_argument("--version", choices=["2011", "2004", "2004-wsa10"], default="2011",
                   help="WS-Eventing version (2004-wsa10: 2004/08 with WS-Addressing 1.0, as DPWS)")
    p.add_argument("--notify-when", default=None, metavar="XPATH",
                   help="edn:NotifyWhen: notify only when the number this XPath selects in the "
                        "event changed by --changed-by since the last notification")
    p.add_argument("--changed-by", default=None, metavar="D|N%%",
                   help="with --notify-when: the change, absolute or N%% of the last value")
    p.add_argument("--tolerance", default=None, metavar="T",
                   help="with --notify-when: how much earlier a notification may come (0..D)")
    bulk = p.add_argument_group("bulk (an operator migrating subscriptions; admin credential)")
    bulk.add_argument("--from-file", default=None, metavar="FILE",
                      help="one JSON request per line ('-': standard input), sent as "
                           "SubscribeMany admin messages; see edn/bulk_commands.py")
    bulk.add_argument("--chunk", type=int, default=5000, help="requests per message")
    bulk.add_argument("--place", action="store_true",
                      help="an EDN server places each request on the server a Subscribe "
                           "would go to (default: all on the server at --at)")
    bulk.add_argument("--out", default=None, metavar="FILE",
                      help="where each line's result goes (default standard output)")
    bulk.add_argument("--admin-token", default=None)
    p.set_defaults(func=cmd_subscribe)


def cmd_subscribe(args) -> int:
    from matchers.vocabulary import RANGE_AGGREGATE_DIALECT, RANGES_DIALECT
    from subscription_manager.client import EventingClient
    from wsframework import ns
    from wsframework.publisher import topic_address
    dialects = {"xpath": None, "xpath2": ns.XPATH20_DIALECT_2011, "ranges": RANGES_DIALECT,
                "range-aggregate": RANGE_AGGREGATE_DIALECT}
    dialect = dialects.get(args.dialect, args.dialect)
    namespaces = dict(item.split("=", 1) for item in args.prefix)
    extensions = []
    if (args.notify_when is None) != (args.changed_by is None) or (
            args.tolerance is not None and args.notify_when is None):
        print("edn subscribe: --notify-when and --changed-by go together (and --tolerance "
              "only with them)", file=sys.stderr)
        return 2
    if args.from_file is not None:
        if args.notify_to or args.filter or args.notify_when or args.end_to:
            print("edn subscribe: with --from-file, each line gives notify_to, end_to and "
                  "filter", file=sys.stderr)
            return 2
        from edn.admin_commands import admin_client
        from edn.bulk_commands import BULK_TIMEOUT, run_bulk_subscribe
        from wsframework.transport import HttpTransport
        transport = HttpTransport(timeout=(3.0, BULK_TIMEOUT))
        return run_bulk_subscribe(args, admin_client(args, transport), dialect=dialect,
                                  namespaces=namespaces)
    if args.notify_to is None:
        print("edn subscribe: --notify-to is required (or --from-file)", file=sys.stderr)
        return 2
    if args.notify_when is not None:
        from subscription_manager.notify_when import notify_when_element
        extensions.append(notify_when_element(args.notify_when, args.changed_by,
                                              args.tolerance, namespaces=namespaces))
    handle = EventingClient(args.version).subscribe(
        topic_address(args.at, args.topic), args.notify_to, end_to=args.end_to,
        filter=args.filter, dialect=dialect, namespaces=namespaces, expires=args.expires,
        extensions=extensions)
    print(f"subscribed: manager {handle.manager.address} id {handle.id} expires {handle.expires}")
    return 0


def add_sink(sub):
    p = sub.add_parser("sink", help="run a notification sink that prints what it receives")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=9090)
    p.add_argument("--count", type=int, default=0, help="exit after this many (0: run until ^C)")
    p.set_defaults(func=cmd_sink)  # with --tls-cert and --tls-key (added for every network
    # command), it serves HTTPS with them


def cmd_sink(args) -> int:
    from lxml import etree as _etree  # only the sink needs it
    from edn.sink import NotificationSink
    context = None
    if args.tls_cert or args.tls_key:
        from wsframework.tls import ServerTls, TlsConfigError, server_context
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("edn sink: --tls-cert and --tls-key go together")
        try:
            context = server_context(ServerTls(args.tls_cert, args.tls_key))
        except TlsConfigError as exc:
            raise SystemExit(f"edn sink: {exc}") from None
    with NotificationSink(args.host, args.port, ssl_context=context) as sink:
        try:
            print(f"listening at {sink.url}/", flush=True)
        except ValueError:  # a wildcard bind: the address to subscribe is the operator's
            print(f"listening on every interface ({args.host}), port {sink.port}", flush=True)
        seen = 0
        try:
            while not args.count or seen < args.count:
                messages = sink.wait_for(seen + 1, timeout=3600)
                for message in messages[seen:]:
                    body = message.envelope.body
                    text = _etree.tostring(body).decode() if body is not None else "(empty body)"
                    print(f"{message.path}: {text}", flush=True)
                seen = len(messages)
        except KeyboardInterrupt:
            pass
    return 0


def add_demo(sub):
    p = sub.add_parser("demo", help="run the demonstration on this machine")
    p.add_argument("--port", type=int, default=0, help="first port to use (default: free ports)")
    p.add_argument("--standalone", action="store_true",
                   help="one event source instead of the event distribution network")
    p.add_argument("--events", type=int, default=None,
                   help="events per measurement (default 400; 20 standalone)")
    p.add_argument("--subscriptions", type=int, default=2000)
    p.add_argument("--servers", type=int, default=4)
    p.add_argument("--partitioners", nargs="+", default=["random", "rtree", "kmeans"],
                   choices=["random", "rtree", "kmeans"])
    p.add_argument("--no-repartition", action="store_true",
                   help="skip the offline re-partition of the random network")
    p.add_argument("--one-by-one", action="store_true",
                   help="make the subscriptions with one WS-Eventing Subscribe each, placed "
                        "by the server each reaches (default: an operator's placed bulk "
                        "subscribe, each request placed as a Subscribe would be)")
    p.add_argument("--topology", choices=("flat", "tree"), default="flat",
                   help="flat: one dispatcher per partitioner (default); tree: a root, two "
                        "child dispatchers and two servers under each (dispatch tree)")
    p.add_argument("--console", action="store_true",
                   help="after the measurements keep the network running and print the web "
                        "console's address and admin token; Ctrl-C stops everything")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from edn.demo import run_demo
    if args.events is None:
        args.events = 20 if args.standalone else 400
    return run_demo(args)
