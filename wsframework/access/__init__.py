"""Principals and per-topic permissions: tokens and grants (:mod:`.store`), who sent a
message (:mod:`.identity`), who may do what (:mod:`.policy`), and their admin messages
(:mod:`.contracts`, served by :class:`AccessAdmin`)."""
from __future__ import annotations

import functools

from .contracts import (CreateAccessToken, CreateAccessTokenResponse, DeleteAccessToken,
                        DeleteAccessTokenResponse, GrantAccess, GrantAccessResponse,
                        ListAccess, ListAccessResponse, RevokeAccess, RevokeAccessResponse,
                        AccessGrant)
from .identity import Identifier
from .policy import ACCESS_MODES, NETWORK, ON_BEHALF_QNAME, AccessPolicy, on_behalf_header
from .store import PERMISSIONS, AccessRefused, AccessStore, Grant

__all__ = ["ACCESS_MODES", "NETWORK", "ON_BEHALF_QNAME", "on_behalf_header", "PERMISSIONS", "AccessPolicy", "AccessStore", "AccessAdmin",
           "AccessRefused", "Grant", "Identifier"]


class AccessAdmin:
    """Serves the access messages on a role's admin endpoint."""

    def __init__(self, endpoint, store: AccessStore):
        self.store = store
        endpoint.register(CreateAccessToken, self._create_token)
        endpoint.register(DeleteAccessToken, self._delete_token)
        endpoint.register(GrantAccess, self._grant)
        endpoint.register(RevokeAccess, self._revoke)
        endpoint.register(ListAccess, self._list)

    def _create_token(self, request, message):
        token = _refused(functools.partial(self.store.create_token,
                                           password_digest=bool(request.PasswordDigest)),
                         request.Name, request.Token)
        return CreateAccessTokenResponse(Name=request.Name, Token=token)

    def _delete_token(self, request, message):
        _refused(self.store.delete_token, request.Name)
        return DeleteAccessTokenResponse(Name=request.Name)

    def _grant(self, request, message):
        grant = _refused(self.store.grant, request.Principal, request.Permission, request.Pattern)
        return GrantAccessResponse(Principal=grant.principal, Permission=grant.permission,
                                   Pattern=grant.pattern)

    def _revoke(self, request, message):
        grant = _refused(self.store.revoke, request.Principal, request.Permission, request.Pattern)
        return RevokeAccessResponse(Principal=grant.principal, Permission=grant.permission,
                                    Pattern=grant.pattern)

    def _list(self, request, message):
        return ListAccessResponse(
            Grant=[AccessGrant(Principal=g.principal, Permission=g.permission, Pattern=g.pattern)
                   for g in self.store.grants()],
            TokenName=self.store.token_names(), DigestTokenName=self.store.digest_token_names())


def _refused(action, *args):
    from ..admin import contracts
    from ..exceptions import sender_fault
    try:
        return action(*args)
    except AccessRefused as exc:
        raise sender_fault(str(exc), contracts.FAULT_INVALID_REQUEST) from None
