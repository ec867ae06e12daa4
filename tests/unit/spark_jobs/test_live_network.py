"""Reading the live network's answers for profiles (spark_jobs.live_network): hostile pages
refused, cursors that must move, a recording read and stopped, traces written and read back.
No sockets: the admin clients are fakes that answer real elements."""
import numpy as np
import pytest
from lxml import etree

from matchers.schema import Schema
from matchers.vocabulary import EDN
from route_manager import protocol
from route_manager.workloads.grid_xml import event_element, schema_element
from spark_jobs.inputs import load_events
from spark_jobs.live_network import (InvalidNetworkInput, from_network, read_boxes_page,
                                     read_recording_page, read_trace, record_events, write_trace)
from wsframework.admin import contracts

D = 2
SCHEMA = Schema.from_config(schema_element(D))


def boxes(rows, topic="t", cursor=None, schema=True, **attributes):
    root = etree.Element(protocol.BOXES, nsmap={"edn": EDN}, topic=topic, **attributes)
    if schema:
        root.append(SCHEMA.to_element())
    for lo, hi in rows:
        etree.SubElement(root, protocol.BOX, lo=lo, hi=hi)
    if cursor is not None:
        root.set("next", cursor)
    return root


def test_a_page_of_boxes_is_read():
    schema, lo, hi, cursor, unusable = read_boxes_page(
        boxes([("1 2", "3 4"), ("0.5 0", "0.5 9")], cursor="b", unusable="2"), "t", "a")
    assert schema == SCHEMA and cursor == "b" and unusable == 2
    assert lo.tolist() == [[1, 2], [0.5, 0]] and hi.tolist() == [[3, 4], [0.5, 9]]


@pytest.mark.parametrize("page", [
    etree.Element("other"),
    boxes([], topic="u"),
    boxes([("1 2", "3 4")], schema=False),
    boxes([("1 2 3", "3 4 5")]),
    boxes([("1", "3")]),
    boxes([("1 nan", "3 4")]),
    boxes([("1 inf", "3 4")]),
    boxes([("1 x", "3 4")]),
    boxes([("5 2", "3 4")]),           # lo above hi
    boxes([("1 2", "3 4")], cursor="a"),  # does not move forward
    boxes([("1 2", "3 4")], cursor="0"),
    boxes([("1 2", "3 4")], cursor="z" * 201),
    boxes([("1 2", "3 4")], unusable="-1"),
    boxes([("1 2", "3 " + "4" * 41)]),
])
def test_a_hostile_page_of_boxes_is_refused(page):
    with pytest.raises(InvalidNetworkInput):
        read_boxes_page(page, "t", "a")


def test_an_unknown_child_or_a_bad_schema_is_refused():
    page = boxes([("1 2", "3 4")])
    etree.SubElement(page, "{urn:x}Other")
    with pytest.raises(InvalidNetworkInput):
        read_boxes_page(page, "t", "")
    bad = etree.Element(protocol.BOXES, topic="t")
    etree.SubElement(bad, f"{{{EDN}}}Schema").append(etree.Element("nonsense"))
    with pytest.raises(InvalidNetworkInput):
        read_boxes_page(bad, "t", "")


class Answers:
    """An admin client that answers by request type from a dict of callables."""

    def __init__(self, **handlers):
        self.handlers = handlers
        self.calls = []

    def call(self, request):
        self.calls.append(request)
        return self.handlers[type(request).__name__](request)


def servers(*names):
    return protocol.ListServersResponse(Server=[
        protocol.ServerInfo(Name=n, Address=f"http://{n}", Load=0) for n in names])


def test_from_network_pages_every_server_and_checks_the_schemas():
    pages = {"http://s1": [boxes([("0 0", "1 1")], cursor="k"), boxes([("2 2", "3 3")])],
             "http://s2": [boxes([("4 4", "5 5")])]}
    clients = {}

    def client_for(address):
        if address == "http://d":
            return Answers(ListServers=lambda r: servers("s2", "s1"))
        queue = list(pages[address])
        clients[address] = Answers(ExportBoxes=lambda r: protocol.ExportBoxesResponse(
            Boxes=queue.pop(0)))
        return clients[address]

    inputs = from_network("http://d", "t", client_for, events=20)
    assert inputs.servers == ("s1", "s2")
    assert inputs.rectangles[0][0].tolist() == [[0, 0], [2, 2]]
    assert [r.After for r in clients["http://s1"].calls] == [None, "k"]
    assert inputs.events.shape == (20, D) and inputs.source["kind"] == "network"
    with pytest.raises(InvalidNetworkInput):  # more rectangles than allowed
        from_network("http://d", "t", client_for, events=5, max_boxes=2)
    other = Schema.from_config(schema_element(3))

    def mixed(address):
        if address == "http://d":
            return Answers(ListServers=lambda r: servers("a", "b"))
        page = boxes([("0 0", "1 1")]) if address == "http://a" else None
        if page is None:
            page = etree.Element(protocol.BOXES, topic="t")
            page.append(other.to_element())
        return Answers(ExportBoxes=lambda r: protocol.ExportBoxesResponse(Boxes=page))

    with pytest.raises(InvalidNetworkInput):
        from_network("http://d", "t", mixed, events=5)
    with pytest.raises(InvalidNetworkInput):  # nobody registered
        from_network("http://d", "t", lambda a: Answers(ListServers=lambda r: servers()))


def recording_page(rid, rows, cursor=None, schema=True):
    root = etree.Element(protocol.RECORDING, nsmap={"edn": EDN}, id=rid)
    if schema:
        root.append(SCHEMA.to_element())
    for k, (at, x0, x1) in enumerate(rows):
        recorded = etree.SubElement(root, protocol.RECORDED, at=repr(at))
        recorded.append(event_element([x0, x1], k))
    if cursor:
        root.set("next", cursor)
    return root


@pytest.mark.parametrize("page", [
    etree.Element("x"),
    recording_page("other", []),
    recording_page("1.0", [(float("nan"), 1, 2)]),
    recording_page("1.0", [(1e400, 1, 2)]),
])
def test_a_hostile_recording_page_is_refused(page):
    with pytest.raises(InvalidNetworkInput):
        read_recording_page(page, "1.0")


def test_a_recorded_element_holds_one_event():
    page = recording_page("1.0", [(1.0, 1, 2)])
    page[1].append(etree.Element("second"))
    with pytest.raises(InvalidNetworkInput):
        read_recording_page(page, "1.0")


def test_record_events_arms_waits_reads_and_stops_even_when_it_fails(tmp_path):
    settings = []
    stored = iter([10, 150, 300])

    def configure(request):
        value = request.Setting[0].Value
        settings.append(value)
        shown = value + ",id=5.000000" if value != "off" else "off"
        return contracts.ConfigureResponse(Setting=[contracts.Figure(Name="record", Value=shown)])

    def stats(request):
        return contracts.GetStatsResponse(Figure=[
            contracts.Figure(Name="record.id", Value="5.000000"),
            contracts.Figure(Name="record.stored", Value=str(next(stored)))])

    pages = [recording_page("5.000000", [(1.0 + k, k % 10, 1) for k in range(200)], cursor="c"),
             recording_page("5.000000", [(300.0 + k, 2, 3) for k in range(150)], schema=False)]
    client = Answers(Configure=configure, GetStats=stats,
                     GetRecording=lambda r: protocol.GetRecordingResponse(Recording=pages.pop(0)))
    waits = []
    schema, rows = record_events(client, "t", 300, every=2, sleep=waits.append)
    assert settings == ["topic=t,events=300,every=2", "off"] and len(waits) == 2
    assert len(rows) == 300 and schema == SCHEMA
    assert [r.Max for r in client.calls if isinstance(r, protocol.GetRecording)] == [300, 100]
    path = tmp_path / "trace" / "events.parquet"
    assert write_trace(path, schema, "t", rows) == 300
    points = read_trace(path)
    assert points.shape == (300, D) and points[:3].tolist() == [[0, 1], [1, 1], [2, 1]]
    assert np.array_equal(load_events(path), points)
    replaced = Answers(Configure=configure, GetStats=lambda r: contracts.GetStatsResponse(
        Figure=[contracts.Figure(Name="record.id", Value="9.000000")]))
    settings.clear()
    with pytest.raises(InvalidNetworkInput):
        record_events(replaced, "t", 10, sleep=waits.append)
    assert settings[-1] == "off"  # stopped all the same


def test_a_parquet_file_that_is_no_trace_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1.0]}), tmp_path / "x.parquet")
    with pytest.raises(ValueError):
        read_trace(tmp_path / "x.parquet")


def test_events_are_read_as_their_own_documents_for_absolute_schema_paths(tmp_path):
    schema = Schema.from_element(etree.fromstring(
        f'<edn:Schema xmlns:edn="{EDN}" xmlns:q="urn:quotes">'
        '<edn:Attribute name="price" xpath="/q:quote/q:price" min="0" max="100"/></edn:Schema>'))
    page = etree.Element(protocol.RECORDING, nsmap={"edn": EDN}, id="1.0")
    page.append(schema.to_element())
    for k, price in enumerate((5, 7)):
        recorded = etree.SubElement(page, protocol.RECORDED, at=repr(float(k)))
        recorded.append(etree.fromstring(f'<q:quote xmlns:q="urn:quotes"><q:price>{price}'
                                         '</q:price></q:quote>'))
    envelope = etree.Element("{http://www.w3.org/2003/05/soap-envelope}Envelope")
    etree.SubElement(envelope, "{http://www.w3.org/2003/05/soap-envelope}Body").append(page)
    found, rows, _ = read_recording_page(page, "1.0")
    write_trace(tmp_path / "t.parquet", found, "quotes", rows)
    assert read_trace(tmp_path / "t.parquet").tolist() == [[5.0], [7.0]]


def test_record_events_stops_waiting_when_the_recording_stopped():
    def configure(request):
        value = request.Setting[0].Value
        shown = value + ",id=5.000000" if value != "off" else "off"
        return contracts.ConfigureResponse(Setting=[contracts.Figure(Name="record", Value=shown)])

    stats = lambda r: contracts.GetStatsResponse(Figure=[  # noqa: E731
        contracts.Figure(Name="record.id", Value="5.000000"),
        contracts.Figure(Name="record.stored", Value="2"),
        contracts.Figure(Name="record.on", Value="0")])
    client = Answers(Configure=configure, GetStats=stats, GetRecording=lambda r: (
        protocol.GetRecordingResponse(Recording=recording_page("5.000000", [(1.0, 1, 2)] * 2))))
    waits = []
    _, rows = record_events(client, "t", 100, sleep=waits.append)
    assert waits == [] and len(rows) == 2


def test_a_recording_the_dispatcher_did_not_start_is_stopped_all_the_same():
    settings = []

    def configure(request):
        settings.append(request.Setting[0].Value)
        return contracts.ConfigureResponse(Setting=[contracts.Figure(Name="record", Value="off")])

    with pytest.raises(InvalidNetworkInput):
        record_events(Answers(Configure=configure), "t", 10)
    assert settings[-1] == "off"
