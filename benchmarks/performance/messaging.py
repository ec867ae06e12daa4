"""In-process cost of the messaging layer: parse + dispatch + reply, SOAP 1.1 and 1.2, and
the hardened parser alone (no sockets: this isolates the framework from HTTP)."""
from __future__ import annotations

import time

from wsframework import ns
from wsframework.messaging import MessageFilter, MessagingLayer, Reply
from wsframework.xmlparse import parse_xml


def _envelope(version_ns: str, i: int) -> bytes:
    return (f'<e:Envelope xmlns:e="{version_ns}" xmlns:a="{ns.WSA10}"><e:Header>'
            f'<a:Action>urn:bench/Echo</a:Action><a:MessageID>urn:uuid:{i}</a:MessageID>'
            f'<a:To>http://bench/topics/t</a:To></e:Header><e:Body><q:quote xmlns:q="urn:q">'
            f'<q:symbol>GE</q:symbol><q:price>{i % 100}</q:price></q:quote></e:Body></e:Envelope>').encode()


def _rate(func, items) -> float:
    start = time.perf_counter()
    for item in items:
        func(item)
    return len(items) / (time.perf_counter() - start)


def run(quick: bool = False) -> dict:
    n = 2_000 if quick else 20_000
    layer = MessagingLayer()
    # Ten decoy handlers so dispatch does real matching work, as a service with several
    # components would.
    for k in range(10):
        layer.route(f"decoy{k}", MessageFilter(action=f"urn:bench/Other{k}"), lambda m: None)
    layer.route("echo", MessageFilter(action="urn:bench/Echo", path_prefix="/topics/"),
                lambda m: Reply("urn:bench/EchoResponse", m.body))
    layer.route("oneway", MessageFilter(action="urn:bench/Notify"), lambda m: None)
    figures = {}
    for label, version_ns in (("soap11", ns.SOAP11), ("soap12", ns.SOAP12)):
        messages = [_envelope(version_ns, i) for i in range(n)]
        ct = "text/xml" if version_ns == ns.SOAP11 else "application/soap+xml"
        figures[f"request_reply_{label}_per_s"] = round(
            _rate(lambda m: layer.handle(m, path="/topics/t", content_type=ct), messages))
    messages = [_envelope(ns.SOAP12, i) for i in range(n)]
    figures["hardened_parse_per_s"] = round(_rate(parse_xml, messages))
    figures["messages"] = n
    return figures
