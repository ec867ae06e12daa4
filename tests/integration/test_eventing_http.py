"""WS-Eventing against a real ``edn serve source`` (gunicorn) and a real HTTP sink: both
versions end to end, SubscriptionEnd on graceful stop and on delivery failure, kill -9
durability, and two worker processes sharing one database."""
from __future__ import annotations

import re

import pytest
import requests
from lxml import etree

from subscription_manager.client import EventingClient
from subscription_manager.versions import V2004, V2011
from tests.support.processes import ServerProcess, free_port
from wsframework import ns
from wsframework.addressing import EndpointReference
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault
from wsframework.publisher import publish
from wsframework.soap import SoapVersion
from wsframework.transport import HttpTransport

VERSIONS = {"2004": V2004, "2011": V2011}
FAST = ["--set", "delivery_backoff=0.05", "--set", "delivery_retries=1",
        "--set", "sweep_interval=0.2"]
Q = "urn:quotes"


def quote(price):
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')


def status_of(message, version):
    return message.envelope.body.find(version.q("Status")).text


@pytest.fixture
def source(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source", extra_args=FAST) as server:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        yield server


@pytest.fixture
def transport():
    t = HttpTransport(timeout=(3.0, 10.0))
    yield t
    t.close()


@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12], ids=["soap11", "soap12"])
@pytest.mark.parametrize("name", ["2004", "2011"])
def test_subscribe_notify_renew_status_unsubscribe(source, sink, transport, name, soap):
    version = VERSIONS[name]
    client = EventingClient(name, transport=transport, soap_version=soap)
    param = etree.Element("{urn:app}Key", nsmap={"app": "urn:app"})
    param.text = "k1"
    sub = client.subscribe(source.base_url + "/topics/stocks",
                           EndpointReference(sink.url + "/notify", (param,)),
                           filter="//q:quote[q:price > 30]", namespaces={"q": Q}, expires="PT1H",
                           end_to=sink.url + "/end")
    assert sub.expires == "PT1H"
    publish(source.base_url, "stocks", quote(10))
    publish(source.base_url, "stocks", quote(42))
    [message] = sink.wait_for(1, path="/notify")
    envelope = message.envelope
    assert envelope.version is soap
    assert envelope.body.find(f"{{{Q}}}price").text == "42"
    assert envelope.header("{urn:app}Key").text == "k1"
    assert envelope.header(version.wsa.q("Action")).text == source.base_url + "/topics/stocks/Event"
    assert client.renew(sub, "PT2H") == "PT2H"
    assert client.get_status(sub).startswith("PT")
    client.unsubscribe(sub)
    with pytest.raises(SoapFault) as info:
        client.get_status(sub)
    assert info.value.subcode == version.q("UnknownSubscription" if name == "2011" else "InvalidMessage")
    # a witness subscribed after the Unsubscribe: once it has the next event, a delivery to
    # the unsubscribed one would have been made too
    client.subscribe(source.base_url + "/topics/stocks", sink.url + "/witness")
    publish(source.base_url, "stocks", quote(50))
    sink.wait_for(1, path="/witness")
    paths = [m.path for m in sink.messages]
    assert paths.count("/notify") == 1 and "/end" not in paths  # no SubscriptionEnd either


def test_wrapped_delivery_over_http(source, sink, transport):
    client = EventingClient("2011", transport=transport)
    client.subscribe(source.base_url + "/topics/stocks", sink.url + "/wrapped",
                     format=ns.WSE2011_FORMAT_WRAP)
    publish(source.base_url, "stocks", quote(1))
    [message] = sink.wait_for(1, path="/wrapped")
    body = message.envelope.body
    assert body.tag == ns.qname(ns.WSE2011, "Notify")
    assert body.get("actionURI") == source.base_url + "/topics/stocks/Event"


def test_faults_over_http_keep_the_server_serving(source, sink, transport):
    client = EventingClient("2011", transport=transport)
    with pytest.raises(SoapFault) as info:
        client.subscribe(source.base_url + "/topics/stocks", "http://169.254.169.254/latest")
    assert info.value.subcode == V2011.q("UnusableEPR")
    with pytest.raises(SoapFault) as info:
        client.subscribe(source.base_url + "/topics/nope", sink.url + "/n")
    assert info.value.subcode == ns.qname(ns.WSA10, "DestinationUnreachable")
    assert requests.get(source.base_url + "/health", timeout=5).status_code == 200


@pytest.mark.parametrize("name", ["2004", "2011"])
def test_graceful_stop_sends_source_shutting_down(tmp_path, sink, transport, name):
    version = VERSIONS[name]
    server = ServerProcess("source", data_dir=tmp_path / "s", extra_args=FAST).start()
    try:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        EventingClient(name, transport=transport).subscribe(
            server.base_url + "/topics/stocks", sink.url + "/n", end_to=sink.url + "/end")
        assert server.stop() == 0
        [end] = sink.wait_for(1, path="/end")
        assert status_of(end, version) == version.action("SourceShuttingDown")
        assert end.envelope.header(version.wsa.q("Action")).text == version.action("SubscriptionEnd")
    finally:
        server.kill()


def test_delivery_failure_when_the_sink_is_down(source, sink, transport):
    dead = f"http://127.0.0.1:{free_port()}/gone"  # nothing listens there
    client = EventingClient("2011", transport=transport)
    sub = client.subscribe(source.base_url + "/topics/stocks", dead, end_to=sink.url + "/end")
    publish(source.base_url, "stocks", quote(1))
    [end] = sink.wait_for(1, path="/end", timeout=15)
    assert status_of(end, V2011) == V2011.action("DeliveryFailure")
    with pytest.raises(SoapFault):
        client.get_status(sub)


def test_kill_9_loses_nothing_acknowledged(tmp_path, sink, transport):
    server = ServerProcess("source", data_dir=tmp_path / "s", extra_args=FAST).start()
    try:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        subs = {name: EventingClient(name, transport=transport).subscribe(
                    server.base_url + "/topics/stocks", f"{sink.url}/{name}", expires="PT1H",
                    filter="//q:price > 5", namespaces={"q": Q})
                for name in ("2004", "2011")}
        server.kill()
        server.start()
        publish(server.base_url, "stocks", quote(9))
        sink.wait_for(1, path="/2004")
        sink.wait_for(1, path="/2011")
        for name, sub in subs.items():
            assert EventingClient(name, transport=HttpTransport()).get_status(sub).startswith("PT")
    finally:
        server.kill()


def _fresh(name):
    """A client on its own connection, so the kernel may pick either worker."""
    return EventingClient(name, transport=HttpTransport())


def test_two_workers_share_subscriptions(tmp_path, sink):
    server = ServerProcess("source", data_dir=tmp_path / "s", extra_args=FAST, workers=2).start()
    try:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        subs = []
        pids: set[str] = set()
        while len(pids) < 2 and len(subs) < 200:
            client = _fresh("2011")
            subs.append(client.subscribe(server.base_url + "/topics/stocks",
                                         f"{sink.url}/s{len(subs)}"))
            client.soap.transport.close()
            pids = set(re.findall(r" (\d+) INFO subscription_manager\.operations: subscription ",
                                  server.log_text()))
        assert len(pids) == 2, "both workers should have taken subscriptions"
        events = 6
        for price in range(events):
            publish(server.base_url, "stocks", quote(price))  # a fresh connection each time
        sink.wait_for(len(subs) * events, timeout=20)
        for index in range(len(subs)):
            assert len([m for m in sink.messages if m.path == f"/s{index}"]) == events
        # Unsubscribe through whichever worker; nobody delivers to it afterwards.
        EventingClient("2011", transport=HttpTransport()).unsubscribe(subs[0])
        before = len(sink.messages)
        for price in range(events):
            publish(server.base_url, "stocks", quote(price))
        sink.wait_for(before + (len(subs) - 1) * events, timeout=20)
        assert len([m for m in sink.messages if m.path == "/s0"]) == events
    finally:
        server.stop()
        server.kill()


def test_wsdl_served_over_http(source):
    for query, namespace in (("wsdl", ns.WSE2011), ("wsdl&version=2004", ns.WSE2004)):
        for path in ("/topics/stocks", "/subscriptions"):
            response = requests.get(f"{source.base_url}{path}?{query}", timeout=5)
            assert response.status_code == 200
            root = etree.fromstring(response.content)
            assert root.get("targetNamespace") == namespace
            assert {a.get("location") for a in root.iter("{*}address")} == {source.base_url + path}


def test_sink_down_at_start_does_not_block_publication(source, transport):
    client = EventingClient("2004", transport=transport)
    client.subscribe(source.base_url + "/topics/stocks", f"http://127.0.0.1:{free_port()}/x")
    for price in range(20):
        assert publish(source.base_url, "stocks", quote(price)) == 202
