"""Helpers of the fuzz tests (no tests here): in-process roles, a source (topics ``stocks``, XPath, and ``boxes``,
R-tree engine), a dispatcher and two subscription servers, each reached through its own WSGI
application (:class:`wsframework.wsgi.WsgiApplication`) called with a fake environ: what
gunicorn would call, without a socket. The seeds are a valid session recorded against them
(:func:`benchmarks.robustness.fuzz.record_seeds`); the fuzz mutates those.

Every answer is checked by :func:`check_answer`: a SOAP envelope (or an empty 2xx), never
HTML, and no HTTP 500 to a malformed message unless the SOAP bindings prescribe it
(:func:`benchmarks.robustness.fuzz.spec_500`)."""
from __future__ import annotations

import io
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, settings

from benchmarks.robustness.fuzz import Message, record_seeds, spec_500
from tests.support.edn import DISPATCHER, Network, server_url
from tests.support.eventing import BASE, SINK, TOKEN, Harness
from route_manager.dispatcher import build_dispatcher
from wsframework.service import ServiceConfig
from wsframework.soap import parse_envelope
from wsframework.xmlparse import ParserLimits
from wsframework.wsgi import WsgiApplication

# Short in CI: every property of this directory together stays well under 30 s.
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@dataclass
class Answer:
    status: int
    headers: dict
    body: bytes


def call(app, path: str, body: bytes = b"", *, method: str = "POST",
         content_type: str | None = "application/soap+xml", soap_action: str | None = None,
         content_length: str | None = "auto", stream=None, extra: dict | None = None) -> Answer:
    """Call a WSGI application as a WSGI server would (PEP 3333 environ, no socket)."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "",
               "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "fuzz", "SERVER_PORT": "80",
               "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
               "wsgi.input": stream if stream is not None else io.BytesIO(body),
               "wsgi.errors": io.StringIO()}
    if content_type is not None:
        environ["CONTENT_TYPE"] = content_type
    if content_length == "auto":
        environ["CONTENT_LENGTH"] = str(len(body))
    elif content_length is not None:
        environ["CONTENT_LENGTH"] = content_length
    if soap_action is not None:
        environ["HTTP_SOAPACTION"] = soap_action
    environ.update(extra or {})
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"] = int(status.split(" ", 1)[0])
        answered["headers"] = {name.lower(): value for name, value in headers}

    chunks = app(environ, start_response)
    data = b"".join(chunks)
    return Answer(answered["status"], answered["headers"], data)


def send(app, message: Message) -> Answer:
    headers = message.http_headers()
    return call(app, message.path, message.body, content_type=headers.get("Content-Type"),
                soap_action=headers.get("SOAPAction"))


def check_answer(answer: Answer, *, malformed: bool = True, method: str = "POST") -> None:
    """The properties every answer of the fuzz must have."""
    lowered = answer.body[:4096].lower()
    assert b"<html" not in lowered and b"<!doctype" not in lowered, answer
    assert "html" not in answer.headers.get("content-type", ""), answer
    assert 200 <= answer.status < 600, answer
    if method != "POST":
        return
    if answer.body or answer.status >= 300:
        envelope = parse_envelope(answer.body, ParserLimits(max_bytes=max(len(answer.body), 1)))
        if answer.status >= 300:
            assert envelope.fault() is not None, answer
    if answer.status == 500 and malformed:
        assert spec_500(answer.body), answer
    assert answer.status < 500 or answer.status == 500, answer


CHILD = "http://child.test"  # a child dispatcher of the network's dispatcher (dispatch tree)


class Roles:
    """The in-process roles (a source, a dispatcher, two servers, and a child dispatcher of
    that dispatcher), their WSGI applications and the recorded seeds."""

    def __init__(self, tmp_path):
        self.harness = Harness(tmp_path / "source", topics=())
        self.network = Network(tmp_path / "edn", partitioners=("rtree", "rtree"))
        self.network.create_topic("grid")
        self.child = build_dispatcher(
            ServiceConfig(CHILD, tmp_path / "child", TOKEN, role="dispatcher",
                          settings={"parent": DISPATCHER, "name": "child", "self_tuning": "off",
                                    "tree_interval": "3600", "precision_poll": "3600"}),
            transport=self.network.transport)
        self.network.transport.mount(CHILD, self.child)
        self.child.dispatcher.tree.step()  # registered at the dispatcher, hosting grid
        self.apps = {"source": WsgiApplication(self.harness.service),
                     "dispatcher": WsgiApplication(self.network.dispatcher_service),
                     "child": WsgiApplication(self.child)}
        for i, service in enumerate(self.network.servers):
            self.apps[f"s{i}"] = WsgiApplication(service)
        seeds = record_seeds(self.harness.transport, token=TOKEN, sink_url=SINK, source=BASE)
        seeds += record_seeds(self.network.transport, token=TOKEN, sink_url=SINK,
                              servers={f"s{i}": server_url(i) for i in range(2)},
                              dispatcher=DISPATCHER)
        self.seeds = [s for s in seeds if s.target in self.apps]
        # the child has no recorded session: the dispatcher's admin seeds, sent to it
        self.seeds += [replace(s, target="child") for s in list(self.seeds)
                       if s.target == "dispatcher" and s.kind in ("admin", "edn-wire")]
        self.by_kind: dict[str, list[Message]] = {}
        for seed in self.seeds:
            self.by_kind.setdefault(seed.kind, []).append(seed)

    def still_answers(self) -> None:
        """Every role still answers a valid request after whatever came before."""
        for name, app in self.apps.items():
            health = call(app, "/health", method="GET", content_type=None)
            assert health.status == 200, (name, health)
            listed = next(s for s in self.seeds if s.target == name and s.kind in ("admin", "edn-wire")
                          and (b"ListTopics" in s.body or b"GetStats" in s.body))
            answer = send(app, listed)
            assert answer.status == 200, (name, answer)

    def close(self) -> None:
        self.harness.close()
        for service in [self.child, *self.network.servers, self.network.dispatcher_service]:
            service.close()
