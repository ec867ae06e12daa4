"""The ``edn`` command: serve roles, administer topics, publish, subscribe, demo.

Other packages add subcommands through the ``edn.commands`` entry-point group: each entry
point is a function ``add(subparsers)`` that adds its parser and sets ``func`` (``edn bench``
from ``benchmarks``, ``edn profile`` and ``edn study`` from ``route_manager.spark``).
"""
from __future__ import annotations

import argparse
import importlib.metadata as _metadata
import json
import logging
import os
import sys
from pathlib import Path


from wsframework.commandline import key_value, number

DEFAULT_PORT = 8080
COMMANDS_GROUP = "edn.commands"


def _add_serve(sub):
    p = sub.add_parser("serve", help="run a role (source, ...) under gunicorn")
    p.add_argument("role", help="source | server | dispatcher | table, or a role a plugin registers")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--base-url", help="the service's public base URL (default http://HOST:PORT)")
    p.add_argument("--data", default=None, help="data directory (default ./edn-data/ROLE-PORT)")
    p.add_argument("--admin-token", default=None,
                   help="admin credential (default $EDN_ADMIN_TOKEN, else generated into DATA/admin-token)")
    p.add_argument("--workers", type=int, default=1, help="gunicorn worker processes")
    p.add_argument("--threads", type=int, default=8,
                   help="threads per worker (the gthread worker class only)")
    p.add_argument("--worker-class", default=None, choices=("gevent", "gthread"),
                   help="gunicorn worker model (default gevent when installed, else gthread; "
                        "the dispatcher defaults to gthread, which gets its CPU-bound routing "
                        "more CPU on a busy machine): gevent keeps every connection in a "
                        "greenlet; gthread reads each request whole before one of its "
                        "--threads takes it: either way idle and slow clients hold no thread")
    p.add_argument("--max-connections", type=int, default=None, metavar="N",
                   help="simultaneous connections per worker (gunicorn worker_connections, "
                        "default 4000); more wait in the listen backlog")
    p.add_argument("--timeout", type=int, default=60, metavar="SECONDS",
                   help="a worker silent for this long is restarted by the arbiter (default 60)")
    p.add_argument("--keepalive", type=int, default=30, metavar="SECONDS",
                   help="how long an idle keep-alive connection is kept open (default 30)")
    p.add_argument("--max-body", type=int, default=4 * 1024 * 1024, help="largest accepted message, bytes")
    p.add_argument("--allow-private", action="append", default=[], metavar="CIDR",
                   help="allow notification targets in this private range (repeatable)")
    p.add_argument("--set", dest="role_settings", action="append", default=[], type=_setting,
                   metavar="KEY=VALUE", help="a role setting, e.g. delivery_retries=5 (repeatable)")
    p.add_argument("--log-level", default="info")
    p.add_argument("--latency", default=None, metavar="FILE",
                   help="server-to-server latency matrix, ms (.json {servers, ms} or .csv with "
                        "a header row of names), read at start: the latency_file setting")
    server = p.add_argument_group("server role (edn serve server)")
    server.add_argument("--dispatcher", action="append", default=None, metavar="URL",
                        help="a dispatcher's base URL (required by the server role; "
                             "repeatable: the server registers with every root dispatcher)")
    server.add_argument("--name", default=None,
                        help="this server's (or child dispatcher's) name in the network "
                             "(default HOST:PORT)")
    server.add_argument("--partitioner", default=None,
                        choices=("random", "rtree", "kmeans", "distance", "local"),
                        help="where new subscriptions go (default rtree; local: never forward; "
                             "distance: least added traffic times latency, needs --latency)")
    server.add_argument("--load-threshold", type=int, default=None, metavar="N",
                        help="servers at this many subscriptions take no more (default 20000)")
    dispatcher = p.add_argument_group("dispatcher role (edn serve dispatcher)")
    dispatcher.add_argument("--parent", action="append", default=None, metavar="URL",
                            help="run as a child in a dispatch tree: register with this parent "
                                 "dispatcher and report sub-tree summaries to it (repeatable: "
                                 "one per root)")
    dispatcher.add_argument("--link-mbps", type=float, default=None, metavar="MBPS",
                            help="cap the outgoing link to the servers at MBPS megabits/s "
                                 "(the throughput model's B; default: uncapped)")
    dispatcher.add_argument("--no-self-tuning", dest="self_tuning", action="store_false",
                            default=None,
                            help="keep the summary precision fixed (default: self-tuning on)")
    dispatcher.add_argument("--routing", default=None,
                            choices=("summaries", "linkmatching", "flooding"),
                            help="how events are routed below (default summaries; the same on "
                                 "every dispatcher of a network: a child refuses a parent that "
                                 "routes otherwise)")
    dispatcher.add_argument("--precision-profile", default=None, metavar="FILE",
                            help="start at the precision edn profile recommends (its "
                                 "recommendation.json): the initial_precision setting")
    p.set_defaults(func=cmd_serve)


def _setting(text: str) -> tuple[str, str]:
    return ("help", "") if text.strip() == "help" else key_value(text)


def cmd_serve(args) -> int:
    from edn.roles import build
    from edn.gunicorn import GunicornServer
    from wsframework.service import ServiceConfig, resolve_admin_token
    from wsframework.xmlparse import ParserLimits

    base_url = args.base_url or f"http://{args.host}:{args.port}"
    settings = {"allow_private": args.allow_private}
    for key in ("dispatcher", "parent", "name", "partitioner", "load_threshold", "link_mbps",
                "self_tuning", "routing"):
        value = getattr(args, key, None)
        if isinstance(value, list):  # repeatable URLs: one stays a plain value
            value = value[0] if len(value) == 1 else value
        if value is not None:
            settings[key] = value
    settings.update(getattr(args, "role_settings", {}) or {})
    if getattr(args, "latency", None):
        settings["latency_file"] = _latency_file(args.latency)
    if getattr(args, "precision_profile", None):
        settings["initial_precision"] = _initial_precision(args)
    _check_settings(args.role, settings)
    _check_workers(args.role, args.workers, settings)
    data_dir = Path(args.data or Path("edn-data") / f"{args.role}-{args.port}").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = resolve_admin_token(args.admin_token, data_dir)
    config = ServiceConfig(base_url=base_url, data_dir=data_dir, admin_token=token,
                           limits=ParserLimits(max_bytes=args.max_body), role=args.role,
                           settings=settings)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    from edn.gunicorn import DEFAULT_MAX_CONNECTIONS, default_worker_class
    GunicornServer(lambda: build(args.role, config), host=args.host, port=args.port,
                   workers=args.workers, threads=args.threads, log_level=args.log_level,
                   worker_class_name=args.worker_class or default_worker_class(args.role),
                   max_connections=args.max_connections or DEFAULT_MAX_CONNECTIONS,
                   timeout=args.timeout, keepalive=args.keepalive,
                   # the workers' Prometheus files: the operator's directory, else DATA's
                   metrics_dir=(None if os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                                else data_dir / "prometheus")).run()
    return 0


def _check_settings(role: str, settings: dict) -> None:
    """Refuse a bad or unknown setting before any process starts (``--set help`` lists them)."""
    from edn.roles import settings_groups
    from wsframework.settings import SettingsError, describe, read_settings
    try:
        groups = settings_groups(role)
    except ValueError as exc:
        raise SystemExit(f"edn serve: {exc}") from None
    if "help" in settings:
        if not groups:
            print(f"the {role} role declares no settings")
        for key, default, meaning in describe(*groups):
            print(f"{key:<34} {default:<14} {meaning}")
        raise SystemExit(0)
    if not groups:  # a role that declares none reads its raw mapping itself
        return
    try:
        read_settings(settings, *groups)
    except SettingsError as exc:
        raise SystemExit(f"edn serve {role}: {exc}") from None


def _check_workers(role: str, workers: int, settings: dict | None = None) -> None:
    """A role whose factory declares ``single_worker`` (why, as text: its state lives in one
    process's memory; or a function of the settings answering that text or None) refuses
    more than one worker before any process starts."""
    from edn.roles import factory
    reason = getattr(factory(role), "single_worker", None)
    if callable(reason):
        reason = reason(settings or {})
    if reason and workers != 1:
        raise SystemExit(f"edn serve {role}: this role runs in one worker ({reason}); "
                         f"use --workers 1")


def _latency_file(path: str) -> str:
    # parsed now so that a bad file stops the start with its reason, before any process
    from route_manager.latency_matrix import LatencyFileError, load_latency
    try:
        load_latency(path)
    except LatencyFileError as exc:
        raise SystemExit(f"edn serve: --latency: {exc}") from None
    return str(Path(path).resolve())


def _initial_precision(args):
    # the recommendation of edn profile (route_manager.precision_profile reads it)
    from route_manager.precision_profile import InvalidPrecisionProfile, initial_precision_from
    if args.role != "dispatcher":
        raise SystemExit("edn serve: --precision-profile is for the dispatcher role")
    try:
        return initial_precision_from(args.precision_profile)
    except InvalidPrecisionProfile as exc:
        raise SystemExit(f"edn serve: --precision-profile: {exc}") from None


def _admin_client(args, transport=None):
    from wsframework.admin import AdminClient
    from wsframework.service import ADMIN_TOKEN_ENV
    token = args.admin_token or os.environ.get(ADMIN_TOKEN_ENV)
    if not token:
        raise SystemExit(f"an admin credential is needed: --admin-token or {ADMIN_TOKEN_ENV}")
    return AdminClient(args.at, token, transport=transport)


def _add_topic(sub):
    p = sub.add_parser("topic", help="create, list or delete topics")
    tsub = p.add_subparsers(dest="topic_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--at", required=True, help="the service's base URL")
    common.add_argument("--admin-token", default=None)
    common.add_argument("--json", action="store_true", help="print JSON")
    c = tsub.add_parser("create", parents=[common])
    c.add_argument("name")
    c.add_argument("--matcher", default=None, help="matcher URI (default: XPath)")
    c.add_argument("--schema", "--options", dest="options", default=None,
                   help="XML file with matcher configuration (e.g. an event schema)")
    c.set_defaults(func=cmd_topic_create)
    ls = tsub.add_parser("list", parents=[common])
    ls.add_argument("--prefix", default=None)
    ls.set_defaults(func=cmd_topic_list)
    d = tsub.add_parser("delete", parents=[common])
    d.add_argument("name")
    d.set_defaults(func=cmd_topic_delete)


def cmd_topic_create(args) -> int:
    from wsframework.xmlparse import parse_xml
    options = parse_xml(Path(args.options).read_bytes()) if args.options else None
    topic = _admin_client(args).create_topic(args.name, args.matcher, options)
    _print(args, topic, f"created {topic['name']} ({topic['matcher']}) at {topic['address']}")
    return 0


def cmd_topic_list(args) -> int:
    topics = _admin_client(args).list_topics(args.prefix)
    if args.json:
        print(json.dumps(topics, indent=2))
    else:
        for t in topics:
            print(f"{t['name']}\t{t['matcher']}\t{t['filters']} filters\t{t['address']}")
    return 0


def cmd_topic_delete(args) -> int:
    name = _admin_client(args).delete_topic(args.name)
    _print(args, {"name": name}, f"deleted {name}")
    return 0


def _add_dead_letters(sub):
    p = sub.add_parser("dead-letters", help="list, redeliver or purge the notifications a "
                       "source or subscription server gave up on")
    dsub = p.add_subparsers(dest="dead_letters_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--at", required=True, help="the source's or server's base URL")
    common.add_argument("--admin-token", "--token", dest="admin_token", default=None)
    common.add_argument("--json", action="store_true", help="print JSON")
    ls = dsub.add_parser("list", parents=[common])
    ls.add_argument("--topic", default=None)
    ls.add_argument("--subscription", default=None)
    ls.add_argument("--limit", type=int, default=100, help="at most this many (1..1000)")
    ls.set_defaults(func=cmd_dead_letters_list)
    for name, text in (("redeliver", "send dead letters again (same wsa:MessageID)"),
                       ("purge", "delete dead letters")):
        c = dsub.add_parser(name, parents=[common], help=text)
        c.add_argument("ids", nargs="*", type=int, help="dead-letter ids")
        c.add_argument("--all", action="store_true")
        if name == "purge":
            c.add_argument("--older-than", type=int, default=None, metavar="SECONDS")
        c.set_defaults(func=cmd_dead_letters_change, verb=name)


def cmd_dead_letters_list(args) -> int:
    from subscription_manager.deadletters import ListDeadLetters
    answer = _admin_client(args).call(ListDeadLetters(Topic=args.topic, Limit=args.limit,
                                                      Subscription=args.subscription))
    letters = [{key: getattr(d, key) for key in type(d).get_flat_type_info(type(d))}
               for d in answer.DeadLetter or ()]
    if args.json:
        print(json.dumps({"total": answer.Total, "dead_letters": letters}, indent=2))
    else:
        for d in letters:
            print(f"{d['Id']}\t{d['Subscription']}\t{d['Url']}\t{d['Attempts']} attempts\t"
                  f"{d['DeadAt']}\t{d['Size']} bytes\t{d['Reason']}")
        print(f"{len(letters)} of {answer.Total} dead letters")
    return 0


def cmd_dead_letters_change(args) -> int:
    from subscription_manager.deadletters import PurgeDeadLetters, RedeliverDeadLetters
    every = "true" if args.all else None
    if args.verb == "redeliver":
        answer = _admin_client(args).call(RedeliverDeadLetters(Id=args.ids or None, All=every))
        unknown = list(answer.Unknown or ())
        _print(args, {"redelivered": answer.Redelivered, "unknown": unknown},
               f"redelivered {answer.Redelivered}"
               + (f"; unknown ids: {' '.join(map(str, unknown))}" if unknown else ""))
    else:
        answer = _admin_client(args).call(PurgeDeadLetters(Id=args.ids or None, All=every,
                                                           OlderThan=args.older_than))
        _print(args, {"purged": answer.Purged}, f"purged {answer.Purged}")
    return 0


def _print(args, obj, text):
    print(json.dumps(obj, indent=2) if getattr(args, "json", False) else text)


def _add_publish(sub):
    p = sub.add_parser("publish", help="send one event document to a topic")
    p.add_argument("--at", required=True, action="append", metavar="URL",
                   help="the service's base URL; repeatable (root dispatchers): sent to the "
                        "first, and to the next when one does not take it (failover)")
    p.add_argument("topic")
    p.add_argument("file", help="XML event document ('-' for standard input)")
    p.add_argument("--soap11", action="store_true", help="send SOAP 1.1 (default 1.2)")
    p.add_argument("--connect-timeout", type=float, default=0.5, metavar="SECONDS",
                   help="seconds to connect to a root before trying the next (default 0.5)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="seconds to wait for a root's answer before trying the next")
    p.set_defaults(func=cmd_publish)


def cmd_publish(args) -> int:
    from wsframework.publisher import Publisher
    from wsframework.soap import SoapVersion
    from wsframework.xmlparse import parse_xml
    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    version = SoapVersion.SOAP11 if args.soap11 else SoapVersion.SOAP12
    with Publisher(args.at, soap_version=version, connect_timeout=args.connect_timeout,
                   read_timeout=args.timeout) as publisher:
        ack = publisher.publish(args.topic, parse_xml(data))
    print(f"published to {args.topic} at {ack.address}: HTTP {ack.status}")
    if ack.in_doubt:
        print(f"(the answer of {', '.join(ack.in_doubt)} was lost: it may have published "
              "the event too)", file=sys.stderr)
    return 0


def _add_partition(sub):
    p = sub.add_parser("partition", help="re-partition a topic's subscriptions across the "
                                         "servers (offline, at the dispatcher)")
    p.add_argument("--at", required=True, help="the dispatcher's base URL")
    p.add_argument("topic")
    p.add_argument("--algorithm", default="rtree", choices=("rtree", "kmeans", "kyra"))
    p.add_argument("--max-distance", type=float, default=None, metavar="MS",
                   help="kyra: widest server clique, ms in the dispatcher's latency file "
                        "(required with --algorithm kyra)")
    p.add_argument("--max-servers", type=int, default=None, metavar="N",
                   help="kyra: most servers in a clique (default: no bound)")
    p.add_argument("--admin-token", default=None)
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for the dispatcher's answer")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_partition)


def cmd_partition(args) -> int:
    from route_manager import edn_wire
    from wsframework.transport import HttpTransport
    from route_manager.repartition import algorithm_text
    algorithm = algorithm_text(args.algorithm, max_distance=args.max_distance,
                               max_servers=args.max_servers)
    from wsframework.progress import waiting
    client = _admin_client(args, HttpTransport(timeout=(3.0, args.timeout)))
    with waiting(f"re-partitioning {args.topic} at the dispatcher", quiet=args.json):
        response = client.call(edn_wire.Repartition(Topic=args.topic, Algorithm=algorithm))
    figures = {f.Name: number(f.Value) for f in (response.Figure or [])}
    result = {"topic": args.topic, "algorithm": args.algorithm, **figures,
              "moved": response.Moved}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.topic}: {response.Moved} subscriptions moved ({args.algorithm})")
        for name, value in figures.items():
            print(f"{name}: {value}")
    return 0


def _add_subscribe(sub):
    p = sub.add_parser("subscribe", help="subscribe a notification endpoint to a topic (WS-Eventing)")
    p.add_argument("--at", required=True, help="base URL of a source or subscription server")
    p.add_argument("topic")
    p.add_argument("--notify-to", required=True, help="URL that receives the notifications")
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
    p.set_defaults(func=cmd_subscribe)


def cmd_subscribe(args) -> int:
    from subscription_manager.client import EventingClient
    from wsframework import ns
    from wsframework.publisher import topic_address
    dialects = {"xpath": None, "xpath2": ns.XPATH20_DIALECT_2011, "ranges": ns.RANGES_DIALECT,
                "range-aggregate": ns.RANGE_AGGREGATE_DIALECT}
    dialect = dialects.get(args.dialect, args.dialect)
    namespaces = dict(item.split("=", 1) for item in args.prefix)
    extensions = []
    if (args.notify_when is None) != (args.changed_by is None) or (
            args.tolerance is not None and args.notify_when is None):
        print("edn subscribe: --notify-when and --changed-by go together (and --tolerance "
              "only with them)", file=sys.stderr)
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


def _add_sink(sub):
    p = sub.add_parser("sink", help="run a notification sink that prints what it receives")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9090)
    p.add_argument("--count", type=int, default=0, help="exit after this many (0: run until ^C)")
    p.set_defaults(func=cmd_sink)


def cmd_sink(args) -> int:
    from lxml import etree as _etree  # only the sink needs it
    from edn.sink import NotificationSink
    with NotificationSink(args.host, args.port) as sink:
        print(f"listening at http://{args.host}:{sink.port}/", flush=True)
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


def _add_precision(sub):
    p = sub.add_parser("precision", help="set the dispatcher's summary precision "
                                         "(none | precise | 0..1 | N%%)")
    p.add_argument("--at", required=True, help="the dispatcher's base URL")
    p.add_argument("value", nargs="?", default=None,
                   help="none | precise | a number in (0, 1] | N%% (omit to only show)")
    p.add_argument("--self-tuning", choices=("on", "off"), default=None,
                   help="also switch self-tuning on or off")
    p.add_argument("--admin-token", default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_precision)


def cmd_precision(args) -> int:
    from wsframework.admin import contracts
    settings = []
    if args.self_tuning is not None:
        settings.append(contracts.Figure(Name="self_tuning", Value=args.self_tuning))
    if args.value is not None:
        settings.append(contracts.Figure(Name="precision", Value=args.value))
    response = _admin_client(args).call(contracts.Configure(Setting=settings))
    in_force = {f.Name: f.Value for f in response.Setting or []}
    if args.json:
        print(json.dumps(in_force, indent=2))
    else:
        print(f"precision {in_force.get('precision')}, self-tuning {in_force.get('self_tuning')}")
    return 0


def _add_status(sub):
    p = sub.add_parser("status", help="the dispatcher's precision, self-tuning trace and "
                                      "measured throughput parameters")
    p.add_argument("--at", required=True, help="the dispatcher's base URL")
    p.add_argument("--admin-token", default=None)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--steps", type=int, default=10, help="self-tuning steps to show (text)")
    p.set_defaults(func=cmd_status)


def cmd_status(args) -> int:
    from wsframework.admin import contracts
    figures = {f.Name: f.Value for f in
               _admin_client(args).call(contracts.GetStats()).Figure or []}
    trace = [json.loads(v) for k, v in sorted(figures.items()) if k.startswith("selftuning.trace.")]
    plain = {k: number(v) for k, v in figures.items() if not k.startswith("selftuning.trace.")}
    if args.json:
        print(json.dumps({**plain, "selftuning.trace": trace}, indent=2))
        return 0
    print(f"precision {plain.get('precision')} (self-tuning "
          f"{'on' if plain.get('selftuning.on') else 'off'}), {plain.get('servers')} servers, "
          f"link cap {plain.get('link_mbps') or 'none'} Mbps")
    if plain.get("bloom.servers"):
        print(f"Bloom summaries on {plain.get('bloom.dims')} from {plain.get('bloom.servers')} "
              f"servers: estimated false-positive rate up to "
              f"{float(plain.get('bloom.false_positive_rate', 0)):.4f} (precision there)")
    _print_tree(plain)
    if "measure.events_per_s" in plain:
        m = {k.split(".", 1)[1]: v for k, v in plain.items() if k.startswith("measure.")}
        print(f"last {m['window_s']:.1f} s: {m['events_per_s']:.1f} events/s, CPU "
              f"{m['cpu']:.2f} of a core, busy {m.get('busy', 0.0):.2f}, T_f {m['t_f_us']:.0f} us, T_d {m['t_d_us']:.1f} us, "
              f"T_c {m['t_c_us']:.1f} us, R {m['hit_ratio']:.3f}, S_m {m['message_bytes']:.0f} B, "
              f"out {m['bytes_out_per_s'] / 1e6:.2f} MB/s")
    if trace:
        print(f"self-tuning: {plain.get('selftuning.steps')} steps, interval "
              f"{plain.get('selftuning.interval')} s; last {min(args.steps, len(trace))}:")
        for step in trace[-args.steps:]:
            print(f"  step {step['step']:>4}  precision {step['previous']:.2f} -> "
                  f"{step['precision']:.2f}  {step['events_per_s']:8.1f} events/s  "
                  f"cpu {step['cpu']:.2f} busy {step.get('busy', 0.0):.2f} "
                  f"backlog {step.get('backlog', 0):+d} ({step.get('signal', '?')})  "
                  f"next {step['interval']:.1f} s  ({step['reason']})")
    return 0


def _print_tree(plain: dict) -> None:
    """A dispatcher's place in a dispatch tree: its child dispatchers, and its parents with
    the precision each routes it at (each level tunes its own precision)."""
    children = sorted(k.split(".")[1] for k, v in plain.items()
                      if k.startswith("server.") and k.endswith(".kind") and v == "dispatcher")
    if children:
        print(f"child dispatchers: {', '.join(children)}")
    if "tree.name" not in plain:
        return
    for index in range(int(plain.get("tree.parents", 0))):
        key = f"tree.parent.{index}"
        print(f"child {plain['tree.name']} of {plain.get(key + '.address')}: "
              f"{'registered' if plain.get(key + '.registered') else 'NOT registered'}, "
              f"routed at precision {plain.get(key + '.precision')}, "
              f"{plain.get(key + '.routes')} routes reported")


def _add_demo(sub):
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edn", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_serve, _add_topic, _add_publish, _add_subscribe, _add_sink, _add_partition,
                _add_precision, _add_status, _add_demo, _add_dead_letters):
        add(sub)
    for entry_point in sorted(_metadata.entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        entry_point.load()(sub)
    from subscription_manager.stateful.interval_commands import add_intervals_parser
    add_intervals_parser(sub)  # edn intervals: S-CN notification conditions (issue 17)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from wsframework.exceptions import SoapFault, WsFrameworkError
    from wsframework.transport import TransportError
    try:
        return args.func(args) or 0
    except SoapFault as fault:
        print(f"edn: fault {fault.subcode or fault.code}: {fault.reason}", file=sys.stderr)
        return 2
    except TransportError as exc:
        print(f"edn: {exc}", file=sys.stderr)
        return 3
    except (WsFrameworkError, OSError) as exc:  # a bad local file, an unreadable document
        print(f"edn: {exc}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
