"""Summary precision: parsing, the ladder, cuts in the route set, and swaps that never mix
two routing tables; the dispatcher's Configure/GetStats surface."""
import threading

import numpy as np
import pytest
from lxml import etree

from matchers import RTreeMatchingEngine, RTreeRouteSet, Schema
from matchers.schema import Attribute
from route_manager.precision import Ladder, format_precision, parse_precision
from route_manager.workloads import uniform_events, uniform_rectangles

D = 3
SCHEMA = Schema(tuple(Attribute(f"x{i}", "number", f"/e/@x{i}", (), 0, 10) for i in range(D)))


# -- parsing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("none", 0.0), ("precise", 1.0), ("0.3", 0.3),
                                         ("30%", 0.3), (" Precise ", 1.0), (0.5, 0.5), ("1", 1.0),
                                         ("no-summary", 0.0), ("0", 0.0)])
def test_parse_precision(text, value):
    assert parse_precision(text) == value


@pytest.mark.parametrize("bad", ["", "half", "1.5", "-0.1", "150%", "nan", True, "inf"])
def test_parse_precision_refuses(bad):
    with pytest.raises(ValueError):
        parse_precision(bad)


def test_format_precision():
    assert [format_precision(p) for p in (0.0, 0.3, 1.0)] == ["none", "0.3", "precise"]


def test_ladder_levels_do_not_drift():
    ladder = Ladder(0.1)
    assert ladder.levels() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert ladder.level(0.3) == 3 and ladder.precision(ladder.level(0.3) + 1) == 0.4
    assert ladder.precision(-5) == 0.0 and ladder.precision(99) == 1.0
    assert Ladder(0.1, with_none=False).levels()[0] == 0.1
    assert Ladder(0.1, with_none=False).level(0.0) == 1
    with pytest.raises(ValueError):
        Ladder(0.3)  # does not divide 1


# -- cuts in the route set -------------------------------------------------------------------

def engine_with(lo, hi) -> RTreeMatchingEngine:
    engine = RTreeMatchingEngine(SCHEMA)
    engine.bulk_load([f"f{i}" for i in range(len(lo))], lo, hi)
    return engine


@pytest.fixture(scope="module")
def workload():
    """Three servers, 600 random rectangles each, and their precise summaries."""
    lo, hi = uniform_rectangles(1800, D, seed=3)
    servers = {}
    for k in range(3):
        engine = engine_with(lo[k::3] * 0.8, hi[k::3] * 0.8)  # leave some space uncovered
        servers[f"s{k}"] = (engine.summary(1.0), engine.rectangle_count)
    points = uniform_events(600, D, seed=4)
    return servers, points


def route_set(servers) -> RTreeRouteSet:
    routes = RTreeRouteSet(SCHEMA)
    for name, (summary, rectangles) in servers.items():
        routes.set_summary(name, summary, rectangles=rectangles)
    return routes


def answers(routes: RTreeRouteSet, points) -> list[frozenset]:
    return routes.route_batch(points)


def hit_ratio(sets, servers: int) -> float:
    return sum(len(s) for s in sets) / (len(sets) * servers)


def test_precision_cuts_boxes_to_share_of_rectangles(workload):
    servers, _ = workload
    routes = route_set(servers)
    precise_boxes = routes.describe()["boxes"]
    routes.set_precision(0.1)
    assert routes.precision == 0.1
    assert routes.describe()["boxes"] == sum(int(np.ceil(0.1 * r)) for _, r in servers.values())
    routes.set_precision(1.0)
    assert routes.describe()["boxes"] == precise_boxes
    routes.set_precision(0.0)
    assert routes.describe()["boxes"] == 0 and routes.describe()["precision"] == 0.0


def test_every_cut_covers_the_precise_routes_and_none_routes_everywhere(workload):
    servers, points = workload
    routes = route_set(servers)
    precise = answers(routes, points)
    for precision in (0.05, 0.1, 0.3, 0.5, 0.7, 0.9):
        routes.set_precision(precision)
        cut = answers(routes, points)
        assert all(p <= c for p, c in zip(precise, cut)), precision  # no false negatives
    routes.set_precision(0.0)
    assert all(s == frozenset(servers) for s in answers(routes, points))


def test_hit_ratio_falls_as_precision_rises_on_this_workload(workload):
    """Not guaranteed in general (STR cuts of different sizes are not nested), but it holds
    on a uniform workload; what is guaranteed is none >= every cut >= precise (above)."""
    servers, points = workload
    routes = route_set(servers)
    ratios = []
    for precision in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        routes.set_precision(precision)
        ratios.append(hit_ratio(answers(routes, points), len(servers)))
    assert ratios[0] == 1.0
    assert all(a >= b for a, b in zip(ratios, ratios[1:])), ratios
    assert ratios[-1] < ratios[1]


def test_match_with_no_summary_does_not_read_the_event(workload):
    servers, _ = workload
    routes = route_set(servers)
    routes.set_precision(0.0)
    assert routes.match(etree.fromstring("<not-an-event/>")) == list(servers)


def test_switching_back_reuses_the_cached_table(workload):
    servers, _ = workload
    routes = route_set(servers)
    routes.set_precision(0.3)
    table = routes._routes
    routes.set_precision(1.0)
    routes.set_precision(0.3)
    assert routes._routes is table
    # a summary change invalidates every cached table (and re-cuts that server only)
    summary, rectangles = servers["s1"]
    routes.set_summary("s1", summary, rectangles=rectangles)
    assert routes._routes is not table and routes.precision == 0.3


def test_summary_updates_keep_the_current_precision(workload):
    servers, _ = workload
    routes = route_set({})
    routes.set_precision(0.2)
    for name, (summary, rectangles) in servers.items():
        routes.set_summary(name, summary, rectangles=rectangles)
    assert routes.precision == 0.2
    assert routes.describe()["boxes"] == sum(int(np.ceil(0.2 * r)) for _, r in servers.values())


def test_rectangles_travel_in_the_summary_element(workload):
    from matchers import FilterSpec
    from matchers.summary import SUMMARY_DIALECT
    servers, _ = workload
    summary, rectangles = servers["s0"]
    element = summary.to_element()
    element.set("rectangles", str(rectangles * 10))
    routes = RTreeRouteSet(SCHEMA)
    routes.add_filter("s0", FilterSpec(SUMMARY_DIALECT, "", (), element))
    assert routes.rectangles_of("s0") == rectangles * 10
    routes.set_precision(0.1)
    assert routes.describe()["boxes"] == min(len(summary), int(np.ceil(0.1 * rectangles * 10)))


def test_swaps_never_mix_two_tables(workload):
    """Events routed while another thread flips the precision get exactly one table's
    answer (none, 30% or precise) -- never a mixture -- and never miss a precise route."""
    servers, points = workload
    routes = route_set(servers)
    expected = {}
    for precision in (0.0, 0.3, 1.0):
        routes.set_precision(precision)
        expected[precision] = answers(routes, points)
    events = [etree.fromstring('<e %s/>' % " ".join(f'x{i}="{v!r}"' for i, v in enumerate(p)))
              for p in points.tolist()]
    stop = threading.Event()

    def flip():
        k = 0
        while not stop.is_set():
            routes.set_precision((0.0, 0.3, 1.0)[k % 3])
            k += 1

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        seen = set()
        for _ in range(3):
            for i, event in enumerate(events):
                got = frozenset(routes.match(event))
                matching = [p for p in expected if expected[p][i] == got]
                assert matching, f"event {i}: {sorted(got)} is no table's answer"
                assert expected[1.0][i] <= got
                seen.update(matching)
    finally:
        stop.set()
        flipper.join()
    assert len(seen) >= 2  # the flips really happened while routing


# -- the dispatcher's surface ----------------------------------------------------------------

def test_dispatcher_configure_precision_and_stats(tmp_path):
    from route_manager.dispatcher import build_dispatcher
    from wsframework.admin import AdminClient, contracts
    from wsframework.exceptions import SoapFault
    from wsframework.service import ServiceConfig
    from wsframework.transport import InProcessTransport

    transport = InProcessTransport()
    service = build_dispatcher(ServiceConfig("http://d.test", tmp_path, "tok", role="dispatcher",
                                             settings={"initial_precision": "0.4",
                                                       "self_tuning": "false"}),
                               transport=transport)
    transport.mount("http://d.test", service)
    try:
        admin = AdminClient("http://d.test", "tok", transport=transport)

        def configure(**settings):
            return {f.Name: f.Value for f in admin.call(contracts.Configure(Setting=[
                contracts.Figure(Name=k, Value=v) for k, v in settings.items()])).Setting}

        assert configure()["precision"] == "0.4"
        assert configure(precision="none")["precision"] == "none"
        assert service.dispatcher.precision == 0.0
        in_force = configure(precision="30%", self_tuning="on")
        assert in_force["precision"] == "0.3" and in_force["self_tuning"] == "on"
        with pytest.raises(SoapFault):
            configure(precision="2")
        with pytest.raises(SoapFault):
            configure(precision="precise", colour="blue")  # nothing changes on a bad request
        assert service.dispatcher.precision == 0.3
        figures = {f.Name: f.Value for f in admin.call(contracts.GetStats()).Figure}
        assert figures["precision"] == "0.3" and figures["selftuning.on"] == "1"
        assert "counters.cpu" in figures and "link_mbps" in figures
    finally:
        service.close()


def test_dispatcher_utilization_leaves_out_the_backpressure_wait_and_is_configurable(tmp_path):
    """Time spent holding a publisher back (outgoing queue full) is not busy time: the
    self-tuner must see a link-bound dispatcher as not the bottleneck."""
    from types import SimpleNamespace

    from route_manager.dispatcher import build_dispatcher
    from wsframework.admin import AdminClient, contracts
    from wsframework.utilization import BusyMeter
    from wsframework.service import ServiceConfig
    from wsframework.transport import InProcessTransport

    transport = InProcessTransport()
    service = build_dispatcher(ServiceConfig("http://d.test", tmp_path, "tok", role="dispatcher",
                                             settings={"self_tuning": "false"}),
                               transport=transport)
    transport.mount("http://d.test", service)
    try:
        dispatcher = service.dispatcher
        clock = [0.0]
        dispatcher.busy = meter = BusyMeter(lambda: clock[0])

        def wait_for_room(limit, timeout):  # the link drains the queue in 4 s
            clock[0] += 4.0
            return True

        full = SimpleNamespace(stats=SimpleNamespace(depth=dispatcher.backpressure + 1),
                               wait_for_room=wait_for_room)
        dispatcher.forwarder.channels["slow"] = full
        with meter.busy():  # one publish request
            clock[0] += 1.0  # parse and route
            dispatcher._hold_back(["slow"])
            clock[0] += 0.5  # answer
        assert meter.seconds() == pytest.approx(1.5)  # 5.5 s in hand, 4 of them held back
        del dispatcher.forwarder.channels["slow"]
        assert dispatcher.control.counters_now().busy == pytest.approx(1.5)

        admin = AdminClient("http://d.test", "tok", transport=transport)
        response = admin.call(contracts.Configure(Setting=[
            contracts.Figure(Name="selftuning.busy_threshold", Value="0.9")]))
        in_force = {f.Name: f.Value for f in response.Setting}
        assert in_force["selftuning_busy_threshold"] == "0.9"
        assert dispatcher.control.tuning_config.busy_threshold == 0.9
        figures = {f.Name: f.Value for f in admin.call(contracts.GetStats()).Figure}
        assert float(figures["counters.busy"]) == pytest.approx(1.5)
    finally:
        service.close()
