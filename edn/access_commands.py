"""``edn access``: tokens and per-topic grants of a role (:mod:`wsframework.access`).

    edn access token create NAME --at URL     prints NAME's new token, once
    edn access token delete NAME --at URL
    edn access grant PRINCIPAL PERMISSION TOPIC-PATTERN --at URL
    edn access revoke PRINCIPAL PERMISSION TOPIC-PATTERN --at URL
    edn access list --at URL [--json]

Each needs the admin credential (``--admin-token`` or $EDN_ADMIN_TOKEN), as every admin
command; a role's tokens and grants live in its own store, so give them at each role that
must know them (the dispatcher for publishers, each server for subscribers): make a token
at one role, then ``edn access token create NAME --value TOKEN`` at the others.
"""
from __future__ import annotations

import json

from wsframework.access.store import PERMISSIONS

__all__ = ["add_access"]


def _common(p):
    p.add_argument("--at", required=True, help="the role's base URL")
    p.add_argument("--admin-token", default=None)


def add_access(sub):
    p = sub.add_parser("access", help="access tokens and per-topic permissions of a role")
    asub = p.add_subparsers(dest="access_command", required=True)
    token = asub.add_parser("token", help="make or delete a principal's access token")
    tsub = token.add_subparsers(dest="token_command", required=True)
    create = tsub.add_parser("create", help="a new token for NAME (printed once; replaces "
                                            "its old one)")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--value", default=None, metavar="TOKEN",
                        help="the token another role printed for NAME: the same principal at "
                             "this role too (default: a new token)")
    create.add_argument("--password-digest", action="store_true",
                        help="also keep the token sealed under the role's key file, so a "
                             "wsse:UsernameToken may send it as a PasswordDigest (otherwise "
                             "only its SHA-256 digest is stored, and PasswordDigest is refused)")
    _common(create)
    create.set_defaults(func=cmd_token_create)
    delete = tsub.add_parser("delete", help="delete NAME's token")
    delete.add_argument("name", metavar="NAME")
    _common(delete)
    delete.set_defaults(func=cmd_token_delete)
    for verb, helptext in (("grant", "give PRINCIPAL PERMISSION on the topics PATTERN matches"),
                           ("revoke", "take a grant back")):
        g = asub.add_parser(verb, help=helptext)
        g.add_argument("principal", metavar="PRINCIPAL",
                       help="a certificate's common name, or a token's name")
        g.add_argument("permission", metavar="PERMISSION", choices=PERMISSIONS,
                       help=" | ".join(PERMISSIONS))
        g.add_argument("pattern", metavar="TOPIC-PATTERN",
                       help="topics it covers: * any characters, ? one (e.g. 'stocks.*', '*')")
        _common(g)
        g.set_defaults(func=cmd_grant if verb == "grant" else cmd_revoke)
    listing = asub.add_parser("list", help="the grants and the names that have a token")
    _common(listing)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)


def _client(args):
    from edn.admin_commands import admin_client
    return admin_client(args)


def cmd_token_create(args) -> int:
    from wsframework.access import CreateAccessToken
    response = _client(args).call(CreateAccessToken(
        Name=args.name, Token=args.value, PasswordDigest=args.password_digest or None))
    print(response.Token)
    return 0


def cmd_token_delete(args) -> int:
    from wsframework.access import DeleteAccessToken
    print(f"deleted the token of {_client(args).call(DeleteAccessToken(Name=args.name)).Name}")
    return 0


def cmd_grant(args) -> int:
    from wsframework.access import GrantAccess
    g = _client(args).call(GrantAccess(Principal=args.principal, Permission=args.permission,
                                       Pattern=args.pattern))
    print(f"granted {g.Principal} {g.Permission} on {g.Pattern}")
    return 0


def cmd_revoke(args) -> int:
    from wsframework.access import RevokeAccess
    g = _client(args).call(RevokeAccess(Principal=args.principal, Permission=args.permission,
                                        Pattern=args.pattern))
    print(f"revoked {g.Principal} {g.Permission} on {g.Pattern}")
    return 0


def cmd_list(args) -> int:
    from wsframework.access import ListAccess
    response = _client(args).call(ListAccess())
    grants = [{"principal": g.Principal, "permission": g.Permission, "pattern": g.Pattern}
              for g in (response.Grant or [])]
    tokens = list(response.TokenName or [])
    digest = list(response.DigestTokenName or [])
    if args.json:
        print(json.dumps({"grants": grants, "tokens": tokens, "password_digest_tokens": digest}))
        return 0
    for g in grants:
        print(f"{g['principal']}\t{g['permission']}\t{g['pattern']}")
    print(f"tokens: {', '.join(tokens) if tokens else '(none)'}")
    if digest:
        print(f"  kept sealed for PasswordDigest: {', '.join(digest)}")
    return 0
