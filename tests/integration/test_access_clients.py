"""Principals and permissions over real HTTP, with real clients unmodified: a source run
``--access closed``; tokens and grants made with ``edn access``; zeep with
``zeep.wsse.username.UsernameToken``, suds with HTTP Basic, the CLI with a bearer token.
Each subscribes where granted, is refused where not, and cannot manage another principal's
subscription."""
from __future__ import annotations

import datetime
import subprocess
import sys

import pytest
from lxml import etree

zeep = pytest.importorskip("zeep")
suds_client = pytest.importorskip("suds.client")

from suds import WebFault  # noqa: E402
from suds.transport.http import HttpAuthenticated  # noqa: E402
from zeep.wsse.username import UsernameToken  # noqa: E402

from tests.integration.test_eventing_suds import WsAddressing  # noqa: E402
from tests.integration.test_eventing_zeep import EventingHeaders, granted, load  # noqa: E402
from tests.support.processes import ServerProcess  # noqa: E402
from wsframework import ns  # noqa: E402
from wsframework.admin import AdminClient  # noqa: E402

WSA = ns.WSA10
WSE = ns.WSE2011


def edn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edn.cli", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture(scope="module")
def closed_source(tmp_path_factory):
    base = tmp_path_factory.mktemp("closed")
    with ServerProcess("source", data_dir=base / "source",
                       extra_args=["--access", "closed"]) as server:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        at = ["--at", server.base_url, f"--admin-token={server.admin_token}"]
        tokens = {}
        for name, flags in (("alice", ()), ("bob", ()), ("carol", ("--password-digest",))):
            made = edn("access", "token", "create", name, *flags, *at)
            assert made.returncode == 0, made.stderr
            tokens[name] = made.stdout.strip()
        for principal, permission in (("alice", "subscribe"), ("alice", "publish"),
                                      ("bob", "subscribe"), ("carol", "subscribe")):
            granted_ = edn("access", "grant", principal, permission, "stock*", *at)
            assert granted_.returncode == 0 and "granted" in granted_.stdout, granted_.stderr
        listing = edn("access", "list", "--json", *at)
        assert listing.returncode == 0
        assert '"tokens": ["alice", "bob", "carol"], "password_digest_tokens": ["carol"]' \
            in listing.stdout
        yield server, tokens


def _zeep_client(source, tmp_path, wsse=None, path="/topics/stocks", plugin=None):
    plugin = plugin or EventingHeaders(wsa_2004=False)
    client = load(source.base_url, path, "2011", tmp_path, plugin)
    if wsse is not None:
        client.wsse = wsse
    return client, plugin


def test_zeep_with_a_username_token_subscribes_and_only_its_owner_manages(closed_source, sink,
                                                                          tmp_path):
    source, tokens = closed_source
    options = {"Delivery": {"NotifyTo": {"Address": sink.url + "/zeep"}}, "Expires": "PT1H"}
    anonymous, _ = _zeep_client(source, tmp_path)
    with pytest.raises(zeep.exceptions.Fault) as refused:
        anonymous.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert "needs a principal" in refused.value.message

    alice, plugin = _zeep_client(source, tmp_path, UsernameToken("alice", tokens["alice"]))
    reply = alice.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert granted(reply, "2011") == "PT1H"
    parameters = list(reply.SubscriptionManager.ReferenceParameters._value_1)

    bob_plugin = EventingHeaders(wsa_2004=False)
    bob_plugin.reference_parameters = parameters
    bob, _ = _zeep_client(source, tmp_path, UsernameToken("bob", tokens["bob"]),
                          "/subscriptions", bob_plugin)
    with pytest.raises(zeep.exceptions.Fault) as foreign:
        bob.bind("SubscriptionManager", "SubscriptionManagerSoap12Port").GetStatusOp()
    assert "belongs to another principal" in foreign.value.message

    plugin.reference_parameters = parameters
    manager, _ = _zeep_client(source, tmp_path, UsernameToken("alice", tokens["alice"]),
                              "/subscriptions", plugin)
    manage = manager.bind("SubscriptionManager", "SubscriptionManagerSoap12Port")
    assert granted(manage.RenewOp(Expires="PT2H"), "2011") == "PT2H"
    manage.UnsubscribeOp()

    wrong, _ = _zeep_client(source, tmp_path, UsernameToken("alice", "not-her-token"))
    with pytest.raises(zeep.exceptions.Fault) as bad:
        wrong.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert "wrong name or token" in bad.value.message


def test_zeep_with_a_password_digest_subscribes_once_per_nonce(closed_source, sink, tmp_path):
    """zeep's ``UsernameToken(use_digest=True)``: Base64(SHA-1(nonce + created + token)),
    checked against carol's token kept sealed; alice's token (digest only) cannot be."""
    source, tokens = closed_source
    options = {"Delivery": {"NotifyTo": {"Address": sink.url + "/zeep-digest"}}, "Expires": "PT1H"}
    carol, _ = _zeep_client(source, tmp_path, UsernameToken("carol", tokens["carol"], use_digest=True))
    reply = carol.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert granted(reply, "2011") == "PT1H"
    alice, _ = _zeep_client(source, tmp_path, UsernameToken("alice", tokens["alice"], use_digest=True))
    with pytest.raises(zeep.exceptions.Fault) as refused:
        alice.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert "wrong name or token" in refused.value.message
    # the same nonce and Created again: a replay
    fixed = UsernameToken("carol", tokens["carol"], use_digest=True, nonce="fixed-nonce-1234",
                          created=datetime.datetime.now(datetime.timezone.utc))
    replayed, _ = _zeep_client(source, tmp_path, fixed)
    replayed.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    with pytest.raises(zeep.exceptions.Fault) as again:
        replayed.bind("EventSource", "EventSourceSoap12Port").SubscribeOp(**options)
    assert "replay" in again.value.message


def _suds_subscribe(source, sink, transport=None):
    addressing = WsAddressing()
    topic = source.base_url + "/topics/stocks"
    extra = {"transport": transport} if transport is not None else {}
    client = suds_client.Client(topic + "?wsdl", plugins=[addressing],
                                port="EventSourceSoap11Port", **extra)
    notify_to = client.factory.create(f"{{{WSA}}}EndpointReferenceType")
    notify_to.Address = sink.url + "/suds"
    delivery = client.factory.create(f"{{{WSE}}}DeliveryType")
    delivery.NotifyTo = notify_to
    addressing.to = topic
    return client.service.SubscribeOp(Delivery=delivery, Expires="PT1H")


def test_suds_with_http_basic_subscribes_where_granted(closed_source, sink):
    source, tokens = closed_source
    reply = _suds_subscribe(source, sink, HttpAuthenticated(username="alice",
                                                            password=tokens["alice"]))
    assert reply.GrantedExpires == "PT1H"
    with pytest.raises(WebFault) as refused:
        _suds_subscribe(source, sink)
    assert "AccessDenied" in str(refused.value.fault.faultcode)
    with pytest.raises(WebFault):
        _suds_subscribe(source, sink, HttpAuthenticated(username="alice", password="guess" * 8))


def test_the_cli_publishes_and_subscribes_with_a_bearer_token(closed_source, sink, tmp_path):
    source, tokens = closed_source
    event = tmp_path / "event.xml"
    event.write_text('<q:quote xmlns:q="urn:quotes"><q:price>42</q:price></q:quote>')
    subscribed = edn("subscribe", "--at", source.base_url, "stocks", "--notify-to",
                     sink.url + "/cli", "--access-token", tokens["bob"])
    assert subscribed.returncode == 0, subscribed.stderr
    refused = edn("publish", "--at", source.base_url, "stocks", str(event),
                  "--access-token", tokens["bob"])  # bob may subscribe, not publish
    assert refused.returncode == 2 and "bob may not publish" in refused.stderr
    published = edn("publish", "--at", source.base_url, "stocks", str(event),
                    "--access-token", tokens["alice"])
    assert published.returncode == 0, published.stderr
    [message] = sink.wait_for(1, path="/cli")
    assert b"42" in etree.tostring(message.envelope.body)


def test_the_cli_administers_topics_its_admin_grant_covers(closed_source):
    """``edn topic create/delete`` without the network credential, as a principal with
    ``admin`` on ``stocks.*``: its topics only."""
    source, _ = closed_source
    at = ["--at", source.base_url]
    made = edn("access", "token", "create", "ops", *at, f"--admin-token={source.admin_token}")
    assert made.returncode == 0, made.stderr
    ops = ["--access-token", made.stdout.strip()]
    assert edn("access", "grant", "ops", "admin", "stocks.*", *at,
               f"--admin-token={source.admin_token}").returncode == 0
    created = edn("topic", "create", "stocks.ops", *at, *ops)
    assert created.returncode == 0 and "created stocks.ops" in created.stdout, created.stderr
    refused = edn("topic", "create", "bonds", *at, *ops)
    assert refused.returncode != 0 and "ops may not administer topic 'bonds'" in refused.stderr
    nothing = edn("topic", "create", "stocks.none", *at)
    assert nothing.returncode != 0 and "--access-token" in nothing.stderr
    deleted = edn("topic", "delete", "stocks.ops", *at, *ops)
    assert deleted.returncode == 0 and "deleted stocks.ops" in deleted.stdout, deleted.stderr
