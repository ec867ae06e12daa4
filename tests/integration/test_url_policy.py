"""A real source never contacts a ReplyTo/FaultTo its URL policy refuses, and an
unauthenticated admin request never makes it contact anything: the fault comes back on the
HTTP response. The HTTP transport connects to the address the policy approved (DNS
rebinding), over real sockets on loopback."""
from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest
import requests

from tests.support.processes import ServerProcess
from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.soap import parse_envelope
from wsframework.transport import HttpTransport, TransportError
from wsframework.urlpolicy import UrlPolicy, UrlRefused

SOAP12_CT = "application/soap+xml; charset=utf-8"
WSE = "http://www.w3.org/2011/03/ws-evt"
QUIET = 1.5  # seconds a sink is watched for a POST that must not come


@pytest.fixture
def strict_source(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source",
                       extra_args=["--set", "allow_loopback=false"]) as server:
        yield server


def envelope(action: str, body: str, *, reply_to: str | None = None,
             fault_to: str | None = None, headers: str = "") -> bytes:
    addressing = f"<a:Action>{action}</a:Action><a:MessageID>urn:uuid:url-policy-1</a:MessageID>"
    if reply_to:
        addressing += f"<a:ReplyTo><a:Address>{reply_to}</a:Address></a:ReplyTo>"
    if fault_to:
        addressing += f"<a:FaultTo><a:Address>{fault_to}</a:Address></a:FaultTo>"
    return (f'<e:Envelope xmlns:e="{ns.SOAP12}" xmlns:a="{ns.WSA10}" xmlns:adm="{ns.ADMIN}" '
            f'xmlns:wse="{WSE}"><e:Header>{addressing}{headers}</e:Header>'
            f'<e:Body>{body}</e:Body></e:Envelope>').encode()


def fault_on_response(server, path: str, data: bytes):
    response = requests.post(server.base_url + path, data=data,
                             headers={"Content-Type": SOAP12_CT}, timeout=30)
    assert response.status_code in (400, 500), (response.status_code, response.content)
    fault = parse_envelope(response.content).fault()
    assert fault is not None, response.content
    return fault


def assert_nothing_arrives(sink):
    time.sleep(QUIET)
    assert sink.messages == []


def test_refused_fault_to_is_not_contacted(strict_source, sink):
    """allow_loopback=false: faults for a loopback FaultTo come back on the HTTP response."""
    AdminClient(strict_source.base_url, strict_source.admin_token).create_topic("t")
    fault_to = sink.url + "/faults"
    cases = [
        ("/admin", envelope(f"{ns.ADMIN}/ListTopics", "<adm:ListTopics/>", fault_to=fault_to,
                            headers="<adm:AdminToken>wrong</adm:AdminToken>"),
         ns.qname(ns.ADMIN, "AccessDenied")),
        ("/subscriptions", envelope(f"{WSE}/GetStatus", "<wse:GetStatus/>", fault_to=fault_to,
                                    headers='<evt:SubscriptionId xmlns:evt="urn:wsframework:eventing">'
                                            'no-such-subscription</evt:SubscriptionId>'),
         None),
        ("/topics/t", envelope(f"{WSE}/Subscribe",
                               "<wse:Subscribe><wse:Delivery><wse:NotifyTo><a:Address>"
                               f"{sink.url}/notify</a:Address></wse:NotifyTo></wse:Delivery>"
                               "</wse:Subscribe>", fault_to=fault_to),
         ns.qname(WSE, "UnusableEPR")),
    ]
    for path, data, subcode in cases:
        fault = fault_on_response(strict_source, path, data)
        if subcode is not None:
            assert fault.subcode == subcode
    assert_nothing_arrives(sink)
    assert "refused" in strict_source.log_text()


def test_admin_fault_for_a_bad_token_stays_on_the_http_response(source_server, sink):
    """Loopback is allowed here, yet an unauthenticated request's fault never goes to its
    ReplyTo/FaultTo."""
    data = envelope(f"{ns.ADMIN}/ListTopics", "<adm:ListTopics/>",
                    reply_to=sink.url + "/replies", fault_to=sink.url + "/faults",
                    headers="<adm:AdminToken>wrong</adm:AdminToken>")
    fault = fault_on_response(source_server, "/admin", data)
    assert fault.subcode == ns.qname(ns.ADMIN, "AccessDenied")
    data = envelope(f"{ns.ADMIN}/ListTopics", "<adm:ListTopics/>",
                    reply_to=sink.url + "/replies")
    assert fault_on_response(source_server, "/admin", data).subcode == \
        ns.qname(ns.ADMIN, "AccessDenied")
    assert_nothing_arrives(sink)


def _read_request(connection) -> bytes:
    """The whole request (head and Content-Length body): closing with unread bytes would
    reset the connection before the client reads the answer."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return data


class _RecordingPeer:
    """Accepts one connection on 127.0.0.1, keeps the request head, answers 202."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.request = b""
        self.socket.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
                break
            except (TimeoutError, OSError):
                continue
        else:
            return
        connection.settimeout(5)
        with connection:
            self.request = _read_request(connection)
            connection.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n")

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.socket.close()


def test_dns_rebinding_cannot_redirect_a_connection():
    """The name answers loopback when checked and the metadata address afterwards: the
    transport connects where the check approved, with the URL's name as Host, and never
    asks the resolver (or the system's DNS) again."""
    peer = _RecordingPeer()
    answers = iter(["127.0.0.1", "169.254.169.254", "169.254.169.254"])
    asked = []

    def rebinding(host, port, family=0, type=0, proto=0, flags=0):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    policy = UrlPolicy(resolver=rebinding, cache_ttl=0)
    transport = HttpTransport(timeout=(3.0, 5.0))
    try:
        approved = policy.approve(f"http://rebind.invalid:{peer.port}/notify")
        response = transport.post(approved, b"<x/>", SOAP12_CT)
    finally:
        transport.close()
        peer.close()
    assert response.status == 202
    head = peer.request.decode("latin-1").lower()
    assert head.startswith("post /notify http/1.1")
    assert f"\r\nhost: rebind.invalid:{peer.port}\r\n" in head
    assert "authorization" not in head
    assert asked == ["rebind.invalid"]


@pytest.mark.parametrize("url", ["http://169.254.169.254\\@127.0.0.1:{port}/",
                                 "http://127.0.0.1:{port}\\@8.8.8.8/",
                                 "http://user:secret@127.0.0.1:{port}/"])
def test_parser_differential_urls_are_refused_before_any_connection(url):
    peer = _RecordingPeer()
    try:
        with pytest.raises(UrlRefused):
            UrlPolicy().approve(url.format(port=peer.port))
    finally:
        peer.close()
    assert peer.request == b""


def test_tls_to_a_pinned_address_keeps_the_name_for_sni_and_the_certificate(tmp_path):
    """https: the connection goes to the approved IP, the TLS server name and the certificate
    check use the URL's name (a certificate for that name is accepted, one for another name
    is not)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=pinned.test", "-addext", "subjectAltName=DNS:pinned.test",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server_names = []
    context.sni_callback = lambda sock, name, ctx: server_names.append(name) or None
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    heads = []

    stop = threading.Event()

    def serve():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            raw.settimeout(5)
            try:
                with context.wrap_socket(raw, server_side=True) as connection:
                    heads.append(_read_request(connection))
                    connection.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n"
                                       b"Connection: close\r\n\r\n")
            except (ssl.SSLError, OSError):  # the refused certificate ends the handshake
                raw.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    resolve = {"pinned.test": "127.0.0.1", "other.test": "127.0.0.1"}

    def resolver(host, port, family=0, type=0, proto=0, flags=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (resolve[host], port))]

    policy = UrlPolicy(resolver=resolver)
    transport = HttpTransport(timeout=(3.0, 5.0))
    session = transport._take_session()
    session.verify = str(cert)  # trust the test certificate (the session the requests reuse)
    transport._give_back(session)
    try:
        response = transport.post(policy.approve(f"https://pinned.test:{port}/n"), b"<x/>",
                                  SOAP12_CT)
        assert response.status == 202
        with pytest.raises(TransportError):  # the certificate does not name other.test
            transport.post(policy.approve(f"https://other.test:{port}/n"), b"<x/>", SOAP12_CT)
    finally:
        transport.close()
        stop.set()
        thread.join(10)
        listener.close()
    assert server_names[:2] == ["pinned.test", "other.test"]
    assert f"\r\nhost: pinned.test:{port}\r\n" in heads[0].decode("latin-1").lower()
