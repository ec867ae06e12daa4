"""The network's CA (wsframework.pki) and the TLS contexts every hop uses (wsframework.tls):
files, modes, names, chains, TLS versions and client-auth modes. No socket is connected."""
from __future__ import annotations

import datetime
import ssl
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from wsframework import pki, tls


@pytest.fixture(scope="module")
def ca_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ca")
    pki.init_ca(directory)
    return directory


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_ca_is_made_with_its_key_private_and_is_never_overwritten(tmp_path):
    cert = pki.init_ca(tmp_path / "ca")
    assert cert == tmp_path / "ca" / "ca.pem"
    assert _mode(tmp_path / "ca" / "ca-key.pem") == 0o600
    ca = x509.load_pem_x509_certificate(cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    before = cert.read_bytes()
    with pytest.raises(pki.PkiError, match="never overwritten"):
        pki.init_ca(tmp_path / "ca")
    assert cert.read_bytes() == before


def test_an_issued_certificate_names_its_member_and_chains_to_the_ca(ca_dir, tmp_path):
    issued = pki.issue("server-1", ca_dir, tmp_path, sans=["DNS:s1.example", "IP:10.77.0.5"])
    assert _mode(issued.key) == 0o600
    chain = x509.load_pem_x509_certificates(issued.certificate.read_bytes())
    leaf, ca = chain
    assert ca.subject == x509.load_pem_x509_certificate((ca_dir / "ca.pem").read_bytes()).subject
    leaf.verify_directly_issued_by(ca)
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "server-1"
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {"s1.example", "server-1"}
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["10.77.0.5"]
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= set(usages)
    assert leaf.public_key().curve.name == "secp256r1"
    # the files load as a TLS identity
    tls.server_context(tls.ServerTls(issued.certificate, issued.key))


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b", "x" * 64, "é"])
def test_a_bad_member_name_is_refused(ca_dir, tmp_path, name):
    with pytest.raises(pki.PkiError, match="certificate name"):
        pki.issue(name, ca_dir, tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("san", ["host", "DNS:", "DNS:a..b", "DNS:a.*", "IP:300.1.1.1",
                                 "URI:http://x", "DNS:" + "a" * 300])
def test_a_bad_subject_alternative_name_is_refused(ca_dir, tmp_path, san):
    with pytest.raises(pki.PkiError):
        pki.issue("ok", ca_dir, tmp_path, sans=[san])
    assert not list(tmp_path.iterdir())


def test_issuing_needs_a_ca_and_never_overwrites(ca_dir, tmp_path):
    with pytest.raises(pki.PkiError, match="edn tls init"):
        pki.issue("x", tmp_path / "no-ca", tmp_path / "out")
    pki.issue("x", ca_dir, tmp_path)
    with pytest.raises(pki.PkiError, match="exists"):
        pki.issue("x", ca_dir, tmp_path)


def test_server_and_client_contexts_speak_tls_1_2_and_newer_only(ca_dir, tmp_path):
    issued = pki.issue("m", ca_dir, tmp_path)
    for mode, reqs in (("none", ssl.CERT_NONE), ("optional", ssl.CERT_OPTIONAL),
                       ("required", ssl.CERT_REQUIRED)):
        context = tls.server_context(tls.ServerTls(issued.certificate, issued.key,
                                                   ca_dir / "ca.pem", mode))
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
        assert context.verify_mode == reqs
        names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
        assert names and all(n.startswith("ECDHE-") and ("GCM" in n or "CHACHA20" in n)
                             for n in names)
    client = tls.client_context(tls.ClientTls(ca=ca_dir / "ca.pem", cert=issued.certificate,
                                              key=issued.key))
    assert client.minimum_version == ssl.TLSVersion.TLSv1_2
    assert client.check_hostname and client.verify_mode == ssl.CERT_REQUIRED


def test_impossible_tls_settings_are_refused_with_their_reason(ca_dir, tmp_path):
    one, other = pki.issue("one", ca_dir, tmp_path), pki.issue("other", ca_dir, tmp_path)
    with pytest.raises(tls.TlsConfigError, match="needs a CA"):
        tls.ServerTls(one.certificate, one.key, None, "required")
    with pytest.raises(tls.TlsConfigError, match="client auth is one of"):
        tls.ServerTls(one.certificate, one.key, None, "sometimes")
    with pytest.raises(tls.TlsConfigError, match="together"):
        tls.ClientTls(cert=one.certificate)
    with pytest.raises(tls.TlsConfigError, match="cannot use certificate"):
        tls.server_context(tls.ServerTls(one.certificate, other.key))
    with pytest.raises(tls.TlsConfigError, match="no such file"):
        tls.server_context(tls.ServerTls(tmp_path / "missing.pem", one.key))
    with pytest.raises(tls.TlsConfigError, match="no such file"):
        tls.client_context(tls.ClientTls(ca=tmp_path / "missing-ca.pem"))


def test_a_peer_is_known_by_its_common_name_else_its_first_dns_name():
    assert tls.peer_principal({"subject": ((("commonName", "server-1"),),),
                               "subjectAltName": (("DNS", "s1.example"),)}) == "server-1"
    assert tls.peer_principal({"subject": ((("organizationName", "x"),),),
                               "subjectAltName": (("IP Address", "10.0.0.1"),
                                                  ("DNS", "s1.example"))}) == "s1.example"
    assert tls.peer_principal({}) is None and tls.peer_principal(None) is None


def test_certificate_expiry_is_read_from_the_file(ca_dir, tmp_path):
    start = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
    issued = pki.issue("later", ca_dir, tmp_path, days=10, not_before=start)
    assert tls.certificate_expiry(issued.certificate) == (start + datetime.timedelta(days=10)).timestamp()
    with pytest.raises(tls.TlsConfigError):
        tls.certificate_expiry(issued.key)
