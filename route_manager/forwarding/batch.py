"""The ``edn:EventBatch`` a channel posts to a server: serialized events spliced into one
body, sent to the topic's address with the action ``ns.EDN_EVENT_BATCH_ACTION``."""
from __future__ import annotations

from typing import Iterable

from lxml import etree

from wsframework import ns
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import ADMIN_TOKEN_QNAME
from wsframework.soap import SoapVersion, build_envelope

from ..edn_wire import BATCH_DISPATCHER, BATCH_FIRST_SEQ


def batch_envelope(soap_version: SoapVersion, address: str, topic: str,
                   events: Iterable[bytes], credential: str | None = None, *,
                   dispatcher: str | None = None, first_seq: int | None = None) -> bytes:
    """One envelope carrying ``events`` (serialized elements) for ``topic`` at ``address``;
    ``credential`` (the network's admin token) goes along as ``adm:AdminToken``: servers take
    event batches from the dispatcher only. ``dispatcher`` and ``first_seq`` (both or neither)
    mark a batch from the durable log (``edn_wire.BATCH_DISPATCHER``, ``BATCH_FIRST_SEQ``)."""
    parts = b"".join(events)
    marks = b""
    if dispatcher is not None and first_seq is not None:
        marks = b' %s="%s" %s="%d"' % (BATCH_DISPATCHER.encode(), _attr(dispatcher),
                                       BATCH_FIRST_SEQ.encode(), first_seq)
    body = etree.fromstring(b'<edn:EventBatch xmlns:edn="%s" Topic="%s"%s>%s</edn:EventBatch>'
                            % (ns.EDN.encode(), _attr(topic), marks, parts))
    url = f"{address}/topics/{topic}"
    headers = request_headers(WsaVersion.WSA10, url, ns.EDN_EVENT_BATCH_ACTION)
    if credential is not None:
        token = etree.Element(ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        token.text = credential
        headers.append(token)
    return build_envelope(soap_version, body, headers)


def _attr(value: str) -> bytes:
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")).encode()
