"""Hostile input against every role on real processes: ``edn bench fuzz [--quick] [--json]``.

A source, a dispatcher and subscription servers (``edn serve``, gunicorn) are started on
loopback with the product's launcher (:mod:`edn.localnet`), plus a notification sink. A valid
session is then recorded against them (Subscribe in every filter dialect and both WS-Eventing
versions, Renew, GetStatus, Unsubscribe, Publish, event batches, admin and EDN-wire messages);
those messages are the seeds. Then ``messages`` fuzzed messages are sent, spread over the
roles, until they are all sent or ``deadline_s`` has passed:

* XML-aware mutations of a seed (hostile text or attributes in a random element, elements
  removed, duplicated, renamed or nested thousands deep, a wrong admin token);
* byte mutations (flips, cuts, splices, DOCTYPEs with entities, control characters);
* wrong HTTP metadata on a valid seed (content type, SOAPAction, path);
* garbage bodies;
* malformed HTTP framing over raw sockets: bad chunk sizes, duplicate or contradictory
  Content-Length, oversized headers, garbage request lines, a body cut short.

Every answer is classified (:func:`classify`): ``2xx``, a SOAP ``sender_fault`` or
``receiver_fault`` (the most frequent Receiver faults by subcode and reason are listed), a ``bare_4xx`` (no SOAP, no HTML), ``html`` (an HTML body: must stay 0),
``other`` (anything else), ``no_answer`` (the server closed a raw connection without a
word), ``connection_error`` and ``timeout``. ``http_500_malformed`` counts HTTP 500 answers to
a fuzzed message that the SOAP bindings do not prescribe (must stay 0: see :func:`spec_500`);
``http_500_by_spec`` the others (every SOAP 1.1 fault, VersionMismatch, the specs' Receiver
faults such as ``wse:UnableToRenew``). Per process: those counts, whether it is alive and still
answering ``/health`` and a valid request at the end, its RSS (gunicorn master and workers,
from ``/proc``) before and after, worker processes replaced meanwhile, and the subscriptions
the fuzz created. The first few requests of every bad outcome are kept (``examples``) as
reproducers.

Message ``i`` is drawn from ``random.Random(seed * 1_000_003 + i)``: with the same seeds, a
run is repeatable message by message (the seeds' message IDs differ between runs).
"""
from __future__ import annotations

import http.client
import itertools
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from lxml import etree

TOKEN = "fuzz-bench-token"
Q = "urn:quotes"
_ROLE_WEIGHTS = {"source": 0.35, "server": 0.35, "dispatcher": 0.30}
OUTCOMES = ("2xx", "sender_fault", "receiver_fault", "bare_4xx", "html", "other", "no_answer",
            "connection_error", "timeout")
BAD_OUTCOMES = ("html", "other", "timeout", "connection_error")
_EXAMPLES_PER_KIND = 5


# -- messages --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Message:
    """One HTTP POST of a SOAP message to a process (``target``: a key of the processes)."""

    target: str
    path: str
    content_type: str
    soap_action: str | None
    body: bytes
    kind: str                # subscribe, renew, getstatus, unsubscribe, publish, admin, ...
    mutation: str = "seed"   # how it was fuzzed ("seed": sent as recorded)
    headers: tuple = ()      # extra or replacing HTTP headers (name, value)

    @property
    def malformed(self) -> bool:
        return self.mutation != "seed"

    def http_headers(self) -> dict[str, str]:
        from wsframework.transport.base import soap_http_headers
        headers = soap_http_headers(self.content_type, self.soap_action)
        for name, value in self.headers:
            if value is None:
                headers.pop(name, None)
            else:
                headers[name] = value
        return headers


def _kind_of(action: str | None, path: str) -> str:
    if path.rstrip("/").endswith("/admin"):
        local = (action or "").rsplit("/", 1)[-1]
        return "edn-wire" if local in _EDN_WIRE else "admin"
    local = (action or "").rsplit("/", 1)[-1]
    return {"Subscribe": "subscribe", "Renew": "renew", "GetStatus": "getstatus",
            "Unsubscribe": "unsubscribe", "EventBatch": "event-batch"}.get(local, "publish")


_EDN_WIRE = {"UpdateSummary", "PeerUpdate", "ExportSubscriptions", "ImportSubscriptions",
             "RegisterServer", "ListServers", "ListRoutes", "MoveSubscriptions", "Repartition"}


class Recorder:
    """A transport that records every message it carries (as a :class:`Message` of the
    process whose base URL the address starts with) and passes it on."""

    def __init__(self, inner, bases: dict[str, str]):
        self.inner = inner
        self.bases = {base.rstrip("/"): name for base, name in bases.items()}
        self.messages: list[Message] = []

    def post(self, url, payload, content_type, soap_action=None):
        for base, name in sorted(self.bases.items(), key=lambda item: -len(item[0])):
            if url == base or url.startswith(base + "/"):
                path = url[len(base):] or "/"
                self.messages.append(Message(name, path, content_type, soap_action, payload,
                                             _kind_of(soap_action, path)))
                break
        return self.inner.post(url, payload, content_type, soap_action)

    def close(self):
        self.inner.close()


def quote_event(price, symbol: str = "ACME") -> etree._Element:
    return etree.fromstring(f'<q:quote xmlns:q="{Q}" symbol="{symbol}"><q:symbol>{symbol}'
                            f'</q:symbol><q:price>{price}</q:price></q:quote>')


def record_seeds(transport, *, token: str, sink_url: str, source: str | None = None,
                 servers: dict[str, str] | None = None, dispatcher: str | None = None,
                 grid_topic: str | None = "grid", d: int = 3) -> list[Message]:
    """A valid session against the given base URLs, recorded. ``source`` gets the topics
    ``stocks`` (XPath matcher) and ``boxes`` (R-tree engine); the servers' ``grid_topic`` must
    exist (created through the dispatcher)."""
    from route_manager import protocol as edn_wire
    from route_manager.grid import event_element, range_filter, schema_element
    from subscription_manager.client import EventingClient
    from wsframework import ns
    from matchers.vocabulary import MATCHER_RTREE_ENGINE, RANGES_DIALECT
    from route_manager.protocol import EVENT_BATCH_ACTION
    from wsframework.admin import AdminClient, contracts
    from wsframework.client import SoapClient
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.soap import SoapVersion

    servers = servers or {}
    bases = {url: name for name, url in servers.items()}
    if source:
        bases[source] = "source"
    if dispatcher:
        bases[dispatcher] = "dispatcher"
    rec = Recorder(transport, bases)

    def soft(call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except Exception:  # a seed that is refused is still a seed
            return None

    def session(client, topic_url, notify, **options):
        handle = soft(client.subscribe, topic_url, notify, **options)
        if handle is not None:
            soft(client.get_status, handle)
            soft(client.renew, handle, "PT2H")
        return handle

    lo, hi = [1.0] * d, [6.0] * d
    point = [3.0] * d
    if source:
        admin = AdminClient(source, token, transport=rec)
        soft(admin.create_topic, "stocks")
        soft(admin.create_topic, "boxes", MATCHER_RTREE_ENGINE, schema_element(d))
        soft(admin.list_topics)
        soft(admin.call, contracts.GetStats())
        stocks, boxes = f"{source}/topics/stocks", f"{source}/topics/boxes"
        cases = [
            ("2011", SoapVersion.SOAP12, stocks, {"filter": "q:price > 10", "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH10_DIALECT_2011}),
            ("2004", SoapVersion.SOAP11, stocks, {"filter": "//q:quote[q:price > 10]",
                                                  "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH10_DIALECT_2004}),
            ("2011", SoapVersion.SOAP12, stocks, {"filter": "q:price > 10 and q:symbol = 'ACME'",
                                                  "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH20_DIALECT_2011}),
            ("2011", SoapVersion.SOAP11, stocks, {"filter": f"{PUBLISH_ACTION} urn:other",
                                                  "dialect": ns.ACTION_DIALECT_DPWS11}),
            ("2004", SoapVersion.SOAP12, stocks, {"filter": PUBLISH_ACTION,
                                                  "dialect": ns.ACTION_DIALECT_DPWS2006}),
            ("2011", SoapVersion.SOAP12, boxes, {"filter": range_filter(lo, hi),
                                                 "dialect": RANGES_DIALECT}),
            ("2004", SoapVersion.SOAP12, boxes, {"filter": range_filter(lo, hi),
                                                 "dialect": RANGES_DIALECT}),
            ("2011", SoapVersion.SOAP12, stocks, {"expires": "2099-01-01T00:00:00Z"}),
            ("2004", SoapVersion.SOAP11, stocks, {"expires": "P1DT2H", "end_to": sink_url + "/end"}),
        ]
        handles = []
        for k, (version, soap, url, options) in enumerate(cases):
            client = EventingClient(version, transport=rec, soap_version=soap)
            options.setdefault("expires", "PT1H")
            handles.append((client, session(client, url, f"{sink_url}/fuzz/seed{k}", **options)))
        publisher = SoapClient(rec)
        soft(publisher.send, stocks, PUBLISH_ACTION, quote_event(42))
        soft(SoapClient(rec, soap_version=SoapVersion.SOAP11).send, stocks, PUBLISH_ACTION,
             quote_event(7, "GE"))
        soft(publisher.send, boxes, PUBLISH_ACTION, event_element(point, 1))
        client, handle = handles[0]
        if handle is not None:
            soft(client.unsubscribe, handle)
    for name, url in servers.items():
        admin = AdminClient(url, token, transport=rec)
        soft(admin.list_topics)
        soft(admin.call, contracts.GetStats())
        soft(admin.call, edn_wire.ExportSubscriptions(Topic=grid_topic))
        soft(admin.call, edn_wire.PeerUpdate(Server="fuzz-peer", Address="http://127.0.0.1:9/",
                                             Route=grid_topic, Load=3))
        for k, version in enumerate(("2011", "2004")):
            client = EventingClient(version, transport=rec)
            handle = session(client, f"{url}/topics/{grid_topic}", f"{sink_url}/fuzz/{name}-{k}",
                             filter=range_filter(lo, hi), dialect=RANGES_DIALECT,
                             expires="PT1H")
            if handle is not None and k:
                soft(client.unsubscribe, handle)
        # as the dispatcher sends it, with the network's credential
        credential = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        credential.text = token
        soft(SoapClient(rec).send, f"{url}/topics/{grid_topic}", EVENT_BATCH_ACTION,
             _batch(grid_topic, [point, hi], ns), [credential])
    if dispatcher:
        admin = AdminClient(dispatcher, token, transport=rec)
        soft(admin.call, contracts.GetStats())
        soft(admin.call, edn_wire.ListServers())
        soft(admin.call, edn_wire.ListRoutes())
        soft(admin.call, edn_wire.UpdateSummary(Server="fuzz-peer", Route=grid_topic,
                                                Generation=1, Load=1,
                                                Summary=etree.Element(edn_wire.SUMMARY)))
        publisher = SoapClient(rec)
        soft(publisher.send, f"{dispatcher}/topics/{grid_topic}", PUBLISH_ACTION,
             event_element(point, 2))
        soft(publisher.send, f"{dispatcher}/topics/{grid_topic}", PUBLISH_ACTION,
             _batch(grid_topic, [point, lo], ns))
    return rec.messages


def _batch(topic: str, points, ns) -> etree._Element:
    from matchers.vocabulary import EDN
    from route_manager.protocol import EVENT_BATCH
    from route_manager.grid import event_element
    body = etree.Element(EVENT_BATCH, nsmap={"edn": EDN})
    body.set("Topic", topic)
    for k, p in enumerate(points):
        body.append(event_element(p, 100 + k))
    return body


# -- mutations -------------------------------------------------------------------------------

def hostile_values(rng: random.Random) -> str:
    """A text value a hostile peer would put anywhere."""
    n = rng.choice((1, 5, 300, 5000))
    return rng.choice([
        "", " ", "-1", "0", "1e309", "NaN", "-0", "9" * n, "P" + "9" * n + "D", "PT" + "9" * n + "S",
        "9" * n + "-01-01T00:00:00Z", "0001-01-01T00:00:00-14:00", "9999-12-31T24:00:00+14:00",
        "P", "PT", "-P1D", "P1Y2M3DT4H5M6.7S", "2024-02-30T00:00:00Z", "PT0S", "P0D",
        "(" * n + "1" + ")" * n, "//*" * min(n, 400), "x0 in [1, 2]" + " and x0 > 1" * min(n, 400),
        "re:test(string(.), '^(a+)+$')", "count(//*) > 0", "price" + "[. > 1]" * min(n, 1000),
        "//q:quote[q:price > 3" * min(n, 300) + "]" * min(n, 300),
        "some $a in //* satisfies every $b in //* satisfies true()", "x0 in [5, 1]",
        "x0 in [-1e308, 1e308] and x9 > 3", "nosuch:function()", "'unterminated", "1 div 0",
        "http://169.254.169.254\\@127.0.0.1/", "http://user:secret@127.0.0.1:9/x",
        "http://127.0.0.1:" + "9" * n + "/", "http://[::1/", "file:///etc/passwd",
        "urn:" + "a" * n, "\u202e\u00a0\u2003\ufeff", "\U0001f600" * min(n, 500), "&amp;&lt;",
        " fuzz-bench-token ", "fuzz-bench-token\u00a0", "a" * 70_000,
    ])


_NAMESPACES = ["http://www.w3.org/2003/05/soap-envelope", "http://schemas.xmlsoap.org/soap/envelope/",
               "http://www.w3.org/2005/08/addressing", "http://schemas.xmlsoap.org/ws/2004/08/addressing",
               "http://www.w3.org/2011/03/ws-evt", "http://schemas.xmlsoap.org/ws/2004/08/eventing",
               "urn:wsframework:admin", "urn:wsframework:edn", "urn:fuzz", ""]

_DOCTYPES = [
    b'<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>',
    b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>',
    b'<!DOCTYPE x SYSTEM "http://127.0.0.1:9/x.dtd">',
    b'<?xml-stylesheet href="http://127.0.0.1:9/x"?>',
]


def _xml_mutation(rng: random.Random, body: bytes) -> tuple[bytes, str]:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(body, parser)
    except etree.XMLSyntaxError:
        return _byte_mutation(rng, body)
    elements = [e for e in root.iter() if isinstance(e.tag, str)]
    target = rng.choice(elements)
    op = rng.choice(("text", "text", "text", "attribute", "remove", "duplicate", "rename",
                     "namespace", "nest", "children", "token"))
    if op == "text":
        target.text = _xml_safe(hostile_values(rng))
    elif op == "attribute":
        name = rng.choice(("Dialect", "Name", "BestEffort", "Mode", "Topic", "id", "mustUnderstand",
                           "{http://www.w3.org/2003/05/soap-envelope}mustUnderstand",
                           "{http://www.w3.org/2005/08/addressing}IsReferenceParameter"))
        target.set(name, _xml_safe(hostile_values(rng)))
    elif op == "remove" and target is not root:
        target.getparent().remove(target)
    elif op == "duplicate" and target is not root:
        import copy
        for _ in range(rng.choice((1, 2, 50))):
            target.addnext(copy.deepcopy(target))
    elif op == "rename":
        qname = etree.QName(target)
        target.tag = etree.QName(qname.namespace or None, rng.choice(
            ("Subscribe", "Renew", "Fault", "Body", "Header", "Envelope", "Filter", "Expires",
             "Identifier", "To", "Action", "MessageID", "ReplyTo", "x"))).text
    elif op == "namespace":
        namespace = rng.choice(_NAMESPACES)
        target.tag = etree.QName(namespace or None, etree.QName(target).localname).text
    elif op == "nest":
        depth = rng.choice((50, 300, 3000))
        inner = etree.SubElement(target, "{urn:fuzz}n")
        for _ in range(depth):
            inner = etree.SubElement(inner, "{urn:fuzz}n")
    elif op == "children":
        for k in range(rng.choice((10, 1000, 20000))):
            etree.SubElement(target, "{urn:fuzz}c").text = str(k)
    else:  # a wrong or odd admin token (and an odd credential anywhere else)
        token = root.find(".//{urn:wsframework:admin}AdminToken")
        (token if token is not None else target).text = rng.choice(
            ("", " " + TOKEN, TOKEN + "\n", TOKEN.upper(), TOKEN[:-1], TOKEN + "\u2003", "x" * 5000))
    return etree.tostring(root, xml_declaration=rng.random() < 0.5, encoding="utf-8"), f"xml-{op}"


def _xml_safe(text: str) -> str:
    return "".join(c for c in text if c in "\t\n\r" or (" " <= c and c not in "\ufffe\uffff"
                                                         and not "\ud800" <= c <= "\udfff"))


def _byte_mutation(rng: random.Random, body: bytes) -> tuple[bytes, str]:
    data = bytearray(body)
    op = rng.choice(("flip", "cut", "insert", "splice", "doctype", "control", "encoding",
                     "repeat", "delete"))
    if not data:
        data = bytearray(b"<")
    at = rng.randrange(len(data))
    if op == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif op == "cut":
        del data[at:]
    elif op == "insert":
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif op == "splice":
        end = min(len(data), at + rng.randint(1, 200))
        data[at:at] = data[at:end] * rng.choice((2, 10, 100))
    elif op == "doctype":
        decl_end = data.find(b"?>") + 2 if data.startswith(b"<?xml") else 0
        data[decl_end:decl_end] = rng.choice(_DOCTYPES)
        if rng.random() < 0.5:
            gt = data.rfind(b"</")
            if gt > 0:
                data[gt:gt] = rng.choice((b"&d;", b"&e;", b"&undefined;"))
    elif op == "control":
        data[at:at] = rng.choice((b"\x00", b"\x01", b"\xff\xfe", b"\xed\xa0\x80", b"\xc3", b"\x1b[0m"))
    elif op == "encoding":
        data = bytearray(rng.choice((b'<?xml version="1.0" encoding="utf-16"?>',
                                     b'<?xml version="1.0" encoding="ebcdic-cp-us"?>',
                                     b'<?xml version="1.1"?>', b"\xef\xbb\xbf", b"\xff\xfe"))
                         + (data[data.find(b"?>") + 2:] if data.startswith(b"<?xml") else data))
    elif op == "repeat":
        data = data * rng.choice((2, 3))
    else:
        end = min(len(data), at + rng.randint(1, 64))
        del data[at:end]
    return bytes(data), f"bytes-{op}"


def _metadata_mutation(rng: random.Random, message: Message) -> Message:
    op = rng.choice(("content-type", "no-content-type", "soapaction", "action-param", "path",
                     "version-swap"))
    if op == "content-type":
        ct = rng.choice(("text/html", "application/json", "text/xml; charset=utf-16",
                         "application/soap+xml; charset=ebcdic-cp-us", "multipart/related; boundary=x",
                         "application/soap+xml; action=", "*/*", "text/xml;;;", "x" * 3000))
        return replace(message, headers=(("Content-Type", ct),), mutation="http-" + op)
    if op == "no-content-type":
        return replace(message, headers=(("Content-Type", None),), mutation="http-" + op)
    if op == "soapaction":
        value = rng.choice(('"urn:nothing"', "", '"' + "a" * 5000 + '"', "unquoted", '"'))
        return replace(message, headers=(("SOAPAction", value),), mutation="http-" + op)
    if op == "action-param":
        return replace(message, content_type="application/soap+xml",
                       soap_action=rng.choice(("urn:x", "http://www.w3.org/2011/03/ws-evt/Renew",
                                               "a" * 3000)), mutation="http-" + op)
    if op == "path":
        path = rng.choice(("/", "/admin", "/topics/", "/topics/nosuch", "/topics/../admin",
                           "/topics/%00", "/subscriptions/x", "/" + "a" * 6000, "/topics/stocks?wsdl",
                           "//admin", "/topics/stocks/..%2fadmin"))
        return replace(message, path=path, mutation="http-" + op)
    swapped = "text/xml" if message.content_type.startswith("application") else "application/soap+xml"
    return replace(message, content_type=swapped, mutation="http-" + op)


def _garbage(rng: random.Random) -> tuple[bytes, str]:
    return rng.choice([
        (b"", "garbage-empty"),
        (bytes(rng.randrange(256) for _ in range(rng.choice((1, 100, 5000)))), "garbage-random"),
        (b'{"json": true}', "garbage-json"),
        (b"<html><body>hi</body></html>", "garbage-html"),
        (b"<" * 10000, "garbage-angles"),
        (b"<a>" * 20000, "garbage-deep"),
        (b'<?xml version="1.0"?>', "garbage-declaration"),
        (b"<s:Envelope xmlns:s='http://www.w3.org/2003/05/soap-envelope'/>", "garbage-empty-envelope"),
    ])


def mutate(rng: random.Random, seed: Message) -> Message:
    """A fuzzed variant of ``seed`` (sometimes ``seed`` itself)."""
    roll = rng.random()
    if roll < 0.05:
        return seed
    if roll < 0.55:
        body, how = _xml_mutation(rng, seed.body)
        return replace(seed, body=body, mutation=how)
    if roll < 0.82:
        body, how = _byte_mutation(rng, seed.body)
        return replace(seed, body=body, mutation=how)
    if roll < 0.94:
        return _metadata_mutation(rng, seed)
    body, how = _garbage(rng)
    return replace(seed, body=body, mutation=how)


# -- malformed HTTP framing (raw sockets) ------------------------------------------------------

def raw_request(rng: random.Random, seed: Message) -> tuple[bytes, str]:
    """The bytes of a request whose HTTP framing is malformed, built around ``seed``."""
    body = seed.body
    ct = seed.http_headers().get("Content-Type", "text/xml")
    head = f"POST {seed.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ct}\r\n".encode()
    cases = {
        "bad-chunk-size": lambda: head + b"Transfer-Encoding: chunked\r\n\r\n" + rng.choice(
            (b"zz", b"-1", b"ffffffffffffffffffffffff", b"1;\x00", b"", b" 5", b"0x10"))
            + b"\r\n" + body[:64] + b"\r\n0\r\n\r\n",
        "chunk-longer-than-data": lambda: head + b"Transfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % (len(body) + 1000) + body + b"\r\n",
        "chunk-no-terminator": lambda: head + b"Transfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n" % len(body) + body,
        "duplicate-content-length": lambda: head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
            % (len(body), len(body) + rng.choice((0, 1))) + body,
        "content-length-and-chunked": lambda: head + b"Content-Length: %d\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % (len(body), len(body)) + body + b"\r\n0\r\n\r\n",
        "bad-content-length": lambda: head + b"Content-Length: " + rng.choice(
            (b"-5", b"abc", b"1e3", b"99999999999999999999999", b"+5", b" ", b"0x10", b"5, 5"))
            + b"\r\n\r\n" + body,
        "short-body": lambda: head + b"Content-Length: %d\r\n\r\n" % (len(body) + 500) + body,
        "huge-header": lambda: head + b"X-Big: " + b"a" * rng.choice((9 * 1024, 64 * 1024))
            + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        "many-headers": lambda: head + b"".join(b"X-%d: a\r\n" % k for k in range(rng.choice((101, 1000))))
            + b"Content-Length: %d\r\n\r\n" % len(body) + body,
        "garbage-request-line": lambda: rng.choice((
            b"GARBAGE\r\n\r\n", b"\r\n\r\n", b"POST\r\n\r\n", b"POST / HTTP/9.9\r\n\r\n",
            b"post / HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64),  # a TLS ClientHello
            b"POST / HTTP/1.1 extra\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            bytes(rng.randrange(256) for _ in range(200)) + b"\r\n\r\n")),
        "bad-header-line": lambda: head + rng.choice((
            b"NoColon\r\n", b"Bad Name: x\r\n", b" folded: x\r\n", b"X-Null: a\x00b\r\n",
            b"Content-Length : 5\r\n", b":\r\n", b"X: \xff\xfe\r\n"))
            + b"Content-Length: %d\r\n\r\n" % len(body) + body,
        "transfer-encoding": lambda: head + b"Transfer-Encoding: " + rng.choice(
            (b"gzip", b"chunked, chunked", b"identity", b"x" * 100, b"gzip, chunked"))
            + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "expect": lambda: head + b"Expect: " + rng.choice((b"100-continue", b"200-ok", b"x"))
            + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        "http10-no-length": lambda: head.replace(b"HTTP/1.1", b"HTTP/1.0") + b"\r\n" + body,
        "pipelined-garbage": lambda: head + b"Content-Length: %d\r\n\r\n" % len(body) + body
            + b"GARBAGE\r\n\r\n",
        "partial-request-line": lambda: b"POST /top",
    }
    how = rng.choice(sorted(cases))
    return cases[how](), how


# -- answers -----------------------------------------------------------------------------------

def _fault(body: bytes):
    """(SOAP version, fault) of an answer that is a SOAP fault envelope, else None."""
    from wsframework.soap import parse_envelope
    from wsframework.xmlparse import ParserLimits
    if not body:
        return None
    try:
        envelope = parse_envelope(body, ParserLimits(max_bytes=max(len(body), 1)))
    except Exception:
        return None
    fault = envelope.fault()
    return None if fault is None else (envelope.version, fault)


def classify(status: int, content_type: str | None, body: bytes) -> str:
    """The outcome of one answer: see the module's docstring."""
    from wsframework.exceptions import RECEIVER
    lowered = body[:4096].lower()
    if b"<html" in lowered or b"<!doctype html" in lowered or "html" in (content_type or "").lower():
        return "html"
    if 200 <= status < 300:
        return "2xx"
    found = _fault(body)
    if found is not None:
        return "receiver_fault" if found[1].code == RECEIVER else "sender_fault"
    if 400 <= status < 500:
        return "bare_4xx"
    return "other"


_SPEC_RECEIVER_NAMESPACES = ("http://schemas.xmlsoap.org/ws/2004/08/eventing",
                             "http://www.w3.org/2011/03/ws-evt",
                             "http://www.w3.org/2005/08/addressing",
                             "http://schemas.xmlsoap.org/ws/2004/08/addressing")


def spec_500(body: bytes) -> bool:
    """Whether an HTTP 500 answer is one the SOAP bindings prescribe: every SOAP 1.1 fault
    but a bare ``soap:Server`` (SOAP 1.1 HTTP binding, section 6.2), a SOAP 1.2
    VersionMismatch, MustUnderstand or DataEncodingUnknown (SOAP 1.2 part 2, table 20), or a
    Receiver fault the WS-Eventing or WS-Addressing specs define (``wse:UnableToRenew``...).
    Anything else (no SOAP, a generic Receiver fault, a SOAP 1.2 Sender fault) at 500 is the
    service failing on its input."""
    from wsframework.exceptions import RECEIVER, SENDER
    from wsframework.soap import SoapVersion
    found = _fault(body)
    if found is None:
        return False
    version, fault = found
    spec_subcode = any(s.startswith(tuple("{%s}" % n for n in _SPEC_RECEIVER_NAMESPACES))
                       for s in fault.subcodes)
    if fault.code == RECEIVER:
        return spec_subcode
    if fault.code == SENDER:
        return version is SoapVersion.SOAP11
    return True  # VersionMismatch, MustUnderstand, DataEncodingUnknown


def parse_raw_answer(data: bytes) -> tuple[int, str | None, bytes] | None:
    """Status, content type and body of the first HTTP response in ``data`` (None: none)."""
    while data.startswith(b"HTTP/1.1 1"):  # 100 Continue: the answer follows
        data = data.partition(b"\r\n\r\n")[2]
    if not data:
        return None
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, None, data
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().decode("latin-1")
    length = headers.get(b"content-length")
    body = rest[:int(length)] if length and length.isdigit() else rest
    return status, headers.get(b"content-type"), body


# -- the run ---------------------------------------------------------------------------------

class _Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[str, Counter] = {}
        self.examples: dict[str, list] = {}
        self.subscribed: Counter = Counter()
        self.sent: Counter = Counter()
        self.fault_reasons: Counter = Counter()

    def add(self, target: str, outcome: str, *, malformed: bool, status: int | None,
            request: bytes, mutation: str, answer: bytes = b"", subscribed: bool = False,
            index: int | None = None):
        with self.lock:
            counts = self.counts.setdefault(target, Counter())
            counts[outcome] += 1
            self.sent[target] += 1
            if subscribed:
                self.subscribed[target] += 1
            bad = outcome in BAD_OUTCOMES
            if outcome == "receiver_fault":
                self.fault_reasons[_reason(answer)] += 1
            if status == 500 and malformed:
                if spec_500(_answer_body(answer)):
                    counts["http_500_by_spec"] += 1
                else:
                    counts["http_500_malformed"] += 1
                    bad = True
            if bad or (outcome == "no_answer" and len(self.examples.get(
                    f"{target}:no_answer", ())) < 2):
                key = f"{target}:{outcome}" + (f":{status}" if status else "")
                kept = self.examples.setdefault(key, [])
                if len(kept) < _EXAMPLES_PER_KIND:
                    kept.append({"message": index, "mutation": mutation, "request": _shown(request),
                                 "answer": _shown(answer)})


def _reason(answer: bytes) -> str:
    """The fault's subcode and reason, shortened, of an answer as :class:`_Tally` keeps it
    (``STATUS CONTENT-TYPE\\nBODY``, or the raw bytes of a raw-socket exchange)."""
    found = _fault(_answer_body(answer))
    if found is None:
        return "?"
    fault = found[1]
    subcode = (fault.subcode or "").rsplit("}", 1)[-1]
    return f"{fault.code}{'/' + subcode if subcode else ''}: {fault.reason[:60]}"


def _answer_body(answer: bytes) -> bytes:
    if answer[:1].isdigit():
        return answer.partition(b"\n")[2]
    return (parse_raw_answer(answer) or (0, None, b""))[2]


def _shown(data: bytes, limit: int = 1200) -> str:
    text = data[:limit].decode("latin-1")
    return text + (f"... ({len(data)} bytes)" if len(data) > limit else "")


def _send_http(conns: dict, port: int, message: Message, timeout: float):
    """POST ``message`` over a kept-alive connection: (status, content type, body)."""
    conn = conns.get(port)
    if conn is None:
        conn = conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", message.path, message.body, message.http_headers())
        response = conn.getresponse()
        body = response.read()
        if response.will_close:
            conn.close()
            conns.pop(port, None)
        return response.status, response.getheader("Content-Type"), body
    except BaseException:
        conn.close()
        conns.pop(port, None)
        raise


def _send_raw(port: int, data: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before reading everything
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def fuzz_one(i: int, seed: int, by_target: dict[str, list[Message]], ports: dict[str, int],
             tally: _Tally, timeout: float, conns: dict, raw_share: float = 0.12) -> None:
    rng = random.Random(seed * 1_000_003 + i)

    def add(*args, **kwargs):
        tally.add(*args, index=i, **kwargs)
    target = _pick_target(rng, list(by_target))
    seed_message = rng.choice(by_target[target])
    port = ports[target]
    if rng.random() < raw_share:
        data, how = raw_request(rng, seed_message)
        try:
            answer = _send_raw(port, data, timeout)
        except socket.timeout:
            add(target, "timeout", malformed=True, status=None, request=data, mutation=how)
            return
        except OSError as exc:
            add(target, "connection_error", malformed=True, status=None, request=data,
                      mutation=how, answer=repr(exc).encode())
            return
        parsed = parse_raw_answer(answer)
        if parsed is None:
            add(target, "no_answer", malformed=True, status=None, request=data, mutation=how)
            return
        status, content_type, body = parsed
        outcome = "html" if b"<html" in answer.lower() else classify(status, content_type, body)
        add(target, outcome, malformed=True, status=status, request=data, mutation=how,
                  answer=answer)
        return
    message = mutate(rng, seed_message)
    request = (f"POST {message.path}\n{message.http_headers()}\n\n").encode() + message.body
    try:
        status, content_type, body = _send_http(conns, port, message, timeout)
    except (socket.timeout, TimeoutError):
        add(target, "timeout", malformed=message.malformed, status=None, request=request,
                  mutation=message.mutation)
        return
    except (OSError, http.client.HTTPException) as exc:
        add(target, "connection_error", malformed=message.malformed, status=None,
                  request=request, mutation=message.mutation, answer=repr(exc).encode())
        return
    outcome = classify(status, content_type, body)
    add(target, outcome, malformed=message.malformed, status=status, request=request,
              mutation=message.mutation, answer=b"%d %s\n" % (status, (content_type or "").encode())
              + body, subscribed=outcome == "2xx" and b"SubscribeResponse" in body)


def _pick_target(rng: random.Random, targets: list[str]) -> str:
    role_of = {t: ("server" if t not in ("source", "dispatcher") else t) for t in targets}
    per_role = Counter(role_of.values())
    weights = [_ROLE_WEIGHTS[role_of[t]] / per_role[role_of[t]] for t in targets]
    return rng.choices(targets, weights)[0]


def group_rss_mb(master: int) -> float:
    """Resident memory (VmRSS) of a gunicorn master and its workers, in MB."""
    total_kb = 0
    for pid in _group_pids(master):
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except OSError:
            pass
    return round(total_kb / 1024, 1)


def _group_pids(master: int) -> set[int]:
    """The gunicorn master ``master`` and its workers (its children)."""
    pids = {master}
    try:
        with open(f"/proc/{master}/task/{master}/children") as handle:
            pids.update(int(pid) for pid in handle.read().split())
    except OSError:
        pass
    return pids


def _held_subscriptions(base_url: str) -> int | None:
    from wsframework.admin import AdminClient
    from wsframework.transport import HttpTransport
    try:
        topics = AdminClient(base_url, TOKEN, transport=HttpTransport(timeout=(5.0, 20.0))).list_topics()
        return sum(int(t["filters"] or 0) for t in topics)
    except Exception:
        return None


def _answers(process, sink_url: str, topic: str | None) -> bool:
    """``/health`` is 200 and a valid request gets its valid answer."""
    import requests
    from subscription_manager.client import EventingClient
    from wsframework.admin import AdminClient
    from wsframework.transport import HttpTransport
    try:
        if requests.get(process.base_url + "/health", timeout=10).status_code != 200:
            return False
        transport = HttpTransport(timeout=(5.0, 20.0))
        if topic is None:
            AdminClient(process.base_url, TOKEN, transport=transport).list_topics()
        else:
            client = EventingClient("2011", transport=transport)
            handle = client.subscribe(f"{process.base_url}/topics/{topic}", sink_url + "/after",
                                      expires="PT5M")
            client.unsubscribe(handle)
        return True
    except Exception:
        return False


def measure(*, messages: int, deadline_s: float, servers: int = 2, threads: int = 4,
            timeout: float = 10.0, seed: int = 12, log=None) -> dict:
    from edn.localnet.network import LocalNetwork
    from edn.localnet.processes import ServerProcess
    from edn.sink import NotificationSink
    from wsframework.transport import HttpTransport

    log = log or (lambda *a: None)
    data_dir = Path(tempfile.mkdtemp(prefix="edn-bench-fuzz-"))
    quiet = ["--log-level", "critical"]
    sink = NotificationSink(keep_bodies=False).start()
    network = LocalNetwork(data_dir, [(f"s{k + 1:02d}", "rtree", 1) for k in range(servers)],
                           token=TOKEN, d=3, sink=sink, dispatcher_args=quiet)
    for process in network.servers.values():
        process.extra_args += quiet
    source = ServerProcess("source", data_dir=data_dir / "source", admin_token=TOKEN,
                           extra_args=quiet)
    processes = {"source": source, "dispatcher": network.dispatcher, **network.servers}
    try:
        source.start()
        network.start()
        network.create_topic("grid")
        transport = HttpTransport(timeout=(5.0, 30.0))
        seeds = record_seeds(transport, token=TOKEN, sink_url=sink.url, source=source.base_url,
                             servers={n: p.base_url for n, p in network.servers.items()},
                             dispatcher=network.dispatcher.base_url)
        by_target: dict[str, list[Message]] = {}
        for message in seeds:
            by_target.setdefault(message.target, []).append(message)
        ports = {name: p.port for name, p in processes.items()}
        rss_before = {name: group_rss_mb(p.proc.pid) for name, p in processes.items()}
        pids_before = {name: _group_pids(p.proc.pid) for name, p in processes.items()}
        held_before = {name: _held_subscriptions(p.base_url) for name, p in processes.items()
                       if name != "dispatcher"}
        log(f"fuzz: {len(seeds)} seeds over {sorted(by_target)}; {messages} messages, "
            f"deadline {deadline_s:.0f} s")
        tally = _Tally()
        counter = itertools.count()
        started = time.monotonic()
        deadline = started + deadline_s

        def worker():
            conns: dict = {}
            while time.monotonic() < deadline:
                i = next(counter)
                if i >= messages:
                    break
                try:
                    fuzz_one(i, seed, by_target, ports, tally, timeout, conns)
                except Exception as exc:  # a bug of this benchmark, not of the service
                    tally.add("bench", "other", malformed=False, status=None,
                              request=str(i).encode(), mutation="bench-error",
                              answer=repr(exc).encode())
            for conn in conns.values():
                conn.close()

        workers = [threading.Thread(target=worker, daemon=True, name=f"fuzz-{k}")
                   for k in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(deadline_s + timeout * 3 + 30)
        elapsed = time.monotonic() - started
        time.sleep(1.0)
        figures: dict = {
            "messages": sum(tally.sent.values()),
            "messages_asked": messages,
            "seconds": round(elapsed, 1),
            "per_s": round(sum(tally.sent.values()) / elapsed, 1) if elapsed else None,
            "deadline_hit": time.monotonic() >= deadline and sum(tally.sent.values()) < messages,
            "seeds": len(seeds),
        }
        totals: Counter = Counter()
        for name, process in processes.items():
            counts = tally.counts.get(name, Counter())
            totals.update(counts)
            pids_after = _group_pids(process.proc.pid) if process.alive() else set()
            role = {**{n: "server" for n in network.servers}, "source": "source",
                    "dispatcher": "dispatcher"}[name]
            entry = {"role": role, "sent": tally.sent[name],
                     **{o: counts.get(o, 0) for o in OUTCOMES},
                     "http_500_malformed": counts.get("http_500_malformed", 0),
                     "http_500_by_spec": counts.get("http_500_by_spec", 0),
                     "alive": process.alive(),
                     "answers_after": _answers(process, sink.url,
                                               {"source": "stocks", "dispatcher": None}.get(name, "grid")),
                     "rss_mb_before": rss_before[name],
                     "rss_mb_after": group_rss_mb(process.proc.pid) if process.alive() else None,
                     "workers_replaced": len(pids_before[name] - pids_after),
                     "subscriptions_created": tally.subscribed[name]}
            if name != "dispatcher":
                entry["subscriptions_held_before"] = held_before[name]
                entry["subscriptions_held_after"] = _held_subscriptions(process.base_url)
            figures[name] = entry
        if "bench" in tally.counts:
            figures["bench_errors"] = sum(tally.counts["bench"].values())
        figures["total"] = {**{o: totals.get(o, 0) for o in OUTCOMES},
                            "http_500_malformed": totals.get("http_500_malformed", 0),
                            "http_500_by_spec": totals.get("http_500_by_spec", 0)}
        figures["receiver_fault_reasons"] = dict(tally.fault_reasons.most_common(8))
        figures["all_alive"] = all(figures[n]["alive"] and figures[n]["answers_after"]
                                   for n in processes)
        figures["examples"] = tally.examples
        return figures
    finally:
        network.close()
        if source.alive():
            try:
                source.stop()
            except Exception:
                source.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


def run(quick: bool = False, *, messages: int | None = None, deadline_s: float | None = None,
        seed: int | None = None) -> dict:
    """``messages`` and ``deadline_s`` default to 100,000 in 900 s (``quick``: 1,500 in 20 s);
    the environment variables ``EDN_FUZZ_MESSAGES``, ``EDN_FUZZ_DEADLINE_S`` and
    ``EDN_FUZZ_SEED`` override the defaults."""
    env = os.environ
    messages = messages or int(env.get("EDN_FUZZ_MESSAGES", 1_500 if quick else 100_000))
    deadline_s = deadline_s or float(env.get("EDN_FUZZ_DEADLINE_S", 20 if quick else 900))
    seed = seed if seed is not None else int(env.get("EDN_FUZZ_SEED", 12))
    return measure(messages=messages, deadline_s=deadline_s, servers=1 if quick else 2,
                   timeout=5.0 if quick else 10.0, seed=seed)
