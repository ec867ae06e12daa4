"""Per-server forwarding channels: batching, order, retry until the server returns, explicit
overflow policies, and the outgoing-link token bucket."""
import threading

import pytest
from lxml import etree

from route_manager.protocol import EVENT_BATCH
from route_manager.forwarding import Forwarder, ServerChannel, TokenBucket
from route_manager.protocol import EVENT_BATCH_ACTION
from wsframework.soap import parse_envelope
from wsframework.transport import TransportError, TransportResponse


class FakeServer:
    """A transport that records batches; can be 'down' (raises) and can hold requests."""

    def __init__(self):
        self.batches = []
        self.down = False
        self.gate = threading.Event()
        self.gate.set()
        self.cond = threading.Condition()
        self.seen: set[tuple] = set()  # (SOAP action, body tag) of every request

    def post(self, url, payload, content_type, soap_action=None):
        self.gate.wait(5)
        if self.down:
            raise TransportError("connection refused")
        envelope = parse_envelope(payload)
        with self.cond:
            # recorded, not asserted here: the channel treats any exception as a failed send
            self.seen.add((soap_action, envelope.body.tag))
            self.batches.append((url, [int(e.text) for e in envelope.body]))
            self.cond.notify_all()
        return TransportResponse(202, None, b"")

    def events(self):
        return [n for _, batch in self.batches for n in batch]

    def wait_events(self, count, timeout=5):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events()) >= count, timeout), self.events()
            assert self.seen == {(EVENT_BATCH_ACTION, EVENT_BATCH)}

    def close(self):
        pass


def event(n: int) -> bytes:
    return etree.tostring(etree.Element("e", nsmap=None)).replace(b"<e/>", b"<e>%d</e>" % n)


@pytest.fixture
def server():
    return FakeServer()


def test_events_arrive_in_order_batched_per_topic(server):
    server.gate.clear()  # hold the first request so the rest pile up into batches
    channel = ServerChannel("s1", "http://s1", server, batch_max=10, backoff=(0.01, 0.05))
    for n in range(25):
        assert channel.offer("t", event(n))
    server.gate.set()
    server.wait_events(25)
    assert server.events() == list(range(25))
    assert all(url == "http://s1/topics/t" for url, _ in server.batches)
    assert max(len(b) for _, b in server.batches) <= 10
    assert len(server.batches) < 25  # batching happened
    assert channel.drain(5)
    assert channel.stats.sent == 25 and channel.stats.dropped == 0
    channel.close()


def test_a_batch_never_mixes_topics(server):
    server.gate.clear()
    channel = ServerChannel("s1", "http://s1", server, batch_max=50)
    for n in range(6):
        channel.offer("a" if n < 3 else "b", event(n))
    server.gate.set()
    server.wait_events(6)
    for url, batch in server.batches:
        topic = url.rsplit("/", 1)[1]
        assert all((n < 3) == (topic == "a") for n in batch), server.batches
    channel.close()


def test_down_server_keeps_its_events_and_gets_them_when_back(server):
    server.down = True
    channel = ServerChannel("s1", "http://s1", server, backoff=(0.01, 0.02))
    for n in range(5):
        channel.offer("t", event(n))
    with channel._cond:
        assert channel._cond.wait_for(lambda: channel.stats.failures >= 2, 5)
    assert channel.stats.up is False and channel.stats.sent == 0
    server.down = False
    server.wait_events(5)
    assert server.events() == [0, 1, 2, 3, 4]
    assert channel.drain(5) and channel.stats.up
    channel.close()


def test_a_server_that_registers_again_gets_its_events_without_waiting_out_the_backoff(server):
    server.down = True
    forwarder = Forwarder(server, backoff=(3.0, 60.0))
    forwarder.ensure("s1", "http://s1")
    forwarder.forward("t", event(0), ["s1"])
    channel = forwarder.channels["s1"]
    with channel._cond:  # the first send failed: the next waits 3 s
        assert channel._cond.wait_for(lambda: channel.stats.failures >= 1, 5)
    server.down = False
    forwarder.retry_now("s1")  # what the dispatcher does when the server registers
    server.wait_events(1, timeout=2.0)  # now, not 3 s after the failure
    assert server.events() == [0]
    forwarder.close()


@pytest.mark.parametrize("policy,delivered", [("drop-newest", [0, 1, 2, 3]),
                                             ("drop-oldest", [0, 3, 4, 5])])
def test_overflow_policy_is_explicit_and_counted(server, policy, delivered):
    server.gate.clear()  # the sender takes event 0 and is held inside the request
    channel = ServerChannel("s1", "http://s1", server, capacity=3, policy=policy)
    assert channel.offer("t", event(0))
    with channel._cond:
        assert channel._cond.wait_for(lambda: channel._inflight, 5)
    results = [channel.offer("t", event(n)) for n in range(1, 6)]
    assert results == [True, True, True, False, False]
    assert channel.stats.dropped == 2
    server.gate.set()
    server.wait_events(4)
    assert channel.drain(5)
    assert server.events() == delivered
    channel.close()


def test_unknown_policy_refused(server):
    with pytest.raises(ValueError):
        ServerChannel("s1", "http://s1", server, policy="block")


def test_one_slow_server_does_not_stall_the_others():
    slow, fast = FakeServer(), FakeServer()
    slow.gate.clear()
    routes = {"http://slow": slow, "http://fast": fast}

    class Router:
        def post(self, url, *args):
            return routes["http://" + url.split("/")[2]].post(url, *args)

        def close(self):
            pass

    forwarder = Forwarder(Router())
    forwarder.ensure("slow", "http://slow")
    forwarder.ensure("fast", "http://fast")
    for n in range(20):
        assert forwarder.forward("t", event(n), ["slow", "fast"]) == 2
    fast.wait_events(20)  # while the slow server is still holding its first request
    assert slow.events() == []
    slow.gate.set()
    slow.wait_events(20)
    assert forwarder.drain(5)
    stats = forwarder.stats()
    assert stats["slow"]["sent"] == stats["fast"]["sent"] == 20
    forwarder.close()


def test_forward_to_unknown_server_is_not_counted(server):
    forwarder = Forwarder(server)
    forwarder.ensure("s1", "http://s1")
    assert forwarder.forward("t", event(1), ["s1", "ghost"]) == 1
    forwarder.close()


def test_token_bucket_waits_for_the_debt():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(1000, burst_bytes=1000, clock=lambda: now[0], sleep=sleep)
    assert bucket.take(1000) == 0          # the burst
    assert bucket.take(500) == pytest.approx(0.5)
    now[0] += 2.0                           # refill caps at the burst size
    assert bucket.take(1000) == 0
    assert bucket.take(1) == pytest.approx(0.001)
    assert TokenBucket.megabits(80).rate == 10_000_000
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_token_bucket_sleeps_with_the_time_sleep_of_when_it_is_built(monkeypatch):
    # gunicorn's gevent worker patches time.sleep after the roles were imported: a bucket
    # built in the worker must wait cooperatively (a sleep bound at import blocked every
    # greenlet of the worker while one sender waited for the link).
    import time
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    bucket = TokenBucket(1000, burst_bytes=1000)
    bucket.take(1000)
    assert bucket.take(500) > 0
    assert slept and slept[0] == pytest.approx(0.5, abs=0.05)


_GEVENT_SENDER_CPU = r"""
from gevent import monkey
monkey.patch_all()
import json, time
from route_manager.forwarding import ServerChannel
from wsframework.transport.base import TransportResponse


class BurningTransport:
    # Each POST burns 20 ms of CPU in the sender, then yields as a socket would.
    def post(self, url, payload, content_type, action=None):
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        time.sleep(0.001)
        return TransportResponse(202, None, b"")


def other_work(seconds):  # another greenlet's CPU, which must not be charged to the sender
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        time.sleep(0)


import gevent
channel = ServerChannel("s1", "http://s1", BurningTransport(), batch_max=1)
busy = gevent.spawn(other_work, 0.3)
for n in range(10):
    channel.offer("t", b"<e%d/>" % n)
channel.drain(10)
busy.join()
print(json.dumps({"sender": channel.sender_cpu_seconds(), "sent": channel.stats.sent}))
channel.close()
"""


def test_sender_cpu_is_its_greenlets_own_under_gevent():
    # Under gunicorn's gevent worker a sender "thread" is a greenlet: its CPU (the per-copy
    # cost T_c) is what ran while it was the current greenlet, not the OS thread's clock.
    import json
    import subprocess
    import sys
    pytest.importorskip("gevent")
    result = subprocess.run([sys.executable, "-c", _GEVENT_SENDER_CPU], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["sent"] == 10
    assert 0.15 <= figures["sender"] <= 0.28, figures  # 10 x 20 ms, not + 300 ms of the other


# -- the spliced batch envelope ---------------------------------------------------------------

def _tree_batch(soap_version, address, topic, events, credential, dispatcher, first_seq):
    """The batch envelope as a tree would give it: what the splice must equal."""
    from route_manager.protocol import BATCH_DISPATCHER, BATCH_FIRST_SEQ
    from wsframework import ns as wsns
    from matchers.vocabulary import EDN
    from route_manager.protocol import EVENT_BATCH_ACTION
    from wsframework.addressing import WsaVersion, request_headers
    from wsframework.admin import ADMIN_TOKEN_QNAME
    from wsframework.soap import build_envelope
    body = etree.Element(f"{{{EDN}}}EventBatch", nsmap={"edn": EDN})
    body.set("Topic", topic)
    if dispatcher is not None:
        body.set(BATCH_DISPATCHER, dispatcher)
        body.set(BATCH_FIRST_SEQ, str(first_seq))
    for event in events:
        body.append(etree.fromstring(event))
    headers = request_headers(WsaVersion.WSA10, f"{address}/topics/{topic}",
                              EVENT_BATCH_ACTION, message_id="urn:uuid:fixed")
    if credential is not None:
        token = etree.Element(ADMIN_TOKEN_QNAME, nsmap={"adm": wsns.ADMIN})
        token.text = credential
        headers.append(token)
    return build_envelope(soap_version, body, headers)


@pytest.mark.parametrize("logged", [False, True])
@pytest.mark.parametrize("credential", [None, "tok", 'FirstSeq="0" >EVENTS< &<'])
def test_spliced_batch_equals_the_tree_built_envelope(logged, credential):
    from route_manager.forwarding.batch import BatchTemplate
    from wsframework.soap import SoapVersion
    events = [b'<e:event xmlns:e="urn:e"><e:x>1</e:x></e:event>',
              b'<q:quote xmlns:q="urn:q" sym="A&amp;B"><q:price>4</q:price></q:quote>']
    for version in SoapVersion:
        template = BatchTemplate(version, "http://s1.test:8080/base", "gr&id", credential,
                                 dispatcher="d-1" if logged else None)
        first = [template.render(events, 7 if logged else None) for _ in range(2)]
        expected = _tree_batch(version, "http://s1.test:8080/base", "gr&id", events,
                               credential, "d-1" if logged else None, 7)
        for spliced in first:
            envelope = parse_envelope(spliced)
            reference = parse_envelope(expected)
            got_id = envelope.root.find(".//{http://www.w3.org/2005/08/addressing}MessageID")
            want_id = reference.root.find(".//{http://www.w3.org/2005/08/addressing}MessageID")
            assert got_id.text.startswith("urn:uuid:") and got_id.text != "urn:uuid:fixed"
            got_id.text = want_id.text
            assert etree.tostring(envelope.root, method="c14n") == \
                etree.tostring(reference.root, method="c14n")
        assert first[0] != first[1]  # a fresh MessageID per batch


def test_a_lingering_batch_leaves_when_full_not_one_event_at_a_time(server):
    # Linger far longer than the test: only a full batch (or closing) sends anything.
    channel = ServerChannel("s1", "http://s1", server, batch_max=3, linger=60.0)
    try:
        for n in range(7):
            channel.offer("t", event(n))
        server.wait_events(6)
        assert [batch for _, batch in server.batches] == [[0, 1, 2], [3, 4, 5]]
    finally:
        channel.close()  # closing sends what lingers
    assert [batch for _, batch in server.batches][-1] == [6]


def test_a_short_batch_leaves_after_its_linger(server):
    channel = ServerChannel("s1", "http://s1", server, batch_max=100, linger=0.01)
    try:
        channel.offer("t", event(1))
        server.wait_events(1)
        assert channel.drain(5)
    finally:
        channel.close()
    assert [batch for _, batch in server.batches] == [[1]]


def test_batches_stop_at_their_byte_cap_and_a_larger_event_goes_alone(server):
    server.gate.clear()  # hold the first request so the rest pile up
    channel = ServerChannel("s1", "http://s1", server, batch_max=100, batch_max_bytes=20)
    try:
        sizes = [len(event(n)) for n in (0, 1, 2)]
        assert sizes == [8, 8, 8]
        for n in range(5):
            channel.offer("t", event(n))
        channel.offer("t", b"<e>" + b"9" * 30 + b"</e>")  # 37 bytes: over the cap alone
        channel.offer("t", event(6))
        server.gate.set()
        server.wait_events(7)
        batches = [batch for _, batch in server.batches]
        assert all(len(b) <= 2 for b in batches) and batches[-2] == [int("9" * 30)]
    finally:
        channel.close()
