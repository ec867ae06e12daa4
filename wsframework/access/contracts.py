"""The access administration messages (admin namespace, the network credential required)::

    CreateAccessToken {Name, Token?, PasswordDigest?} -> CreateAccessTokenResponse {Name, Token}
    DeleteAccessToken {Name}                      -> DeleteAccessTokenResponse {Name}
    GrantAccess  {Principal, Permission, Pattern} -> GrantAccessResponse  {the grant}
    RevokeAccess {Principal, Permission, Pattern} -> RevokeAccessResponse {the grant}
    ListAccess   {}                      -> ListAccessResponse {Grant*, TokenName*, DigestTokenName*}

A token is answered once, in the CreateAccessTokenResponse; the role keeps its digest, and
with ``PasswordDigest`` true also the token sealed under its key file, for
``wsse:PasswordDigest`` (:mod:`.sealing`).
"""
from __future__ import annotations

from .. import ns
from ..admin.model import Boolean, Contract, Unicode, optional, repeated, required
from ..admin.registry import register_operation

__all__ = ["CreateAccessToken", "CreateAccessTokenResponse", "DeleteAccessToken",
           "DeleteAccessTokenResponse", "GrantAccess", "GrantAccessResponse", "RevokeAccess",
           "RevokeAccessResponse", "ListAccess", "ListAccessResponse", "AccessGrant",
           "OPERATIONS"]

_Text = Unicode.customize(min_len=1, max_len=256, min_occurs=1, nillable=False)


class CreateAccessToken(Contract):
    """``Token``: give the token another role made for this name (else a new one);
    ``PasswordDigest``: keep it sealed too, so ``wsse:PasswordDigest`` can be checked."""

    __namespace__ = ns.ADMIN
    _type_info = [("Name", _Text), ("Token", optional(Unicode)),
                  ("PasswordDigest", optional(Boolean))]


class CreateAccessTokenResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", _Text), ("Token", required(Unicode))]


class DeleteAccessToken(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", _Text)]


class DeleteAccessTokenResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Name", _Text)]


_GRANT = [("Principal", _Text), ("Permission", _Text), ("Pattern", _Text)]


class AccessGrant(Contract):
    """One ``<adm:Grant>`` of a ListAccessResponse."""

    __namespace__ = ns.ADMIN
    _type_info = list(_GRANT)


class GrantAccess(Contract):
    __namespace__ = ns.ADMIN
    _type_info = list(_GRANT)


class GrantAccessResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = list(_GRANT)


class RevokeAccess(Contract):
    __namespace__ = ns.ADMIN
    _type_info = list(_GRANT)


class RevokeAccessResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = list(_GRANT)


class ListAccess(Contract):
    __namespace__ = ns.ADMIN
    _type_info = []


class ListAccessResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Grant", repeated(AccessGrant)), ("TokenName", repeated(Unicode)),
                  ("DigestTokenName", repeated(Unicode))]


OPERATIONS = [
    register_operation(CreateAccessToken, CreateAccessTokenResponse),
    register_operation(DeleteAccessToken, DeleteAccessTokenResponse),
    register_operation(GrantAccess, GrantAccessResponse),
    register_operation(RevokeAccess, RevokeAccessResponse),
    register_operation(ListAccess, ListAccessResponse),
]
