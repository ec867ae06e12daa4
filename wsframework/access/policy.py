"""Who may do what on a role (``edn serve --access``):

* ``open`` -- today's behaviour: anyone who reaches a topic may publish to it and subscribe;
  a credential, when sent, must still be right, and names the subscription's owner.
* ``closed`` -- every publication and Subscribe needs a principal
  (:mod:`.identity`) holding ``publish`` or ``subscribe`` on the topic (or ``admin``), from
  the grants of :mod:`.store`.

The holder of the network credential (the ``adm:AdminToken`` header, with a member
certificate where the role serves mutual TLS) is :data:`NETWORK`: it may do everything, as
the network's own members and its operator must.
"""
from __future__ import annotations

from ..admin.endpoint import carries_credential
from ..exceptions import AccessDenied
from .identity import Identifier
from .store import AccessStore

__all__ = ["ACCESS_MODES", "NETWORK", "ON_BEHALF_QNAME", "AccessPolicy", "on_behalf_header"]

ACCESS_MODES = ("open", "closed")
NETWORK = "#network"  # not a principal name anyone can hold (names start alphanumeric)
ACCESS_NS = "urn:wsframework:access"
#: the header a member forwarding a request names its requester with (empty: nobody);
#: believed only from the network (the network credential)
ON_BEHALF_QNAME = f"{{{ACCESS_NS}}}OnBehalfOf"


def on_behalf_header(principal: str | None):
    """The header naming ``principal`` (None or the network: nobody) as a forward's requester."""
    from lxml import etree
    element = etree.Element(ON_BEHALF_QNAME, nsmap={"acc": ACCESS_NS})
    element.text = principal if principal not in (None, NETWORK) else ""
    return element


class AccessPolicy:
    def __init__(self, mode: str, store: AccessStore, admin_token: str,
                 identifier: Identifier | None = None):
        if mode not in ACCESS_MODES:
            raise ValueError(f"access is one of {', '.join(ACCESS_MODES)}, not {mode!r}")
        self.mode = mode
        self.store = store
        self._token = admin_token
        self.identifier = identifier or Identifier(store)

    def principal(self, message) -> str | None:
        """The message's principal (:data:`NETWORK` for the network credential), None for
        none; AccessDenied for a credential that is wrong."""
        if carries_credential(message, self._token):
            return NETWORK
        return self.identifier.principal(message)

    def acting(self, message, principal: str | None) -> str | None:
        """Who the request is for: a member's forward names its requester
        (:data:`ON_BEHALF_QNAME`), anyone else acts for itself."""
        if principal != NETWORK:
            return principal
        header = message.header(ON_BEHALF_QNAME)
        if header is None:
            return NETWORK
        text = (header.text or "").strip()
        return text if text and len(text) <= 128 and not len(header) else None

    def require(self, message, permission: str, topic: str) -> str | None:
        """The principal that may ``permission`` on ``topic``; AccessDenied if none may."""
        principal = self.principal(message)
        if self.mode == "open" or principal == NETWORK:
            return principal
        if principal is None:
            raise AccessDenied(f"{permission} on topic {topic!r} needs a principal: a client "
                               f"certificate, a token (Authorization: Bearer) or a "
                               f"wsse:UsernameToken")
        if (self.store.allowed(principal, permission, topic)
                or self.store.allowed(principal, "admin", topic)):
            return principal
        raise AccessDenied(f"{principal} may not {permission} on topic {topic!r}")

    def administers(self, principal: str, topic: str) -> bool:
        """Whether ``principal`` holds ``admin`` on ``topic``: it may create and delete it
        (:meth:`AdminEndpoint.delegate_topics <wsframework.admin.AdminEndpoint>`)."""
        return principal == NETWORK or self.store.allowed(principal, "admin", topic)

    def may_manage(self, principal: str | None, owner: str | None, topic: str) -> bool:
        """Whether ``principal`` may renew, read or end a subscription ``owner`` made on
        ``topic``: its owner, the network, or an ``admin`` of the topic. A subscription
        made without a principal is managed by its identifier alone."""
        if owner is None or principal == NETWORK:
            return True
        if principal is None:
            return False
        return principal == owner or self.store.allowed(principal, "admin", topic)
