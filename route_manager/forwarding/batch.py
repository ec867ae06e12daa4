"""The ``edn:EventBatch`` a channel posts to a server: serialized events spliced into one
body, sent to the topic's address with the action ``ns.EDN_EVENT_BATCH_ACTION``."""
from __future__ import annotations

from typing import Iterable

from lxml import etree

from wsframework import ns
from wsframework.addressing import WsaVersion, request_headers
from wsframework.soap import SoapVersion, build_envelope



def batch_envelope(soap_version: SoapVersion, address: str, topic: str,
                   events: Iterable[bytes]) -> bytes:
    """One envelope carrying ``events`` (serialized elements) for ``topic`` at ``address``."""
    parts = b"".join(events)
    body = etree.fromstring(b'<edn:EventBatch xmlns:edn="%s" Topic="%s">%s</edn:EventBatch>'
                            % (ns.EDN.encode(), _attr(topic), parts))
    url = f"{address}/topics/{topic}"
    return build_envelope(soap_version, body,
                          request_headers(WsaVersion.WSA10, url, ns.EDN_EVENT_BATCH_ACTION))


def _attr(value: str) -> bytes:
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")).encode()
