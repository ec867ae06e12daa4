"""The ``edn`` commands that administer a running role with the admin credential: topics
(``edn topic``), dead letters (``edn dead-letters``), the dispatcher's offline re-partition
(``edn partition``), its summary precision (``edn precision``) and its state
(``edn status``)."""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from wsframework.commandline import number

__all__ = ["admin_client", "add_topic", "add_dead_letters", "add_partition", "add_precision", "add_status"]


def admin_client(args, transport=None, *, principal_may: bool = False):
    """An admin client of ``--at`` with the credential of ``--admin-token``, else of the
    EDN's environment variable (EDN_ADMIN_TOKEN). ``principal_may``: the operation may also
    be run by a principal with an admin grant on its topic, so without the network
    credential the command goes as the principal of ``--access-token`` (or its client
    certificate)."""
    from route_manager.protocol import SERVICE_NAMES
    from wsframework.admin import AdminClient
    env = SERVICE_NAMES.admin_token_env
    token = args.admin_token or os.environ.get(env)
    if not token and not (principal_may and _has_principal(args)):
        also = (" (or, as a principal with an admin grant on the topic, --access-token or "
                "--tls-cert)") if principal_may else ""
        raise SystemExit(f"an admin credential is needed: --admin-token or {env}{also}")
    return AdminClient(args.at, token or None, transport=transport)


def _has_principal(args) -> bool:
    from edn.tls_commands import TOKEN_ENV
    return bool(getattr(args, "access_token", None) or os.environ.get(TOKEN_ENV)
                or getattr(args, "tls_cert", None) or os.environ.get("EDN_TLS_CERT"))


def add_topic(sub):
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
    topic = admin_client(args, principal_may=True).create_topic(args.name, args.matcher, options)
    _print(args, topic, f"created {topic['name']} ({topic['matcher']}) at {topic['address']}")
    return 0


def cmd_topic_list(args) -> int:
    topics = admin_client(args).list_topics(args.prefix)
    if args.json:
        print(json.dumps(topics, indent=2))
    else:
        for t in topics:
            print(f"{t['name']}\t{t['matcher']}\t{t['filters']} filters\t{t['address']}")
    return 0


def cmd_topic_delete(args) -> int:
    name = admin_client(args, principal_may=True).delete_topic(args.name)
    _print(args, {"name": name}, f"deleted {name}")
    return 0


def add_dead_letters(sub):
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
    answer = admin_client(args).call(ListDeadLetters(Topic=args.topic, Limit=args.limit,
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
        answer = admin_client(args).call(RedeliverDeadLetters(Id=args.ids or None, All=every))
        unknown = list(answer.Unknown or ())
        _print(args, {"redelivered": answer.Redelivered, "unknown": unknown},
               f"redelivered {answer.Redelivered}"
               + (f"; unknown ids: {' '.join(map(str, unknown))}" if unknown else ""))
    else:
        answer = admin_client(args).call(PurgeDeadLetters(Id=args.ids or None, All=every,
                                                           OlderThan=args.older_than))
        _print(args, {"purged": answer.Purged}, f"purged {answer.Purged}")
    return 0


def _print(args, obj, text):
    print(json.dumps(obj, indent=2) if getattr(args, "json", False) else text)


def add_partition(sub):
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
    from route_manager import protocol
    from route_manager.repartition import algorithm_text
    from wsframework.progress import waiting
    from wsframework.transport import HttpTransport
    algorithm = algorithm_text(args.algorithm, max_distance=args.max_distance,
                               max_servers=args.max_servers)
    client = admin_client(args, HttpTransport(timeout=(3.0, args.timeout)))
    with waiting(f"re-partitioning {args.topic} at the dispatcher", quiet=args.json):
        response = client.call(protocol.Repartition(Topic=args.topic, Algorithm=algorithm))
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


def add_precision(sub):
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
    response = admin_client(args).call(contracts.Configure(Setting=settings))
    in_force = {f.Name: f.Value for f in response.Setting or []}
    if args.json:
        print(json.dumps(in_force, indent=2))
    else:
        print(f"precision {in_force.get('precision')}, self-tuning {in_force.get('self_tuning')}")
    return 0


def add_status(sub):
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
               admin_client(args).call(contracts.GetStats()).Figure or []}
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
    if plain.get("profile.on"):
        applied = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                time.gmtime(float(plain.get("profile.applied_at") or 0)))
        print(f"precision profile in force: recommends {plain.get('profile.initial_precision')}"
              f", {plain.get('profile.points')} precisions, applied {applied}"
              f" (from {plain.get('profile.source') or 'unnamed'}; self-tuner "
              f"{'has it' if plain.get('profile.tuner_model') else 'off'})")
    else:
        print("precision profile: none applied")
    _print_tree(plain)
    if "measure.events_per_s" in plain:
        m = {k.split(".", 1)[1]: v for k, v in plain.items() if k.startswith("measure.")}
        print(f"last {m['window_s']:.1f} s: {m['events_per_s']:.1f} events/s, CPU "
              f"{m['cpu']:.2f} of a core, busy {m.get('busy', 0.0):.2f}, T_f {m['t_f_us']:.0f} us, T_d {m['t_d_us']:.1f} us, "
              f"T_c {m['t_c_us']:.1f} us, R {m['hit_ratio']:.3f}, S_m {m['message_bytes']:.0f} B, "
              f"out {m['bytes_out_per_s'] / 1e6:.2f} MB/s")
    if trace:
        print(f"self-tuning: {plain.get('selftuning.steps')} steps, interval "
              f"{plain.get('selftuning.interval')} s, {plain.get('selftuning.rule', 'paper')} "
              f"rule; last {min(args.steps, len(trace))}:")
        for step in trace[-args.steps:]:
            print(f"  step {step['step']:>4}  precision {step['previous']:.2f} -> "
                  f"{step['precision']:.2f}  {step['events_per_s']:8.1f} events/s  "
                  f"cpu {step['cpu']:.2f} busy {step.get('busy', 0.0):.2f} "
                  f"backlog {step.get('backlog', 0):+d} ({step.get('signal', '?')})  "
                  f"next {step['interval']:.1f} s  ({step['reason']}"
                  f"{', ' + step['decision'] if step.get('decision') else ''})")
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
