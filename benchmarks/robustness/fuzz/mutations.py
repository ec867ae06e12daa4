"""How a seed message is fuzzed: hostile values, XML-aware and byte mutations, wrong HTTP
metadata, garbage bodies (:func:`mutate`), and malformed HTTP framing sent over a raw
socket (:func:`raw_request`)."""
from __future__ import annotations

import random
from dataclasses import replace

from lxml import etree

from .session import TOKEN, Message


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
