"""``edn serve``'s TLS flags and gunicorn's TLS settings (edn.gunicorn_tls): what is refused
before anything starts, the https base URL, the client-auth modes, and failed handshakes
logged once per kind a minute. No socket is connected."""
from __future__ import annotations

import logging
import ssl

import pytest

from edn import cli
from edn.addresses import AddressError, advertised_base_url
from edn.gunicorn import GunicornServer
from edn.gunicorn_tls import HandshakeLog, tls_of
from wsframework import pki
from wsframework.tls import ServerTls


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    pki.init_ca(directory / "ca")
    issued = pki.issue("member", directory / "ca", directory)
    return {"cert": str(issued.certificate), "key": str(issued.key),
            "ca": str(directory / "ca" / "ca.pem")}


def _serve(tmp_path, *args):
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "source", "--data", str(tmp_path / "d"), *args])
    return str(caught.value)


def test_a_tls_role_advertises_https_and_refuses_an_http_base_url():
    assert advertised_base_url("10.0.0.5", 8443, None, scheme="https") == "https://10.0.0.5:8443"
    assert advertised_base_url("::1", 8443, None, scheme="https") == "https://[::1]:8443"
    assert advertised_base_url("0.0.0.0", 1, "https://a.example:1", scheme="https") == "https://a.example:1"
    with pytest.raises(AddressError, match="serves https"):
        advertised_base_url("10.0.0.5", 8443, "http://10.0.0.5:8443", scheme="https")
    # a plain role behind a proxy that ends TLS in front of it
    assert advertised_base_url("10.0.0.5", 8080, "https://edn.example") == "https://edn.example"
    with pytest.raises(AddressError, match="--base-url https://ADDRESS"):
        advertised_base_url("0.0.0.0", 8443, None, scheme="https")


@pytest.mark.parametrize("args, reason", [
    (["--tls-cert", "{cert}"], "together"),
    (["--tls-cert", "{cert}", "--tls-key", "{missing}"], "no such file"),
    (["--tls-cert", "{cert}", "--tls-key", "{ca}"], "cannot use certificate"),
    (["--tls-client-auth", "required"], "needs --tls-cert"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-client-auth", "required"], "needs a CA"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-ca", "{missing}"], "no such file"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--base-url", "http://127.0.0.1:8080"], "serves https"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-handshake-timeout", "0"], "handshake timeout"),
    (["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-handshake-timeout", "1e9"], "handshake timeout"),
])
def test_edn_serve_refuses_tls_settings_that_cannot_work_before_anything_starts(
        tmp_path, files, args, reason):
    values = dict(files, missing=str(tmp_path / "missing.pem"))
    message = _serve(tmp_path, *(a.format(**values) for a in args))
    assert reason in message and message.startswith("edn serve source:")
    assert not (tmp_path / "d").exists()


def test_gunicorn_serves_what_the_flags_say(files):
    tls = ServerTls(files["cert"], files["key"], files["ca"], "required")
    server = GunicornServer(object, host="127.0.0.1", port=1, tls=tls)
    assert server.cfg.is_ssl and server.cfg.cert_reqs == ssl.CERT_REQUIRED
    assert tls_of(server.cfg) == tls
    context = server.cfg.ssl_context(server.cfg, None)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    plain = GunicornServer(object, host="127.0.0.1", port=1)
    assert not plain.cfg.is_ssl


def test_failed_handshakes_are_logged_once_per_kind_a_minute(caplog):
    now = [0.0]
    handshakes = HandshakeLog(interval=60.0, clock=lambda: now[0])
    unknown_ca = ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] unknown ca")
    unknown_ca.reason = "TLSV1_ALERT_UNKNOWN_CA"
    plain = ssl.SSLError(1, "[SSL: HTTP_REQUEST] http request")
    plain.reason = "HTTP_REQUEST"
    with caplog.at_level(logging.WARNING, logger="edn.tls"):
        logged = [handshakes.failed(unknown_ca, ("10.0.0.9", 5000)) for _ in range(1000)]
        logged.append(handshakes.failed(plain, ("10.0.0.9", 5001)))
        now[0] = 61.0
        logged.append(handshakes.failed(unknown_ca, ("10.0.0.9", 5002)))
    assert logged.count(True) == 3 and logged[0] and logged[-2] and logged[-1]
    assert len(caplog.records) == 3
    assert "10.0.0.9" in caplog.records[0].getMessage()
    assert "TLSV1_ALERT_UNKNOWN_CA" in caplog.records[0].getMessage()
