"""Client side of the admin messages (used by ``edn topic`` and by tests)."""
from __future__ import annotations

from lxml import etree
from .. import ns

from ..client import SoapClient
from . import contracts
from .codec import parse_response, render
from .registry import action_for


class AdminClient:
    """``token``: the network credential (the ``adm:AdminToken`` header); None sends none,
    for a principal that administers topics by its grant (its credential travels with the
    transport: a bearer token or a client certificate)."""

    def __init__(self, base_url: str, token: str | None, *, transport=None,
                 soap_client: SoapClient | None = None):
        self.base_url = base_url.rstrip("/")
        self.address = self.base_url + "/admin"
        self.token = token
        self.client = soap_client or SoapClient(transport)

    def call(self, request):
        """Send any admin contract instance; returns the parsed response contract."""
        element = render(request)
        headers = []
        if self.token is not None:
            token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
            token.text = self.token
            headers.append(token)
        name = etree.QName(element)
        reply = self.client.call(self.address, action_for(name.localname, name.namespace),
                                 element, headers=headers)
        return parse_response(reply.body)

    def create_topic(self, name: str, matcher: str | None = None,
                     options: etree._Element | None = None) -> dict:
        r = self.call(contracts.CreateTopic(Name=name, Matcher=matcher, Options=options))
        return {"name": r.Name, "matcher": r.Matcher, "address": r.Address}

    def delete_topic(self, name: str) -> str:
        return self.call(contracts.DeleteTopic(Name=name)).Name

    def list_topics(self, prefix: str | None = None) -> list[dict]:
        r = self.call(contracts.ListTopics(Prefix=prefix))
        return [{"name": t.Name, "matcher": t.Matcher, "address": t.Address,
                 "filters": t.FilterCount} for t in (r.Topic or [])]
