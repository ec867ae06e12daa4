"""The control gate: bounded control requests, events never waiting, the control path's
share of a worker while events flow (wsframework.admission). No sockets."""
from __future__ import annotations

import threading

import pytest
from lxml import etree

from wsframework.addressing import WsaVersion, request_headers
from wsframework.admission import (ENDPOINT_UNAVAILABLE, RETRY_AFTER, RETRY_AFTER_MS,
                                   AdmissionSettings, ControlGate, waiting_on_peer)
from wsframework.exceptions import RECEIVER, SoapFault
from wsframework.messaging import MessageFilter, Reply
from wsframework.service import Service, ServiceConfig
from wsframework.settings import SettingsError, read_settings
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.transport import InProcessTransport

EVENT = "urn:test:event"
CONTROL = "urn:test:control"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _flowing(concurrency: int) -> tuple[Clock, ControlGate]:
    """A gate (share 0.5) that has just seen an event, and its clock."""
    clock = Clock()
    gate = ControlGate(concurrency=concurrency, share=0.5, max_wait=5, clock=clock)
    gate.let_through(EVENT)
    gate.event_seen()  # an event, its sender authenticated
    return clock, gate


def _hold(gate: ControlGate, action: str | None, entered: threading.Event,
          leave: threading.Event) -> threading.Thread:
    """A thread that holds ``gate`` for ``action`` until ``leave`` is set."""
    def run():
        with gate.admitted(action):
            entered.set()
            leave.wait(10)
    thread = threading.Thread(target=run)
    thread.start()
    assert entered.wait(5)
    return thread


def test_letting_an_event_through_is_not_yet_an_event_seen():
    clock = Clock()
    gate = ControlGate(concurrency=1, share=0.5, max_wait=5, clock=clock)
    gate.let_through(EVENT)
    assert gate.passes(EVENT) and not gate.passes(CONTROL) and not gate.passes(None)
    with gate.admitted(EVENT):  # its handler has not authenticated it
        pass
    assert not gate.events_flowing()
    gate.event_seen()
    assert gate.events_flowing()
    clock.now += 1.0
    assert not gate.events_flowing()


def test_events_pass_when_every_control_slot_is_taken():
    gate = ControlGate(concurrency=1, share=1.0, max_wait=5)
    gate.let_through(EVENT)
    leave = threading.Event()
    holder = _hold(gate, CONTROL, threading.Event(), leave)
    try:
        with gate.admitted(EVENT):  # at once, although the one slot is held
            assert gate.waiting == 0
    finally:
        leave.set()
        holder.join(5)


def test_a_control_request_without_a_slot_in_time_is_told_to_come_back():
    gate = ControlGate(concurrency=1, share=1.0, max_wait=0.05)
    leave = threading.Event()
    holder = _hold(gate, None, threading.Event(), leave)  # no action: control
    try:
        with pytest.raises(SoapFault) as refused:
            with gate.admitted(CONTROL):
                pytest.fail("admitted without a slot")
        fault = refused.value
        assert fault.code == RECEIVER and fault.subcodes == (ENDPOINT_UNAVAILABLE,)
        retry, = fault.detail
        assert retry.tag == RETRY_AFTER and retry.text == str(RETRY_AFTER_MS)
        assert gate.refused == 1 and gate.waiting == 0
    finally:
        leave.set()
        holder.join(5)
    with gate.admitted(CONTROL):  # the slot is back
        pass


def test_a_slot_is_let_go_while_its_request_waits_on_a_peer():
    gate = ControlGate(concurrency=1, share=1.0, max_wait=5)
    inside, go_on, other_done = threading.Event(), threading.Event(), []

    def first():
        with gate.admitted(CONTROL):
            with waiting_on_peer():
                inside.set()
                go_on.wait(10)  # the peer answers when the other request has been through

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(5)
    with gate.admitted(CONTROL):  # would wait out max_wait if the slot were still held
        other_done.append(True)
    go_on.set()
    thread.join(5)
    assert other_done == [True] and not thread.is_alive()
    assert gate._slots.acquire(blocking=False)  # taken again, then given back
    gate._slots.release()


def test_a_request_whose_slot_was_taken_while_it_waited_on_a_peer_goes_on_without_one():
    """Waiting for the slot again could wait for ever: its holder may wait on a lock the
    request holds across its call (a table role's sending lock)."""
    gate = ControlGate(concurrency=1, share=1.0, max_wait=5)
    lock = threading.Lock()
    in_call, other_in, results = threading.Event(), threading.Event(), []

    def first():
        with gate.admitted(CONTROL):
            with lock:
                with waiting_on_peer():
                    in_call.set()
                    assert other_in.wait(5)  # the other request took the slot meanwhile
            results.append("first")

    def second():
        assert in_call.wait(5)
        with gate.admitted(CONTROL):
            other_in.set()
            with lock:  # held by the first until its call returns
                results.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(results) == ["first", "second"]
    assert gate._slots.acquire(blocking=False)  # one slot, given back once
    gate._slots.release()


def test_while_events_flow_a_slot_rests_so_control_keeps_its_share():
    clock, gate = _flowing(2)
    with gate.admitted(CONTROL):
        clock.now += 0.02  # worked 20 ms
    # each of 2 slots may be worked on a quarter of the time: 60 ms of rest
    assert gate.rested == pytest.approx(0.06)
    assert gate._slots.acquire(blocking=False)  # the other slot
    assert not gate._slots.acquire(blocking=False)  # this one rests
    assert gate._slots.acquire(timeout=5)  # and comes back
    gate._slots.release()
    gate._slots.release()


def test_a_slot_rests_for_the_time_it_was_worked_on_not_the_time_a_peer_took():
    clock, gate = _flowing(1)
    with gate.admitted(CONTROL):
        clock.now += 0.01
        with waiting_on_peer():
            clock.now += 0.5  # a peer's answer
        clock.now += 0.01
    assert gate.rested == pytest.approx(0.02)  # (10 + 10 ms) * (1 / 0.5 - 1)
    assert gate._slots.acquire(timeout=5)
    gate._slots.release()


def test_when_no_event_flows_control_takes_the_whole_worker():
    clock, gate = _flowing(1)
    clock.now += 1.5  # the last event is past the window
    with gate.admitted(CONTROL):
        clock.now += 0.02
    assert gate.rested == 0
    assert gate._slots.acquire(blocking=False)
    gate._slots.release()


def test_a_gate_for_threads_lets_everything_through():
    gate = ControlGate(concurrency=1, share=0.5, enabled=False)
    with gate.admitted(CONTROL), gate.admitted(CONTROL):
        pass
    assert gate._slots is None


def test_no_bound_means_no_slot_and_no_rest():
    gate = ControlGate(concurrency=0, share=0.5)
    with gate.admitted(CONTROL), gate.admitted(CONTROL):
        pass
    assert gate.rested == 0 and gate.refused == 0


@pytest.mark.parametrize("bad", [{"control_concurrency": "-1"}, {"control_share": "0"},
                                 {"control_share": "1.5"}, {"control_wait": "0"},
                                 {"control_concurrency": "many"}])
def test_bad_admission_settings_are_refused(bad):
    with pytest.raises(SettingsError):
        read_settings(bad, AdmissionSettings)


@pytest.mark.parametrize("bad", [(-1, 0.5, 1.0), (1, 0.0, 1.0), (1, 2.0, 1.0), (1, 0.5, 0.0)])
def test_a_gate_refuses_bounds_that_mean_nothing(bad):
    with pytest.raises(ValueError):
        ControlGate().configure(*bad)


def test_a_service_answers_a_control_request_it_has_no_room_for_with_endpoint_unavailable(
        tmp_path):
    service = Service(ServiceConfig(base_url="http://edn.example", data_dir=tmp_path,
                                    admin_token="t0ken"), transport=InProcessTransport())
    service.messaging.route("control", MessageFilter(action=CONTROL),
                            lambda m: Reply(CONTROL + "/response", etree.fromstring("<ok/>")))
    assert service.gate.enabled is False  # the tests' threads are not greenlets
    service.gate = ControlGate()  # as in a gevent worker
    AdmissionSettings(control_concurrency=1, control_share=1.0,
                      control_wait=0.05).apply_to(service.gate)
    transport = InProcessTransport()
    transport.mount("http://edn.example", service)
    envelope = build_envelope(SoapVersion.SOAP12, etree.fromstring("<ping/>"),
                              request_headers(WsaVersion.WSA10, "http://edn.example/", CONTROL))
    leave = threading.Event()
    holder = _hold(service.gate, CONTROL, threading.Event(), leave)
    try:
        answer = transport.post("http://edn.example/", envelope,
                                SoapVersion.SOAP12.content_type, CONTROL)
        fault = parse_envelope(answer.body).fault()
        assert fault.code == RECEIVER and fault.subcodes == (ENDPOINT_UNAVAILABLE,)
        assert answer.status == 500 and b"RetryAfter" in answer.body
    finally:
        leave.set()
        holder.join(5)
        service.close()


def test_the_gate_is_figures_on_metrics():
    from wsframework.metrics import _gate_readings
    gate = ControlGate(concurrency=1, share=1.0, max_wait=0.01)
    leave = threading.Event()
    holder = _hold(gate, CONTROL, threading.Event(), leave)
    try:
        with pytest.raises(SoapFault):
            with gate.admitted(CONTROL):
                pass
    finally:
        leave.set()
        holder.join(5)
    readings = {r.name: r.value for r in _gate_readings("edn_", gate)}
    assert readings == {"edn_control_waiting": 0, "edn_control_refused_total": 1,
                        "edn_control_rested_seconds_total": 0.0}


def test_a_request_let_through_on_an_announced_action_must_carry_it(tmp_path):
    """SOAPAction says event, wsa:Action says control: wsa:ActionMismatch, not a control
    request that skipped the queue."""
    service = Service(ServiceConfig(base_url="http://edn.example", data_dir=tmp_path,
                                    admin_token="t0ken"), transport=InProcessTransport())
    handled = []
    for action in (EVENT, CONTROL):
        service.messaging.route(action, MessageFilter(action=action),
                                lambda m: handled.append(m.action))
    service.gate = ControlGate()
    service.gate.let_through(EVENT)
    transport = InProcessTransport()
    transport.mount("http://edn.example", service)
    try:
        for wsa_action, expected in ((CONTROL, "ActionMismatch"), (EVENT, None)):
            envelope = build_envelope(SoapVersion.SOAP11, etree.fromstring("<e/>"),
                                      request_headers(WsaVersion.WSA10, "http://edn.example/",
                                                      wsa_action))
            answer = transport.post("http://edn.example/", envelope,
                                    SoapVersion.SOAP11.content_type, EVENT)
            if expected:
                fault = parse_envelope(answer.body).fault()
                assert fault.subcodes[-1].endswith(expected)
            else:
                assert answer.status == 202
        assert handled == [EVENT]
    finally:
        service.close()


def test_a_name_lookup_lets_the_control_slot_go():
    import socket
    from wsframework.urlpolicy import UrlPolicy
    gate = ControlGate(concurrency=1, share=1.0, max_wait=5)
    free_during_lookup = []

    def resolver(host, port, *rest):
        free = gate._slots.acquire(blocking=False)
        if free:
            gate._slots.release()
        free_during_lookup.append(free)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    with gate.admitted(CONTROL):
        UrlPolicy(resolver=resolver).approve("http://subscriber.example/n")
        assert not gate._slots.acquire(blocking=False)  # held again after the lookup
    assert free_during_lookup == [True]
