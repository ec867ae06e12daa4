"""SubscribeMany: the operator's bulk subscribe. Each request is checked as a Subscribe is and
refused alone with the fault a Subscribe gets; those made are stored in one transaction,
counted against the limits one after the other, and take part in matching at once; the
message itself is bounded and admin only. On an EDN server the route update goes out before
the answer. In process, no socket."""
from __future__ import annotations

import numpy as np
import pytest
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.bulk_subscribe import (MAX_BULK_SUBSCRIBES, SubscribeMany,
                                                 parse_results, requests_element)
from subscription_manager import messages as msg
from subscription_manager.client import subscribe_body
from subscription_manager.lifecycle import State
from subscription_manager.operations import MAX_REFUSAL_REASON, Made, Refused
from subscription_manager.versions import V2011
from tests.support.edn import TOPIC, Network, server_url
from tests.support.eventing import SINK, TOKEN, Harness, quote
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault


@pytest.fixture
def make(tmp_path):
    made = []

    def build(**settings):
        h = Harness(tmp_path / f"h{len(made)}", settings={k: str(v) for k, v in settings.items()})
        made.append(h)
        return h
    yield build
    for h in made:
        h.close()


def bulk(admin: AdminClient, bodies, *, version: str = "2011", topic: str = "stocks"):
    response = admin.call(SubscribeMany(Topic=topic, Requests=requests_element(version, bodies)))
    return parse_results(response.Results)


def body(n: int, version: str = "2011", **options):
    options.setdefault("expires", "PT1H")
    return subscribe_body(version, f"{SINK}/n/{n}", **options)


def test_each_request_is_made_or_refused_alone_in_order(make):
    h = make()
    answers = bulk(h.admin, [
        body(0, filter="/q:quote[q:price > 10]", namespaces={"q": "urn:quotes"}),
        body(1, expires="-PT5M"),                        # a negative duration
        body(2, filter="/q:quote[", namespaces={"q": "urn:quotes"}),  # not XPath
        subscribe_body("2011", "ftp://elsewhere/x", expires="PT1H"),  # a scheme not allowed
        etree.Element("{urn:other}Subscribe"),           # not a wse:Subscribe
        body(5),
    ])
    assert [type(a) for a in answers] == [Made, Refused, Refused, Refused, Refused, Made]
    assert answers[0].expires == "PT1H"
    assert answers[1].code.endswith("}UnsupportedExpirationValue")  # as a Subscribe gets
    assert answers[2].reason and answers[3].reason and answers[4].reason
    assert h.manager.store.count(State.ACTIVE) == 2
    h.publish(quote(11))
    h.drain()
    assert sorted(url for url, *_ in h.sink.messages) == [f"{SINK}/n/0", f"{SINK}/n/5"]


def test_filters_a_matcher_refuses_in_a_batch_leave_the_others_made(make):
    h = make()
    bad = {1, 4, 5, 8}
    answers = bulk(h.admin, [
        body(i, filter="/q:quote[" if i in bad else f"/q:quote[q:price > {i}]",
             namespaces={"q": "urn:quotes"}) for i in range(9)])
    assert [type(a) for a in answers] == [Refused if i in bad else Made for i in range(9)]
    h.publish(quote(7))
    h.drain()
    assert sorted(url for url, *_ in h.sink.messages) == [f"{SINK}/n/{i}" for i in (0, 2, 3, 6)]


def test_made_subscriptions_are_managed_like_any_other(make):
    h = make()
    made, = bulk(h.admin, [body(0)])
    stored = h.manager.store.get(made.id)
    assert stored is not None and stored.is_active and stored.owner is None
    manager = msg.manager_epr(V2011, h.manager.manager_address, made.id)
    client = h.client()
    assert client.get_status(manager) is not None  # the manager knows it
    client.unsubscribe(manager)
    assert not h.manager.store.get(made.id).is_active


def test_limits_count_each_request_against_those_before_it(make):
    h = make(max_subscriptions_per_host=3)
    answers = bulk(h.admin, [body(i) for i in range(5)])
    assert [type(a) for a in answers] == [Made, Made, Made, Refused, Refused]
    assert "host" in answers[3].reason
    assert h.manager.store.count(State.ACTIVE) == 3
    again = bulk(h.admin, [body(9)])  # the limit holds across messages too
    assert isinstance(again[0], Refused)


def test_the_message_is_bounded_and_versioned(make):
    h = make()
    with pytest.raises(SoapFault, match="1 to"):
        bulk(h.admin, [])
    too_many = requests_element("2011", [])
    for _ in range(MAX_BULK_SUBSCRIBES + 1):
        etree.SubElement(too_many, "{urn:x}r")
    with pytest.raises(SoapFault, match="1 to"):
        h.admin.call(SubscribeMany(Topic="stocks", Requests=too_many))
    unknown_version = requests_element("1999", [body(0)])
    with pytest.raises(SoapFault, match="version"):
        h.admin.call(SubscribeMany(Topic="stocks", Requests=unknown_version))
    with pytest.raises(SoapFault):
        bulk(h.admin, [body(0)], topic="no-such-topic")
    assert h.manager.store.count(State.ACTIVE) == 0


def test_refusal_reasons_are_bounded_whatever_the_requests_quote(make):
    h = make()
    long_and_wrong = "/q:quote[q:price > " + "1" * 3000  # the reason quotes the expression
    answers = bulk(h.admin, [body(i, filter=long_and_wrong, namespaces={"q": "urn:quotes"})
                             for i in range(50)])
    assert all(isinstance(a, Refused) for a in answers)
    assert all(0 < len(a.reason) <= MAX_REFUSAL_REASON for a in answers)
    assert any(len(a.reason) == MAX_REFUSAL_REASON for a in answers)  # one was cut


def test_the_2004_vocabulary_and_its_faults(make):
    h = make()
    answers = bulk(h.admin, [body(0, "2004"), body(1, "2004", expires="P1Y2Q")], version="2004")
    assert isinstance(answers[0], Made) and isinstance(answers[1], Refused)
    assert h.manager.store.get(answers[0].id).version.name == "2004"


def test_admin_only(make):
    h = make()
    stranger = AdminClient(h.admin.address, "not-the-token", transport=h.transport)
    with pytest.raises(SoapFault):
        bulk(stranger, [body(0)])
    assert h.manager.store.count(State.ACTIVE) == 0


def test_a_server_routes_to_a_bulk_at_once(tmp_path):
    net = Network(tmp_path, partitioners=("rtree",))
    try:
        net.create_topic()
        net.step(2)
        lo, hi = np.zeros(net.d), np.full(net.d, 5.0)
        admin = AdminClient(server_url(0), TOKEN, transport=net.transport)
        answers = bulk(admin, [subscribe_body("2011", f"{SINK}/n/{i}", expires="PT1H",
                                              filter=range_filter(lo, hi), dialect=RANGES_DIALECT)
                               for i in range(3)], topic=TOPIC)
        assert all(isinstance(a, Made) for a in answers)
        assert net.manager(0).stats()["bulk_subscribed"] == 3
        # the route update went out before the answer: no step of the network in between
        net.publish([np.full(net.d, 1.0)])
        net.drain()
        assert sorted(path for path, _ in net.received()) == ["/n/0", "/n/1", "/n/2"]
    finally:
        net.close()
