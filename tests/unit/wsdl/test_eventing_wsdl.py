"""The eventing WSDL documents: served at {topic}?wsdl and {manager}?wsdl with the address
filled in, both versions, and usable by zeep (loaded from the served bytes, no network)."""
from __future__ import annotations

import io

import pytest
import zeep
from lxml import etree

from subscription_manager.versions import V2004, V2011
from tests.support.eventing import BASE, SINK, Harness
from wsdl.eventing import MANAGER, SOURCE, eventing_wsdl
from wsframework.soap import SoapVersion
from wsframework.wsgi import WsgiApplication

WSDL = "http://schemas.xmlsoap.org/wsdl/"
VERSIONS = {"2004": V2004, "2011": V2011}


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.close()


def get(app, path, query):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
               "wsgi.input": io.BytesIO(b""), "SERVER_NAME": "es.test", "SERVER_PORT": "80"}
    captured = {}

    def start_response(status, headers):
        captured["status"] = int(status.split()[0])
    body = b"".join(app(environ, start_response))
    return captured["status"], body


def zeep_client(tmp_path, document: bytes, name: str) -> zeep.Client:
    path = tmp_path / f"{name}.wsdl"
    path.write_bytes(document)
    return zeep.Client(str(path))


@pytest.mark.parametrize("query,version", [("wsdl", "2011"), ("wsdl&version=2011", "2011"),
                                           ("wsdl&version=2004", "2004")])
def test_served_at_topic_and_manager_addresses(harness, query, version):
    app = WsgiApplication(harness.service)
    for path, kind in (("/topics/stocks", SOURCE), ("/subscriptions", MANAGER)):
        status, body = get(app, path, query)
        assert status == 200
        root = etree.fromstring(body)
        assert root.get("targetNamespace") == VERSIONS[version].namespace
        service = root.find(f"{{{WSDL}}}service")
        assert service.get("name") == kind
        locations = {el.get("location") for el in service.iter("{*}address")}
        assert locations == {BASE + path}


@pytest.mark.parametrize("path,query", [("/topics/nope", "wsdl"), ("/topics/stocks", "wsdl&version=1999"),
                                        ("/subscriptions/x", "wsdl")])
def test_no_wsdl_for_unknown_addresses(harness, path, query):
    status, _ = get(WsgiApplication(harness.service), path, query)
    assert status == 404


def test_admin_wsdl_still_served(harness):
    status, body = get(WsgiApplication(harness.service), "/admin", "wsdl")
    assert status == 200 and b"AdminService" in body


@pytest.mark.parametrize("version", ["2004", "2011"])
@pytest.mark.parametrize("port", ["Soap11", "Soap12"])
def test_zeep_builds_a_subscribe_the_source_accepts(harness, tmp_path, version, port):
    v = VERSIONS[version]
    document = harness.service.wsdl_for("/topics/stocks", {"version": [version]})
    client = zeep_client(tmp_path, document, f"source-{version}")
    service = client.bind(SOURCE, f"{SOURCE}{port}Port")
    options = {"Delivery": {"NotifyTo": {"Address": SINK + "/zeep"}}, "Expires": "PT1H",
               "Filter": {"_value_1": "count(*) >= 0"}}
    if version == "2011":
        options["Format"] = {"Name": v.namespace + "/DeliveryFormats/Wrap"}
    message = client.create_message(service, "SubscribeOp", **options)
    body = message.find("{*}Body")[0]
    assert body.tag == v.q("Subscribe")
    # The body zeep built is accepted by the event source as it is.
    soap = SoapVersion.SOAP11 if port == "Soap11" else SoapVersion.SOAP12
    handle = harness.client(version, soap).subscribe_raw(BASE + "/topics/stocks", body)
    assert handle.expires == "PT1H" and handle.id
    harness.publish(b'<e xmlns="urn:e"/>')
    harness.drain()
    assert len(harness.sink.at("/zeep")) == 1


@pytest.mark.parametrize("version", ["2004", "2011"])
def test_zeep_reads_the_manager_operations(harness, tmp_path, version):
    document = harness.service.wsdl_for("/subscriptions", {"version": [version]})
    client = zeep_client(tmp_path, document, f"manager-{version}")
    service = client.bind(MANAGER, f"{MANAGER}Soap12Port")
    for operation in ("RenewOp", "GetStatusOp", "UnsubscribeOp"):
        message = client.create_message(service, operation)
        assert message.find("{*}Body")[0].tag == VERSIONS[version].q(operation[:-2])


def test_documents_are_well_formed_and_cached():
    first = eventing_wsdl("2011", SOURCE, "http://a/topics/t")
    assert eventing_wsdl("2011", SOURCE, "http://a/topics/t") is first
    with pytest.raises(ValueError):
        eventing_wsdl("1999", SOURCE, "http://a")
    with pytest.raises(ValueError):
        eventing_wsdl("2011", "Nope", "http://a")
