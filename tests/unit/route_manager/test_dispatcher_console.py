"""The dispatcher's web console panels (route_manager.dispatcher.console) over HTTP,
socket-free through the WSGI app, on an in-process network (tests.support.edn): the live
figures and the self-tuning trace, the servers with their channels and summaries, the topics
with the subscriptions the summaries cover."""
from __future__ import annotations

from dataclasses import replace

import pytest

from route_manager.models.measurement import SlidingWindow
from route_manager.selftuning import Step
from tests.support.console_client import ConsoleClient
from tests.support.edn import TOPIC, Network, random_boxes, random_points, server_url
from tests.support.eventing import TOKEN

SUBSCRIPTIONS = 7
EVENTS = 40


@pytest.fixture
def net(tmp_path):
    net = Network(tmp_path, partitioners=("rtree", "rtree", "rtree"))
    net.create_topic()
    net.step()
    lo, hi = random_boxes(SUBSCRIPTIONS, net.d, seed=11)
    for k in range(SUBSCRIPTIONS):
        net.subscribe(k % 2, lo[k], hi[k], k)
    for m in net.managers:
        m.flush_summaries()
    yield net
    net.close()


@pytest.fixture
def console(net):
    client = ConsoleClient(net.dispatcher_service)
    assert client.login(TOKEN).status == 200
    return client


def test_the_dispatcher_offers_its_panels_behind_the_login(net, console):
    assert console.get("/console/api/session").json()["features"] == [
        "figures", "network", "summary", "topics"]
    anonymous = ConsoleClient(net.dispatcher_service)
    for name in ("figures", "network", "topics", "summary"):
        assert anonymous.get(f"/console/api/{name}").status == 401
        answer = console.get(f"/console/api/{name}")
        assert answer.status == 200 and answer.header("Cache-Control") == "no-store"
    # no dead letters here: nothing to redeliver or purge
    assert console.post("/console/api/purge", {"all": True}).status == 404
    assert console.get("/console/api/dead-letters").status == 404


def test_the_live_figures_follow_the_events(net, console):
    control = net.dispatcher.control
    control.stop()  # the test takes the readings: the window holds exactly these two
    control.window = SlidingWindow(10.0)
    start = control.counters_now()
    control.window.add(start)
    net.publish(random_points(EVENTS, net.d, seed=5))
    net.drain()
    # one second later by the window's clock: EVENTS events in it
    control.window.add(replace(control.counters_now(), time=start.time + 1.0))
    figures = console.get("/console/api/figures").json()
    assert figures["events_per_s"] == pytest.approx(EVENTS, rel=0.01)
    assert figures["precision"] == pytest.approx(control.precision)
    assert 0 <= figures["hit_ratio"] <= 1 and figures["cpu"] >= 0
    assert 0 <= figures["utilization"] <= 1 and figures["window_s"] > 0
    assert figures["self_tuning"] is True and isinstance(figures["trace"], list)
    copies = net.dispatcher.counters.copies_out
    assert figures["hit_ratio"] == pytest.approx(copies / (EVENTS * 3), rel=0.01)
    summary = console.get("/console/api/summary").json()["figures"]
    assert summary["events_in"] == EVENTS and summary["servers"] == 3


def test_the_trace_carries_the_self_tuners_last_steps(net, console):
    tuner = net.dispatcher.control.tuner
    for k in range(130):
        tuner.trace.append(Step(step=k, time=float(k), precision=0.5, previous=0.6,
                                events_per_s=100.0, cpu=0.9, busy=0.8, backlog=0.0,
                                copies=10.0, signal="cpu", interval=2.0,
                                reason="cpu above threshold"))
    trace = console.get("/console/api/figures").json()["trace"]
    assert len(trace) == 120 and trace[-1]["step"] == 129
    assert trace[-1] == {"step": 129, "time": 129.0, "precision": 0.5, "previous": 0.6,
                         "events_per_s": 100.0, "cpu": 0.9, "busy": 0.8, "signal": "cpu",
                         "reason": "cpu above threshold"}


def test_the_network_lists_every_server_with_its_channel_and_summary(net, console):
    servers = console.get("/console/api/network").json()["servers"]
    assert [s["name"] for s in servers] == ["s0", "s1", "s2"]
    assert [s["address"] for s in servers] == [server_url(i) for i in range(3)]
    assert all(s["kind"] == "server" and s["up"] is True and s["queue_depth"] == 0
               for s in servers)
    # placement decides where a subscription lands: what each server holds is the truth
    held = {f"s{i}": len(m.view.subscriptions) for i, m in enumerate(net.managers)}
    assert sum(held.values()) == SUBSCRIPTIONS
    assert {s["name"]: s["summary_rectangles"] for s in servers} == held
    assert {s["name"]: s["load"] for s in servers} == held
    assert all(s["summary_bytes"] > 0 for s in servers if held[s["name"]])
    net.dispatcher.forwarder.channels["s1"].stats.up = False
    states = {s["name"]: s["up"] for s in console.get("/console/api/network").json()["servers"]}
    assert states == {"s0": True, "s1": False, "s2": True}


def test_topics_show_the_subscriptions_the_summaries_cover(net, console):
    assert console.get("/console/api/topics").json() == {
        "topics": [{"name": TOPIC, "subscriptions": SUBSCRIPTIONS}]}
    net.create_topic("other")
    assert console.get("/console/api/topics").json()["topics"][-1] == {
        "name": "other", "subscriptions": 0}
