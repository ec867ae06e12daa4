"""The ``edn:EventBatch`` a channel posts to a server: serialized events spliced into one
body, sent to the topic's address with the action ``route_manager.protocol.EVENT_BATCH_ACTION``.

A channel sends many batches to one address and topic: :class:`BatchTemplate` builds that
envelope once (headers, credential, the batch element's attributes) and then makes each
batch by joining bytes -- a fresh ``wsa:MessageID``, the ``FirstSeq`` of a logged batch and
the events -- instead of parsing the events into a tree and serializing it again (~1 us
against ~360 us for a 64-event batch). The events are lxml's own serializations of parsed
elements (well-formed, with their namespace declarations); the spliced values are a UUID
and an integer, so the result is the same document the tree would have given.
"""
from __future__ import annotations

import uuid
from typing import Iterable

from lxml import etree

from wsframework import ns
from matchers.vocabulary import EDN
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import ADMIN_TOKEN_QNAME
from wsframework.soap import SoapVersion, build_envelope

from ..protocol import BATCH_DISPATCHER, BATCH_FIRST_SEQ

__all__ = ["BatchTemplate", "batch_envelope"]


class BatchTemplate:
    """The envelope of every batch for one ``topic`` at one server ``address``."""

    def __init__(self, soap_version: SoapVersion, address: str, topic: str,
                 credential: str | None = None, *, dispatcher: str | None = None):
        """``credential`` (the network's admin token) goes along as ``adm:AdminToken``:
        servers take event batches from the dispatcher only. With ``dispatcher`` (the
        durable log's id) each batch carries ``protocol.BATCH_DISPATCHER`` and the
        ``BATCH_FIRST_SEQ`` given to :meth:`render`."""
        self.logged = dispatcher is not None
        # Placeholders, random per template so that no address, topic or credential can
        # contain them; each is found by its last occurrence (the body comes last).
        id_mark = f"urn:uuid:{uuid.uuid4()}"
        seq_mark = str(uuid.uuid4().int)
        body = etree.Element(f"{{{EDN}}}EventBatch", nsmap={"edn": EDN})
        body.set("Topic", topic)
        if self.logged:
            body.set(BATCH_DISPATCHER, dispatcher)
            body.set(BATCH_FIRST_SEQ, seq_mark)
        body.text = id_mark
        url = f"{address}/topics/{topic}"
        headers = request_headers(WsaVersion.WSA10, url, EVENT_BATCH_ACTION,
                                  message_id=id_mark)
        if credential is not None:
            token = etree.Element(ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
            token.text = credential
            headers.append(token)
        whole = build_envelope(soap_version, body, headers)
        head, _, tail = whole.rpartition(b">%s<" % id_mark.encode())
        before_id, _, after_id = head.rpartition(id_mark.encode())
        if not tail or not before_id:
            raise ValueError("could not prepare the batch envelope")
        self._parts = [before_id, None, after_id + b">", None, b"<" + tail]
        if self.logged:
            marker = f'{BATCH_FIRST_SEQ}="{seq_mark}"'.encode()
            start, _, end = after_id.rpartition(marker)
            if not start:
                raise ValueError("could not prepare the batch envelope")
            self._seq_parts = (start + BATCH_FIRST_SEQ.encode() + b'="', b'"' + end + b">")

    def render(self, events: Iterable[bytes], first_seq: int | None = None) -> bytes:
        """One envelope carrying ``events`` (serialized elements), with a new MessageID."""
        message_id = f"urn:uuid:{uuid.uuid4()}".encode()
        if self.logged:
            if first_seq is None:
                raise ValueError("a logged batch needs its FirstSeq")
            start, end = self._seq_parts
            return b"".join((self._parts[0], message_id, start, b"%d" % first_seq, end,
                             b"".join(events), self._parts[4]))
        return b"".join((self._parts[0], message_id, self._parts[2], b"".join(events),
                         self._parts[4]))


def batch_envelope(soap_version: SoapVersion, address: str, topic: str,
                   events: Iterable[bytes], credential: str | None = None, *,
                   dispatcher: str | None = None, first_seq: int | None = None) -> bytes:
    """One envelope carrying ``events`` for ``topic`` at ``address`` (see
    :class:`BatchTemplate`); ``dispatcher`` and ``first_seq`` (both or neither) mark a
    batch from the durable log."""
    if (dispatcher is None) != (first_seq is None):
        dispatcher = first_seq = None
    template = BatchTemplate(soap_version, address, topic, credential, dispatcher=dispatcher)
    return template.render(events, first_seq)
