"""The EDN subscription server in process: a dispatcher and three servers on one
InProcessTransport (tests.support.edn.Network), no sockets, no timers."""
from __future__ import annotations

import time

import numpy as np
import pytest
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from matchers.rtree_engine import RTreeMatchingEngine
from matchers.summary import Summary
from route_manager import protocol
from route_manager.peers import PeerSummary
from subscription_manager.client import EventingClient, subscribe_body
from subscription_manager import manager as base_manager
from subscription_manager.server import PLACED, EdnSettings, build_server
from subscription_manager.settings import EventingSettings
from subscription_manager.versions import VERSIONS
from tests.support.edn import (DISPATCHER, EV, TOPIC, Network, SingleSource,
                                         event_element, expected_notifications, random_boxes,
                                         random_points, range_filter, schema_element, server_url)
from tests.support.eventing import FAST, SINK, TOKEN, fake_resolver
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.admission import AdmissionSettings
from wsframework.service import ServiceConfig
from wsframework.soap import SoapVersion


@pytest.fixture
def network(tmp_path):
    nets = []

    def make(*args, **kwargs):
        net = Network(tmp_path, *args, **kwargs)
        nets.append(net)
        return net
    yield make
    for net in nets:
        net.close()


def summary_rows(net, server):
    return net.dispatcher_service.store.query(
        "SELECT generation, load, summary FROM edn_summaries WHERE route = ? AND server = ?",
        (TOPIC, server))


# -- registration and topics ----------------------------------------------------------------

def test_registration_hosts_the_dispatchers_topics_and_learns_the_peers(network):
    net = network(register=False)
    net.create_topic()  # before any server registered
    m0 = net.manager(0)
    assert TOPIC not in m0.topics
    for m in net.managers:
        assert m.network.register()
    entry = m0.topics.get(TOPIC)
    assert isinstance(entry.matcher, RTreeMatchingEngine)
    assert entry.matcher.schema.dims == ("x0", "x1", "x2")
    # The last to register learnt its peers from the answer; the first learns them from the
    # periodic ListServers of the peer exchange.
    assert set(net.manager(2).peers.servers()) == {"s0", "s1"}
    assert set(m0.peers.servers()) == set()
    m0.network.exchange_peers()
    assert set(m0.peers.servers()) == {"s1", "s2"}
    # A topic created after registration reaches every server through the dispatcher.
    net.admin.create_topic("later", None, schema_element(2))
    assert all("later" in m.topics for m in net.managers)
    # Registration announced every topic's (empty) summary.
    assert len(summary_rows(net, "s0")) == 1


def test_registration_retries_in_the_background_until_the_dispatcher_answers(tmp_path):
    net = Network(tmp_path, (), register=False)
    try:
        net.create_topic()
        config = ServiceConfig(server_url(0), tmp_path / "late", TOKEN, role="server",
                               settings={"dispatcher": "http://later.test", "name": "late",
                                         "summary_interval": 0.01, "peer_interval": 0.05})
        service = build_server(config, transport=net.transport, resolver=fake_resolver(),
                               settings=dict(FAST), start_sweeper=False)
        manager = service.subscription_manager
        try:
            deadline = time.monotonic() + 5
            while manager.stats().get("leader") != 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert manager.stats()["leader"] == 1 and not manager.network.registered.is_set()
            net.transport.mount("http://later.test", net.dispatcher_service)  # it answers now
            assert manager.network.registered.wait(5)
            assert TOPIC in manager.topics
            # A second process on the same data directory does not run the threads.
            twin = build_server(config, transport=net.transport, resolver=fake_resolver(),
                                settings=dict(FAST), start_sweeper=False, start_background=False)
            try:
                assert not twin.subscription_manager.network.election.try_acquire()
            finally:
                twin.close()
        finally:
            service.close()
        assert not manager.network.election.held
    finally:
        net.close()


def test_the_server_role_needs_a_dispatcher(tmp_path):
    with pytest.raises(ValueError, match="dispatcher"):
        build_server(ServiceConfig("http://x.test", tmp_path, TOKEN), start_background=False)


def test_the_server_reads_its_mapping_once_into_both_groups(tmp_path, monkeypatch):
    reads = []
    read = base_manager.read_settings

    def counting(mapping, *groups, **kwargs):
        reads.append(groups)
        return read(mapping, *groups, **kwargs)

    def never(cls, *args, **kwargs):
        raise AssertionError("the manager reads its settings through the base, once")

    monkeypatch.setattr(base_manager, "read_settings", counting)
    monkeypatch.setattr(EdnSettings, "from_mapping", classmethod(never))
    config = ServiceConfig("http://s7.test:8081", tmp_path, TOKEN,
                           settings={"dispatcher": "http://d.test/", "load_threshold": "7",
                                     "delivery_retries": "1"})
    service = build_server(config, start_background=False, start_sweeper=False)
    try:
        manager = service.subscription_manager
        assert len(reads) == 1 and set(reads[0]) == {EdnSettings, EventingSettings,
                                                     AdmissionSettings}
        assert (manager.edn.dispatcher, manager.edn.load_threshold) == ("http://d.test", 7)
        assert manager.edn.name == "s7.test:8081"  # defaults to the base URL's host:port
        assert manager.settings is manager.role_settings[EventingSettings]
        assert manager.settings.delivery_retries == 1
        assert manager.settings.keep_subscriptions_on_shutdown  # the server role's default
    finally:
        service.close()


# -- route updates --------------------------------------------------------------------------

def test_route_updates_are_coalesced_and_generations_grow(network):
    net = network(("local", "local", "local"))
    net.create_topic()
    m0 = net.manager(0)
    before = m0.stats().get("summary_updates_sent", 0)
    lo, hi = random_boxes(40, 3, seed=3)
    for i in range(40):
        net.subscribe(0, lo[i], hi[i], i)
    assert m0.flush_summaries() == 1  # 40 subscribes, one route update
    assert m0.flush_summaries() == 0  # nothing new
    assert m0.stats()["summary_updates_sent"] == before + 1
    (row,) = summary_rows(net, "s0")
    assert row["load"] == 40
    summary = Summary.from_text(row["summary"])
    engine = m0.matcher_for(m0.topics.get(TOPIC))
    assert len(summary) == engine.maximal_count  # precise: the maximal rectangles
    first = row["generation"]
    client = EventingClient("2011", transport=net.transport)
    handle = net.subscribe(0, [1, 1, 1], [2, 2, 2], 99)
    client.unsubscribe(handle)
    assert m0.flush_summaries() == 1
    assert summary_rows(net, "s0")[0]["generation"] > first


def test_the_centroid_counts_every_subscription_held_as_they_come_and_go(network):
    """K-means placement's centroid: the mean centre of the subscriptions' boxes, a
    subscription without a filter counting the whole space, kept through an unsubscribe."""
    net = network(partitioners=("kmeans",))
    net.create_topic()
    net.step(2)
    m0 = net.manager(0)
    entry = m0.topics.get(TOPIC)
    lo, hi = random_boxes(12, 3, seed=8)
    handles = [net.subscribe(0, lo[i], hi[i], i) for i in range(12)]
    client = EventingClient("2011", transport=net.transport)
    client.subscribe(f"{server_url(0)}/topics/{TOPIC}", f"{SINK}/n/all", expires="PT1H")
    everything = m0.matcher_for(entry).schema.everything()
    centres = [(lo[i] + hi[i]) / 2 for i in range(12)] + [(everything[0] + everything[1]) / 2]
    centroid, count = m0.summaries.centroid(entry)
    assert count == 13 == m0.summaries.route_count(entry)
    assert np.allclose(centroid, np.mean(centres, axis=0))
    for handle in handles[:5]:
        client.unsubscribe(handle)
    centroid, count = m0.summaries.centroid(entry)
    assert count == 8
    assert np.allclose(centroid, np.mean(centres[5:], axis=0))


def test_a_summary_too_large_for_the_root_is_cut_to_fit_and_still_routes_exactly(network):
    """summary_max_bytes: the precise summary would not fit, so the server sends a coarser
    one (fewer boxes, each covering several): no subscription loses an event."""
    net = network(("local", "local", "local"), settings={"summary_max_bytes": 2048})
    net.create_topic()
    m0 = net.manager(0)
    lo, hi = random_boxes(60, 3, seed=31, width=1.0)
    for i in range(60):
        net.subscribe(0, lo[i], hi[i], i)
    assert m0.flush_summaries() == 1
    (row,) = summary_rows(net, "s0")
    assert len(row["summary"]) <= 2048
    sent = Summary.from_text(row["summary"])
    assert len(sent) < m0.matcher_for(m0.topics.get(TOPIC)).maximal_count
    events = random_points(80, 3, seed=32)
    net.publish(events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)


def test_route_update_content_covers_every_worker(network, tmp_path):
    """Another process on the same store (a second gunicorn worker) took subscriptions: the
    elected worker's route update includes them (it follows the store first)."""
    net = network(("local", "local", "local"))
    net.create_topic()
    config = net.servers[0].config
    worker = build_server(config, transport=net.transport, resolver=fake_resolver(),
                          settings=dict(FAST), start_sweeper=False, start_background=False)
    try:
        net.transport.mount(server_url(0), worker)  # requests now reach the other "worker"
        lo, hi = random_boxes(10, 3, seed=5)
        for i in range(10):
            net.subscribe(0, lo[i], hi[i], i)
        net.transport.mount(server_url(0), net.servers[0])
        assert net.manager(0).flush_summaries() == 1
        assert summary_rows(net, "s0")[0]["load"] == 10
    finally:
        worker.close()


# -- exact delivery -------------------------------------------------------------------------

@pytest.mark.parametrize("partitioner", ["random", "rtree", "kmeans"])
def test_delivery_is_exactly_that_of_a_single_source(network, tmp_path, partitioner):
    # precise summaries throughout: a self-tuning step (the test process is CPU bound) would
    # make the hits below those of a coarser precision
    net = network((partitioner,) * 3, dispatcher_settings={"self_tuning": "off"})
    net.create_topic()
    single = SingleSource(tmp_path, 3)
    try:
        n = 120
        lo, hi = random_boxes(n, 3, seed=11)
        for i in range(n):
            net.subscribe(i % 3, lo[i], hi[i], i)
            single.subscribe(lo[i], hi[i], i)
            if i % 15 == 14:
                net.step()
        net.step()
        assert sum(m.load() for m in net.managers) == n
        placements = {}
        for m in net.managers:
            for key, value in m.stats().items():
                if key.startswith("placements."):
                    placements[key] = placements.get(key, 0) + value
        assert sum(placements.values()) == n
        events = random_points(80, 3, seed=12)
        net.publish(events)
        single.publish(events)
        net.drain()
        got = net.received()
        assert got == single.received() == expected_notifications(lo, hi, events)
        assert len(set(got)) == len(got)  # no duplicates
        # The dispatcher sent an event to a server exactly when its summary covers it.
        hits = net.dispatcher.counters.per_server_hits
        for m in net.managers:
            engine = m.matcher_for(m.topics.get(TOPIC))
            summary = engine.summary(1.0)
            covered = sum(summary.covers(engine.schema.point(event_element(e, 0)))
                          for e in events)
            assert hits.get(m.edn.name, 0) == covered
    finally:
        single.close()


# -- placement: forwarded subscribes --------------------------------------------------------

# "2004-wsa10": 2004/08 with WS-Addressing 1.0 (DPWS), identified by its manager address
@pytest.mark.parametrize("version", ["2004", "2004-wsa10"])
def test_a_forwarded_subscribe_answers_with_the_owning_servers_epr(network, version):
    net = network(("rtree", "rtree", "local"))
    net.create_topic()
    net.subscribe(2, [5, 5, 5], [8, 8, 8], 0)  # s2 owns the region
    net.step()
    m0, m2 = net.manager(0), net.manager(2)
    # 2004/08 over SOAP 1.1 at s0, inside s2's rectangle: placed on s2.
    client = EventingClient(version, transport=net.transport, soap_version=SoapVersion.SOAP11)
    handle = client.subscribe(f"{server_url(0)}/topics/{TOPIC}", f"{SINK}/n/1",
                              filter=range_filter([6, 6, 6], [7, 7, 7]), dialect=RANGES_DIALECT,
                              expires="PT1H")
    assert handle.manager.address == server_url(2) + "/subscriptions" + (
        f"/{handle.id}" if version == "2004-wsa10" else "")
    assert m0.load() == 0 and m2.load() == 2
    stored = m2.store.get(handle.id)
    assert stored.version.name == version and stored.soap_version == SoapVersion.SOAP11.value
    assert m0.stats()["placements.s2"] == 1 and m2.stats()["placed_here_by_peers"] == 1
    assert client.get_status(handle) is not None
    assert client.renew(handle, "PT2H") is not None
    net.step()
    events = [[6.5, 6.5, 6.5], [1, 1, 1]]
    net.publish(events)
    net.drain()
    assert net.received() == [("/n/0", "0"), ("/n/1", "0")]
    client.unsubscribe(handle)
    with pytest.raises(SoapFault):
        client.get_status(handle)
    # A fault from the owning server reaches the client as it was sent.
    with pytest.raises(SoapFault) as caught:
        client.subscribe(f"{server_url(0)}/topics/{TOPIC}", f"{SINK}/n/2",
                         filter=range_filter([6, 6, 6], [7, 7, 7]), dialect=RANGES_DIALECT,
                         expires="P1Y", mode="urn:unknown-mode")
    assert "DeliveryModeRequestedUnavailable" in caught.value.subcode


def test_xpath_prefixes_declared_on_the_envelope_survive_forwarding(network):
    net = network(("rtree", "rtree", "local"))
    net.create_topic()
    net.subscribe(2, [0, 0, 0], [10, 10, 10], 0)  # s2 covers everything
    net.step()
    client = EventingClient("2011", transport=net.transport)
    body = subscribe_body(client.version, f"{SINK}/n/1", filter="e:x0 > 4",
                          namespaces={"e": EV}, expires="PT1H")
    handle = client.subscribe_raw(f"{server_url(0)}/topics/{TOPIC}", body)
    assert handle.manager.address.startswith(server_url(2))
    net.step()
    net.publish([[5, 1, 1], [3, 1, 1]])
    net.drain()
    assert net.received() == [("/n/0", "0"), ("/n/0", "1"), ("/n/1", "0")]


@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12])
def test_a_2004_xpath_filter_is_read_on_the_envelope_for_routing_and_matching(network, soap):
    """2004/08 XPath filters see the notification's envelope (the submission's dialect): the
    server's summary is still narrowed by the event's ranges under s:Body, and the exact
    match on the server reads the envelope, not the event."""
    net = network(("local", "local", "local"))
    net.create_topic()
    client = EventingClient("2004", transport=net.transport, soap_version=soap)
    namespaces = {"e": EV, "s": soap.namespace}
    m0 = net.manager(0)
    for index, expression in enumerate(["/s:Envelope/s:Body/e:event[e:x0 > 4]",
                                        "/e:event[e:x0 > 4]"]):  # root is the envelope: never
        body = subscribe_body(client.version, f"{SINK}/n/{index}", filter=expression,
                              namespaces=namespaces, expires="PT1H")
        client.subscribe_raw(f"{server_url(0)}/topics/{TOPIC}", body)
        if index == 0:  # its one rectangle starts at x0 = 4 (the next spans the whole space)
            summary = m0.matcher_for(m0.topics.get(TOPIC)).summary(1.0)
            assert summary.mins[:, 0].tolist() == pytest.approx([4.0])
    net.step()
    net.publish([[5, 1, 1], [3, 1, 1]])
    net.drain()
    assert net.received() == [("/n/0", "0")]


def test_placement_by_a_client_is_refused(network):
    net = network()
    net.create_topic()
    soap = SoapClient(net.transport)
    placed = etree.Element(PLACED)
    placed.text = "1"
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = "guess"
    body = subscribe_body("2011", f"{SINK}/n/1", expires="PT1H")
    with pytest.raises(SoapFault) as caught:
        soap.call(f"{server_url(0)}/topics/{TOPIC}",
                  "http://www.w3.org/2011/03/ws-evt/Subscribe", body, [placed, token])
    assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
    assert caught.value.reason == "edn:Placed needs the network's admin credential"
    assert sum(m.load() for m in net.managers) == 0


def test_an_unreachable_peer_leaves_the_subscription_here(network):
    net = network(("rtree", "rtree", "local"))
    net.create_topic()
    net.subscribe(2, [0, 0, 0], [10, 10, 10], 0)
    net.step()
    net.transport._endpoints.pop(server_url(2))  # s2 goes away
    handle = net.subscribe(0, [1, 1, 1], [2, 2, 2], 1)
    assert handle.manager.address == server_url(0) + "/subscriptions"
    m0 = net.manager(0)
    assert m0.stats()["forward_unreachable"] == 1 and m0.is_down("s2")
    handle = net.subscribe(0, [1, 1, 1], [2, 2, 2], 2)  # s2 is now skipped outright
    assert m0.stats()["forward_unreachable"] == 1 and m0.load() == 2


# -- peer exchange --------------------------------------------------------------------------

def test_peer_updates_are_stored_and_validated(network):
    net = network()
    net.create_topic()
    m0 = net.manager(0)
    summary = Summary(("x0", "x1", "x2"), np.array([[1.0, 1.0, 1.0]]), np.array([[2.0, 2.0, 2.0]]))
    element = PeerSummary(summary, np.array([1.5, 1.5, 1.5]), 3).to_element()
    admin = AdminClient(server_url(0), TOKEN, transport=net.transport)
    response = admin.call(protocol.PeerUpdate(Server="s9", Address="http://s9.test", Route=TOPIC,
                                              Load=3, Summary=element))
    assert response.Server == "s0"
    (state,) = [s for s in m0.peers.route_states(TOPIC) if s.name == "s9"]
    assert state.load == 3 and state.count == 3 and state.mins.tolist() == [[1.0, 1.0, 1.0]]
    bad = etree.fromstring(etree.tostring(element))
    bad.find("{urn:wsframework:edn}Summary").set("boxes", "7")
    with pytest.raises(SoapFault) as caught:
        admin.call(protocol.PeerUpdate(Server="s9", Address="http://s9.test", Route=TOPIC,
                                       Load=3, Summary=bad))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert caught.value.reason.startswith("unusable peer summary from s9: ")
    with pytest.raises(SoapFault) as caught:
        AdminClient(server_url(0), "wrong", transport=net.transport).call(
            protocol.PeerUpdate(Server="s9", Address="http://s9.test", Route=TOPIC, Load=3))
    assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
    with pytest.raises(SoapFault) as caught:  # one reading of peer addresses (urlpolicy)
        admin.call(protocol.PeerUpdate(Server="s8", Address="http://169.254.169.254\\@s8.test",
                                       Route=TOPIC, Load=3))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert "s8" not in [s.name for s in m0.peers.route_states(TOPIC)]
    # The periodic exchange tells every peer our summary, centroid and load.
    net.subscribe(1, [3, 3, 3], [4, 4, 4], 0)
    net.manager(1).network.exchange_peers()
    (state,) = [s for s in m0.peers.route_states(TOPIC) if s.name == "s1"]
    assert state.load == 1 and state.count == 1 and state.centroid.tolist() == [3.5, 3.5, 3.5]
    assert net.manager(1).network.exchange_peers() == 0  # nothing new: no traffic


# -- events from the dispatcher -------------------------------------------------------------

def test_an_event_batch_for_an_unknown_topic_is_a_fault(network):
    net = network()
    net.create_topic()
    batch = etree.Element("{urn:wsframework:edn}EventBatch")
    batch.append(event_element([1, 1, 1], 0))
    with pytest.raises(SoapFault) as caught:
        SoapClient(net.transport).call(f"{server_url(0)}/topics/nope", EVENT_BATCH_ACTION,
                                       batch, [_token(TOKEN)])
    assert "DestinationUnreachable" in caught.value.subcode


def _token(text: str) -> etree._Element:
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = text
    return token


@pytest.mark.parametrize("token", [None, "guess", f" {TOKEN}"])
def test_an_event_batch_needs_the_networks_credential(network, token):
    """Only the dispatcher sends batches: one from anybody else is refused before a single
    event of it is matched (it would bypass the dispatcher's routing and accounting)."""
    net = network(("local", "local", "local"))
    net.create_topic()
    net.subscribe(0, [0, 0, 0], [10, 10, 10], 0)
    batch = etree.Element("{urn:wsframework:edn}EventBatch")
    batch.append(event_element([1, 1, 1], 0))
    headers = [] if token is None else [_token(token)]
    with pytest.raises(SoapFault) as caught:
        SoapClient(net.transport).call(f"{server_url(0)}/topics/{TOPIC}",
                                       EVENT_BATCH_ACTION, batch, headers)
    assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
    net.drain()
    assert net.received() == []
    assert net.manager(0).edn_counters.get("events_received", 0) == 0


def test_an_event_batch_over_the_most_events_is_refused_whole_before_matching(network):
    net = network(("local", "local", "local"))
    net.create_topic()
    net.subscribe(0, [0, 0, 0], [10, 10, 10], 0)

    def send(count, how="send"):
        batch = etree.Element("{urn:wsframework:edn}EventBatch")
        for k in range(count):
            batch.append(event_element([1, 1, 1], k))
        getattr(SoapClient(net.transport), how)(f"{server_url(0)}/topics/{TOPIC}",
                                                EVENT_BATCH_ACTION, batch, [_token(TOKEN)])
    with pytest.raises(SoapFault) as caught:
        send(protocol.EVENT_BATCH_MOST + 1, "call")  # a fault, rather than an empty 202
    assert caught.value.code == "Sender" and "at most 4096 events" in caught.value.reason
    net.drain()
    assert net.received() == []
    assert net.manager(0).edn_counters.get("events_received", 0) == 0
    send(protocol.EVENT_BATCH_MOST)  # the most is taken
    net.drain()
    assert len(net.received()) == protocol.EVENT_BATCH_MOST


def test_an_event_batch_action_without_an_event_batch_body_is_a_sender_fault(network):
    net = network(("local", "local", "local"))
    net.create_topic()
    net.subscribe(0, [0, 0, 0], [10, 10, 10], 0)
    with pytest.raises(SoapFault) as caught:
        SoapClient(net.transport).call(f"{server_url(0)}/topics/{TOPIC}", EVENT_BATCH_ACTION,
                                       event_element([1, 1, 1], 0), [_token(TOKEN)])
    assert caught.value.code == "Sender"
    assert "needs an edn:EventBatch body" in caught.value.reason
    net.drain()
    assert net.received() == []


def test_notifications_carry_the_networks_topic_action(network):
    net = network(("local", "local", "local"))
    net.create_topic()
    net.subscribe(1, [0, 0, 0], [10, 10, 10], 0)
    net.step()
    net.publish([[1, 2, 3]])
    net.drain()
    (message,) = net.sink.messages
    assert message[3] == f"{DISPATCHER}/topics/{TOPIC}/Event"


# -- restarts -------------------------------------------------------------------------------

def test_a_restarted_server_keeps_its_subscriptions_and_announces_its_summary(network,
                                                                             monkeypatch):
    from matchers.rtree_engine import RTreeMatchingEngine
    net = network(("local", "local", "local"))
    net.create_topic()
    lo, hi = random_boxes(24, 3, seed=21)
    lo[20:], hi[20:] = lo[:4], hi[:4]  # identical boxes: the first made stays maximal
    for i in range(24):
        net.subscribe(0, lo[i], hi[i], i)
    net.step()
    generation, summary = (summary_rows(net, "s0")[0][k] for k in ("generation", "summary"))
    net.servers[0].close()  # (kept subscriptions: the server role's default)
    one_by_one = []
    monkeypatch.setattr(RTreeMatchingEngine, "add_filter",
                        lambda self, *args: one_by_one.append(args))
    net.servers[0] = net.start_server(0, "local")
    assert one_by_one == []  # loaded in one batch, through the engine's bulk path
    monkeypatch.undo()
    m0 = net.manager(0)
    assert m0.load() == 24
    sent = m0.stats().get("summary_updates_sent", 0)
    assert m0.network.register()
    assert m0.stats()["summary_updates_sent"] == sent + 1  # re-announced
    assert summary_rows(net, "s0")[0]["generation"] >= generation
    # the same summary as the one built box by box as the subscriptions came
    assert summary_rows(net, "s0")[0]["summary"] == summary
    events = random_points(40, 3, seed=22)
    net.publish(events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)


def test_a_server_the_dispatcher_forgot_registers_again(network, tmp_path):
    from route_manager.dispatcher import build_dispatcher
    net = network(("local", "local", "local"))
    net.create_topic()
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 0)
    net.step()
    fresh = build_dispatcher(ServiceConfig(DISPATCHER, tmp_path / "fresh", TOKEN),
                             transport=net.transport)
    try:
        net.transport.mount(DISPATCHER, fresh)  # a dispatcher that lost its state
        m0 = net.manager(0)
        m0.network.exchange_peers()  # ListServers: we are not listed
        assert not m0.network.registered.is_set()
        m0.step()
        assert "s0" in fresh.dispatcher.servers
    finally:
        net.transport.mount(DISPATCHER, net.dispatcher_service)
        fresh.close()


# -- hostile Subscribes ---------------------------------------------------------------------

@pytest.mark.parametrize("version, expected", [("2011", "UnusableEPR"), ("2004", "InvalidMessage")])
def test_a_subscribe_with_a_relative_namespace_uri_gets_the_fault_a_source_gives(network, version,
                                                                                 expected):
    """One flipped bit (``http://`` -> ``http?//``) makes the addressing namespace relative,
    which canonical XML refuses: the request's idempotency key must not turn that into an
    internal error. Its NotifyTo then has no wsa:Address, and the version says what that is."""
    net = network(("rtree",))
    net.create_topic()
    v = VERSIONS[version]
    body = subscribe_body(v, f"{SINK}/n/1", filter="x", dialect="urn:unknown-dialect",
                          expires="PT1H")
    text = etree.tostring(body).decode().replace(f'xmlns:wsa="{v.wsa.namespace}"',
                                                 'xmlns:wsa="http?//www.w3.org/2005/08/addressing"')
    assert "http?//" in text
    with pytest.raises(SoapFault) as caught:
        SoapClient(net.transport, wsa_version=v.wsa).call(
            f"{server_url(0)}/topics/{TOPIC}", v.action("Subscribe"), etree.fromstring(text))
    assert caught.value.code.endswith("Sender")
    assert caught.value.subcode == f"{{{v.namespace}}}{expected}"
    assert "NotifyTo" in caught.value.reason


def test_a_forwarded_subscribe_keeps_its_owner_on_the_server_that_holds_it(network):
    """The entry server names the requester to the one it places the subscription on
    (with the network's credential): the holder records the owner, and refuses another
    principal's GetStatus, as the entry server would."""
    from wsframework.access.identity import PASSWORD_TEXT, WSSE
    net = network(("rtree", "rtree", "local"))
    net.create_topic()
    net.subscribe(2, [5, 5, 5], [8, 8, 8], 0)  # s2 owns the region
    net.step()
    secrets = {name: net.servers[0].access.store.create_token(name) for name in ("alice", "bob")}
    for service in net.servers[1:]:  # the same principals at every server
        for name, secret in secrets.items():
            service.access.store.create_token(name, secret)

    def as_(name):
        def header():
            security = etree.Element(f"{{{WSSE}}}Security", nsmap={"wsse": WSSE})
            token = etree.SubElement(security, f"{{{WSSE}}}UsernameToken")
            etree.SubElement(token, f"{{{WSSE}}}Username").text = name
            etree.SubElement(token, f"{{{WSSE}}}Password", Type=PASSWORD_TEXT).text = secrets[name]
            return [security]
        return EventingClient("2011", transport=net.transport, headers=header)

    alice, bob = as_("alice"), as_("bob")
    handle = alice.subscribe(f"{server_url(0)}/topics/{TOPIC}", f"{SINK}/n/1",
                             filter=range_filter([6, 6, 6], [7, 7, 7]), dialect=RANGES_DIALECT,
                             expires="PT1H")
    assert handle.manager.address.startswith(server_url(2))  # placed on s2
    assert net.manager(2).store.get(handle.id).owner == "alice"
    with pytest.raises(SoapFault) as caught:
        bob.get_status(handle)
    assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED
    assert alice.get_status(handle) is not None
