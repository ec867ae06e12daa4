"""Helpers shared by the eventing unit tests (this module holds no tests).

Everything runs in process: services and the notification sink are mounted on an
:class:`~wsframework.transport.InProcessTransport`, and target checks use a fake resolver,
so no socket and no DNS lookup is ever made.
"""
from __future__ import annotations

import socket
import threading
from pathlib import Path

from lxml import etree

from subscription_manager.client import EventingClient
from subscription_manager.source import build_source
from wsframework.admin import AdminClient
from wsframework.namespace import EntryExists
from wsframework.service import ServiceConfig
from wsframework.soap import SoapVersion, parse_envelope
from wsframework.transport import InProcessTransport, TransportResponse
from wsframework.xmlparse import ParserLimits

BASE = "http://es.test"
SINK = "http://sink.test"
TOKEN = "unit-token"
PUBLIC_IP = "93.184.216.34"
Q = "urn:quotes"

# Short retries and no background sweeper: tests drive time themselves.
FAST = {"delivery_backoff": 0.001, "delivery_backoff_max": 0.01, "delivery_retries": 2,
        "delivery_workers": 2}


def fake_resolver(table: dict[str, list[str] | str] | None = None, calls: list | None = None):
    """A getaddrinfo stand-in: host -> address(es); unknown hosts get a public address."""
    def resolve(host, port, family=0, type=0, proto=0, flags=0):
        if calls is not None:
            calls.append(host)
        answer = (table or {}).get(host, PUBLIC_IP)
        if isinstance(answer, Exception):
            raise answer
        addresses = [answer] if isinstance(answer, str) else list(answer)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port)) for a in addresses]
    return resolve


class RecordingSink:
    """An in-process notification sink: records every POST, answers ``status``."""

    def __init__(self, status: int = 202):
        self.status = status
        self.messages: list[tuple[str, bytes, str, str | None]] = []
        self.attempts = 0
        self._cond = threading.Condition()

    def __call__(self, url, payload, content_type, soap_action):
        with self._cond:
            self.attempts += 1
            status = self.status
            if status < 300:
                self.messages.append((url, payload, content_type, soap_action))
                self._cond.notify_all()
        return TransportResponse(status, None, b"")

    def at(self, path: str) -> list:
        return [m for m in self.messages if m[0] == SINK + path]

    def wait_for(self, count: int, path: str | None = None, timeout: float = 5.0) -> list:
        def selected():
            return [m for m in self.messages if path is None or m[0] == SINK + path]
        with self._cond:
            if not self._cond.wait_for(lambda: len(selected()) >= count, timeout):
                raise AssertionError(f"expected {count} messages at {path or 'the sink'}, "
                                     f"got {len(selected())}")
            return selected()

    def envelopes(self, path: str | None = None):
        return [parse_envelope(m[1], ParserLimits(max_bytes=10**7))
                for m in self.messages if path is None or m[0] == SINK + path]


class Harness:
    """One event source process (a Service with the source role) plus a sink."""

    def __init__(self, data_dir: Path, *, settings: dict | None = None, topics=("stocks",),
                 sink: RecordingSink | None = None, clock=None, resolver=None,
                 manager_class=None, access: str = "open"):
        self.transport = InProcessTransport()
        self.sink = sink or RecordingSink()
        self.transport.mount(SINK, self.sink)
        merged = dict(FAST)
        merged.update(settings or {})
        kwargs = {"manager_class": manager_class} if manager_class else {}
        self.service = build_source(
            ServiceConfig(BASE, Path(data_dir), TOKEN, settings=merged, access=access),
            transport=self.transport, resolver=resolver or fake_resolver(),
            start_sweeper=False, clock=clock, **kwargs)
        self.transport.mount(BASE, self.service)
        self.manager = self.service.subscription_manager
        self.admin = AdminClient(BASE, TOKEN, transport=self.transport)
        for topic in topics:
            self.create_topic(topic)

    def create_topic(self, name: str, matcher: str | None = None):
        try:
            self.service.topics.create(name, matcher)
        except EntryExists:
            pass

    def client(self, version: str = "2011", soap: SoapVersion = SoapVersion.SOAP12) -> EventingClient:
        return EventingClient(version, transport=self.transport, soap_version=soap)

    def subscribe(self, version: str = "2011", topic: str = "stocks", soap=SoapVersion.SOAP12,
                  notify_path: str = "/notify", **options):
        return self.client(version, soap).subscribe(f"{BASE}/topics/{topic}", SINK + notify_path,
                                                    **options)

    def post(self, path: str, envelope: bytes, soap: SoapVersion = SoapVersion.SOAP12,
             action: str | None = None):
        return self.transport.post(BASE + path, envelope, soap.content_type, action)

    def publish(self, event, topic: str = "stocks", action: str | None = None,
                soap: SoapVersion = SoapVersion.SOAP12) -> TransportResponse:
        from wsframework.addressing import WsaVersion, request_headers
        from wsframework.publisher import PUBLISH_ACTION
        from wsframework.soap import build_envelope
        element = etree.fromstring(event) if isinstance(event, (str, bytes)) else event
        headers = request_headers(WsaVersion.WSA10, f"{BASE}/topics/{topic}",
                                  action or PUBLISH_ACTION)
        return self.post(f"/topics/{topic}", build_envelope(soap, element, headers), soap)

    def drain(self, timeout: float = 5.0) -> None:
        assert self.manager.deliverer.drain(timeout), self.manager.counters

    def close(self) -> None:
        self.service.close()


def quote(price, symbol="ACME") -> bytes:
    return (f'<q:quote xmlns:q="{Q}" symbol="{symbol}"><q:symbol>{symbol}</q:symbol>'
            f"<q:price>{price}</q:price></q:quote>").encode()


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
