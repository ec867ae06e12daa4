"""A real network over TLS on loopback: a dispatcher and two servers (``edn serve ...
--tls-cert --tls-key --tls-ca``, every hop HTTPS with the member certificates ``edn tls
issue`` makes), subscribers whose NotifyTo is an HTTPS sink, events published over HTTPS;
delivery exact against ground truth. Then what a TLS port refuses, for each worker model."""
from __future__ import annotations

import socket
import warnings
import ssl
import time

import numpy as np
import pytest
import requests

from edn.localnet.network import LocalNetwork, NetworkPki
from edn.localnet.processes import ServerProcess
from tests.support.processes import ADMIN_TOKEN
from wsframework import pki

D = 2


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    base = tmp_path_factory.mktemp("tls-net")
    net = LocalNetwork(base / "data", [("s1", "rtree", 1), ("s2", "rtree", 1)],
                       token=ADMIN_TOKEN, d=D, tls_dir=base / "pki")
    with net:
        net.create_topic()
        rng = np.random.default_rng(7)
        centres = rng.uniform(0, 10, size=(60, D))
        net.subscribe(np.round(np.clip(centres - 1.5, 0, 10), 2),
                      np.round(np.clip(centres + 1.5, 0, 10), 2))
        yield net


def test_every_hop_is_https_and_delivery_is_exact(network):
    assert network.dispatcher.base_url.startswith("https://")
    assert all(s.base_url.startswith("https://") for s in network.servers.values())
    assert network.sink.url.startswith("https://")
    first, last = network.publish(np.round(np.random.default_rng(3).uniform(0, 10, (80, D)), 3))
    expected = network.wait_delivered(first, last)
    assert len(expected) > 20
    assert network.received(first, last) == expected


def test_the_network_refuses_a_caller_without_the_networks_ca(network):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(network.dispatcher.base_url + "/health", timeout=5)
    stranger = NetworkPki(network.data_dir.parent / "stranger")  # another CA altogether
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(network.dispatcher.base_url + "/health", timeout=5,
                     verify=str(stranger.ca))


@pytest.fixture(params=["source", "dispatcher"], scope="module")
def required_role(request, tmp_path_factory):
    """Each worker model (gevent, buffered gthread) with client certificates required and a
    one-second handshake deadline."""
    base = tmp_path_factory.mktemp(f"tls-{request.param}")
    issuer = NetworkPki(base / "pki")
    process = ServerProcess(request.param, data_dir=base / "data",
                            tls=issuer.member("role", client_auth="required"),
                            extra_args=["--tls-handshake-timeout", "1"])
    with process:
        yield process, issuer, base


@pytest.fixture(autouse=True)
def _old_tls_versions_are_named_on_purpose():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "ssl.TLSVersion.TLSv1", DeprecationWarning)
        yield


def _tls_client(issuer: NetworkPki, name: str | None, *, maximum=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(issuer.ca))
    if name:
        files = issuer.member(name)
        context.load_cert_chain(str(files.cert), str(files.key))
    if maximum:  # an old client: its library would speak TLS 1.1 to a server that allowed it
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = maximum
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    return context


def _get_health(port: int, context: ssl.SSLContext) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            return answer


def test_a_member_certificate_is_served(required_role):
    process, issuer, _ = required_role
    assert _get_health(process.port, _tls_client(issuer, "member")).startswith(b"HTTP/1.1 200")


def test_hostile_tls_is_refused_and_the_role_keeps_serving(required_role):
    process, issuer, base = required_role
    port = process.port
    # no client certificate, where one is required
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get_health(port, _tls_client(issuer, None))
    # a client certificate from another CA
    stranger = NetworkPki(base / "stranger")
    context = _tls_client(issuer, None)
    files = stranger.member("intruder")
    context.load_cert_chain(str(files.cert), str(files.key))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get_health(port, context)
    # TLS 1.1 and older: the server refuses the version
    with pytest.raises(ssl.SSLError, match="PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|version"):
        _get_health(port, _tls_client(issuer, "member", maximum=ssl.TLSVersion.TLSv1_1))
    # a server name the certificate does not carry (outbound check, as every client does)
    wrong = _tls_client(issuer, "member")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            wrong.wrap_socket(raw, server_hostname="not-this-host.example")
    # plain HTTP to the TLS port: told so, in plain HTTP
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = raw.recv(65536)
    assert answer.startswith(b"HTTP/1.1 400") and b"https://" in answer
    assert _get_health(port, _tls_client(issuer, "member")).startswith(b"HTTP/1.1 200")


def test_stalled_handshakes_hold_nothing_and_end_at_the_deadline(required_role):
    process, issuer, _ = required_role
    stalled = [socket.create_connection(("127.0.0.1", process.port), timeout=5) for _ in range(100)]
    try:
        for sock in stalled[::2]:
            sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
        started = time.monotonic()
        assert _get_health(process.port, _tls_client(issuer, "member")).startswith(b"HTTP/1.1 200")
        assert time.monotonic() - started < 1.0  # served while 100 handshakes stall
        for sock in stalled:  # each is closed once its deadline (1 s) passes
            sock.settimeout(10)
            try:
                assert sock.recv(65536) == b""
            except ConnectionResetError:
                pass
    finally:
        for sock in stalled:
            sock.close()
    assert _get_health(process.port, _tls_client(issuer, "member")).startswith(b"HTTP/1.1 200")


def test_the_certificate_expiry_is_a_metric(required_role):
    process, issuer, _ = required_role
    files = issuer.member("role")
    response = requests.get(process.base_url + "/metrics", timeout=5, verify=str(issuer.ca),
                            cert=(str(files.cert), str(files.key)),
                            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.status_code == 200
    line = next(l for l in response.text.splitlines()
                if l.startswith("edn_tls_certificate_expiry_seconds"))
    expiry = float(line.split()[-1])
    from wsframework.tls import certificate_expiry
    assert expiry == pytest.approx(certificate_expiry(files.cert))
    assert expiry > time.time() + 300 * 86400


def test_the_network_credential_counts_only_with_a_member_certificate(network):
    """A stolen admin token alone opens nothing: over mutual TLS, registering as a server,
    an event batch or any admin operation needs a certificate the network's CA issued."""
    from route_manager import protocol
    from wsframework.admin import AdminClient, contracts
    from wsframework.exceptions import SoapFault
    from wsframework.tls import ClientTls, process_client_tls, set_process_client_tls
    previous = process_client_tls()
    set_process_client_tls(ClientTls(ca=network.pki.ca))  # trusts the network, no certificate
    try:
        admin = AdminClient(network.dispatcher.base_url, ADMIN_TOKEN)
        for request in (contracts.ListTopics(), protocol.RegisterServer(
                Name="impostor", Address="https://127.0.0.1:1", Incarnation=0)):
            with pytest.raises(SoapFault) as caught:
                admin.call(request)
            assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
            assert "member certificate" in caught.value.reason
    finally:
        set_process_client_tls(previous)
    servers = network.node_stats(network.dispatcher, "servers")  # the operator's certificate
    assert int(servers["servers"]) == 2  # the impostor was never registered


def test_the_cli_speaks_tls_with_its_own_identity(network):
    import subprocess
    import sys
    operator = network.pki.member("cli-operator")
    base = [sys.executable, "-m", "edn.cli", "topic", "list", "--at", network.dispatcher.base_url,
            f"--admin-token={ADMIN_TOKEN}", "--tls-ca", str(operator.ca)]
    listed = subprocess.run([*base, "--tls-cert", str(operator.cert), "--tls-key", str(operator.key)],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "grid" in listed.stdout
    refused = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "member certificate" in refused.stderr
    untrusted = subprocess.run(base[:-2], capture_output=True, text=True, timeout=60)
    assert untrusted.returncode == 3 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr


@pytest.mark.parametrize("role", ["source", "dispatcher"])
def test_certificates_reload_on_sighup_while_serving(tmp_path, role):
    import shutil
    import signal
    issuer = NetworkPki(tmp_path / "pki")
    served = tmp_path / "served"
    served.mkdir()
    first = issuer.member("role-v1")
    shutil.copy(first.cert, served / "role.pem")
    shutil.copy(first.key, served / "role-key.pem")
    from edn.localnet.processes import TlsFiles
    files = TlsFiles(served / "role.pem", served / "role-key.pem", issuer.ca)
    client = _tls_client(issuer, "member")

    def served_name() -> str:
        with socket.create_connection(("127.0.0.1", process.port), timeout=5) as raw:
            with client.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                return dict(x[0] for x in sock.getpeercert()["subject"])["commonName"]

    process = ServerProcess(role, data_dir=tmp_path / "data", tls=files)
    with process:
        assert served_name() == "role-v1"
        second = issuer.member("role-v2")
        shutil.copy(second.cert, served / "role.pem")
        shutil.copy(second.key, served / "role-key.pem")
        assert served_name() == "role-v1"  # read when a worker starts, not per connection
        process.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30

        # every probe is served, by an old worker or a new one: none is reset (a stopping
        # worker still reads the connections it accepted, the dispatcher's buffered one too)
        while served_name() != "role-v2":
            assert time.monotonic() < deadline, "the new certificate was never served"
            assert _get_health(process.port, client).startswith(b"HTTP/1.1 200")
        assert _get_health(process.port, client).startswith(b"HTTP/1.1 200")


def test_expired_early_and_oversized_certificates_are_refused(required_role):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    process, issuer, base = required_role
    now = datetime.datetime.now(datetime.timezone.utc)
    out = base / "hostile"
    expired = pki.issue("expired", issuer.ca_dir, out, days=1,
                        not_before=now - datetime.timedelta(days=10))
    early = pki.issue("early", issuer.ca_dir, out, days=10,
                      not_before=now + datetime.timedelta(days=5))
    for files in (expired, early):
        context = _tls_client(issuer, None)
        context.load_cert_chain(str(files.certificate), str(files.key))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _get_health(process.port, context)
    # a chain of 300 KB (a self-signed certificate with a huge extension): refused, not read
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "huge")])
    huge = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier("1.2.3.4.5"),
                                                      b"x" * 300_000), critical=False)
            .sign(key, hashes.SHA256()))
    (out / "huge.pem").write_bytes(huge.public_bytes(serialization.Encoding.PEM))
    (out / "huge-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    context = _tls_client(issuer, None)
    context.load_cert_chain(str(out / "huge.pem"), str(out / "huge-key.pem"))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get_health(process.port, context)
    assert _get_health(process.port, _tls_client(issuer, "member")).startswith(b"HTTP/1.1 200")


def test_a_role_refuses_to_call_a_peer_whose_certificate_expired(tmp_path):
    """Outbound: a delivery to an https endpoint whose certificate expired is never made."""
    import datetime

    from edn.sink import NotificationSink
    from wsframework.tls import ServerTls, server_context
    from wsframework.transport import LeanHttpTransport, TransportError
    issuer = NetworkPki(tmp_path / "pki")
    now = datetime.datetime.now(datetime.timezone.utc)
    stale = pki.issue("stale-sink", issuer.ca_dir, tmp_path / "stale", days=1,
                      sans=["IP:127.0.0.1"], not_before=now - datetime.timedelta(days=3))
    with NotificationSink(ssl_context=server_context(ServerTls(stale.certificate, stale.key))) as sink:
        context = _tls_client(issuer, "member")
        transport = LeanHttpTransport(timeout=(2.0, 5.0), ssl_context=context)
        with pytest.raises(TransportError, match="expired"):
            transport.post(sink.url + "/n", b"<x/>", "text/xml")
        assert sink.count == 0
