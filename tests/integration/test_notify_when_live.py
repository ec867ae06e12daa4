"""edn:NotifyWhen on real processes: a dispatcher and two subscription servers (``edn
serve``), a notification sink. Subscriptions with and without a NotifyWhen (strict,
with tolerance, relative; both WS-Eventing versions) on one topic; a price trace is
published at the dispatcher, which routes each event as usual; the server holding each
subscription applies its condition. Each sink path receives exactly the values the rule
gives, GetStatus shows L, and a ``kill -9`` of a server between events neither loses nor
rewinds the L it committed; then every subscription with a NotifyWhen moves to the other
server (``MoveSubscriptions``, the import over real HTTP), and the second half of the trace
is still notified exactly from the L each had (GetStatus through the old EPRs shows it).

"Exactly" is per ``wsa:MessageID``: delivery is at least once (docs/guarantees.md,
Duplicates). The killed server deletes delivered outbox rows in batches (at its next sweep),
so the restarted one sends again what was delivered in the last moment before the
``kill -9``, each with the MessageID it had; a repeat must be the same notification, and two
MessageIDs for one would be a second decision (a real duplicate), which fails.

Every wait is on a condition (the sink's distinct notifications, the network's stats),
never a fixed sleep.
"""
from __future__ import annotations

import random

from lxml import etree

from edn.localnet.network import LocalNetwork, wait_until
from route_manager import protocol
from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
from subscription_manager.client import EventingClient, subscribe_body
from subscription_manager.notify_when import (last_notified_of, notify_when_element,
                                              parse_notify_when)
from subscription_manager.versions import V2011
from tests.support.processes import ADMIN_TOKEN
from matchers.vocabulary import RANGES_DIALECT
from route_manager.workloads.grid_xml import GRID_EVENTS
from wsframework.admin import AdminClient
from route_manager.publisher import Publisher

TOPIC = "ticks"
VALUE = "/e:event/e:x0"
# path -> (version, ChangedBy, Tolerance); None: no NotifyWhen
SUBSCRIPTIONS = {"/n/strict": ("2011", "5", None), "/n/tolerant": ("2004", "3", "1"),
                 "/n/relative": ("2011", "4%", None), "/n/plain": ("2011", None, None)}


def trace(n: int, seed: int = 23) -> list[float]:
    rng = random.Random(seed)
    value, out = 100.0, []
    for _ in range(n):
        value = round(min(900.0, max(10.0, value + rng.gauss(0, 2.5))), 3)
        out.append(value)
    return out


def rule(values, changed_by, tolerance):
    return parse_notify_when(_body(changed_by, tolerance), V2011).notified(values)


def _body(changed_by, tolerance, version="2011", notify_to="http://sink.invalid/n"):
    body = subscribe_body(version, notify_to, filter=range_filter([0.0], [1000.0]),
                          dialect=RANGES_DIALECT, expires="PT1H")
    if changed_by is not None:
        body.append(notify_when_element(VALUE, changed_by, tolerance,
                                        namespaces={"e": GRID_EVENTS}))
    return body


#: the wsa:MessageID header of a notification, in either WS-Addressing version
MESSAGE_ID = "/*/*[local-name()='Header']/*[local-name()='MessageID']"


def received(sink) -> dict[str, list[float]]:
    """Each path's notified values, sorted, one per wsa:MessageID: a repeated MessageID (an
    at-least-once repeat) is checked to carry the same event and counted once."""
    by_id: dict[str, dict[str, tuple[str, float]]] = {path: {} for path in SUBSCRIPTIONS}
    for message in list(sink.messages):
        envelope = etree.fromstring(message.body)
        (message_id,) = envelope.xpath(MESSAGE_ID)
        event = envelope.find(f".//{{{GRID_EVENTS}}}event")
        notified = (event.get("id"), float(event.find(f"{{{GRID_EVENTS}}}x0").text))
        first = by_id[message.path].setdefault(message_id.text, notified)
        assert first == notified, f"{message_id.text} came with {first} and with {notified}"
    return {path: sorted(value for _, value in notified.values())
            for path, notified in by_id.items()}


def wait_received(sink, count: int, timeout: float) -> None:
    """Until the sink has ``count`` distinct notifications (repeats do not count)."""
    wait_until(lambda: sum(map(len, received(sink).values())) >= count, timeout,
               what=f"{count} distinct notifications", poll=0.2)


def last_notified(handle) -> tuple[bool, float | None]:
    client = EventingClient("2004" if handle.version.is_2004 else "2011")
    reply = client._manage(handle, "GetStatus", etree.Element(handle.version.q("GetStatus")))
    return last_notified_of(reply.body)


def test_notify_when_through_the_edn_exact_and_durable_across_kill_9(tmp_path):
    servers = [("s1", "local", 1), ("s2", "local", 1)]
    with LocalNetwork(tmp_path / "net", servers, token=ADMIN_TOKEN, d=1) as network:
        AdminClient(network.dispatcher.base_url, ADMIN_TOKEN).create_topic(
            TOPIC, None, schema_element(1, 0.0, 1000.0))
        wait_until(lambda: all(network.hosts_topic(s, TOPIC) for s in network.servers.values()),
                   what="the topic on every server")
        names = list(network.servers)
        handles = {}
        for k, (path, (version, changed_by, tolerance)) in enumerate(SUBSCRIPTIONS.items()):
            server = network.servers[names[k % 2]]
            client = EventingClient(version)
            handles[path] = client.subscribe_raw(
                f"{server.base_url}/topics/{TOPIC}",
                _body(changed_by, tolerance, version, f"{network.sink.url}{path}"))
            network.handles.append(handles[path])
        network.wait_routed()

        values = trace(120)
        half = len(values) // 2
        expected_half = {p: (rule(values[:half], c, t) if c else values[:half])
                         for p, (_, c, t) in SUBSCRIPTIONS.items()}
        expected = {p: (rule(values, c, t) if c else values)
                    for p, (_, c, t) in SUBSCRIPTIONS.items()}

        def publish(part, first_id):
            with Publisher(network.dispatcher.base_url) as publisher:
                for offset, value in enumerate(part):
                    publisher.publish(TOPIC, event_element([value], first_id + offset))

        publish(values[:half], 0)
        wait_received(network.sink, sum(map(len, expected_half.values())), timeout=60)
        wait_until(network.quiet, 60, what="an idle network")
        assert received(network.sink) == {p: sorted(v) for p, v in expected_half.items()}
        for path, (_, changed_by, _) in SUBSCRIPTIONS.items():
            status = last_notified(handles[path])
            if changed_by is None:
                assert status == (False, None)
            else:
                assert status == (True, expected_half[path][-1]), path

        # kill -9 the server holding the strict subscription, start it again on its store
        holder = next(s for s in network.servers.values()
                      if handles["/n/strict"].manager.address.startswith(s.base_url))
        holder.kill()
        holder.start()
        assert last_notified(handles["/n/strict"]) == (True, expected_half["/n/strict"][-1])
        network.wait_routed()

        # every conditional subscription moves to the other server, with its condition and L
        for path, (_, changed_by, _) in SUBSCRIPTIONS.items():
            if changed_by is None:
                continue
            source, target = sorted(network.servers.values(), key=lambda s: not handles[
                path].manager.address.startswith(s.base_url))
            moved = AdminClient(source.base_url, ADMIN_TOKEN).call(protocol.MoveSubscriptions(
                Topic=TOPIC, Target=target.base_url, Id=[handles[path].id])).Moved
            assert moved == 1, path
            assert last_notified(handles[path]) == (True, expected_half[path][-1]), path
        network.wait_routed()

        publish(values[half:], half)
        wait_received(network.sink, sum(map(len, expected.values())), timeout=90)
        wait_until(network.quiet, 60, what="an idle network")
        got = received(network.sink)
        print(f"\n{len(values)} values; distinct notifications per path: "
              f"{ {p: len(v) for p, v in got.items()} }; {len(network.sink.messages)} "
              f"received in all (repeats after the kill -9 included)")
        assert got == {p: sorted(v) for p, v in expected.items()}
        for path, (_, changed_by, _) in SUBSCRIPTIONS.items():
            if changed_by is not None:
                assert last_notified(handles[path]) == (True, expected[path][-1]), path
        # the condition saved messages: the strict one heard of a fraction of the trace
        assert len(expected["/n/strict"]) < len(values) / 3
