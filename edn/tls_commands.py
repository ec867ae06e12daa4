"""``edn tls init DIR`` and ``edn tls issue NAME --ca DIR --out DIR [--san ...]``: the
network's own CA and its members' certificates (:mod:`wsframework.pki`).

An organisation with its own CA skips both: give its CA certificate as ``--tls-ca`` and each
role a certificate it issued (server and client authentication, the role's host names and
addresses as subject alternative names) as ``--tls-cert``/``--tls-key``.
"""
from __future__ import annotations

import sys

__all__ = ["add_tls"]


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
