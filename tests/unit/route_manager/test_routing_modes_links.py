"""Routing modes (``--routing``): link matching's predicate report (round trip, bounds,
hostile input), its route set against an oracle, a server's predicates from its subscription
boxes, mode negotiation, and a dispatcher routing in each mode (in process, no sockets)."""
import random

import pytest
from lxml import etree

from matchers import FilterSpec, unregister_matcher
from matchers.conformance import check_matcher
from matchers.pst.links_route_set import (MATCHER_PST_LINKS, MAX_ID, MAX_PREDICATES, PREDICATE, PREDICATES,
                                          LinkRouteSet, predicates_element, read_predicates,
                                          union_predicates)
from matchers.ranges import RANGES_DIALECT
from matchers.rtree_engine import RTreeMatchingEngine
from matchers.schema import Attribute, Schema
from matchers.summary import SUMMARY_DIALECT
from route_manager import protocol
from route_manager.dispatcher import DispatcherSettings, build_dispatcher
from route_manager.dispatcher.routing import ModeCheck
from subscription_manager.server.summaries import box_predicates
from wsframework.admin import AdminClient
from wsframework.exceptions import SoapFault
from wsframework.matching.errors import InvalidFilter
from wsframework.service import ServiceConfig
from wsframework.settings import SettingsError, read_settings
from wsframework.transport import InProcessTransport

from test_dispatcher import DISPATCHER, TOKEN, EV, Servers, publish_all, register

EDN = "urn:wsframework:edn"
SCHEMA = Schema(tuple(Attribute(n, "number", f"/e:event/e:{n}", (("e", EV),), 0, 10)
                      for n in ("x", "y")))


def event(x, y):
    element = etree.Element(f"{{{EV}}}event", nsmap={"e": EV})
    etree.SubElement(element, f"{{{EV}}}x").text = str(x)
    etree.SubElement(element, f"{{{EV}}}y").text = str(y)
    return element


def spec(element):
    return FilterSpec(SUMMARY_DIALECT, "", (), element)


# -- the report ------------------------------------------------------------------------------
def test_report_round_trips_and_sends_each_conjunction_once():
    sent = {"a": (("x", 1.0), ("y", 2.0)), "b": (("y", 2.0), ("x", 1.0)), "c": (("x", 3.5),),
            "d": ()}
    back = read_predicates(etree.fromstring(etree.tostring(predicates_element(sent))), SCHEMA)
    assert sorted(back.values()) == sorted({(("x", 1.0), ("y", 2.0)), (("x", 3.5),), ()})
    assert read_predicates(predicates_element(None), SCHEMA) is None


def test_too_many_predicates_are_reported_as_everything():
    many = {str(i): (("x", float(i)),) for i in range(MAX_PREDICATES + 1)}
    assert predicates_element(many).get("everything") == "true"


def _report(*children, **attributes):
    root = etree.Element(PREDICATES, **attributes)
    for child in children:
        root.append(child)
    return root


def _p(**attributes):
    element = etree.Element(PREDICATE)
    for k, v in attributes.items():
        element.set(k, v)
    return element


@pytest.mark.parametrize("report", [
    etree.Element(f"{{{EDN}}}Summary"),                              # another report form
    _report(everything="maybe"),
    _report(etree.Element(f"{{{EDN}}}Q", id="1")),                  # unknown element
    _report(_p(x="1")),                                              # no id
    _report(_p(id="a" * (MAX_ID + 1), x="1")),                       # id too long
    _report(_p(id="1", x="1"), _p(id="1", y="1")),                   # duplicate id
    _report(_p(id="1", z="1")),                                      # not in the schema
    _report(_p(id="1", x="nan")), _report(_p(id="1", x="inf")), _report(_p(id="1", x="one")),
    _report(_p(id="1", x="1" * 65)),                                 # absurdly long number
])
def test_hostile_reports_are_refused(report):
    with pytest.raises(InvalidFilter):
        read_predicates(report, SCHEMA)
    matcher = LinkRouteSet(SCHEMA)
    with pytest.raises(InvalidFilter):
        matcher.add_filter("c1", spec(report))
    assert len(matcher) == 0  # the route stays as it was


def test_a_report_with_more_than_the_bound_is_refused():
    report = _report(*(_p(id=str(i), x="1") for i in range(MAX_PREDICATES + 1)))
    with pytest.raises(InvalidFilter):
        read_predicates(report, SCHEMA)


def test_union_of_children_names_ids_by_child_and_everything_wins():
    union = union_predicates([("c1", {"p0": (("x", 1.0),)}), ("c2", {"p0": (("y", 2.0),)})])
    assert union == {"c1/p0": (("x", 1.0),), "c2/p0": (("y", 2.0),)}
    assert union_predicates([("c1", {"p0": ()}), ("c2", None)]) is None


# -- the route set against an oracle ---------------------------------------------------------
def test_route_set_answers_exactly_the_children_with_a_matching_predicate():
    rng = random.Random(7)
    children = {}
    matcher = LinkRouteSet(SCHEMA)
    for c in range(6):
        predicates = {}
        for i in range(rng.randint(0, 5)):
            tests = tuple(sorted((a, float(rng.randint(0, 3))) for a in ("x", "y")
                                 if rng.random() < 0.6))
            predicates[f"p{i}"] = tests
        children[f"c{c}"] = predicates
        matcher.add_filter(f"c{c}", spec(predicates_element(predicates)))
    matcher.add_filter("all", spec(predicates_element(None)))
    events = [(rng.randint(0, 3), rng.randint(0, 3)) for _ in range(60)]

    def oracle(x, y):
        values = {"x": float(x), "y": float(y)}
        hit = [c for c, ps in children.items()
               if any(all(values[a] == v for a, v in tests) for tests in ps.values())]
        return hit + ["all"]

    answers = matcher.match_many([event(x, y) for x, y in events])
    assert answers == [oracle(x, y) for x, y in events]
    assert matcher.match(event(*events[0])) == oracle(*events[0])
    matcher.remove_filter("all")
    assert "all" not in matcher.match(event(0, 0))


# -- the route set's link matching against the oracle, reports replaced and removed ----------
def range_event(x, y):
    """An eCube event: x spans [x[0], x[1]] (a box that is no point), y a point."""
    element = etree.Element(f"{{{EV}}}event", nsmap={"e": EV})
    etree.SubElement(element, f"{{{EV}}}x", min=str(x[0]), max=str(x[1]))
    etree.SubElement(element, f"{{{EV}}}y").text = str(y)
    return element


def random_report(rng):
    if rng.random() < 0.08:
        return None  # everything
    return {f"p{i}": tuple(sorted((a, float(rng.randint(0, 3))) for a in ("x", "y")
                                  if rng.random() < 0.6))
            for i in range(rng.randint(0, 6))}


def oracle_links(reports, x, y, downstream=None):
    """A link gets the event iff one of its reported subscriptions matches (x, y: closed
    ranges of the event's values)."""
    span = {"x": x, "y": y}
    return [link for link, predicates in reports.items()
            if (downstream is None or link in downstream)
            and (predicates is None or any(all(span[a][0] <= v <= span[a][1] for a, v in tests)
                                           for tests in predicates.values()))]


@pytest.mark.parametrize("build_cost", [0, 3, 10**9])  # rebuild at once, soon, never by itself
@pytest.mark.parametrize("seed", range(8))
def test_link_matching_decisions_equal_the_oracle(build_cost, seed):
    rng = random.Random(seed)
    matcher = LinkRouteSet(SCHEMA)
    matcher.build_cost = build_cost
    reports = {}
    for _ in range(40):
        action = rng.random()
        if action < 0.35 or not reports:  # a link reports, or replaces its report
            link = f"c{rng.randint(0, 7)}"
            reports[link] = random_report(rng)
            matcher.add_filter(link, spec(predicates_element(reports[link])))
        elif action < 0.45:
            link = rng.choice(sorted(reports))
            del reports[link]
            matcher.remove_filter(link)
        elif action < 0.5:
            matcher.rebuild()
        else:
            spans = []
            for _ in range(rng.randint(1, 12)):
                x, y = rng.randint(0, 4), rng.randint(0, 4)
                spans.append(((x, x + rng.randint(1, 2)), (y, y)) if rng.random() < 0.15
                             else ((x, x), (y, y)))
            elements = [range_event(x, y[0]) if x[0] != x[1] else event(x[0], y[0])
                        for x, y in spans]
            downstream = None
            if rng.random() < 0.2:
                downstream = {link for link in reports if rng.random() < 0.5}
            answers = (matcher.route(elements, downstream) if downstream is not None
                       else matcher.match_many(elements))
            assert answers == [oracle_links(reports, x, y, downstream) for x, y in spans]
    if build_cost == 0:  # the tree really decided events
        assert matcher.builds > 0 and matcher.search_steps > 0


def test_a_replaced_report_is_scanned_until_its_scans_pay_for_a_rebuild(monkeypatch):
    from matchers.pst import links_route_set
    monkeypatch.setattr(links_route_set, "SCAN_CALL_IN_ROW_SCANS", 0)
    matcher = LinkRouteSet(SCHEMA)
    matcher.build_cost = 20
    for c in range(4):
        matcher.set_predicates(f"c{c}", {f"p{i}": (("x", float(i)),) for i in range(5)})
    matcher.rebuild()
    assert (matcher.builds, matcher.pending_rows()) == (1, 0)
    for burst in range(3):  # a burst of replacements: the tree untouched, each link exact
        matcher.set_predicates("c0", {"p0": (("x", 9.0), ("y", float(burst)))})
    assert (matcher.builds, matcher.pending_rows()) == (1, 1)
    assert matcher.match(event(9, 2)) == ["c0"]
    assert matcher.match(event(0, 0)) == ["c1", "c2", "c3"]  # the tree no longer decides c0
    # each event's debt: 1 row scanned + 5 stale rows (c0's old report) the tree still walks;
    # a rebuild costs 20 x 16 rows: the 54th event of the replaced report's scans rebuilds
    events = 2
    while matcher.builds == 1 and events < 1000:
        matcher.match(event(1, 1))
        events += 1
    assert events == -(-20 * 16 // 6)
    assert (matcher.builds, matcher.pending_rows()) == (2, 0)
    assert matcher.match(event(9, 2)) == ["c0"] and matcher.match(event(0, 0)) == ["c1", "c2", "c3"]


# -- a server's predicates -------------------------------------------------------------------
def test_server_predicates_cover_its_subscriptions():
    engine = RTreeMatchingEngine(SCHEMA)
    for sid, text in [("eq", "x = 1 and y = 2"), ("half", "x = 3 and y > 5"),
                      ("range", "x > 4"), ("or", "x = 7 or y = 8")]:
        engine.add_filter(sid, FilterSpec(RANGES_DIALECT, text))
    predicates = box_predicates(engine)
    assert predicates["eq"] == (("x", 1.0), ("y", 2.0))
    assert predicates["half"] == (("x", 3.0),)      # the range test is dropped: still covers
    assert predicates["range"] == ()                # no equality: matches every event
    assert sorted([predicates["or"], predicates["or#1"]]) == [(("x", 7.0),), (("y", 8.0),)]


# -- negotiation -----------------------------------------------------------------------------
def test_a_child_refuses_a_parent_of_another_mode_until_it_agrees():
    check = ModeCheck("linkmatching")
    ok = protocol.RegisterServerResponse(Name="c", Routing="linkmatching")
    assert check.check("http://p", ok) and check.agrees()
    assert not check.check("http://q", protocol.RegisterServerResponse(Name="c"))  # summaries
    assert not check.check("http://q", protocol.RegisterServerResponse(Name="c", Routing="zzz"))
    assert not check.agrees()
    assert check.check("http://q", ok) and check.agrees()


def test_routing_setting_is_checked():
    assert read_settings({"routing": "flooding"}, DispatcherSettings)[0].routing == "flooding"
    with pytest.raises(SettingsError):
        read_settings({"routing": "gossip"}, DispatcherSettings)


# -- a dispatcher in each mode ---------------------------------------------------------------
@pytest.fixture
def start(tmp_path):
    started = []

    def run(routing):
        transport = InProcessTransport()
        servers = Servers()
        for name in ("s1", "s2"):
            transport.mount(f"http://{name}.test", servers.endpoint(name))
        service = build_dispatcher(ServiceConfig(DISPATCHER, tmp_path / routing, TOKEN,
                                                 role="dispatcher",
                                                 settings={"routing": routing}),
                                   transport=transport)
        started.append(service)
        transport.mount(DISPATCHER, service)
        admin = AdminClient(DISPATCHER, TOKEN, transport=transport)
        admin.create_topic("grid", None, SCHEMA.to_element())
        return service, admin, transport, servers

    yield run
    for service in started:
        service.close()
    unregister_matcher(MATCHER_PST_LINKS)  # registered by a linkmatching dispatcher


def test_registration_announces_the_mode_and_flooding_reads_nothing(start):
    service, admin, transport, servers = start("flooding")
    assert register(admin, "s1").Routing == "flooding"
    register(admin, "s2")
    publish_all(transport, [(1, 1), (9, 9)])
    assert service.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1, 1), (9, 9)], "s2": [(1, 1), (9, 9)]}
    assert service.dispatcher.precision == 0.0


def test_linkmatching_routes_by_predicate_reports_and_refuses_summaries(start):
    service, admin, transport, servers = start("linkmatching")
    assert register(admin, "s1").Routing == "linkmatching"
    register(admin, "s2")
    for server, predicates in (("s1", {"a": (("x", 1.0),)}), ("s2", {"b": (("y", 9.0),)})):
        admin.call(protocol.UpdateSummary(Server=server, Route="grid", Generation=1, Load=1,
                                          Summary=predicates_element(predicates)))
    publish_all(transport, [(1, 1), (1, 9), (5, 5), (9, 9)])
    assert service.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1, 1), (1, 9)], "s2": [(1, 9), (9, 9)]}
    summary = etree.Element(f"{{{EDN}}}Summary")
    with pytest.raises(SoapFault):
        admin.call(protocol.UpdateSummary(Server="s1", Route="grid", Generation=2, Load=1,
                                          Summary=summary))


def test_a_route_set_without_a_schema_adopts_the_one_a_report_carries():
    matcher = LinkRouteSet()
    matcher.add_filter("c1", FilterSpec(SUMMARY_DIALECT, etree.tostring(
        predicates_element({"a": (("x", 1.0),)}, SCHEMA), encoding="unicode")))
    assert matcher.schema == SCHEMA
    assert matcher.match(event(1, 5)) == ["c1"] and matcher.match(event(2, 5)) == []


def test_route_set_passes_the_matcher_conformance_checks():
    check_matcher(LinkRouteSet)
