"""``edn intervals``: the publisher side of S-CN notification conditions from the command line
(argument parsing lives here; :mod:`edn.cli` only registers it).

::

    edn intervals schema --limit 10 > quotes-schema.xml
    edn topic create quotes --schema quotes-schema.xml --at http://127.0.0.1:8080
    edn subscribe --at http://127.0.0.1:8081 quotes --notify-to http://127.0.0.1:9090/me \\
        --dialect ranges --filter "low < 2.5 and high >= 2.5"      # notify when changed by 2.5
    edn intervals publish --at http://127.0.0.1:8080 quotes --data ./scn --limit 10 100 105 108
    edn intervals show --data ./scn

``publish`` keeps the stream's interval set in ``DATA/intervals.db`` (created with
``--limit`` and ``--tolerance`` on first use; later runs continue it) and sends the messages
of each value, and any a previous run could not send, to the root dispatcher(s).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["add_intervals_parser"]

STORE_FILE = "intervals.db"


def add_intervals_parser(sub) -> None:
    p = sub.add_parser("intervals", help="S-CN notification conditions: publish a value stream "
                                         "as interval messages (Chandramouli, section 5.3.3)",
                       description=__doc__)
    isub = p.add_subparsers(dest="intervals_command", required=True)
    s = isub.add_parser("schema", help="print the event schema of an interval-message topic")
    s.add_argument("--limit", type=float, required=True, help="the maximum bound δ_limit")
    s.add_argument("--min", type=float, default=None, help="the values' lower domain edge")
    s.add_argument("--max", type=float, default=None, help="the values' upper domain edge")
    s.set_defaults(func=cmd_schema)
    pub = isub.add_parser("publish", help="apply values to the stream and send its messages")
    pub.add_argument("--at", required=True, action="append", metavar="URL",
                     help="a root dispatcher's base URL; repeatable (failover)")
    pub.add_argument("topic")
    pub.add_argument("values", nargs="+", help="the values, in order ('-': one a line from "
                                               "standard input)")
    pub.add_argument("--data", required=True, help="directory of the stream's store")
    pub.add_argument("--limit", type=float, default=None,
                     help="the maximum bound δ_limit (needed when the store is new)")
    pub.add_argument("--tolerance", type=float, default=None,
                     help="a common tolerance t: intervals break only at multiples of t")
    pub.add_argument("--json", action="store_true", help="print the messages as JSON")
    pub.set_defaults(func=cmd_publish)
    show = isub.add_parser("show", help="the stream's intervals and unsent messages")
    show.add_argument("--data", required=True)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)


def _fail(text: str) -> int:
    print(f"edn intervals: {text}", file=sys.stderr)
    return 4


def cmd_schema(args) -> int:
    from lxml import etree

    from .interval_publisher import VALUE_DOMAIN, topic_schema
    from .intervals import IntervalSet, InvalidIntervalState
    try:
        IntervalSet(args.limit)
        low = VALUE_DOMAIN[0] if args.min is None else args.min
        high = VALUE_DOMAIN[1] if args.max is None else args.max
        if not low < high:
            raise InvalidIntervalState(f"--min {low!r} must be below --max {high!r}")
    except InvalidIntervalState as exc:
        return _fail(str(exc))
    print(etree.tostring(topic_schema(args.limit, low, high), pretty_print=True).decode(), end="")
    return 0


def _open(args):
    from wsframework.store import store_exists

    from .interval_store import IntervalStore, StoreMismatch
    path = Path(args.data) / STORE_FILE
    if store_exists(path) and args.limit is None:
        store = IntervalStore.open_existing(path)
        if args.tolerance is not None and args.tolerance != store.tolerance:
            store.close()
            raise StoreMismatch(f"{path} holds a stream with tolerance {store.tolerance!r}")
        return store
    if args.limit is None:
        raise FileNotFoundError(f"no stream at {path} yet: give --limit to start one")
    return IntervalStore(path, limit=args.limit, tolerance=args.tolerance)


def _values(texts: list[str]) -> list[str]:
    if texts == ["-"]:
        return [line.strip() for line in sys.stdin if line.strip()]
    return texts


def cmd_publish(args) -> int:
    from route_manager.publisher import Publisher
    from wsframework.transport import TransportError

    from .interval_publisher import IntervalPublisher
    from .intervals import InvalidIntervalState
    try:
        store = _open(args)
    except (InvalidIntervalState, FileNotFoundError) as exc:
        return _fail(str(exc))
    out = []
    try:
        with Publisher(args.at) as roots:
            publisher = IntervalPublisher(store, roots, args.topic)
            publisher.flush()  # what an earlier run could not send goes first
            for text in _values(args.values):
                try:
                    messages = publisher.publish(text)
                except InvalidIntervalState as exc:
                    return _fail(f"{text!r}: {exc}")
                except TransportError:
                    print(f"edn intervals: {text} is applied; its messages wait in {args.data} "
                          "for the next run; the values after it were not applied",
                          file=sys.stderr)
                    raise
                for m in messages:
                    row = {"seq": m.seq, "part": m.part, "low": m.message.low,
                           "high": m.message.high, "update": m.message.update}
                    out.append(row)
                    if not args.json:
                        print(f"seq {m.seq}.{m.part}: <{m.message.low!r}, {m.message.high!r}, "
                              f"{m.message.update!r}>")
    finally:
        store.close()
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def cmd_show(args) -> int:
    from .interval_store import IntervalStore
    from .intervals import InvalidIntervalState
    try:
        store = IntervalStore.open_existing(Path(args.data) / STORE_FILE)
        intervals = store.interval_set()
    except (InvalidIntervalState, FileNotFoundError) as exc:
        return _fail(str(exc))
    shown = {"limit": store.limit, "tolerance": store.tolerance, "last": intervals.last,
             "seq": store.seq(), "unsent": len(store.pending()),
             "intervals": [{"lnv": i.lnv, "low": i.low, "high": i.high}
                           for i in intervals.intervals]}
    store.close()
    if args.json:
        print(json.dumps(shown, indent=2))
        return 0
    print(f"limit {shown['limit']!r}, tolerance {shown['tolerance']!r}, last value "
          f"{shown['last']!r}, {shown['seq']} values sent messages, {shown['unsent']} unsent")
    for i in shown["intervals"]:
        print(f"  ({i['low']!r}, {i['high']!r}]  last notified {i['lnv']!r}")
    return 0
