"""Topics kept the same at every root (``peer_roots``), in process (socket-free): two root
dispatchers that list each other on an in-process transport, a fake server below. Their
exchange threads are stopped: exchanges run synchronously through ``peer_roots.step()``."""
import pytest
from lxml import etree

from route_manager import protocol
from route_manager.dispatcher import build_dispatcher
from route_manager.dispatcher.topic_catalog import TopicRecord, canonical_options, reconcile
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.service import ServiceConfig
from wsframework.settings import SettingsError
from wsframework.transport import InProcessTransport, TransportError

from tests.unit.route_manager.test_dispatcher import (TOKEN, Servers, box_summary, event,
                                                      schema)
from wsframework.client import SoapClient
from wsframework.publisher import PUBLISH_ACTION

A = "http://root-a.test"
B = "http://root-b.test"
QUIET = {"self_tuning": "false", "batch_linger": "0", "topic_sync_interval": "3600"}


def down(url, payload, content_type, action):
    raise TransportError(f"{url} is down", unsent=True)


@pytest.fixture
def roots(tmp_path):
    transport = InProcessTransport()
    servers = Servers()
    transport.mount("http://s1.test", servers.endpoint("s1"))
    built = {}
    for url, peer, folder in ((A, B, "a"), (B, A, "b")):
        built[url] = build_dispatcher(ServiceConfig(
            url, tmp_path / folder, TOKEN, role="dispatcher",
            settings={**QUIET, "peer_roots": peer}), transport=transport)
        transport.mount(url, built[url])
        built[url].dispatcher.peer_roots.stop()  # exchanges only when a test steps
    yield built[A], built[B], transport, servers
    for service in built.values():
        service.close()


def admin(url, transport):
    return AdminClient(url, TOKEN, transport=transport)


def topics(url, transport):
    return {t["name"]: t["matcher"] for t in admin(url, transport).list_topics()}


def figures(service, prefix="topic_sync"):
    return {k: v for k, v in service.dispatcher.stats().items() if k.startswith(prefix)}


def other_schema():
    options = schema()
    options[0].set("max", "99")
    return options


def test_a_topic_created_at_one_root_is_routed_at_the_other(roots):
    root_a, root_b, transport, servers = roots
    admin(A, transport).call(protocol.RegisterServer(Name="s1", Address="http://s1.test"))
    admin(B, transport).call(protocol.RegisterServer(Name="s1", Address="http://s1.test"))
    admin(A, transport).create_topic("grid", None, schema())
    assert root_a.dispatcher.peer_roots.step() == 1
    assert "grid" in topics(B, transport)
    admin(B, transport).call(protocol.UpdateSummary(Server="s1", Route="grid", Generation=1,
                                                    Load=1, Summary=box_summary([0, 0], [5, 5])))
    SoapClient(transport).send(f"{B}/topics/grid", PUBLISH_ACTION, event(1, 1))
    assert root_b.dispatcher.forwarder.drain(5)
    assert servers.events == {"s1": [(1.0, 1.0)]}
    # the same definition at both roots, one version: nothing to take and no conflict
    assert figures(root_b)["topic_sync.conflicts"] == 0
    assert figures(root_b)["topic_sync.taken"] == 1 and figures(root_a)["topic_sync.taken"] == 0


def test_a_root_down_at_the_create_and_the_delete_catches_up_when_it_answers(roots):
    root_a, root_b, transport, _ = roots
    transport.mount(B, down)
    admin(A, transport).create_topic("grid", None, schema())
    admin(A, transport).create_topic("gone", None, schema())
    assert root_a.dispatcher.peer_roots.step() == 0
    assert figures(root_a)["topic_sync.peer.0.failures"] >= 1
    transport.mount(B, root_b)
    assert root_b.dispatcher.peer_roots.step() == 1  # B starts the exchange: it pulls
    assert set(topics(B, transport)) == {"grid", "gone"}
    transport.mount(B, down)
    admin(A, transport).delete_topic("gone")
    assert root_a.dispatcher.peer_roots.step() == 0
    transport.mount(B, root_b)
    assert root_a.dispatcher.peer_roots.step() == 1  # A starts it: it pushes the tombstone
    assert set(topics(B, transport)) == {"grid"}
    assert root_b.dispatcher.tables.topic_records()["gone"].deleted


def test_the_same_create_at_both_roots_is_idempotent_and_another_definition_a_fault(roots):
    root_a, root_b, transport, _ = roots
    admin(A, transport).create_topic("grid", None, schema())
    admin(B, transport).create_topic("grid", None, schema())  # before any exchange
    root_a.dispatcher.peer_roots.step()
    assert figures(root_a)["topic_sync.conflicts"] == 0
    assert figures(root_b)["topic_sync.conflicts"] == 0
    admin(B, transport).create_topic("grid", None, schema())  # known: answered as it is
    with pytest.raises(SoapFault) as caught:
        admin(B, transport).create_topic("grid", None, other_schema())
    assert caught.value.subcode == contracts.FAULT_TOPIC_EXISTS
    assert "another definition" in caught.value.reason


def test_conflicting_creates_are_reported_at_both_roots_until_one_deletes(roots):
    root_a, root_b, transport, _ = roots
    transport.mount(B, down)  # cut off: each root creates its own grid
    admin(A, transport).create_topic("grid", None, schema())
    transport.mount(B, root_b)
    transport.mount(A, down)
    admin(B, transport).create_topic("grid", None, other_schema())
    transport.mount(A, root_a)
    root_a.dispatcher.peer_roots.step()
    for service in (root_a, root_b):
        assert figures(service)["topic_sync.conflicts"] == 1
        assert "topic_sync.conflict.grid" in figures(service)
    options = {url: service.dispatcher.tables.topic_records()["grid"].options
               for url, service in ((A, root_a), (B, root_b))}
    assert options[A] == canonical_options(schema())
    assert options[B] == canonical_options(other_schema())  # neither overwritten
    admin(A, transport).delete_topic("grid")  # the operator resolves it at one root
    root_a.dispatcher.peer_roots.step()
    assert "grid" not in topics(B, transport)
    assert figures(root_a)["topic_sync.conflicts"] == 0
    assert figures(root_b)["topic_sync.conflicts"] == 0
    admin(A, transport).create_topic("grid", None, other_schema())
    root_a.dispatcher.peer_roots.step()
    assert root_b.dispatcher.tables.topic_records()["grid"] == TopicRecord(
        "grid", 3, matcher=root_b.dispatcher.default_server_matcher,
        options=canonical_options(other_schema()))


def test_a_redefinition_made_while_a_root_was_away_replaces_its_topic(roots):
    root_a, root_b, transport, _ = roots
    admin(A, transport).create_topic("grid", None, schema())
    root_a.dispatcher.peer_roots.step()
    transport.mount(B, down)
    admin(A, transport).delete_topic("grid")
    admin(A, transport).create_topic("grid", None, other_schema())
    transport.mount(B, root_b)
    root_b.dispatcher.peer_roots.step()
    record = root_b.dispatcher.tables.topic_records()["grid"]
    assert (record.version, record.options) == (3, canonical_options(other_schema()))
    assert "grid" in topics(B, transport)


# -- what a peer sends is checked before anything is merged ------------------------------------

def live(name="t", version=1, **kw):
    return protocol.TopicVersion(Name=name, Version=version, Deleted=0,
                                 Matcher=kw.pop("matcher", "urn:wsframework:matcher:rtree"),
                                 **kw)


def big_options():
    options = etree.Element("{urn:x}o")
    options.text = "x" * (protocol.MAX_SYNC_OPTIONS_BYTES + 1)
    return options


@pytest.mark.parametrize("records, subcode", [
    ([live(f"t{i}") for i in range(protocol.MAX_SYNC_TOPICS + 1)], contracts.FAULT_INVALID_REQUEST),
    ([live("t"), live("t")], contracts.FAULT_INVALID_REQUEST),
    ([live("a b")], contracts.FAULT_INVALID_NAME),
    ([live(matcher=None)], contracts.FAULT_INVALID_REQUEST),
    ([protocol.TopicVersion(Name="t", Version=2, Deleted=1, Matcher="urn:m")],
     contracts.FAULT_INVALID_REQUEST),
    ([live(Options=big_options())], contracts.FAULT_INVALID_REQUEST),
    ([live("ok"), live("t", version=0)], None),  # the codec refuses Version 0
    ([live(version=2**31)], None),
], ids=["too-many", "twice", "bad-name", "no-matcher", "tombstone-with-matcher",
        "options-too-big", "version-0", "version-too-big"])
def test_hostile_sync_messages_are_sender_faults_and_merge_nothing(roots, records, subcode):
    root_a, root_b, transport, _ = roots
    with pytest.raises(SoapFault) as caught:
        admin(B, transport).call(protocol.SyncTopics(Topic=records))
    assert caught.value.code.endswith("Sender")
    if subcode is not None:
        assert caught.value.subcode == subcode
    assert topics(B, transport) == {}
    assert root_b.dispatcher.tables.topic_records() == {}


def test_a_record_this_root_cannot_host_is_skipped_and_the_rest_merged(roots):
    root_a, root_b, transport, _ = roots
    response = admin(B, transport).call(protocol.SyncTopics(Topic=[
        live("odd", Options=etree.Element("{urn:x}not-a-schema")), live("grid", Options=schema())]))
    assert set(topics(B, transport)) == {"grid"}
    assert {t.Name for t in response.Topic} == {"grid"}
    assert figures(root_b)["topic_sync.skipped"] == 1


def test_sync_needs_the_network_credential(roots):
    _, _, transport, _ = roots
    with pytest.raises(SoapFault) as caught:
        AdminClient(B, "wrong", transport=transport).call(protocol.SyncTopics(Topic=[live()]))
    assert caught.value.subcode == contracts.FAULT_ACCESS_DENIED


@pytest.mark.parametrize("settings", [
    {"peer_roots": "ftp://elsewhere"},
    {"peer_roots": "http://r2.test", "parent": "http://p.test"},
    {"peer_roots": "http://r2.test", "topic_sync_interval": "0"},
])
def test_unusable_peer_root_settings_are_refused(tmp_path, settings):
    with pytest.raises(SettingsError):
        build_dispatcher(ServiceConfig("http://d.test", tmp_path, TOKEN, role="dispatcher",
                                       settings=settings), transport=InProcessTransport())


def test_reconcile_takes_newer_keeps_older_and_names_equal_versions_that_differ():
    def rec(name, version, options=b"<o/>", deleted=False):
        return TopicRecord(name, version, deleted, None if deleted else "urn:m",
                           None if deleted else options)
    ours = {"same": rec("same", 2), "older": rec("older", 1), "newer": rec("newer", 3),
            "clash": rec("clash", 1, b"<a/>")}
    merge = reconcile(ours, [rec("same", 2), rec("older", 2, deleted=True), rec("newer", 2),
                             rec("clash", 1, b"<b/>"), rec("fresh", 1)])
    assert [r.name for r in merge.take] == ["older", "fresh"]
    assert [(a.name, b.options) for a, b in merge.conflicts] == [("clash", b"<b/>")]
