"""edn:NotifyWhen across the EDN (in process): the condition and L travel with moved
subscriptions (MoveSubscriptions, Repartition) and with a Subscribe placed on another
server; a hostile import of them is refused whole."""
from __future__ import annotations

from contextlib import closing

import numpy as np
import pytest
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from route_manager import protocol
from route_manager.workloads.grid_xml import event_element, range_filter
from subscription_manager.client import EventingClient, subscribe_body
from subscription_manager.server.relay import MessageIdClient
from subscription_manager.server.moved_subscriptions import parse_import, subscriptions_element
from subscription_manager.notify_index import NotifyGate
from subscription_manager.notify_when import NotifyWhen, last_notified_of, notify_when_element
from tests.support.edn import EV, TOPIC, Network, server_url
from tests.support.eventing import SINK, TOKEN
from tests.unit.subscription_manager.test_edn_moves import move  # MoveSubscriptions
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault

VALUE = "/e:event/e:x0"
EDN = "{urn:wsframework:edn}"
#: (ChangedBy, Tolerance) of the subscriptions, in turn: strict, with a tolerance, relative
KINDS = (("1", None), ("1", "0.25"), ("15%", None))


def rule(changed_by: str, tolerance: str | None) -> NotifyWhen:
    relative = changed_by.endswith("%")
    amount = float(changed_by.rstrip("%"))
    return NotifyWhen(VALUE, (("e", EV),), amount, relative,
                      float((tolerance or "0").rstrip("%")))


def subscribe_nw(net, at: int, lo, hi, index: int, changed_by: str, tolerance=None, *,
                 version: str = "2011"):
    client = EventingClient(version, transport=net.transport)
    body = subscribe_body(client.version, f"{SINK}/n/{index}", filter=range_filter(lo, hi),
                          dialect=RANGES_DIALECT, expires="PT1H", extensions=[
                              notify_when_element(VALUE, changed_by, tolerance,
                                                  namespaces={"e": EV})])
    return client.subscribe_raw(f"{server_url(at)}/topics/{TOPIC}", body)


def last_notified(net, handle):
    client = EventingClient(handle.version.name, transport=net.transport)
    reply = client._manage(handle, "GetStatus", etree.Element(client.version.q("GetStatus")))
    return last_notified_of(reply.body)


def holder(net, subscription_id: str) -> int:
    """The server whose store holds the subscription active."""
    held = [i for i, m in enumerate(net.managers)
            if (s := m.store.get(subscription_id)) is not None and s.is_active]
    assert len(held) == 1, held
    return held[0]


def walk(n: int, seed: int) -> np.ndarray:
    """Events whose x0 walks like a price (steps of at most 0.6 in [0, 10]) and whose x1,
    x2 are uniform: each subscription's box on x1 decides which events match it."""
    rng = np.random.default_rng(seed)
    x0 = np.clip(5 + np.cumsum(rng.uniform(-0.6, 0.6, n)), 0, 10)
    return np.round(np.column_stack([x0, rng.uniform(0, 10, (n, 2))]), 3)


def expected(boxes, rules, events, *, restart_at: int | None = None):
    """(sink path, event id) the rule notifies, L carried over the whole trace (or, with
    ``restart_at``, forgotten there: what a move that dropped L would give)."""
    out = []
    for i, ((lo, hi), condition) in enumerate(zip(boxes, rules)):
        last = None
        for k, point in enumerate(events):
            if k == restart_at:
                last = None
            if not np.all((lo <= point) & (point <= hi)):
                continue
            if condition.fires(last, float(point[0])):
                out.append((f"/n/{i}", str(k)))
                last = float(point[0])
    return sorted(out)


def last_values(boxes, rules, events) -> list[float | None]:
    lasts = []
    for (lo, hi), condition in zip(boxes, rules):
        values = [float(p[0]) for p in events if np.all((lo <= p) & (p <= hi))]
        notified = condition.notified(values)
        lasts.append(notified[-1] if notified else None)
    return lasts


def publish(net, events, first_id: int):
    net.publish(events, first_id=first_id)
    net.drain()


def nw_boxes(n: int, seed: int):
    """Boxes over all of x0 and x2 and a band of x1 (so each matches about a third)."""
    rng = np.random.default_rng(seed)
    start = np.round(rng.uniform(0, 6.5, n), 2)
    return [(np.array([0.0, a, 0.0]), np.array([10.0, a + 3.5, 10.0])) for a in start]


# == the wire form ===========================================================================

def test_condition_and_l_round_trip_through_the_wire_form(tmp_path):
    net = Network(tmp_path, ("local",))
    try:
        net.create_topic()
        handles = [subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], i, *kind)
                   for i, kind in enumerate(KINDS)]
        net.step()
        publish(net, [[4.0, 1, 1]], 0)
        m0 = net.manager(0)
        stored = {s.id: s for s in m0.store.active()}
        element = m0.mover.export(TOPIC)
        parsed, notified = parse_import(etree.fromstring(etree.tostring(element)),
                                        topic=TOPIC, topic_uid="u")
        assert {s.id: s.notify_when for s in parsed} == {i: s.notify_when
                                                          for i, s in stored.items()}
        assert notified == {h.id: (4.0, 0) for h in handles}
        # relative amounts travel as percentages, namespaces as stored
        relative = stored[handles[2].id].notify_when
        assert relative.relative and relative.changed_by == 15.0
        assert ("e", EV) in relative.namespaces
        # nothing notified yet and events without a number: both kept
        fresh = subscriptions_element(TOPIC, [stored[handles[0].id]],
                                      notified={handles[0].id: (None, 7)})
        assert parse_import(fresh, topic=TOPIC, topic_uid="u")[1] == {handles[0].id: (None, 7)}
    finally:
        net.close()


# == moves ===================================================================================

@pytest.fixture
def net(tmp_path):
    """Three servers that keep the subscriptions made at them (placement "local")."""
    with closing(Network(tmp_path, ("local",) * 3)) as network:
        network.create_topic()
        yield network


def test_a_moved_subscription_goes_on_from_its_l(net):
    boxes = nw_boxes(6, seed=3)
    rules = [rule(*KINDS[i % 3]) for i in range(6)]
    handles = [subscribe_nw(net, 0, lo, hi, i, *KINDS[i % 3]) for i, (lo, hi) in enumerate(boxes)]
    net.step()
    events = walk(120, seed=4)
    publish(net, events[:60], 0)
    before = last_values(boxes, rules, events[:60])
    assert [last_notified(net, h) for h in handles] == [(True, v) for v in before]
    m0, m1 = net.manager(0), net.manager(1)
    assert move(net, 0, 1, [h.id for h in handles]) == 6
    for h, last in zip(handles, before):
        assert m1.notify_state.last_value(h.id)[0] == last  # adopted with the row
        assert m0.notify_state.last_value(h.id) == (None, 0)  # gone with the row
        assert last_notified(net, h) == (True, last)  # through the EPR naming s0
        assert m1.store.get(h.id).notify_when == m0.store.get(h.id).notify_when
    net.step()
    publish(net, events[60:], 60)
    assert net.received() == expected(boxes, rules, events)
    # the test can fail: forgetting L at the move notifies something else
    assert expected(boxes, rules, events, restart_at=60) != expected(boxes, rules, events)
    after = last_values(boxes, rules, events)
    assert [last_notified(net, h) for h in handles] == [(True, v) for v in after]


def test_a_subscription_moved_away_and_back_uses_the_newer_l(net):
    """s0's index held the subscription with an L; after a round trip through s1, where L
    changed, s0 decides against s1's L, not the one it had."""
    lo, hi = [0, 0, 0], [10, 10, 10]
    handle = subscribe_nw(net, 0, lo, hi, 0, "1")
    net.step()
    publish(net, [[5.0, 1, 1]], 0)  # L = 5 at s0, indexed there
    assert move(net, 0, 1, [handle.id]) == 1
    net.step()
    publish(net, [[6.5, 1, 1]], 1)  # notified by s1: L = 6.5
    assert move(net, 1, 0, [handle.id]) == 1
    net.step()
    publish(net, [[5.8, 1, 1], [7.6, 1, 1]], 2)  # 5.8: within 1 of 6.5 (not of 5)
    assert net.received() == [("/n/0", "0"), ("/n/0", "1"), ("/n/0", "3")]
    assert last_notified(net, handle) == (True, 7.6)


def test_another_process_index_catches_up_on_an_adopted_l(net):
    """A second process on the target's store (another worker) indexed the subscription
    before a newer copy was imported: it decides against the adopted L (the state's
    generation), not the L it indexed."""
    handle = subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], 0, "1")
    net.step()
    publish(net, [[5.0, 1, 1]], 0)
    m0, m1 = net.manager(0), net.manager(1)
    element = m0.mover.export(TOPIC)
    assert m1.mover.import_(TOPIC, element) == 1
    other = NotifyGate()
    subscription = m1.store.get(handle.id)
    assert other.load(m1.service.store.connection(), [subscription]) == 1  # with L = 5
    element.find(f".//{EDN}NotifyWhen").set("lastNotified", "8.0")
    assert m1.mover.import_(TOPIC, element) == 1  # the newer copy: L = 8
    key = subscription.notify_when.value_key
    with m1.service.store.transaction() as conn:
        assert other.decide(conn, [subscription], {key: 7.5}) == set()  # within 1 of 8
    with m1.service.store.transaction() as conn:
        assert other.decide(conn, [subscription], {key: 6.9}) == {handle.id}
    assert m1.notify_state.last_value(handle.id)[0] == 6.9


def test_an_import_replaces_the_l_held_here(net):
    """This process's index held L; a copy imported without one (nothing notified at the
    source) starts again at the next value, as the source would have."""
    handle = subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], 0, "1")
    net.step()
    m0, m1 = net.manager(0), net.manager(1)
    element = m0.mover.export(TOPIC)  # nothing notified yet: no lastNotified
    assert element.find(f".//{EDN}NotifyWhen").get("lastNotified") is None
    held = etree.fromstring(etree.tostring(element))
    held.find(f".//{EDN}NotifyWhen").set("lastNotified", "8.0")
    assert m1.mover.import_(TOPIC, held) == 1
    subscription = m1.store.get(handle.id)
    key = subscription.notify_when.value_key
    with m1.service.store.transaction() as conn:  # m1's index now holds L = 8
        assert m1.notify_gate.decide(conn, [subscription], {key: 8.5}) == set()
    assert m1.mover.import_(TOPIC, element) == 1
    assert m1.notify_state.last_value(handle.id) == (None, 0)
    with m1.service.store.transaction() as conn:
        assert m1.notify_gate.decide(conn, [subscription], {key: 8.5}) == {handle.id}


def test_l_changed_during_a_move_goes_again(net, monkeypatch):
    """The source notifies the subscription between the export and the release: the
    newer L is exported again, and the target goes on from it."""
    handle = subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], 0, "1")
    net.step()
    publish(net, [[5.0, 1, 1]], 0)
    m0, m1 = net.manager(0), net.manager(1)
    original = m0.mover._import_at
    sent = []

    def import_then_notify(target, topic, subscriptions, notified):
        original(target, topic, subscriptions, notified)
        sent.append(m1.notify_state.last_value(handle.id)[0])
        if len(sent) == 1:  # an event that reaches s0 before it lets go
            subscription = m0.store.get(handle.id)
            entry = m0.topics.get(TOPIC)
            m0.deliver([subscription], m0.default_action(entry),
                       etree.tostring(event_element([7.0, 1, 1], 1)))
            assert m0.deliverer.drain(10)

    monkeypatch.setattr(m0.mover, "_import_at", import_then_notify)
    assert move(net, 0, 1, [handle.id]) == 1
    assert sent == [5.0, 7.0]  # the first import carried 5, the second 7
    assert last_notified(net, handle) == (True, 7.0)
    net.step()
    publish(net, [[6.5, 1, 1], [5.9, 1, 1]], 2)  # 6.5 is within 1 of 7 (not of 5)
    assert net.received() == [("/n/0", "0"), ("/n/0", "1"), ("/n/0", "3")]


def test_repartition_keeps_conditions_and_l(tmp_path):
    net = Network(tmp_path, ("random", "random", "random"))
    try:
        net.create_topic()
        n = 36
        boxes = nw_boxes(n, seed=7)
        rules = [rule(*KINDS[i % 3]) for i in range(n)]
        handles = [subscribe_nw(net, i % 3, lo, hi, i, *KINDS[i % 3],
                                version="2004" if i % 2 else "2011")
                   for i, (lo, hi) in enumerate(boxes)]
        net.step()
        events = walk(160, seed=8)
        publish(net, events[:80], 0)
        before = last_values(boxes, rules, events[:80])
        where = [holder(net, h.id) for h in handles]
        response = net.admin.call(protocol.Repartition(Topic=TOPIC, Algorithm="rtree"))
        assert response.Moved > 0
        moved = [i for i, h in enumerate(handles) if holder(net, h.id) != where[i]]
        assert moved  # NotifyWhen subscriptions among those moved
        for i in moved:
            source, target = net.manager(where[i]), net.manager(holder(net, handles[i].id))
            assert source.notify_state.last_value(handles[i].id) == (None, 0)
            assert target.notify_state.last_value(handles[i].id)[0] == before[i]
            assert target.store.get(handles[i].id).notify_when == \
                source.store.get(handles[i].id).notify_when
        assert [last_notified(net, h) for h in handles] == [(True, v) for v in before]
        net.step()
        publish(net, events[80:], 80)
        assert net.received() == expected(boxes, rules, events)
        restarted = expected(boxes, rules, events, restart_at=80)
        differs = {p for p in set(restarted) ^ set(expected(boxes, rules, events))}
        assert any(path == f"/n/{i}" for path, _ in differs for i in moved)
    finally:
        net.close()


# == a Subscribe placed on another server ====================================================

def test_a_forwarded_subscribe_keeps_its_condition(tmp_path):
    net = Network(tmp_path, ("rtree", "rtree", "local"))
    try:
        net.create_topic()
        net.subscribe(2, [5, 5, 5], [8, 8, 8], 99)  # s2 owns the region
        net.step()
        def body(path):
            return subscribe_body("2011", f"{SINK}{path}", filter=range_filter([6, 6, 6], [7, 7, 7]),
                                  dialect=RANGES_DIALECT, expires="PT1H", extensions=[
                                      notify_when_element(VALUE, "0.3", "0.1",
                                                          namespaces={"e": EV})])
        client = EventingClient("2011", transport=net.transport)
        handle = client.subscribe_raw(f"{server_url(0)}/topics/{TOPIC}", body("/n/0"))
        assert handle.manager.address.startswith(server_url(2))  # placed on s2
        stored = net.manager(2).store.get(handle.id).notify_when
        assert (stored.value, stored.changed_by, stored.tolerance, stored.relative) == \
               (VALUE, 0.3, 0.1, False)
        # a request sent twice under one MessageID at s0: one subscription, with its condition
        again = MessageIdClient(net.transport, "urn:uuid:nw-forward-1",
                                soap_version=client.soap.soap_version,
                                wsa_version=client.version.wsa)
        manager = client.version.q("SubscriptionManager")
        first, second = (again.call(f"{server_url(0)}/topics/{TOPIC}",
                                    client.version.action("Subscribe"), body("/n/1"))
                         for _ in range(2))
        assert etree.tostring(first.body.find(manager)) == etree.tostring(second.body.find(manager))
        assert net.manager(2).load() == 3 and net.manager(0).load() == 0
        net.step()
        x0 = [6.0, 6.2, 6.35, 6.5, 6.61, 6.9, 6.7, 6.65]
        publish(net, [[v, 6.5, 6.5] for v in x0], 0)
        notified = rule("0.3", "0.1").notified(x0)
        assert len(notified) < len(x0)
        for path in ("/n/0", "/n/1"):
            got = sorted(int(k) for at, k in net.received() if at == path)
            assert [x0[k] for k in got] == notified, path
        assert last_notified(net, handle) == (True, notified[-1])
    finally:
        net.close()


def test_a_repeated_subscribe_after_a_move_gets_the_moved_subscription(net):
    """The server that made a subscription answers a repeated Subscribe (same MessageID)
    with it after it moved away, and after it came back: not a second subscription (which
    would notify again from no L)."""
    client = EventingClient("2011", transport=net.transport)
    repeating = MessageIdClient(net.transport, "urn:uuid:nw-repeated-1",
                                soap_version=client.soap.soap_version,
                                wsa_version=client.version.wsa)
    body = subscribe_body("2011", f"{SINK}/n/0", filter=range_filter([0, 0, 0], [10, 10, 10]),
                          dialect=RANGES_DIALECT, expires="PT1H", extensions=[
                              notify_when_element(VALUE, "1", namespaces={"e": EV})])
    manager = client.version.q("SubscriptionManager")

    def subscribe():
        reply = repeating.call(f"{server_url(0)}/topics/{TOPIC}",
                               client.version.action("Subscribe"), body)
        return etree.tostring(reply.body.find(manager))
    first = subscribe()
    (made,) = [s.id for s in net.manager(0).store.active()]
    assert move(net, 0, 1, [made]) == 1
    assert subscribe() == first
    assert move(net, 1, 0, [made]) == 1
    assert subscribe() == first
    assert [m.load() for m in net.managers] == [1, 0, 0]


# == hostile imports =========================================================================

def _set(name, value):
    return lambda nw: nw.set(name, value)


def _value(text):
    return lambda nw: setattr(nw.find(f"{EDN}Value"), "text", text)


def _add(tag, **attributes):
    return lambda nw: etree.SubElement(nw, f"{EDN}{tag}", **attributes)


HOSTILE = {
    "L not a number": _set("lastNotified", "nan"),
    "L infinite": _set("lastNotified", "inf"),
    "L overflowing": _set("lastNotified", "1e999"),
    "L too long": _set("lastNotified", "1" * 80),
    "ChangedBy negative": _set("changedBy", "-1.0"),
    "ChangedBy zero": _set("changedBy", "0"),
    "ChangedBy with _": _set("changedBy", "1_0"),
    "ChangedBy missing": lambda nw: nw.attrib.pop("changedBy"),
    "ChangedBy over 100%": lambda nw: (nw.set("relative", "true"), nw.set("changedBy", "150")),
    "tolerance above ChangedBy": _set("tolerance", "2.0"),
    "relative not a boolean": _set("relative", "yes"),
    "unnumbered negative": _set("unnumbered", "-1"),
    "unnumbered huge": _set("unnumbered", "9" * 40),
    "Value empty": _value(""),
    "Value too long": _value("/e:event/e:x0" + " " * 1100 + "+ 1"),
    "Value not XPath": _value("/e:event/["),
    "Value with an unknown prefix": _value("/z:event"),
    "Value nesting a scan": _value("count(//*[count(//*) > 0])"),
    "Value holding elements": lambda nw: etree.SubElement(nw.find(f"{EDN}Value"), "x"),
    "two Values": _add("Value"),
    "unknown child": _add("Script"),
    "empty prefix": _add("Namespace", prefix="", uri="urn:x"),
    "prefix declared twice": _add("Namespace", prefix="e", uri="urn:other"),
    "namespace without uri": _add("Namespace", prefix="f", uri=""),
    "two conditions": lambda nw: nw.getparent().append(etree.fromstring(etree.tostring(nw))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_import_is_refused_whole(net, case):
    """A good subscription and one with a bad condition in one import: nothing is stored
    at the target, neither row nor L."""
    good = subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], 0, "1")
    bad = subscribe_nw(net, 0, [0, 0, 0], [10, 10, 10], 1, "1")
    net.step()
    publish(net, [[5.0, 1, 1]], 0)
    element = net.manager(0).mover.export(TOPIC)
    target = next(s for s in element if s.get("id") == bad.id)
    HOSTILE[case](target.find(f"{EDN}NotifyWhen"))
    admin = AdminClient(server_url(1), TOKEN, transport=net.transport)
    with pytest.raises(SoapFault) as caught:
        admin.call(protocol.ImportSubscriptions(Topic=TOPIC, Subscriptions=element))
    assert caught.value.subcode == contracts.FAULT_INVALID_REQUEST
    assert caught.value.reason.startswith(f"cannot import into {TOPIC}: subscription {bad.id}: "
                                          "edn:NotifyWhen")
    m1 = net.manager(1)
    assert m1.load() == 0 and m1.store.count() == 0
    for handle in (good, bad):
        assert m1.notify_state.last_value(handle.id) == (None, 0)
    assert net.manager(0).load() == 2  # the source still has both
