"""The dispatcher on its own (in process): summary updates, routing, durability, faults."""
import pytest
from lxml import etree

from matchers.route_set.routing import strategies
from matchers.schema import Schema
from matchers.summary import Summary
from route_manager import protocol
from route_manager.dispatcher import build_dispatcher
from route_manager.protocol import FAULT_UNKNOWN_SERVER
from route_manager.protocol import EVENT_BATCH
from wsframework.admin import AdminClient, contracts
from wsframework.admin.registry import action_for
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import ServiceConfig
from wsframework.soap import parse_envelope
from wsframework.transport import InProcessTransport, TransportResponse

DISPATCHER = "http://dispatcher.test"
TOKEN = "t0k"
EV = "urn:test:events"


def schema(absolute: bool = True) -> etree._Element:
    root = etree.Element("{urn:wsframework:edn}Schema", nsmap={"edn": "urn:wsframework:edn", "e": EV})
    for name in ("x", "y"):
        etree.SubElement(root, "{urn:wsframework:edn}Attribute", name=name, type="number",
                         xpath=f"/e:event/e:{name}" if absolute else f"e:{name}", min="0", max="10")
    return root


def event(x: float, y: float) -> etree._Element:
    element = etree.Element(f"{{{EV}}}event", nsmap={"e": EV})
    etree.SubElement(element, f"{{{EV}}}x").text = str(x)
    etree.SubElement(element, f"{{{EV}}}y").text = str(y)
    return element


def box_summary(lo, hi) -> etree._Element:
    parsed = Schema.from_config(schema())
    return Summary(parsed.dims, [lo], [hi], parsed).to_element()


class Servers:
    """Records the event batches each fake server receives; answers 202 to everything."""

    def __init__(self):
        self.events: dict[str, list[tuple[float, float]]] = {}

    def endpoint(self, name):
        def handle(url, payload, content_type, action):
            body = parse_envelope(payload).body
            if body is not None and body.tag == EVENT_BATCH:
                for e in body:
                    self.events.setdefault(name, []).append(
                        (float(e.findtext(f"{{{EV}}}x")), float(e.findtext(f"{{{EV}}}y"))))
            return TransportResponse(202, None, b"")
        return handle


@pytest.fixture
def network(tmp_path):
    transport = InProcessTransport()
    servers = Servers()
    for name in ("s1", "s2"):
        transport.mount(f"http://{name}.test", servers.endpoint(name))

    def start():
        service = build_dispatcher(ServiceConfig(DISPATCHER, tmp_path / "d", TOKEN, role="dispatcher"),
                                   transport=transport)
        transport.mount(DISPATCHER, service)
        return service

    service = start()
    admin = AdminClient(DISPATCHER, TOKEN, transport=transport)
    yield service, admin, transport, servers, start
    service.close()


def register(admin, name):
    return admin.call(protocol.RegisterServer(Name=name, Address=f"http://{name}.test"))


def update(admin, server, generation, lo, hi, route="grid"):
    return admin.call(protocol.UpdateSummary(Server=server, Route=route, Generation=generation,
                                             Load=1, Summary=box_summary(lo, hi)))


def publish_all(transport, points):
    client = SoapClient(transport)
    for x, y in points:
        client.send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, event(x, y))


def test_routes_events_with_absolute_schema_xpaths_only_to_covering_servers(network):
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema(absolute=True))
    register(admin, "s1"), register(admin, "s2")
    assert update(admin, "s1", 1, [0, 0], [5, 5]).Accepted == 1
    assert update(admin, "s2", 1, [4, 4], [10, 10]).Accepted == 1
    publish_all(transport, [(1, 1), (4.5, 4.5), (9, 9), (1, 9)])
    assert service.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1, 1), (4.5, 4.5)], "s2": [(4.5, 4.5), (9, 9)]}
    stats = service.dispatcher.stats()
    assert stats["events_in"] == 4 and stats["copies_out"] == 4
    assert stats["hit_ratio"] == pytest.approx(4 / (4 * 2))


def test_the_figures_name_the_batch_strategy_a_batch_of_events_decided(network):
    service, admin, transport, _, _ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1"), register(admin, "s2")
    update(admin, "s1", 1, [0, 0], [5, 5]), update(admin, "s2", 1, [4, 4], [10, 10])
    assert service.dispatcher.stats()["route_batch_strategy"] == "undecided"
    batch = etree.Element(EVENT_BATCH)
    batch.extend(event(i % 10, (i * 3) % 10) for i in range(64))  # one calibration's worth
    SoapClient(transport).send(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, batch)
    figures = service.dispatcher.stats()
    assert figures["events_in"] == 64
    assert figures["route_batch_strategy"] in strategies(single=False)
    assert figures["route_strategy"] == "undecided"  # no single event was routed


def test_a_published_batch_over_the_most_events_is_refused_whole(network):
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    update(admin, "s1", 1, [0, 0], [10, 10])
    batch = etree.Element(EVENT_BATCH)
    batch.extend(event(1, 1) for _ in range(protocol.EVENT_BATCH_MOST + 1))
    with pytest.raises(SoapFault) as caught:
        SoapClient(transport).call(f"{DISPATCHER}/topics/grid", PUBLISH_ACTION, batch)
    assert caught.value.code == "Sender" and "at most 4096 events" in caught.value.reason
    assert service.dispatcher.stats()["events_in"] == 0
    assert service.dispatcher.forwarder.drain(5) and "s1" not in servers.events


def test_stale_generation_is_ignored_and_newer_replaces(network):
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    update(admin, "s1", 5, [0, 0], [1, 1])
    assert update(admin, "s1", 4, [0, 0], [10, 10]).Accepted == 0   # older: ignored
    publish_all(transport, [(8, 8)])
    assert service.dispatcher.forwarder.drain(5) and "s1" not in servers.events
    assert update(admin, "s1", 6, [0, 0], [10, 10]).Accepted == 1
    publish_all(transport, [(8, 8)])
    assert service.dispatcher.forwarder.drain(5) and servers.events["s1"] == [(8, 8)]


def test_a_node_registering_as_a_new_incarnation_counts_its_generations_anew(network):
    """A server whose data dir was wiped starts its generations from a new offset, which may
    be below what it sent before: its registration's incarnation says so."""
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    incarnate = lambda n: admin.call(protocol.RegisterServer(  # noqa: E731
        Name="s1", Address="http://s1.test", Incarnation=n))
    incarnate(1000)
    assert update(admin, "s1", 1500, [0, 0], [1, 1]).Accepted == 1
    incarnate(1000)  # the same node again (a restart): its generations still hold
    assert update(admin, "s1", 1200, [0, 0], [10, 10]).Accepted == 0
    incarnate(1100)  # wiped and started again: below its old generations
    assert update(admin, "s1", 1101, [0, 0], [10, 10]).Accepted == 1
    publish_all(transport, [(8, 8)])
    assert service.dispatcher.forwarder.drain(5) and servers.events["s1"] == [(8, 8)]
    assert update(admin, "s1", 1100, [0, 0], [1, 1]).Accepted == 0  # and grow from there
    register(admin, "s1")  # a registration without one keeps the incarnation known
    assert update(admin, "s1", 1101, [0, 0], [1, 1]).Accepted == 0


@pytest.mark.parametrize("incarnation", ["-1", "2147483648", "x"])
def test_bad_incarnations_are_refused(network, incarnation):
    service, admin, transport, servers, _ = network
    body = (f'<adm:RegisterServer xmlns:adm="urn:wsframework:admin"><adm:Name>s1</adm:Name>'
            f'<adm:Address>http://s1.test</adm:Address>'
            f'<adm:Incarnation>{incarnation}</adm:Incarnation></adm:RegisterServer>')
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": "urn:wsframework:admin"})
    token.text = TOKEN
    with pytest.raises(SoapFault) as info:
        admin.client.call(admin.address, action_for("RegisterServer", "urn:wsframework:admin"),
                          etree.fromstring(body), headers=[token])
    assert info.value.code == "Sender"
    assert service.dispatcher.servers == {}  # nothing registered


def test_bad_updates_are_refused_and_change_nothing(network):
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    with pytest.raises(SoapFault) as info:
        update(admin, "ghost", 1, [0, 0], [10, 10])
    assert info.value.subcode == FAULT_UNKNOWN_SERVER
    register(admin, "s1")
    with pytest.raises(SoapFault) as info:
        update(admin, "s1", 1, [0, 0], [10, 10], route="nope")
    assert info.value.subcode == contracts.FAULT_UNKNOWN_TOPIC
    garbage = etree.fromstring(b'<edn:Summary xmlns:edn="urn:wsframework:edn" encoding="bogus">x</edn:Summary>')
    with pytest.raises(SoapFault) as info:
        admin.call(protocol.UpdateSummary(Server="s1", Route="grid", Generation=1, Load=0, Summary=garbage))
    assert info.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert service.store.query("SELECT COUNT(*) AS n FROM edn_summaries")[0]["n"] == 0
    with pytest.raises(SoapFault) as info:
        AdminClient(DISPATCHER, "wrong", transport=transport).call(
            protocol.UpdateSummary(Server="s1", Route="grid", Generation=1, Load=0,
                                   Summary=box_summary([0, 0], [1, 1])))
    assert info.value.subcode == contracts.FAULT_ACCESS_DENIED


def test_restart_loses_no_route_server_or_summary(network):
    service, admin, transport, servers, start = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    update(admin, "s1", 1, [0, 0], [2, 2])
    service.close()
    restarted = start()
    try:
        listed = admin.call(protocol.ListRoutes())
        assert [(r.Name, r.Servers) for r in listed.Route] == [("grid", 1)]
        assert [s.Name for s in admin.call(protocol.ListServers()).Server] == ["s1"]
        publish_all(transport, [(1, 1), (3, 3)])
        assert restarted.dispatcher.forwarder.drain(5)
        assert servers.events["s1"] == [(1, 1)]
    finally:
        restarted.close()


def test_register_returns_topics_and_peers(network):
    service, admin, transport, servers, _ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    reply = register(admin, "s2")
    assert [t.Name for t in reply.Topic] == ["grid"]
    assert reply.Topic[0].Matcher == "urn:wsframework:matchers:rtree-matching-engine"
    assert [p.Name for p in reply.Peer] == ["s1"]
    with pytest.raises(SoapFault):
        admin.call(protocol.RegisterServer(Name="bad/name", Address="http://x"))


@pytest.mark.parametrize("address", ["http://169.254.169.254\\@127.0.0.1:8080",
                                     "http://user:secret@s3.test", "http://s3.test/\nx",
                                     "http://0x7f.1/", "http://s3.test/" + "a" * 3000])
def test_register_refuses_addresses_two_parsers_read_differently(network, address):
    service, admin, transport, servers, _ = network
    with pytest.raises(SoapFault) as info:
        admin.call(protocol.RegisterServer(Name="s3", Address=address))
    assert info.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert "s3" not in [s.Name for s in admin.call(protocol.ListServers()).Server or []]


def test_unknown_topic_publication_is_destination_unreachable(network):
    service, admin, transport, servers, _ = network
    with pytest.raises(SoapFault) as info:
        SoapClient(transport).send(f"{DISPATCHER}/topics/none", PUBLISH_ACTION, event(1, 1))
    assert info.value.subcode.endswith("DestinationUnreachable")


def test_stats_show_bloom_summaries_and_their_false_positive_rate(network):
    from matchers.summary import BloomFilter
    service, admin, *_ = network
    admin.create_topic("grid", None, schema())
    register(admin, "s1")
    parsed = Schema.from_config(schema())
    bloom = BloomFilter.of([1.0, 2.0, 3.0], 0.01)
    summary = Summary(parsed.dims, [[0, 0]], [[10, 10]], parsed, blooms={"x": bloom})
    admin.call(protocol.UpdateSummary(Server="s1", Route="grid", Generation=1, Load=3,
                                      Summary=summary.to_element()))
    figures = service.dispatcher.stats()
    assert figures["bloom.dims"] == "x" and figures["bloom.servers"] == 1
    assert 0 < figures["bloom.false_positive_rate"] < 0.01
