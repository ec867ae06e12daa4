"""Dispatch trees in process (socket-free): a root dispatcher and a child dispatcher
(``parent`` setting) on an in-process transport, fake servers under the child. Sub-tree
summaries, the precision the parent asks for, routing down, replays, hostile batches."""
import numpy as np
import pytest
from lxml import etree

from matchers.summary import Summary
from route_manager import protocol
from route_manager.dispatcher import build_dispatcher
from route_manager.dispatcher.tables import DispatcherTables
from route_manager.protocol import EVENT_BATCH
from route_manager.forwarding import EventLog
from wsframework import ns
from matchers.vocabulary import EDN
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.admin import AdminClient, contracts
from wsframework.client import SoapClient
from wsframework.exceptions import SoapFault
from wsframework.publisher import PUBLISH_ACTION
from wsframework.service import ServiceConfig
from wsframework.store import Store

from tests.unit.route_manager.test_dispatcher import TOKEN, Servers, box_summary, event, schema

ROOT = "http://root.test"
CHILD = "http://child.test"
QUIET = {"self_tuning": "false", "tree_interval": "3600", "precision_poll": "3600",
         "batch_linger": "0"}


@pytest.fixture
def tree(tmp_path):
    from wsframework.transport import InProcessTransport
    transport = InProcessTransport()
    servers = Servers()
    for name in ("s1", "s2"):
        transport.mount(f"http://{name}.test", servers.endpoint(name))
    root = build_dispatcher(ServiceConfig(ROOT, tmp_path / "root", TOKEN, role="dispatcher",
                                          settings=QUIET), transport=transport)
    transport.mount(ROOT, root)
    child = build_dispatcher(ServiceConfig(CHILD, tmp_path / "child", TOKEN, role="dispatcher",
                                           settings={**QUIET, "parent": ROOT, "name": "c1"}),
                             transport=transport)
    transport.mount(CHILD, child)
    yield root, child, transport, servers
    child.close()
    root.close()


def admin(url, transport):
    return AdminClient(url, TOKEN, transport=transport)


def report(child, server, generation, lo, hi, transport):
    return admin(CHILD, transport).call(protocol.UpdateSummary(
        Server=server, Route="grid", Generation=generation, Load=5,
        Summary=box_summary(lo, hi)))


def grown(tree):
    """The root has topic grid; the child registered (and hosts it); s1, s2 under the child
    with one box each; the child reported its sub-tree."""
    root, child, transport, servers = tree
    admin(ROOT, transport).create_topic("grid", None, schema())
    child.dispatcher.tree.step()  # registers, hosts grid
    for name in ("s1", "s2"):
        admin(CHILD, transport).call(protocol.RegisterServer(Name=name,
                                                             Address=f"http://{name}.test"))
    report(child, "s1", 1, [0, 0], [2, 2], transport)
    report(child, "s2", 1, [6, 6], [9, 9], transport)
    assert child.dispatcher.tree.step() == 1
    return root, child, transport, servers


def test_the_child_registers_as_a_dispatcher_and_hosts_the_parents_topics(tree):
    root, child, transport, _ = grown(tree)
    assert root.dispatcher.kinds == {"c1": "dispatcher"}
    assert "grid" in child.dispatcher.routes
    # a child dispatcher is nobody's peer: servers of the root never see it in ListServers
    listed = admin(ROOT, transport).call(protocol.ListServers()).Server or []
    assert listed == []
    figures = child.dispatcher.stats()
    assert figures["tree.parent.0.registered"] == 1 and figures["tree.name"] == "c1"


def test_the_sub_tree_summary_covers_every_child_and_the_load_adds_up(tree):
    root, *_ = grown(tree)
    summary = root.dispatcher.routes.get("grid").matcher.summary_of("c1")
    assert summary.covers([1, 1]) and summary.covers([7, 8])
    assert not summary.covers([4, 4])
    assert root.dispatcher.loads["c1"] == 10


def test_events_go_down_only_the_covering_subtree_to_the_covering_server(tree):
    root, child, transport, servers = grown(tree)
    client = SoapClient(transport)
    for x, y in ((1, 1), (4, 4), (8, 8)):
        client.send(f"{ROOT}/topics/grid", PUBLISH_ACTION, event(x, y))
    assert root.dispatcher.forwarder.drain(5) and child.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1.0, 1.0)], "s2": [(8.0, 8.0)]}
    assert root.dispatcher.stats()["copies_out"] == 2  # (4, 4) stopped at the root


def test_a_changed_child_summary_is_reported_once_and_an_unchanged_one_not_at_all(tree):
    root, child, transport, _ = grown(tree)
    assert child.dispatcher.tree.step() == 0
    report(child, "s1", 2, [0, 0], [3, 3], transport)
    assert child.dispatcher.tree.step() == 1
    assert root.dispatcher.routes.get("grid").matcher.summary_of("c1").covers([2.5, 2.5])


def test_the_child_cuts_its_report_to_the_precision_the_parent_routes_it_with(tree):
    root, child, transport, _ = grown(tree)
    admin(ROOT, transport).call(contracts.Configure(
        Setting=[contracts.Figure(Name="precision", Value="0.1")]))
    assert child.dispatcher.tree.uplink.poll_precisions()
    assert child.dispatcher.tree.step() == 1
    summary = root.dispatcher.routes.get("grid").matcher.summary_of("c1")
    # each server stands for 5 rectangles (its load): ceil(0.1 x 10) = one box for both
    assert len(summary) == 1
    assert summary.covers([1, 1]) and summary.covers([8, 8])
    assert root.dispatcher.routes.get("grid").matcher.rectangles_of("c1") == 10
    assert child.dispatcher.stats()["tree.parent.0.precision"] == 0.1


def root_without_its_data(tree, data_dir):
    """The root replaced by one on an empty data dir (hosting grid again), not knowing c1."""
    root, child, transport, _ = grown(tree)
    root.close()
    fresh = build_dispatcher(ServiceConfig(ROOT, data_dir, TOKEN, role="dispatcher",
                                           settings=QUIET), transport=transport)
    transport.mount(ROOT, fresh)
    admin(ROOT, transport).create_topic("grid", None, schema())
    return fresh, child, transport


def test_a_parent_that_forgot_the_child_gets_everything_again(tree, tmp_path):
    fresh, child, transport = root_without_its_data(tree, tmp_path / "root-wiped")
    try:
        report(child, "s1", 3, [0, 0], [1, 1], transport)
        child.dispatcher.tree.step()  # UnknownServer: registration lost
        child.dispatcher.tree.uplink.upstreams[ROOT].retry_at = 0
        child.dispatcher.tree.step()  # registers again and reports
        summary = fresh.dispatcher.routes.get("grid").matcher.summary_of("c1")
        assert summary.covers([0.5, 0.5]) and summary.covers([8, 8])
    finally:
        fresh.close()


def batch(parent_id, first_seq, points):
    body = etree.Element(EVENT_BATCH, nsmap={"edn": EDN})
    body.set("Topic", "grid")
    if parent_id is not None:
        body.set(protocol.BATCH_DISPATCHER, parent_id)
        body.set(protocol.BATCH_FIRST_SEQ, str(first_seq))
    body.extend(event(x, y) for x, y in points)
    return body


def send_batch(transport, body, token=TOKEN):
    header = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
    header.text = token
    SoapClient(transport).send(f"{CHILD}/topics/grid", EVENT_BATCH_ACTION, body,
                               headers=[header] if token else [])


def test_a_resent_parent_batch_is_routed_once(tree):
    root, child, transport, servers = grown(tree)
    send_batch(transport, batch("root-id", 1, [(1, 1), (8, 8)]))
    send_batch(transport, batch("root-id", 1, [(1, 1), (8, 8), (1.5, 1.5)]))  # a resend + 1
    assert child.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1.0, 1.0), (1.5, 1.5)], "s2": [(8.0, 8.0)]}
    assert child.dispatcher.tree.replayed_skipped == 2
    assert child.dispatcher.tree.position("root-id") == 3


@pytest.mark.parametrize("token, first_seq, error", [
    (None, 1, "credential"),
    ("wrong", 1, "credential"),
    (TOKEN, 0, "FirstSeq"),
    (TOKEN, "12x", "FirstSeq"),
    (TOKEN, 2 ** 70, "FirstSeq"),
])
def test_hostile_parent_batches_are_refused_and_route_nothing(tree, token, first_seq, error):
    root, child, transport, servers = grown(tree)
    with pytest.raises(SoapFault) as fault:
        send_batch(transport, batch("root-id", first_seq, [(1, 1)]), token=token)
    assert error in fault.value.reason
    assert child.dispatcher.forwarder.drain(5)
    assert servers.events == {}


def test_a_parent_batch_over_the_most_events_is_refused_and_routes_nothing(tree):
    root, child, transport, servers = grown(tree)
    with pytest.raises(SoapFault) as fault:
        send_batch(transport, batch("root-id", 1, [(1, 1)] * (protocol.EVENT_BATCH_MOST + 1)))
    assert "at most 4096 events" in fault.value.reason
    assert child.dispatcher.forwarder.drain(5)
    assert servers.events == {} and child.dispatcher.tree.position("root-id") == 0


def test_a_parent_batch_action_without_an_event_batch_body_is_a_sender_fault(tree):
    root, child, transport, servers = grown(tree)
    with pytest.raises(SoapFault) as fault:
        send_batch(transport, event(1, 1))  # an event where the batch should be
    assert fault.value.code == "Sender" and "needs an edn:EventBatch body" in fault.value.reason
    assert child.dispatcher.forwarder.drain(5)
    assert servers.events == {}


def test_publishing_at_a_child_is_a_sender_fault_naming_the_root(tree):
    _, child, transport, servers = grown(tree)
    with pytest.raises(SoapFault) as fault:
        SoapClient(transport).send(f"{CHILD}/topics/grid", PUBLISH_ACTION, event(1, 1))
    assert fault.value.code.endswith("Sender") and ROOT in fault.value.reason


def test_register_refuses_an_unknown_kind(tree):
    with pytest.raises(SoapFault) as fault:
        admin(ROOT, tree[2]).call(protocol.RegisterServer(Name="x", Address="http://x.test",
                                                          Kind="router"))
    assert "Kind" in fault.value.reason


def test_the_log_keeps_a_parents_position_with_the_copies(tmp_path):
    store = Store(str(tmp_path / "s.db"))
    log = EventLog(store)
    log.append([("grid", b"<e/>", ["s1"])], upstream=("p", 7))
    log.append([], upstream=("p", 9))  # nothing routed: the position still moves
    log.append([], upstream=("p", 4))  # never backwards
    log.close()
    assert EventLog(store).upstream == {"p": 9}


def test_servers_stored_before_trees_are_read_as_servers(tmp_path):
    store = Store(str(tmp_path / "old.db"))
    store.executescript("CREATE TABLE edn_servers (name TEXT PRIMARY KEY, address TEXT NOT NULL, "
                        "registered REAL NOT NULL)")
    with store.transaction() as conn:
        conn.execute("INSERT INTO edn_servers VALUES ('s1', 'http://s1.test', 0)")
    assert DispatcherTables(store).servers() == [("s1", "http://s1.test", "server")]


def test_sub_tree_union_and_cut_cover_their_inputs():
    from matchers.summary import cut, union
    rng = np.random.default_rng(3)
    parts = []
    for _ in range(3):
        lo = rng.uniform(0, 8, size=(20, 2))
        parts.append(Summary(("x", "y"), lo, lo + rng.uniform(0, 2, size=(20, 2))))
    whole = union(parts)
    coarse = cut(whole, 4)
    assert len(whole) == 60 and len(coarse) <= 4
    for part in parts:
        for lo, hi in zip(part.mins, part.maxs):
            assert whole.contains_box(lo, hi) and coarse.contains_box(lo, hi)


def test_a_union_too_large_for_the_parent_is_cut_to_fit_and_still_covers(tree):
    root, child, transport, _ = grown(tree)
    child.dispatcher.tree.max_report_bytes = 1024  # 24 boxes of d = 2 (43 bytes each)
    rng = np.random.default_rng(5)
    lo = rng.uniform(0, 9, size=(100, 2))
    parsed = Summary.from_element(box_summary([0, 0], [1, 1]))
    big = Summary(parsed.dims, lo, lo + 0.5, parsed.schema)
    admin(CHILD, transport).call(protocol.UpdateSummary(
        Server="s1", Route="grid", Generation=5, Load=100, Summary=big.to_element()))
    assert child.dispatcher.tree.step() == 1
    reported = root.dispatcher.routes.get("grid").matcher.summary_of("c1")
    assert len(reported) <= 24
    for box_lo, box_hi in zip(big.mins, big.maxs):
        assert reported.contains_box(box_lo, box_hi)
    assert reported.covers([8, 8])  # s2's box too


def test_a_report_the_parent_refused_stays_due_and_goes_once_the_route_exists(tree):
    root, child, transport, _ = grown(tree)
    # a topic created at the child only: the root refuses its report (no such route)
    admin(CHILD, transport).create_topic("late", None, schema())
    admin(CHILD, transport).call(protocol.UpdateSummary(
        Server="s1", Route="late", Generation=9, Load=5, Summary=box_summary([0, 0], [1, 1])))
    child.dispatcher.tree.step()
    state = child.dispatcher.tree.uplink.upstreams[ROOT]
    assert "late" in state.refused and "late" not in state.announced
    assert child.dispatcher.tree.step() == 0  # waiting: not offered again at once
    admin(ROOT, transport).create_topic("late", None, schema())  # now the root has the route
    wanted, _, tries = state.refused["late"]
    state.refused["late"] = (wanted, 0.0, tries)  # its wait is over
    assert child.dispatcher.tree.step() == 1
    assert root.dispatcher.routes.get("late").matcher.summary_of("c1").covers([0.5, 0.5])
    assert "late" not in state.refused


def test_a_parent_restarted_without_its_data_is_noticed_by_the_poll(tree, tmp_path):
    fresh, child, transport = root_without_its_data(tree, tmp_path / "root-empty")
    try:
        child.dispatcher.tree.uplink.poll_precisions()  # nothing changed below: the poll sees it
        assert not child.dispatcher.tree.uplink.is_registered(ROOT)
        child.dispatcher.tree.step()
        assert fresh.dispatcher.routes.get("grid").matcher.summary_of("c1").covers([8, 8])
    finally:
        fresh.close()
