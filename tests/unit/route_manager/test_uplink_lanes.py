"""An uplink talks to each upstream on its own lane: an upstream that hangs (a cut link where
every call waits for its timeout) never delays the calls to another. Upstreams in memory,
no sockets; every wait is on an event, with a timeout only so a regression fails instead of
hanging the suite."""
from __future__ import annotations

import threading

from lxml import etree

from route_manager import protocol
from route_manager.lanes import Lane, finished
from route_manager.protocol import KIND_SERVER
from route_manager.uplink import RouteReport, Uplink
from wsframework.transport import TransportError

A = "http://root-a.test"
B = "http://root-b.test"
PATIENCE = 10.0  # seconds an assertion waits for an event that should come at once


class Upstream:
    """A dispatcher in memory: answers RegisterServer and UpdateSummary, recording the
    updates; :meth:`cut` makes every later call hang until :meth:`heal`."""

    def __init__(self, address: str):
        self.address = address
        self.updates: list[tuple[str, int]] = []  # (route, generation), in arrival order
        self.updated = threading.Condition()
        self.hanging = threading.Event()  # a call is hanging in the cut link
        self._healed = threading.Event()
        self._healed.set()

    def cut(self) -> None:
        self._healed.clear()

    def heal(self) -> None:
        self._healed.set()

    def call(self, request):
        if not self._healed.is_set():
            self.hanging.set()
            if not self._healed.wait(PATIENCE):
                raise TransportError(f"POST {self.address} timed out")
        if isinstance(request, protocol.RegisterServer):
            return protocol.RegisterServerResponse(Name=request.Name)
        with self.updated:
            self.updates.append((request.Route, request.Generation))
            self.updated.notify_all()
        return protocol.UpdateSummaryResponse(Route=request.Route, Accepted=1)

    def wait_for(self, count: int) -> bool:
        """True once ``count`` updates arrived (False after :data:`PATIENCE` seconds)."""
        with self.updated:
            return self.updated.wait_for(lambda: len(self.updates) >= count, PATIENCE)


def report(key: int) -> RouteReport:
    return RouteReport("grid", key, lambda _precision: (etree.Element("{urn:test}S"), 1))


def uplink_to(*upstreams: Upstream, **kwargs) -> Uplink:
    by_address = {u.address: u for u in upstreams}
    return Uplink(name="s1", address="http://s1.test", kind=KIND_SERVER,
                  upstreams=list(by_address), client_for=by_address.__getitem__, **kwargs)


def in_background(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_an_upstream_that_hangs_does_not_delay_the_update_to_another():
    a, b = Upstream(A), Upstream(B)
    uplink = uplink_to(a, b)
    try:
        assert uplink.register_missing() == 2
        a.cut()
        pusher = in_background(lambda: uplink.push([report(1)], generation=7))
        assert b.wait_for(1), "B got nothing while A hung"
        assert b.updates == [("grid", 7)]
        assert a.hanging.wait(PATIENCE) and a.updates == []
        a.heal()
        assert a.wait_for(1) and a.updates == [("grid", 7)]
        pusher.join(PATIENCE)
        assert not pusher.is_alive()
    finally:
        a.heal()
        uplink.close()


def test_a_registration_that_hangs_does_not_delay_another():
    a, b = Upstream(A), Upstream(B)
    a.cut()
    answered = {A: threading.Event(), B: threading.Event()}
    uplink = uplink_to(a, b, on_registered=lambda address, _response: answered[address].set())
    registered = threading.Event()
    try:
        registering = in_background(lambda: (uplink.register_missing(), registered.set()))
        assert answered[B].wait(PATIENCE), "B not registered while A hung"
        assert a.hanging.wait(PATIENCE)
        assert not answered[A].is_set() and not registered.is_set()
        a.heal()
        assert registered.wait(PATIENCE) and uplink.is_registered()
        registering.join(PATIENCE)
    finally:
        a.heal()
        uplink.close()


def test_a_loop_that_does_not_wait_keeps_the_others_current_and_the_hung_one_catches_up_in_order():
    a, b = Upstream(A), Upstream(B)
    counted = []
    uplink = uplink_to(a, b, on_sent=counted.append)
    try:
        assert uplink.register_missing() == 2
        a.cut()
        uplink.push([report(1)], generation=1, wait=0)  # returns at once: A's lane hangs
        assert a.hanging.wait(PATIENCE) and b.wait_for(1)
        uplink.push([report(2)], generation=2, wait=0)
        assert b.wait_for(2)
        uplink.push([report(3)], generation=3, wait=0)
        assert b.wait_for(3)
        assert b.updates == [("grid", 1), ("grid", 2), ("grid", 3)]
        assert a.updates == []
        a.heal()
        # the call under way ends, then the two rounds made meanwhile go as one: the latest
        assert a.wait_for(2)
        assert uplink.push([report(3)], generation=4) == 0  # both hold key 3 already
        assert a.updates == [("grid", 1), ("grid", 3)]
        assert sum(counted) == 5
    finally:
        a.heal()
        uplink.close()


def test_closing_a_lane_finishes_the_jobs_waiting_behind_a_hung_call():
    lane = Lane("root-a")
    release, entered = threading.Event(), threading.Event()
    try:
        hung = lane.submit("push", None, lambda _: (entered.set(), release.wait(PATIENCE))[1])
        assert entered.wait(PATIENCE)
        waiting = lane.submit("poll", None, lambda _: "ran")
        merged = lane.submit("poll", None, lambda _: "ran")
        assert merged is waiting  # one waiting job per kind
        lane.close(timeout=0)
        assert finished([waiting], 0) == [waiting] and waiting.result is None
        assert lane.submit("poll", None, lambda _: "ran").result is None  # closed: runs nothing
        release.set()
        assert finished([hung], PATIENCE) == [hung] and hung.result is True
    finally:
        release.set()


def test_a_round_whose_generation_is_below_one_already_sent_waits_for_the_next_round():
    b = Upstream(B)
    uplink = uplink_to(b)
    try:
        assert uplink.register_missing() == 1
        assert uplink.push([report(1)], generation=5) == 1
        # drawn after generation 5 was sent (a lane drew a later round's first): held back
        assert uplink.push([report(2)], generation=3) == 0
        assert uplink.push([report(2)], generation=6) == 1
        assert b.updates == [("grid", 5), ("grid", 6)]
    finally:
        uplink.close()
