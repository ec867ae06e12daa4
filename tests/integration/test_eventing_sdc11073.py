"""sdc11073 (the maintained Python SDC/DPWS stack) against a real ``edn serve source``.

sdc11073's consumer speaks WS-Eventing 2004/08 with WS-Addressing 1.0 (the DPWS 1.1 pairing).
Its subscription class, :class:`sdc11073.consumer.subscription.ConsumerSubscription`, is
driven as :class:`sdc11073.consumer.SdcConsumer` drives it, without a full SDC provider: the
hosted service it subscribes to is the source's topic address, the filter is a DPWS action
filter, and every message goes through sdc11073's own :class:`MessageFactory` (schema
validation on), :class:`SoapClient` and :class:`MessageReader` (schema validation on).
Notifications arrive at the test sink.
"""
from __future__ import annotations

import logging

import pytest
from lxml import etree

sdc11073 = pytest.importorskip("sdc11073")

from sdc11073.consumer.subscription import ConsumerSubscription  # noqa: E402
from sdc11073.definitions_sdc import SdcV1Definitions  # noqa: E402
from sdc11073.pysoap.msgfactory import MessageFactory  # noqa: E402
from sdc11073.pysoap.msgreader import MessageReader  # noqa: E402
from sdc11073.pysoap.soapclient import SoapClient as SdcSoapClient  # noqa: E402
from sdc11073.xml_types import eventing_types  # noqa: E402
from sdc11073.xml_types.addressing_types import EndpointReferenceType  # noqa: E402
from sdc11073.xml_types.dpws_types import HostedServiceType  # noqa: E402

from tests.support.processes import ServerProcess  # noqa: E402
from wsframework import ns  # noqa: E402
from wsframework.addressing import AddressingHeaders, WsaVersion  # noqa: E402
from wsframework.admin import AdminClient  # noqa: E402
from wsframework.client import SoapClient  # noqa: E402
from wsframework.publisher import topic_address  # noqa: E402

ACTION = "urn:example:sdc/EpisodicMetricReport"
OTHER_ACTION = "urn:example:sdc/EpisodicAlertReport"
Q = "urn:quotes"
LOG = logging.LoggerAdapter(logging.getLogger("sdc11073-test"), {})


@pytest.fixture
def source(tmp_path):
    with ServerProcess("source", data_dir=tmp_path / "source") as server:
        AdminClient(server.base_url, server.admin_token).create_topic("sdc")
        yield server


def sdc_subscription(base_url: str, notify_url: str, end_to_url: str | None,
                     ssl_context=None) -> ConsumerSubscription:
    """A ConsumerSubscription wired the way SdcConsumer wires it (validating factory and
    reader, one SoapClient per netloc), to the hosted service at the source's topic;
    ``ssl_context``: the consumer's client context (HTTPS, its certificate presented)."""
    definitions = SdcV1Definitions
    factory = MessageFactory(definitions, None, LOG, validate=True)
    reader = MessageReader(definitions, None, LOG, validate=True)
    clients: dict[str, SdcSoapClient] = {}

    def soap_client_for(address: str) -> SdcSoapClient:
        netloc = address.split("/")[2]
        if netloc not in clients:
            clients[netloc] = SdcSoapClient(netloc, 10, LOG, ssl_context=ssl_context,
                                            sdc_definitions=definitions, msg_reader=reader)
        return clients[netloc]

    hosted = HostedServiceType()
    endpoint = EndpointReferenceType()
    endpoint.Address = topic_address(base_url, "sdc")
    hosted.EndpointReference.append(endpoint)
    hosted.ServiceId = "urn:example:sdc:service"
    filter_type = eventing_types.FilterType()
    filter_type.Dialect = ns.ACTION_DIALECT_DPWS11
    filter_type.text = ACTION
    subscription = ConsumerSubscription(factory, definitions.data_model, soap_client_for, hosted,
                                        filter_type, notify_url, end_to_url, "test")
    subscription._test_clients = clients  # closed by the test
    return subscription


def close(subscription):
    for client in subscription._test_clients.values():
        client.close()


def publish(base_url: str, action: str, price: int) -> None:
    event = etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')
    SoapClient().send(topic_address(base_url, "sdc"), action, event)


def test_sdc11073_subscribes_renews_gets_status_and_unsubscribes(source, sink):
    subscription = sdc_subscription(source.base_url, sink.url + "/sdc", sink.url + "/sdc-end")
    try:
        subscription.subscribe(expires=600)
        assert subscription.is_subscribed
        manager = subscription.subscribe_response.SubscriptionManager
        # identified by its own address: nothing for sdc11073 to echo (and mark)
        assert manager.Address.startswith(source.base_url + "/subscriptions/")
        assert not manager.ReferenceParameters
        assert subscription.granted_expires == 600

        publish(source.base_url, OTHER_ACTION, 1)  # filtered out by the action filter
        publish(source.base_url, ACTION, 2)
        [message] = sink.wait_for(1, path="/sdc")
        headers = AddressingHeaders.parse(message.envelope.headers)
        assert headers.version is WsaVersion.WSA10
        assert headers.action == ACTION and headers.to == sink.url + "/sdc"
        assert message.envelope.body.find(f"{{{Q}}}price").text == "2"

        assert subscription.renew(1200) == 1200
        assert subscription.is_subscribed
        assert 0 < subscription.get_status() <= 1200
        subscription.unsubscribe()
        assert not subscription.is_subscribed
        # the source has forgotten it: a further GetStatus is a fault sdc11073 reports
        subscription.is_subscribed = True
        assert subscription.get_status() == 0.0
        assert not subscription.is_subscribed
    finally:
        close(subscription)


def test_sdc11073_hears_subscription_end(source, sink):
    subscription = sdc_subscription(source.base_url, sink.url + "/sdc", sink.url + "/sdc-end")
    try:
        subscription.subscribe(expires=600)
        assert subscription.is_subscribed
        AdminClient(source.base_url, source.admin_token).delete_topic("sdc")
        [end] = sink.wait_for(1, path="/sdc-end")
        headers = AddressingHeaders.parse(end.envelope.headers)
        assert headers.version is WsaVersion.WSA10
        assert headers.action == ns.WSE2004 + "/SubscriptionEnd"
        body = eventing_types.SubscriptionEnd.from_node(end.envelope.body)
        assert body.Status == ns.WSE2004 + "/SourceCancelling"
        assert body.SubscriptionManager.Address == \
            subscription.subscribe_response.SubscriptionManager.Address
    finally:
        close(subscription)


def test_sdc11073_with_mutual_tls_both_ways(tmp_path):
    """As SDC runs: the provider (here the source) verifies the consumer's certificate, and
    the consumer's notification endpoint is itself HTTPS and verifies the provider's. Every
    certificate comes from ``edn tls issue``; the consumer's contexts from sdc11073's own
    ``mk_ssl_contexts``."""
    from pathlib import Path

    from sdc11073.certloader import mk_ssl_contexts

    from edn.localnet.network import NetworkPki
    from edn.sink import NotificationSink
    from wsframework.tls import ClientTls, process_client_tls, set_process_client_tls
    issuer = NetworkPki(tmp_path / "pki")
    consumer = issuer.member("sdc-consumer")
    contexts = mk_ssl_contexts(Path(consumer.key), Path(consumer.cert), Path(issuer.ca))
    previous = process_client_tls()
    set_process_client_tls(ClientTls(issuer.ca, consumer.cert, consumer.key))  # to publish
    provider = ServerProcess("source", data_dir=tmp_path / "source",
                             tls=issuer.member("provider", client_auth="required"))
    try:
        with provider, NotificationSink(ssl_context=contexts.server_context) as sink:
            AdminClient(provider.base_url, provider.admin_token).create_topic("sdc")
            assert provider.base_url.startswith("https://") and sink.url.startswith("https://")
            subscription = sdc_subscription(provider.base_url, sink.url + "/sdc", None,
                                            ssl_context=contexts.client_context)
            try:
                subscription.subscribe(expires=600)
                assert subscription.is_subscribed
                publish(provider.base_url, ACTION, 7)
                [message] = sink.wait_for(1, path="/sdc")
                assert message.envelope.body.find(f"{{{Q}}}price").text == "7"
                assert subscription.renew(1200) == 1200
                subscription.unsubscribe()
            finally:
                close(subscription)
            # a consumer without a certificate cannot even connect to the provider (sdc11073
            # 3.x reports the handshake's failure as a TypeError of its own log call)
            stranger = sdc_subscription(provider.base_url, sink.url + "/x", None,
                                        ssl_context=_no_certificate(issuer.ca))
            try:
                with pytest.raises((OSError, TypeError)):
                    stranger.subscribe(expires=600)
                assert not stranger.is_subscribed
            finally:
                close(stranger)
            import socket
            import ssl
            with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as raw:
                with pytest.raises((ssl.SSLError, ConnectionError)):
                    with _no_certificate(issuer.ca).wrap_socket(raw) as tls:
                        tls.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                        tls.recv(1024)
    finally:
        set_process_client_tls(previous)


def _no_certificate(ca):
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(str(ca))
    return context
