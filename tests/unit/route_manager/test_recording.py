"""The dispatcher's recorder (route_manager.dispatcher.recording) on a real SQLite store, no
sockets: what a recording keeps, its bounds, its hostile settings and cursors."""
import threading

import pytest
from lxml import etree

from route_manager import protocol
from route_manager.dispatcher import recording
from route_manager.dispatcher.recording import Recorder, RecordingSpec, parse_cursor
from route_manager.dispatcher.tables import DispatcherTables
from wsframework.store import Store


@pytest.fixture
def tables(tmp_path):
    store = Store(tmp_path / "edn.db")
    yield DispatcherTables(store)
    store.close()


def events(n, first=0):
    return [etree.fromstring(f'<e xmlns="urn:t" n="{first + k}"><x>{k}</x></e>') for k in range(n)]


def numbers(page):
    return [int(r[0].get("n")) for r in page if r.tag == protocol.RECORDED]


def test_parse_reads_the_setting_and_refuses_everything_else():
    spec = RecordingSpec.parse(" topic=a/b , events=10, every=3 ")
    assert spec == RecordingSpec("a/b", 10, 3)
    assert RecordingSpec.parse("OFF") is None
    assert RecordingSpec.parse(spec.stamped(12.5).to_text()).id == "12.500000"
    for bad in ("", "topic=a", "events=5", "topic=a,events=0", "topic=a,events=100001",
                "topic=a,events=5,every=1000001", "topic=a,events=5,every=0",
                "topic=a,events=5,topic=a", "topic=a,events=5,x=1", "topic=a;events=5",
                "topic=..,events=5", "topic=a,events=+5", "topic=a,events=5.0",
                "topic=a,events=1e3", "topic=a,events=5,id=now", "topic=a,events=5,id=1.2.3",
                "x" * 513, None, 5, "topic=a,events=99999999999999999999"):
        with pytest.raises(ValueError):
            RecordingSpec.parse(bad)


def test_cursors_are_checked():
    assert parse_cursor(None) == ("", 0) and parse_cursor("") == ("", 0)
    assert parse_cursor("64:host:1:ab") == ("host:1:ab", 64)
    for bad in ("garbage", "-1:p", "1:", ":p", "1" * 13 + ":p", "1:" + "p" * 151):
        with pytest.raises(ValueError):
            parse_cursor(bad)


def test_nothing_is_kept_when_off_or_for_another_topic(tables):
    recorder = Recorder(tables)
    recorder.offer("t", events(10))
    recorder.arm(RecordingSpec("t", 100, id="1.0"))
    recorder.offer("other", events(10))
    recorder.flush()
    assert tables.recorded_count("1.0") == 0
    recorder.close()


def test_every_kth_event_is_kept_in_order_until_the_count_is_stored(tables, monkeypatch):
    monkeypatch.setattr(recording, "FLUSH_AT", 4)
    recorder = Recorder(tables)
    recorder.arm(RecordingSpec("t", 10, every=3, id="1.0"))
    for k in range(0, 60, 6):  # messages of 6 events: the count runs across them
        recorder.offer("t", events(6, first=k))
    recorder.flush()
    page = recorder.page(None, 100)
    kept = numbers(page)
    assert kept[:10] == list(range(0, 30, 3))
    assert recorder.full and int(page.get("stored")) >= 10
    assert len(kept) < 10 + 4  # one batch at most beyond the count
    before = tables.recorded_count("1.0")
    recorder.offer("t", events(6, first=100))  # full: nothing more
    recorder.flush()
    assert tables.recorded_count("1.0") == before
    recorder.close()


def test_pages_walk_every_process_once(tables):
    a, b = Recorder(tables), Recorder(tables)
    spec = RecordingSpec("t", 1000, id="2.0")
    a.arm(spec)
    b.arm(spec)
    a.offer("t", events(7, first=0))
    b.offer("t", events(5, first=100))
    a.flush()
    b.flush()
    seen, after = [], None
    while True:
        page = a.page(after, 3)
        seen += numbers(page)
        after = page.get("next")
        if after is None:
            break
    assert sorted(seen) == list(range(7)) + list(range(100, 105))
    assert len(seen) == 12
    a.close()
    b.close()


def test_a_new_recording_drops_the_old_one_and_the_same_one_again_changes_nothing(tables):
    recorder = Recorder(tables)
    first = RecordingSpec("t", 50, id="1.0")
    recorder.arm(first)
    recorder.offer("t", events(5))
    recorder.flush()
    recorder.arm(RecordingSpec("t", 50, id="1.0"))  # every process applies the stored value
    assert tables.recorded_count("1.0") == 5
    recorder.arm(RecordingSpec("t", 50, id="3.0"))
    assert tables.recorded_count("1.0") == 0
    recorder.arm(None)
    assert recorder.figures() == {"record.on": 0} and recorder.setting() == "off"
    assert recorder.page(None, 10).get("stored") == "0"
    recorder.close()


def test_an_oversized_event_is_skipped_and_counted(tables, monkeypatch):
    monkeypatch.setattr(recording, "MAX_EVENT_BYTES", 60)
    recorder = Recorder(tables)
    recorder.arm(RecordingSpec("t", 50, id="1.0"))
    big = etree.fromstring("<e>" + "y" * 100 + "</e>")
    recorder.offer("t", [big, *events(2)])
    recorder.flush()
    assert tables.recorded_count("1.0") == 2
    assert recorder.figures()["record.skipped"] == 1
    recorder.close()


def test_a_failing_store_stops_the_recording_not_the_routing(tables, monkeypatch):
    recorder = Recorder(tables)
    recorder.arm(RecordingSpec("t", 50, id="1.0"))

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(tables, "save_recorded", broken)
    recorder.offer("t", events(3))
    recorder.flush()  # logs, does not raise
    assert recorder.failed and recorder.full
    recorder.close()


def test_threads_offering_at_once_keep_every_kth_of_the_total(tables):
    recorder = Recorder(tables)
    recorder.arm(RecordingSpec("t", 100_000, every=2, id="1.0"))
    barrier = threading.Barrier(4)

    def offer(first):
        barrier.wait()
        for k in range(25):
            recorder.offer("t", events(4, first=first + 4 * k))

    threads = [threading.Thread(target=offer, args=(1000 * t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorder.flush()
    assert tables.recorded_count("1.0") == 4 * 25 * 4 // 2
    recorder.close()


def test_a_page_stops_at_its_byte_budget_and_the_next_one_goes_on(tables, monkeypatch):
    monkeypatch.setattr(recording, "PAGE_BYTES", 200)
    monkeypatch.setattr(recording, "_CHUNK", 2)
    recorder = Recorder(tables)
    recorder.arm(RecordingSpec("t", 100, id="1.0"))
    recorder.offer("t", events(9))
    recorder.flush()
    seen, after, pages = [], None, 0
    while True:
        page = recorder.page(after, 1000)
        got = numbers(page)
        assert got and len(got) <= 5  # about 40 bytes an event: a budget of 200
        seen += got
        pages += 1
        after = page.get("next")
        if after is None:
            break
    assert seen == list(range(9)) and pages >= 2
    recorder.arm(None)  # stopped: what was recorded is gone
    assert tables.recorded_count("1.0") == 0
    recorder.close()


def test_a_store_that_fails_at_arming_raises_and_arms_nothing(tables, monkeypatch):
    recorder = Recorder(tables)

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(tables, "drop_recordings_but", broken)
    with pytest.raises(OSError):
        recorder.arm(RecordingSpec("t", 10, id="1.0"))
    assert recorder.spec is None and recorder.setting() == "off"
