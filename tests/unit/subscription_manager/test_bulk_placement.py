"""A placed bulk subscribe (SubscribeMany with Place): each request is made on the server the
router chooses, each other server's share in one message; the answers name the manager of a
subscription made elsewhere; an unreachable server's share is made here, one that may have
received it is refused for it, a fault for the whole share refuses each request of it. In
process (tests.support.edn.Network), no socket."""
from __future__ import annotations

import pytest
import requests
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.bulk_subscribe import (SubscribeMany, parse_results,
                                                 requests_element)
from subscription_manager.client import EventingClient, SubscriptionHandle, subscribe_body
from subscription_manager.messages import manager_epr
from subscription_manager.operations import Made, Refused
from subscription_manager.versions import VERSIONS
from tests.support.edn import (EV, TOPIC, Network, SingleSource, expected_notifications,
                               random_boxes, random_points, server_url)
from tests.support.eventing import SINK, TOKEN, Harness
from wsframework import ns
from wsframework.admin import AdminClient, contracts
from wsframework.admin.codec import render
from wsframework.admin.registry import action_for
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault, sender_fault
from wsframework.transport import TransportError


@pytest.fixture
def network(tmp_path):
    nets = []

    def make(*args, **kwargs):
        net = Network(tmp_path / f"n{len(nets)}", *args, **kwargs)
        nets.append(net)
        return net
    yield make
    for net in nets:
        net.close()


def _body(lo, hi, index: int, version: str = "2011", **options):
    options.setdefault("expires", "PT1H")
    return subscribe_body(version, f"{SINK}/n/{index}", filter=range_filter(lo, hi),
                          dialect=RANGES_DIALECT, **options)


def _held_by_s2(network, lo, hi):
    """Three servers (s2 never places elsewhere) that know each other, s2 holding one
    subscription ``lo``..``hi``: the R-tree rule sends requests inside it to s2."""
    net = network(("rtree", "rtree", "local"))
    net.create_topic()
    net.subscribe(2, lo, hi, 0)
    net.step()
    return net


def _raising(exc: Exception):
    def fail(*args, **kwargs):
        raise exc
    return fail


def placed_bulk(net, at: int, bodies, *, version: str = "2011", place=True):
    admin = AdminClient(server_url(at), TOKEN, transport=net.transport)
    return parse_results(admin.call(SubscribeMany(
        Topic=TOPIC, Requests=requests_element(version, bodies), Place=place)).Results)


def _holder(net, answer: Made, at: int) -> int:
    address = answer.manager or server_url(at) + "/subscriptions"
    return next(i for i in range(len(net.servers))
                if address == server_url(i) + "/subscriptions")


@pytest.mark.parametrize("partitioner", ["random", "rtree", "kmeans"])
def test_a_placed_bulk_spreads_like_subscribes_and_delivers_exactly(network, tmp_path,
                                                                    partitioner):
    net = network((partitioner,) * 3, dispatcher_settings={"self_tuning": "off"},
                  settings={"load_threshold": "60"})
    net.create_topic()
    net.step()  # the servers learn their peers
    single = SingleSource(tmp_path / "single", 3)
    try:
        n = 120
        lo, hi = random_boxes(n, 3, seed=21)
        answers = placed_bulk(net, 0, [_body(lo[i], hi[i], i) for i in range(n)])
        assert all(isinstance(a, Made) for a in answers)
        holders = [_holder(net, a, 0) for a in answers]
        # every subscription lives where its answer says, and the loads add up
        for answer, holder in zip(answers, holders):
            assert net.manager(holder).store.get(answer.id) is not None
        loads = [m.load() for m in net.managers]
        assert loads == [holders.count(i) for i in range(3)] and sum(loads) == n
        assert max(loads) <= 60 and sum(load > 0 for load in loads) >= 2  # placed, bounded
        made_elsewhere = sum(a.manager is not None for a in answers)
        assert net.manager(0).stats().get("bulk_placed_elsewhere", 0) == made_elsewhere
        for i in range(n):
            single.subscribe(lo[i], hi[i], i)
        events = random_points(60, 3, seed=22)
        net.step()
        net.publish(events)
        single.publish(events)
        net.drain()
        assert net.received() == single.received() == expected_notifications(lo, hi, events)
    finally:
        single.close()


def test_a_subscription_made_elsewhere_is_managed_through_the_manager_named(network):
    net = _held_by_s2(network, [5, 5, 5], [8, 8, 8])  # s2 owns the region
    answers = placed_bulk(net, 0, [_body([6, 6, 6], [7, 7, 7], 1)])
    (answer,) = answers
    assert answer.manager == server_url(2) + "/subscriptions"
    version = VERSIONS["2011"]
    client = EventingClient("2011", transport=net.transport)
    handle = SubscriptionHandle(version, manager_epr(version, answer.manager, answer.id),
                                answer.expires)
    assert client.get_status(handle) is not None
    client.unsubscribe(handle)
    assert net.manager(2).load() == 1


def test_without_place_every_request_stays_on_the_server_addressed(network):
    net = _held_by_s2(network, [5, 5, 5], [8, 8, 8])
    answers = placed_bulk(net, 0, [_body([6, 6, 6], [7, 7, 7], 1)], place=None)
    assert answers[0].manager is None and net.manager(0).load() == 1


def test_each_request_is_refused_alone_with_the_fault_a_subscribe_gets(network):
    net = _held_by_s2(network, [5, 5, 5], [8, 8, 8])
    bodies = [_body([6, 6, 6], [7, 7, 7], 1),           # placed on s2
              _body([6, 6, 6], [7, 7, 7], 2, expires="-PT5M"),  # a negative duration
              subscribe_body("2011", f"{SINK}/n/3", filter="x0 in [", dialect=RANGES_DIALECT,
                             expires="PT1H"),            # no range filter
              _body([6, 6, 6], [7, 7, 7], 4, expires="P1Y"),  # placed on s2, granted less
              etree.Element("{urn:other}Subscribe")]    # not a wse:Subscribe
    answers = placed_bulk(net, 0, bodies)
    assert [type(a) for a in answers] == [Made, Refused, Refused, Made, Refused]
    assert answers[0].manager == answers[3].manager == server_url(2) + "/subscriptions"
    assert answers[1].code.endswith("UnsupportedExpirationValue")
    assert answers[2].code.endswith("InvalidMessage") or "Filter" in answers[2].code
    assert net.manager(2).load() == 3 and net.manager(0).load() == 0


def test_an_unreachable_servers_share_is_made_here(network):
    net = _held_by_s2(network, [0, 0, 0], [10, 10, 10])  # s2 covers everything
    net.transport._endpoints.pop(server_url(2))  # s2 goes away
    answers = placed_bulk(net, 0, [_body([1, 1, 1], [2, 2, 2], i) for i in range(1, 4)])
    assert all(isinstance(a, Made) and a.manager is None for a in answers)
    m0 = net.manager(0)
    assert m0.load() == 3 and m0.is_down("s2")
    assert m0.stats()["bulk_share_unreachable"] == 1


class _AnswerLostFrom:
    """The in-process transport, but a request to ``url`` arrives and its answer is lost
    (``cause``: a read timeout, or a connection reset after sending)."""

    def __init__(self, transport, url: str, cause: Exception):
        self.transport = transport
        self.url = url
        self.cause = cause

    def post(self, url, *args, **kwargs):
        answer = self.transport.post(url, *args, **kwargs)
        if url.startswith(self.url):
            raise TransportError(f"answer lost: {self.cause!r}") from self.cause
        return answer

    def __getattr__(self, name):
        return getattr(self.transport, name)


@pytest.mark.parametrize("cause", [requests.exceptions.ReadTimeout(),
                                   requests.exceptions.ConnectionError("reset by peer")])
def test_a_share_that_may_have_arrived_is_refused_not_made_twice(network, cause):
    net = _held_by_s2(network, [0, 0, 0], [10, 10, 10])
    m0 = net.manager(0)
    m0.peer_transport = _AnswerLostFrom(net.transport, server_url(2), cause)
    answers = placed_bulk(net, 0, [_body([1, 1, 1], [2, 2, 2], i) for i in range(1, 3)])
    # 2011 has no subcode of its own for it: the Receiver fault a Subscribe would get
    assert all(isinstance(a, Refused) and a.code == "Receiver"
               and "may exist there" in a.reason for a in answers)
    assert m0.load() == 0 and not m0.is_down("s2")
    assert net.manager(2).load() == 3  # it did arrive: an operator checks before a retry


def test_a_receiver_fault_for_a_share_says_it_may_exist_there(network, monkeypatch):
    net = _held_by_s2(network, [0, 0, 0], [10, 10, 10])
    monkeypatch.setattr(net.manager(2).operations, "subscribe_many",
                        _raising(RuntimeError("disk full")))
    answers = placed_bulk(net, 0, [_body([1, 1, 1], [2, 2, 2], 1)])
    assert answers[0].code == "Receiver" and "may exist there" in answers[0].reason


def test_a_failure_of_the_share_here_keeps_the_other_shares_answers(network, monkeypatch):
    net = _held_by_s2(network, [5, 5, 5], [8, 8, 8])  # s2 owns that region; s0 the rest
    m0 = net.manager(0)
    monkeypatch.setattr(m0.operations, "subscribe_many", _raising(RuntimeError("disk full")))
    answers = placed_bulk(net, 0, [_body([6, 6, 6], [7, 7, 7], 1),
                                   _body([0, 0, 0], [1, 1, 1], 2)])
    assert isinstance(answers[0], Made) and answers[0].manager == server_url(2) + "/subscriptions"
    assert isinstance(answers[1], Refused) and "could not store its share" in answers[1].reason
    assert net.manager(2).load() == 2 and m0.load() == 0


def test_prefixes_declared_above_the_requests_survive_placement(network):
    net = _held_by_s2(network, [0, 0, 0], [10, 10, 10])  # s2 covers everything: placed there
    bodies = [subscribe_body("2011", f"{SINK}/n/{i}", filter=f"e:x0 > {i}", expires="PT1H")
              for i in (1, 2)]
    requests_ = requests_element("2011", bodies)
    requests_ = etree.fromstring(etree.tostring(requests_).replace(
        b"<edn:Requests ", f'<edn:Requests xmlns:e="{EV}" '.encode(), 1))
    admin = AdminClient(server_url(0), TOKEN, transport=net.transport)
    answers = parse_results(admin.call(SubscribeMany(Topic=TOPIC, Requests=requests_,
                                                     Place=True)).Results)
    assert all(isinstance(a, Made) and a.manager == server_url(2) + "/subscriptions"
               for a in answers), answers
    net.step()
    net.publish([[1.5, 1, 1], [3, 1, 1]])
    net.drain()
    assert net.received() == [("/n/0", "0"), ("/n/0", "1"), ("/n/1", "0"), ("/n/1", "1"),
                              ("/n/2", "1")]


def test_a_fault_for_a_whole_share_refuses_each_request_of_it(network, monkeypatch):
    net = _held_by_s2(network, [0, 0, 0], [10, 10, 10])
    m2 = net.manager(2)
    monkeypatch.setattr(m2.operations, "subscribe_many",
                        _raising(sender_fault("this server takes no bulk subscribes now")))
    answers = placed_bulk(net, 0, [_body([1, 1, 1], [2, 2, 2], 1),
                                   _body([1, 1, 1], [2, 2, 2], 2)])
    assert [a.reason for a in answers] == ["this server takes no bulk subscribes now"] * 2
    assert net.manager(0).stats()["bulk_share_faults"] == 1
    assert net.manager(0).load() == 0 and m2.load() == 1


def test_a_bulk_placed_here_counts_its_own_share_against_the_threshold(network):
    net = network(("rtree",) * 3, settings={"load_threshold": "10"})
    net.create_topic()
    net.step()
    # 30 identical boxes: the R-tree rule keeps each where the first went until the
    # threshold, which only holds when the bulk counts what it already placed there
    answers = placed_bulk(net, 0, [_body([1, 1, 1], [2, 2, 2], i) for i in range(30)])
    assert all(isinstance(a, Made) for a in answers)
    assert sorted(m.load() for m in net.managers) == [10, 10, 10]


@pytest.mark.parametrize("value", ["maybe", "2", "yes", " true ", "True"])
def test_place_must_be_a_boolean(network, value):
    net = network(("rtree", "rtree"))
    net.create_topic()
    rendered = render(SubscribeMany(Topic=TOPIC, Requests=requests_element(
        "2011", [_body([1, 1, 1], [2, 2, 2], 1)]), Place=True))
    place = next(child for child in rendered if etree.QName(child).localname == "Place")
    place.text = value
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
    token.text = TOKEN
    with pytest.raises(SoapFault) as caught:
        SoapClient(net.transport).call(f"{server_url(0)}/admin",
                                       action_for("SubscribeMany", ns.ADMIN), rendered,
                                       headers=[token])
    assert caught.value.code.endswith("Sender")
    assert sum(m.load() for m in net.managers) == 0


def test_a_standalone_source_makes_a_placed_bulk_here(tmp_path):
    h = Harness(tmp_path)
    try:
        answers = parse_results(h.admin.call(SubscribeMany(
            Topic="stocks", Requests=requests_element("2011", [
                subscribe_body("2011", f"{SINK}/n/1", expires="PT1H")]),
            Place=True)).Results)
        assert isinstance(answers[0], Made) and answers[0].manager is None
    finally:
        h.close()
