"""A real `edn serve source` (gunicorn) on loopback: SOAP 1.1 and 1.2, admin messages, and
every kind of bad input answered with a SOAP fault while the process keeps serving."""
from __future__ import annotations

import subprocess
import sys

import pytest
import requests
from lxml import etree

from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault
from wsframework.soap import SoapVersion, parse_envelope
from wsframework.xmlparse import ParserLimits

SOAP11_CT = "text/xml; charset=utf-8"
SOAP12_CT = "application/soap+xml; charset=utf-8"


def post(server, path, body: bytes, content_type=SOAP12_CT, **headers):
    return requests.post(server.base_url + path, data=body,
                         headers={"Content-Type": content_type, **headers}, timeout=30)


def fault_of(response):
    """The response must be a SOAP fault envelope (never HTML, never a traceback)."""
    assert "html" not in (response.headers.get("Content-Type") or "")
    assert b"Traceback" not in response.content
    envelope = parse_envelope(response.content, ParserLimits(max_bytes=10**7))
    fault = envelope.fault()
    assert fault is not None, response.content
    return envelope.version, fault


def still_serving(server):
    assert requests.get(server.base_url + "/health", timeout=5).json()["status"] == "ok"


def list_envelope(version: SoapVersion, token: str) -> bytes:
    env = version.namespace
    return (f'<e:Envelope xmlns:e="{env}" xmlns:a="{ns.WSA10}" xmlns:adm="{ns.ADMIN}">'
            f'<e:Header><a:Action>{ns.ADMIN}/ListTopics</a:Action><a:MessageID>urn:uuid:1</a:MessageID>'
            f'<adm:AdminToken>{token}</adm:AdminToken></e:Header>'
            f'<e:Body><adm:ListTopics/></e:Body></e:Envelope>').encode()


@pytest.mark.parametrize("version,content_type", [(SoapVersion.SOAP11, SOAP11_CT),
                                                  (SoapVersion.SOAP12, SOAP12_CT)])
def test_answers_both_soap_versions(source_server, version, content_type):
    response = post(source_server, "/admin", list_envelope(version, source_server.admin_token),
                    content_type)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith(version.content_type)
    reply = parse_envelope(response.content)
    assert reply.version is version
    assert reply.body.tag == ns.qname(ns.ADMIN, "ListTopicsResponse")
    relates = reply.header(ns.qname(ns.WSA10, "RelatesTo"))
    assert relates is not None and relates.text == "urn:uuid:1"


def test_topics_created_listed_deleted_with_credential(source_server):
    admin = AdminClient(source_server.base_url, source_server.admin_token)
    created = admin.create_topic("stocks/quotes")
    assert created["address"] == source_server.base_url + "/topics/stocks/quotes"
    assert created["matcher"] == ns.MATCHER_XPATH
    admin.create_topic("stocks/quotes/nyse")
    assert [t["name"] for t in admin.list_topics()] == ["stocks/quotes", "stocks/quotes/nyse"]
    assert [t["name"] for t in admin.list_topics("stocks/quotes/nyse")] == ["stocks/quotes/nyse"]
    assert admin.delete_topic("stocks/quotes") == "stocks/quotes"
    assert [t["name"] for t in admin.list_topics()] == ["stocks/quotes/nyse"]


@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_wrong_or_missing_credential_changes_nothing(source_server, token):
    good = AdminClient(source_server.base_url, source_server.admin_token)
    good.create_topic("kept")
    bad = AdminClient(source_server.base_url, token)
    for attempt in (lambda: bad.create_topic("intruder"), lambda: bad.delete_topic("kept"),
                    lambda: bad.list_topics()):
        with pytest.raises(SoapFault) as info:
            attempt()
        assert info.value.subcode == ns.qname(ns.ADMIN, "AccessDenied")
    assert [t["name"] for t in good.list_topics()] == ["kept"]


def test_topic_bound_to_named_matcher_and_unknown_matcher_fault(source_server):
    admin = AdminClient(source_server.base_url, source_server.admin_token)
    with pytest.raises(SoapFault) as info:
        admin.create_topic("t", "urn:no-such-matcher")
    assert info.value.subcode == ns.qname(ns.ADMIN, "UnknownMatcher")
    assert ns.MATCHER_XPATH in [d.text for d in info.value.detail]
    assert admin.list_topics() == []


def test_example_plugin_matcher_works_once_installed(source_server):
    pytest.importorskip("edn_example_matcher", reason="install examples/plugin_matcher (CI does)")
    admin = AdminClient(source_server.base_url, source_server.admin_token)
    created = admin.create_topic("news", "urn:edn-example:matchers:keywords")
    assert created["matcher"] == "urn:edn-example:matchers:keywords"
    assert admin.list_topics()[0]["matcher"] == "urn:edn-example:matchers:keywords"


BAD_INPUTS = {
    "malformed": b"<e:Envelope xmlns:e='http://www.w3.org/2003/05/soap-envelope'><e:Body>",
    "not-xml": b"\x00\xff\xfe garbage",
    "empty": b"",
    "xxe": (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b'<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body><r>&x;</r>'
            b'</e:Body></e:Envelope>'),
    "billion-laughs": (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                       + b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
                                  for i in range(1, 10))
                       + b']><e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body>'
                       b'<r>&lol9;</r></e:Body></e:Envelope>'),
    "deep-nesting": (b'<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body>'
                     + b"<a>" * 10_000 + b"</a>" * 10_000 + b"</e:Body></e:Envelope>"),
    "not-an-envelope": b"<event><price>3</price></event>",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_gets_sender_fault_and_server_keeps_serving(source_server, name):
    response = post(source_server, "/topics/anything", BAD_INPUTS[name])
    version, fault = fault_of(response)
    assert fault.code == "Sender"
    assert response.status_code == 400
    assert b"root:" not in response.content  # nothing of /etc/passwd leaks
    still_serving(source_server)


def test_oversized_body_refused_with_fault(source_server):
    body = (b'<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body><x>'
            + b"x" * (50 * 1024 * 1024) + b"</x></e:Body></e:Envelope>")
    response = post(source_server, "/topics/t", body)
    _, fault = fault_of(response)
    assert fault.code == "Sender" and "exceeds the limit" in fault.reason
    still_serving(source_server)


def test_unknown_action_gets_action_not_supported(source_server):
    body = (f'<e:Envelope xmlns:e="{ns.SOAP11}" xmlns:a="{ns.WSA2004}"><e:Header>'
            f'<a:Action>urn:unknown</a:Action><a:To>{source_server.base_url}/nowhere</a:To>'
            f'</e:Header><e:Body><x/></e:Body></e:Envelope>').encode()
    response = post(source_server, "/nowhere", body, SOAP11_CT)
    version, fault = fault_of(response)
    assert version is SoapVersion.SOAP11 and response.status_code == 500
    assert fault.subcode == ns.qname(ns.WSA2004, "ActionNotSupported")
    still_serving(source_server)


def test_version_mismatch(source_server):
    body = b'<e:Envelope xmlns:e="urn:not-soap"><e:Body/></e:Envelope>'
    _, fault = fault_of(post(source_server, "/admin", body))
    assert fault.code == "VersionMismatch"


def test_admin_wsdl_is_served(source_server):
    response = requests.get(source_server.base_url + "/admin?wsdl", timeout=10)
    assert response.status_code == 200
    wsdl = etree.fromstring(response.content)
    operations = {op.get("name") for op in wsdl.iter("{http://schemas.xmlsoap.org/wsdl/}operation")}
    assert {"CreateTopic", "DeleteTopic", "ListTopics"} <= operations
    assert source_server.base_url + "/admin" in response.text


def test_topics_survive_restart_and_are_shared_by_workers(tmp_path):
    from tests.support.processes import ServerProcess
    with ServerProcess("source", data_dir=tmp_path / "d", workers=2) as server:
        admin = AdminClient(server.base_url, server.admin_token)
        for i in range(6):
            admin.create_topic(f"t{i}")
        # Each request may land on either worker; all must agree.
        for _ in range(6):
            assert len(admin.list_topics()) == 6
        server.kill()
        server.start()
        assert len(admin.list_topics()) == 6


def test_edn_topic_cli(source_server):
    base = [sys.executable, "-m", "edn.cli", "topic"]
    auth = ["--at", source_server.base_url, "--admin-token", source_server.admin_token]
    created = subprocess.run(base + ["create", "cli/topic", *auth], capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    listed = subprocess.run(base + ["list", *auth], capture_output=True, text=True)
    assert "cli/topic" in listed.stdout
    denied = subprocess.run(base + ["list", "--at", source_server.base_url, "--admin-token", "nope"],
                            capture_output=True, text=True)
    assert denied.returncode == 2 and "AccessDenied" in denied.stderr
