"""The ``edn`` command: serve roles (``edn serve``, here), administer them
(:mod:`edn.admin_commands`), publish, subscribe and run the demo (:mod:`edn.client_commands`).

Other packages add subcommands through the ``edn.commands`` entry-point group: each entry
point is a function ``add(subparsers)`` that adds its parser and sets ``func`` (``edn bench``
from ``benchmarks``, ``edn profile`` and ``edn study`` from ``spark_jobs``).
"""
from __future__ import annotations

import argparse
import importlib.metadata as _metadata
import logging
import os
import sys
from pathlib import Path

from wsframework.commandline import key_value

from . import admin_commands as admin, client_commands as client, latency_commands as latency
from . import access_commands as access, tls_commands as tls

DEFAULT_PORT = 8080
ALLOW_PRIVATE_ENV = "EDN_ALLOW_PRIVATE"  # --allow-private's default, for every role of a host
STORE_ENV = "EDN_STORE"  # --store's default, for every role of a host
CONTROL_SOCKET = "gunicorn.ctl"  # gunicorn's control socket, in the role's data directory
COMMANDS_GROUP = "edn.commands"


def _add_serve(sub):
    p = sub.add_parser("serve", help="run a role (source, ...) under gunicorn")
    p.add_argument("role", help="source | server | dispatcher | table, or a role a plugin registers")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to bind (default 127.0.0.1: this machine only; "
                        "0.0.0.0 or :: for every interface, which needs --base-url)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--base-url",
                   help="the address peers reach this role at, http(s)://HOST:PORT, which it "
                        "registers and advertises (default http://HOST:PORT from --host and "
                        "--port; required when --host is a wildcard)")
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
    tls = p.add_argument_group("TLS", "serve HTTPS, and call peers with the network's CA and "
                                      "this role's certificate (mutual TLS)")
    tls.add_argument("--tls-cert", default=None, metavar="FILE",
                     help="this role's certificate chain (PEM; edn tls issue makes one): serve "
                          "HTTPS, TLS 1.2 and newer, and present it to the peers it calls")
    tls.add_argument("--tls-key", default=None, metavar="FILE", help="its private key (PEM)")
    tls.add_argument("--tls-ca", default=None, metavar="FILE",
                     help="the network's CA (edn tls init makes one): peers' certificates, "
                          "servers' and clients', are verified against it (servers' also "
                          "against the system's trust store)")
    tls.add_argument("--tls-client-auth", default=None, choices=("none", "optional", "required"),
                     help="ask clients for a certificate (default optional with --tls-ca, "
                          "else none); required refuses a client without one")
    tls.add_argument("--tls-handshake-timeout", type=float, default=10.0, metavar="SECONDS",
                     help="a client that has not finished its TLS handshake within this long "
                          "is disconnected (default 10)")
    p.add_argument("--access", default="closed", choices=("open", "closed"),
                   help="who may publish and subscribe: closed (the default: a principal "
                        "with the publish or subscribe grant on the topic, see edn access) "
                        "or open (anyone who reaches a topic)")
    p.add_argument("--tcp-rto-max-ms", type=int, default=None, metavar="MS",
                   help="cap on TCP's retransmission backoff for every connection this role "
                        "opens or accepts, so a connection resumes within this long after a "
                        "lossy link recovers (Linux 6.15+; default 1000, the kernel's least; "
                        "0 keeps the kernel's default, 120 s; raise it on paths whose round "
                        "trip nears a second, where it would resend needlessly)")
    p.add_argument("--durable-sync", default="full", choices=("full", "normal"),
                   help="full (the default): nothing is acknowledged before it is on disk "
                        "(an fdatasync of the store's log, shared by the requests waiting at "
                        "the same time; on PostgreSQL, synchronous_commit=on, which with a "
                        "synchronous standby also waits for the standby); normal: "
                        "acknowledged once committed, which survives kill -9 but not a power "
                        "cut or an OS crash (the last transactions, acknowledged or not, can "
                        "be lost)")
    p.add_argument("--store", default=os.environ.get(STORE_ENV) or None,
                   metavar="postgresql://...",
                   help="keep the role's state in this PostgreSQL database instead of SQLite "
                        "files in DATA: the shared and replicated store, for several workers "
                        "and hosts of one role (libpq's URL; several hosts, e.g. "
                        "postgresql://h1,h2/edn?target_session_attrs=read-write, follow a "
                        f"failover to the promoted standby; default ${STORE_ENV})")
    p.add_argument("--store-schema", default=None, metavar="NAME",
                   help="the schema in --store that holds this role's state (default "
                        "ROLE_PORT); the workers and hosts of one role name the same one")
    p.add_argument("--allow-private", action="append", default=None, metavar="CIDR",
                   help="allow notification targets (the dispatcher: ReplyTo/FaultTo) in this "
                        "private range, e.g. 10.77.0.0/24 (repeatable or comma-separated; "
                        "default $EDN_ALLOW_PRIVATE, else none: private addresses are refused)")
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
                             "(default the HOST:PORT of its --base-url)")
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
    dispatcher.add_argument("--peer-root", dest="peer_roots", action="append", default=None,
                            metavar="URL",
                            help="another root dispatcher of the network (repeatable): topics "
                                 "created or deleted at any root reach every other")
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
    from edn.gunicorn import GunicornServer
    from edn.roles import build
    from route_manager.protocol import SERVICE_NAMES
    from wsframework.service import ServiceConfig, resolve_admin_token
    from wsframework.xmlparse import ParserLimits

    from edn.addresses import AddressError, advertised_base_url, loopback_warning

    server_tls, client_tls = _serve_tls(args)
    try:
        base_url = advertised_base_url(args.host, args.port, args.base_url,
                                       scheme="https" if server_tls else "http")
    except AddressError as exc:
        raise SystemExit(f"edn serve {args.role}: {exc}") from None
    if args.tcp_rto_max_ms is not None:
        from wsframework.transport import tcp
        try:
            tcp.set_rto_max_ms(args.tcp_rto_max_ms)
        except ValueError as exc:
            raise SystemExit(f"edn serve {args.role}: --tcp-rto-max-ms: {exc}") from None
    warning = loopback_warning(base_url, [*(args.dispatcher or ()), *(args.parent or ()),
                                          *(getattr(args, "peer_roots", None) or ())])
    if warning:
        print(f"edn serve {args.role}: warning: {warning}", file=sys.stderr)
    allow_private = args.allow_private
    if allow_private is None:  # one setting for every role a host runs
        allow_private = [os.environ.get(ALLOW_PRIVATE_ENV, "")]
    settings = {"allow_private": allow_private}
    for key in ("dispatcher", "parent", "peer_roots", "name", "partitioner", "load_threshold", "link_mbps",
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
    from wsframework.store import set_default_durability
    set_default_durability(args.durable_sync)  # every store of the role (workers inherit it)
    if args.store:
        _use_postgresql(args)
    data_dir = Path(args.data or Path("edn-data") / f"{args.role}-{args.port}").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = resolve_admin_token(args.admin_token, data_dir, SERVICE_NAMES.admin_token_env)
    config = ServiceConfig(base_url=base_url, data_dir=data_dir, admin_token=token,
                           limits=ParserLimits(max_bytes=args.max_body), role=args.role,
                           settings=settings, tls=server_tls, access=args.access)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    from edn.gunicorn import DEFAULT_MAX_CONNECTIONS, default_worker_class
    from wsframework.tls import set_process_client_tls
    set_process_client_tls(client_tls)
    GunicornServer(lambda: build(args.role, config), host=args.host, port=args.port,
                   control_socket=data_dir / CONTROL_SOCKET,
                   workers=args.workers, threads=args.threads, log_level=args.log_level,
                   worker_class_name=args.worker_class or default_worker_class(args.role),
                   max_connections=args.max_connections or DEFAULT_MAX_CONNECTIONS,
                   timeout=args.timeout, keepalive=args.keepalive, tls=server_tls,
                   # the workers' Prometheus files: the operator's directory, else DATA's
                   metrics_dir=(None if os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                                else data_dir / "prometheus")).run()
    return 0


def _use_postgresql(args) -> None:
    """Put the role's stores in ``--store`` (set in the arbiter, inherited by its workers,
    which open their own connections): the main store in the schema ``--store-schema``,
    another store file (``table.db``) in ``SCHEMA_table``. The database is checked now, so a
    wrong URL stops the start with its reason."""

    import psycopg

    from route_manager.protocol import SERVICE_NAMES
    from wsframework.store import is_postgresql, use_postgresql
    from wsframework.store_postgres import check_schema_name, split_location
    if not is_postgresql(args.store):
        raise SystemExit(f"edn serve: --store is a postgresql:// URL, not {args.store!r}")
    schema = args.store_schema or f"{args.role}_{args.port}"
    try:  # at most 41: the table role's schema is NAME_table
        check_schema_name(schema, longest=41)
    except ValueError as exc:
        raise SystemExit(f"edn serve: --store-schema: {exc}") from None
    try:
        psycopg.connect(split_location(args.store)[0], connect_timeout=10).close()
    except psycopg.Error as exc:
        raise SystemExit(f"edn serve: cannot reach the store {args.store}: {exc}") from None
    main = SERVICE_NAMES.store_file
    use_postgresql(args.store, lambda path: schema if Path(path).name == main
                   else f"{schema}_{Path(path).stem}")


def _serve_tls(args):
    """The role's :class:`~wsframework.tls.ServerTls` (None: plain HTTP) and its identity for
    every peer it calls (:class:`~wsframework.tls.ClientTls`, set by cmd_serve as it starts
    serving), their files checked."""
    from edn.gunicorn_tls import set_handshake_timeout
    from wsframework.tls import (ClientTls, ServerTls, TlsConfigError, client_context,
                                 require_member_certificates, server_context)
    cert, key, ca = (Path(v) if v else None for v in (args.tls_cert, args.tls_key, args.tls_ca))
    try:
        client_tls = ClientTls(ca=ca, cert=cert, key=key)
        client_context(client_tls)
        if cert is None:
            if args.tls_client_auth not in (None, "none"):
                raise TlsConfigError("--tls-client-auth needs --tls-cert and --tls-key "
                                     "(a role asks for certificates only over TLS)")
            return None, client_tls
        tls = ServerTls(cert=cert, key=key, ca=ca,
                        client_auth=args.tls_client_auth or ("optional" if ca else "none"))
        server_context(tls)  # a missing file or a key that does not match stops the start
        set_handshake_timeout(args.tls_handshake_timeout)
        # mutual TLS inside the network: the network credential counts only with a member
        # certificate (set here, in the arbiter: every worker inherits it)
        require_member_certificates(tls.ca is not None and tls.client_auth != "none")
        return tls, client_tls
    except (TlsConfigError, ValueError) as exc:
        raise SystemExit(f"edn serve {args.role}: {exc}") from None


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edn", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_serve, admin.add_topic, client.add_publish, client.add_subscribe,
                client.add_sink, admin.add_partition, admin.add_precision, admin.add_status,
                client.add_demo, admin.add_dead_letters, latency.add_latency, tls.add_tls,
                access.add_access):
        add(sub)
    for entry_point in sorted(_metadata.entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        entry_point.load()(sub)
    from subscription_manager.stateful.interval_commands import add_intervals_parser
    add_intervals_parser(sub)  # edn intervals: S-CN notification conditions
    tls.add_client_tls_options(parser)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    tls.apply_client_tls(args)
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
