"""Moving subscriptions between servers: export / import / move, forwarding records, and the
dispatcher's offline re-partitioning (in process)."""
from __future__ import annotations

import pytest
from lxml import etree

from route_manager import protocol
from subscription_manager.client import EventingClient
from subscription_manager.server.moved_subscriptions import parse_subscriptions, subscriptions_element
from subscription_manager.lifecycle import State
from tests.support.edn import (EV, TOPIC, Network, expected_notifications,
                                         random_boxes, random_points, server_url)
from tests.support.eventing import SINK, TOKEN
from wsframework.addressing import EndpointReference
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.matching.limits import FilterLimits


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, ("local", "local", "local"))
    network.create_topic()
    yield network
    network.close()


def fill(net, n, at=0, seed=31):
    lo, hi = random_boxes(n, 3, seed=seed)
    handles = [net.subscribe(at, lo[i], hi[i], i) for i in range(n)]
    net.step()
    return lo, hi, handles


def move(net, source, target, ids):
    admin = AdminClient(server_url(source), TOKEN, transport=net.transport)
    return admin.call(protocol.MoveSubscriptions(Topic=TOPIC, Target=server_url(target),
                                                 Id=list(ids))).Moved


# -- the XML form ---------------------------------------------------------------------------

def test_export_and_parse_round_trip(net):
    client = EventingClient("2004", transport=net.transport)
    param = etree.Element("{urn:app}Ref")
    param.text = "r-1"
    client.subscribe(f"{server_url(0)}/topics/{TOPIC}", EndpointReference(f"{SINK}/n/0", (param,)),
                     end_to=f"{SINK}/end", filter="e:x0 > 4 and e:x1 < 2", namespaces={"e": EV},
                     expires="PT1H")
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 1)
    m0 = net.manager(0)
    element = m0.mover.export(TOPIC)
    originals = {s.id: s for s in m0.store.active()}
    parsed = parse_subscriptions(etree.fromstring(etree.tostring(element)), topic="t",
                                 topic_uid="u")
    assert {s.id for s in parsed} == set(originals)
    for s in parsed:
        o = originals[s.id]
        assert (s.version, s.soap_version, s.filter, s.notify_to, s.end_to, s.format,
                s.expires, s.expires_kind, s.created) == \
               (o.version, o.soap_version, o.filter, o.notify_to, o.end_to, o.format,
                o.expires, o.expires_kind, o.created)
        assert (s.topic, s.topic_uid) == ("t", "u")
    boxes = element.findall(".//{urn:wsframework:edn}Box")
    assert len(boxes) == 2 and boxes[1].get("lo") == "1.0 1.0 1.0"


def test_parse_refuses_malformed_exports():
    good = subscriptions_element("t", [])
    assert parse_subscriptions(good, topic="t", topic_uid="u") == []
    bad = etree.fromstring(etree.tostring(good))
    etree.SubElement(bad, "{urn:wsframework:edn}Subscription", id="../x", version="2011")
    with pytest.raises(ValueError):
        parse_subscriptions(bad, topic="t", topic_uid="u")
    with pytest.raises(ValueError):
        parse_subscriptions(etree.Element("x"), topic="t", topic_uid="u")


def test_parse_refuses_carried_numbers_unbounded_or_not_written_as_floats(net):
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 1)
    exported = etree.tostring(net.manager(0).mover.export(TOPIC))
    for attribute, text in (("expires", "1" * 65), ("created", "1_0"), ("created", "x"),
                            ("expires", "inf")):
        bad = etree.fromstring(exported)
        bad.find("{urn:wsframework:edn}Subscription").set(attribute, text)
        with pytest.raises(ValueError, match=attribute):
            parse_subscriptions(bad, topic="t", topic_uid="u")


# -- moves ----------------------------------------------------------------------------------

def test_moved_subscriptions_keep_their_eprs_and_exact_delivery(net):
    lo, hi, handles = fill(net, 30)
    m0, m1 = net.manager(0), net.manager(1)
    moving = [h.id for h in handles[:15]]
    assert move(net, 0, 1, moving + ["unknown-id"]) == 15
    assert (m0.load(), m1.load()) == (15, 15)
    assert m0.mover.forwarding.count() == 15
    assert {s.id for s in m1.store.active()} == set(moving)  # same identifiers
    assert m0.store.get(moving[0]).status is State.ENDED
    # The target announced its summary before answering the import: routing is exact now.
    events = random_points(60, 3, seed=32)
    net.publish(events)
    net.drain()
    assert net.received() == expected_notifications(lo, hi, events)
    # EPRs still name s0; s0 forwards with the same identifier and relays the answer.
    client = EventingClient("2011", transport=net.transport)
    for handle in handles:
        assert handle.manager.address == server_url(0) + "/subscriptions"
        assert client.get_status(handle) is not None
    assert client.renew(handles[0], "PT3H") is not None
    assert m1.store.get(handles[0].id).expires > m0.store.get(handles[0].id).expires
    client.unsubscribe(handles[1])
    assert m1.store.get(handles[1].id).status is State.UNSUBSCRIBED
    assert m0.mover.forwarding.lookup(handles[1].id) is None
    with pytest.raises(SoapFault) as caught:
        client.get_status(handles[1])
    assert "UnknownSubscription" in caught.value.subcode


def test_a_subscription_moved_on_is_forwarded_again_and_can_come_back(net):
    _, _, handles = fill(net, 4)
    client = EventingClient("2011", transport=net.transport)
    ids = [h.id for h in handles]
    assert move(net, 0, 1, ids) == 4
    assert move(net, 1, 2, ids[:2]) == 2
    assert client.renew(handles[0], "PT2H") is not None  # s0 -> s1 -> s2
    assert net.manager(2).store.get(ids[0]).is_active
    assert move(net, 1, 0, ids[2:]) == 2  # back home: the forwarding record goes
    m0 = net.manager(0)
    assert m0.mover.forwarding.lookup(ids[2]) is None and m0.store.get(ids[2]).is_active
    assert client.get_status(handles[2]) is not None
    assert (m0.load(), net.manager(1).load(), net.manager(2).load()) == (2, 0, 2)


def test_a_failed_import_changes_nothing(net):
    _, _, handles = fill(net, 5)
    m0 = net.manager(0)
    net.manager(1).topics.delete(TOPIC)  # the target does not host the topic
    with pytest.raises(SoapFault) as caught:
        move(net, 0, 1, [h.id for h in handles])
    assert caught.value.subcode == contracts.FAULT_UNKNOWN_TOPIC  # relayed from the target
    assert caught.value.reason == f"no topic named {TOPIC!r} here"
    assert m0.load() == 5 and m0.mover.forwarding.count() == 0
    net.transport._endpoints.pop(server_url(2))  # unreachable target
    with pytest.raises(SoapFault) as caught:
        move(net, 0, 2, [h.id for h in handles])
    assert caught.value.code == "Receiver" and caught.value.subcodes == ()
    assert caught.value.reason.startswith(f"{server_url(2)} did not answer the import: ")
    assert m0.load() == 5 and m0.mover.forwarding.count() == 0
    assert {s.id for s in m0.store.active()} == {h.id for h in handles}
    assert net.manager(1).load() == 0 and net.manager(2).load() == 0


def test_import_refuses_what_the_engine_cannot_hold(net):
    m0 = net.manager(0)
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 0)
    element = m0.mover.export(TOPIC)
    spec = element.find(".//{urn:wsframework:edn}Expression")
    spec.text = "x0 in [1"
    element.find(".//{urn:wsframework:edn}Subscription").set("id", "fresh-id")
    admin = AdminClient(server_url(1), TOKEN, transport=net.transport)
    with pytest.raises(SoapFault) as caught:
        admin.call(protocol.ImportSubscriptions(Topic=TOPIC, Subscriptions=element))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert caught.value.reason.startswith(f"cannot import into {TOPIC}: invalid filter")
    assert net.manager(1).load() == 0


def test_import_refuses_a_filter_over_this_servers_limits(net):
    """An import is bounded as a Subscribe is, before the engine compiles its filters."""
    m0 = net.manager(0)
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 0)
    element = m0.mover.export(TOPIC)
    net.manager(1).view.filter_limits = FilterLimits(max_length=8)
    admin = AdminClient(server_url(1), TOKEN, transport=net.transport)
    with pytest.raises(SoapFault) as caught:
        admin.call(protocol.ImportSubscriptions(Topic=TOPIC, Subscriptions=element))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert caught.value.reason.startswith(f"cannot import into {TOPIC}: ")
    assert "8" in caught.value.reason
    assert net.manager(1).load() == 0


def test_import_is_idempotent(net):
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 0)
    element = net.manager(0).mover.export(TOPIC)
    admin = AdminClient(server_url(1), TOKEN, transport=net.transport)
    for _ in range(2):
        assert admin.call(protocol.ImportSubscriptions(Topic=TOPIC, Subscriptions=element)).Imported == 1
    assert net.manager(1).load() == 1


def test_changes_during_a_move_are_reconciled(net, monkeypatch):
    """A Renew and an Unsubscribe land at the source between the export and the release."""
    _, _, handles = fill(net, 3)
    m0, m1 = net.manager(0), net.manager(1)
    client = EventingClient("2011", transport=net.transport)
    original = m0.mover._import_at
    calls = []

    def import_then_interfere(target, topic, subscriptions, notified):
        original(target, topic, subscriptions, notified)
        calls.append([s.id for s in subscriptions])
        if len(calls) == 1:
            client.renew(handles[0], "PT5H")
            client.unsubscribe(handles[1])

    monkeypatch.setattr(m0.mover, "_import_at", import_then_interfere)
    assert move(net, 0, 1, [h.id for h in handles]) == 2
    assert calls[1] == [handles[0].id]  # the renewed one went again, with its new expiry
    assert m1.store.get(handles[0].id).expires == m0.store.get(handles[0].id).expires
    assert m1.store.get(handles[1].id).status is State.UNSUBSCRIBED  # copy removed
    assert m0.mover.forwarding.lookup(handles[1].id) is None
    assert {s.id for s in m1.store.active()} == {handles[0].id, handles[2].id}
    assert m0.load() == 0


# -- the dispatcher's offline re-partitioning -----------------------------------------------

@pytest.mark.parametrize("algorithm", ["rtree", "kmeans"])
def test_repartition_moves_subscriptions_and_delivery_stays_exact(tmp_path, algorithm):
    net = Network(tmp_path, ("random", "random", "random"))
    try:
        net.create_topic()
        n = 150
        lo, hi = random_boxes(n, 3, seed=41)
        handles = [net.subscribe(i % 3, lo[i], hi[i], i) for i in range(n)]
        net.step()
        response = net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm=algorithm))
        figures = {f.Name: f.Value for f in response.Figure}
        assert response.Moved > 0 and int(figures["moved"]) == response.Moved
        assert int(figures["subscriptions"]) == n and int(figures["servers"]) == 3
        assert 0.0 <= float(figures["hit_ratio_after"]) <= 1.0
        loads = [m.load() for m in net.managers]
        assert sum(loads) == n and max(loads) <= 2 * n / 3 + 1
        assert sum(m.mover.forwarding.count() for m in net.managers) == response.Moved
        net.step()
        events = random_points(100, 3, seed=42)
        net.publish(events)
        net.drain()
        assert net.received() == expected_notifications(lo, hi, events)
        client = EventingClient("2011", transport=net.transport)
        assert all(client.get_status(h) is not None for h in handles)
        # A second run has (almost) nothing left to do.
        again = net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm=algorithm))
        assert again.Moved <= response.Moved
    finally:
        net.close()


def test_repartition_refuses_unknown_topics_and_algorithms(net):
    with pytest.raises(SoapFault) as caught:
        net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm="hash"))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    with pytest.raises(SoapFault) as caught:
        net.admin.call(protocol.Repartition(Topic="nope", Algorithm="rtree"))
    assert caught.value.subcode == contracts.FAULT_UNKNOWN_TOPIC


def test_repartition_with_a_silent_server_moves_nothing(net):
    fill(net, 9)
    net.transport._endpoints.pop(server_url(2))
    with pytest.raises(SoapFault):
        net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm="rtree"))
    assert net.manager(0).load() == 9 and net.manager(0).mover.forwarding.count() == 0




def test_repartition_across_a_cut_between_servers_says_what_did_not_move(tmp_path, monkeypatch):
    """The dispatcher reaches every server, but server 0 cannot reach the others: its moves
    fail, the subscriptions stay with it, and the answer says how many and why."""
    from wsframework.transport import TransportError
    net = Network(tmp_path, ("random", "random", "random"))
    try:
        net.create_topic()
        n = 60
        lo, hi = random_boxes(n, 3, seed=43)
        handles = [net.subscribe(0, lo[i], hi[i], i) for i in range(n)]
        net.step()

        class Cut:
            def post(self, url, *args, **kwargs):
                raise TransportError(f"POST {url} failed: connect timed out")

        mover = net.manager(0).mover
        monkeypatch.setattr(mover, "admin_client",
                            lambda address: AdminClient(address, TOKEN, transport=Cut()))
        monkeypatch.setattr("subscription_manager.server.moves.time.sleep", lambda s: None)
        response = net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm="rtree"))
        figures = {f.Name: f.Value for f in response.Figure}
        assert response.Moved == 0
        assert int(figures["not_moved"]) > 0 and int(figures["failed_moves"]) >= 1
        assert " -> " in figures["first_failure"]  # which servers, and why
        assert "connect timed out" in figures["first_failure"]
        assert net.manager(0).load() == n and mover.forwarding.count() == 0
        assert all(EventingClient("2011", transport=net.transport).get_status(h) is not None
                   for h in handles)
    finally:
        net.close()


def test_a_moved_subscription_keeps_its_owner_and_a_bad_owner_is_refused(net):
    import dataclasses
    net.subscribe(0, [1, 1, 1], [2, 2, 2], 1)
    m0 = net.manager(0)
    [original] = m0.store.active()
    owned = dataclasses.replace(original, owner="alice")
    element = subscriptions_element(TOPIC, [owned, dataclasses.replace(original, id="other")])
    parsed = parse_subscriptions(etree.fromstring(etree.tostring(element)), topic="t",
                                 topic_uid="u")
    assert [s.owner for s in parsed] == ["alice", None]
    for bad_owner in ("", "-x", "a b", "x" * 200, "#network"):
        bad = etree.fromstring(etree.tostring(element))
        bad.find("{urn:wsframework:edn}Subscription").set("owner", bad_owner)
        with pytest.raises(ValueError, match="owner"):
            parse_subscriptions(bad, topic="t", topic_uid="u")
