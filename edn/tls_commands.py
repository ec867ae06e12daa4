"""``edn tls init DIR`` and ``edn tls issue NAME --ca DIR --out DIR [--san ...]``: the
network's own CA and its members' certificates (:mod:`wsframework.pki`).

An organisation with its own CA skips both: give its CA certificate as ``--tls-ca`` and each
role a certificate it issued (server and client authentication, the role's host names and
addresses as subject alternative names) as ``--tls-cert``/``--tls-key``.
"""
from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_tls", "add_client_tls_options", "apply_client_tls", "LOCAL_COMMANDS"]

#: commands that call no running network: they take no TLS client options
LOCAL_COMMANDS = frozenset({"serve", "tls", "demo", "bench", "profile", "study"})
_ENV = {"tls_ca": "EDN_TLS_CA", "tls_cert": "EDN_TLS_CERT", "tls_key": "EDN_TLS_KEY"}
TOKEN_ENV = "EDN_ACCESS_TOKEN"


def add_client_tls_options(root: argparse.ArgumentParser) -> None:
    """``--tls-ca``, ``--tls-cert`` and ``--tls-key`` on every command that calls a network
    (each leaf below ``root`` but :data:`LOCAL_COMMANDS`); defaults from $EDN_TLS_CA,
    $EDN_TLS_CERT and $EDN_TLS_KEY."""
    for name, parser in _commands(root):
        if name in LOCAL_COMMANDS:
            continue
        for leaf in _leaves(parser):
            group = leaf.add_argument_group("TLS (https:// addresses) and credentials")
            group.add_argument("--tls-ca", default=None, metavar="FILE",
                               help="trust this CA besides the system's (the network's "
                                    "ca.pem; default $EDN_TLS_CA)")
            group.add_argument("--tls-cert", default=None, metavar="FILE",
                               help="present this certificate (mutual TLS; edn sink: serve "
                                    "HTTPS with it; default $EDN_TLS_CERT)")
            group.add_argument("--tls-key", default=None, metavar="FILE",
                               help="its private key (default $EDN_TLS_KEY)")
            group.add_argument("--access-token", default=None, metavar="TOKEN",
                               help="act as the principal this access token belongs to "
                                    "(edn access token create; sent as Authorization: "
                                    "Bearer; default $EDN_ACCESS_TOKEN)")


def apply_client_tls(args) -> None:
    """Make the command's TLS options this process's identity for its https calls."""
    if not hasattr(args, "tls_ca") or getattr(args, "command", None) in LOCAL_COMMANDS:
        return
    from pathlib import Path
    from wsframework.tls import ClientTls, TlsConfigError, set_process_client_tls
    values = [getattr(args, key, None) or os.environ.get(env) or None for key, env in _ENV.items()]
    try:
        set_process_client_tls(ClientTls(*(Path(v) if v else None for v in values)))
    except TlsConfigError as exc:
        raise SystemExit(f"edn {args.command}: {exc}") from None
    token = getattr(args, "access_token", None) or os.environ.get(TOKEN_ENV)
    if token:
        from wsframework.transport.http import set_process_authorization
        try:
            set_process_authorization(f"Bearer {token}")
        except ValueError as exc:
            raise SystemExit(f"edn {args.command}: --access-token: {exc}") from None


def _commands(root: argparse.ArgumentParser):
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _leaves(parser: argparse.ArgumentParser):
    below = [p for _, p in _commands(parser)]
    if not below:
        yield parser
    for child in below:
        yield from _leaves(child)


def add_tls(sub):
    p = sub.add_parser("tls", help="a CA for the network and certificates for its members")
    tsub = p.add_subparsers(dest="tls_command", required=True)
    init = tsub.add_parser("init", help="make a CA: DIR/ca.pem and DIR/ca-key.pem (mode 0600)")
    init.add_argument("dir", metavar="DIR")
    init.add_argument("--name", default="edn network CA", help="the CA's common name")
    init.add_argument("--days", type=int, default=None, help="validity (default 3650)")
    init.set_defaults(func=cmd_init)
    issue = tsub.add_parser("issue", help="issue NAME.pem and NAME-key.pem (ECDSA P-256), "
                                          "for serving and for calling peers")
    issue.add_argument("name", metavar="NAME",
                       help="the member's name: its certificate's common name, the principal "
                            "it acts as")
    issue.add_argument("--ca", required=True, metavar="DIR", help="the CA's directory")
    issue.add_argument("--out", required=True, metavar="DIR", help="where the files go")
    issue.add_argument("--san", action="append", default=[], metavar="DNS:host|IP:addr",
                       help="a name or address peers reach it at (repeatable)")
    issue.add_argument("--days", type=int, default=None, help="validity (default 397)")
    issue.set_defaults(func=cmd_issue)


def cmd_init(args) -> int:
    from wsframework.pki import DEFAULT_CA_DAYS, PkiError, init_ca
    try:
        path = init_ca(args.dir, name=args.name, days=args.days or DEFAULT_CA_DAYS)
    except PkiError as exc:
        raise SystemExit(f"edn tls init: {exc}") from None
    print(path)
    return 0


def cmd_issue(args) -> int:
    from wsframework.pki import DEFAULT_DAYS, PkiError, issue
    try:
        issued = issue(args.name, args.ca, args.out, sans=args.san, days=args.days or DEFAULT_DAYS)
    except PkiError as exc:
        raise SystemExit(f"edn tls issue: {exc}") from None
    print(issued.certificate)
    print(issued.key, file=sys.stdout)
    return 0
