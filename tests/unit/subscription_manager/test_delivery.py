"""Push delivery: bounded queue, worker pool, retries with backoff, giving up, and the
DeliveryFailure SubscriptionEnd (fake transports, no sockets)."""
from __future__ import annotations

import threading
import time

import pytest

from subscription_manager.delivery import (NOTIFICATION, SUBSCRIPTION_END, Delivery, Deliverer,
                                           DeliveryPolicy)
from subscription_manager.delivery_job import JOB_BYTES
from subscription_manager.lifecycle import State
from subscription_manager.versions import V2004, V2011
from tests.support.eventing import SINK, Harness, RecordingSink, quote
from wsframework import ns
from wsframework.soap import parse_envelope
from wsframework.transport import TransportError, TransportResponse
from wsframework.urlpolicy import UrlRefused


class ScriptedTransport:
    """Answers from a script of statuses/exceptions (then the last one forever), recording
    when each attempt happened."""

    def __init__(self, *script):
        self.script = list(script) or [202]
        self.calls: list[tuple[float, str, bytes]] = []
        self.lock = threading.Lock()

    def post(self, url, payload, content_type, soap_action=None):
        with self.lock:
            self.calls.append((time.monotonic(), url, payload))
            outcome = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(outcome, Exception):
            raise outcome
        return TransportResponse(outcome, None, b"")

    def close(self):
        pass


class BlockingTransport(ScriptedTransport):
    """A ScriptedTransport whose posts wait until ``release`` is set (at most 5 s)."""

    def __init__(self, *script):
        super().__init__(*script)
        self.release = threading.Event()

    def post(self, *args, **kwargs):
        self.release.wait(5)
        return super().post(*args, **kwargs)


def job(url="http://sink.test/n", payload=b"<x/>", **kwargs):
    return Delivery(url, "application/soap+xml", "urn:a", payload=payload, **kwargs)


def test_backoff_doubles_and_is_capped():
    policy = DeliveryPolicy(backoff=0.5, backoff_max=3)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3, 3]
    with pytest.raises(ValueError):
        DeliveryPolicy(workers=0)


def test_retries_until_success_with_the_same_message():
    transport = ScriptedTransport(TransportError("refused"), 503, 202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=2, retries=3, backoff=0.02))
    given_up = []
    deliverer._on_give_up = given_up.append
    rendered = []
    deliverer.submit(Delivery("http://sink.test/n", "text/xml", "urn:a",
                              render=lambda: rendered.append(1) or b"<m/>"))
    assert deliverer.drain(5)
    times = [t for t, _, _ in transport.calls]
    assert len(times) == 3 and {p for _, _, p in transport.calls} == {b"<m/>"}
    assert rendered == [1]  # rendered once, retried byte-identical
    # exponential: the second gap is about twice the first
    assert times[1] - times[0] >= 0.02 and times[2] - times[1] >= 0.04
    stats = deliverer.stats()
    assert (stats["delivered"], stats["retries"], stats["failed"], stats["queued"]) == (1, 2, 0, 1)
    assert given_up == []
    deliverer.close()


def test_gives_up_after_the_last_retry():
    transport = ScriptedTransport(500)
    given_up = []
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, retries=2, backoff=0.001),
                          on_give_up=given_up.append)
    deliverer.submit(job(subscription_id="s1"))
    assert deliverer.drain(5)
    assert len(transport.calls) == 3
    assert [j.subscription_id for j in given_up] == ["s1"]
    assert given_up[0].last_error == "HTTP 500"
    assert deliverer.stats()["failed"] == 1 and deliverer.stats()["retries"] == 2
    deliverer.close()


def test_full_queue_drops_the_newest_and_never_blocks():
    transport = BlockingTransport(202)
    release = transport.release
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, queue_size=2, retries=0))
    started = time.monotonic()
    accepted = [deliverer.submit(job(payload=str(i).encode())) for i in range(10)]
    assert time.monotonic() - started < 1.0  # submit never waited for the blocked worker
    # Two queue slots, plus what the one worker took before it blocked (a batch of <= 2).
    assert accepted[:2] == [True, True] and 2 <= accepted.count(True) <= 4
    stats = deliverer.stats()
    assert stats["dropped"] == accepted.count(False) >= 6
    release.set()
    assert deliverer.drain(5)
    assert deliverer.stats()["delivered"] == accepted.count(True)
    deliverer.close()


def test_the_byte_budget_bounds_the_jobs_held_and_takes_one_job_over_it_when_empty():
    charge = JOB_BYTES + 1000
    transport = BlockingTransport(202)
    release = transport.release
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, queue_bytes=3 * charge,
                                                        retries=0))
    assert deliverer.room_for([(5, 1000)]) == 3
    accepted = deliverer.submit_many([job(payload=b"x" * 1000, size=1000) for _ in range(5)])
    assert accepted == 3  # in flight or queued, they hold what the budget allows
    assert deliverer.held_bytes() == 3 * charge and deliverer.stats()["dropped"] == 2
    assert deliverer.room_for([(1, 0)]) == 0 and not deliverer.submit(job(size=0))
    release.set()
    assert deliverer.drain(5) and deliverer.held_bytes() == 0
    # a job over the whole budget is taken when nothing is held (else it could never go)
    assert deliverer.room_for([(2, 10 * charge)]) == 1
    assert deliverer.submit_many([job(size=10 * charge), job(size=10 * charge)]) == 1
    assert deliverer.drain(5) and deliverer.held_bytes() == 0
    assert deliverer.stats()["delivered"] == 4
    deliverer.close()
    with pytest.raises(ValueError):
        DeliveryPolicy(queue_bytes=JOB_BYTES - 1)


def test_a_template_job_with_its_message_id_keeps_no_bytes_between_attempts():
    """Its bytes are the same at every render, so a job waiting out a backoff holds only
    its share of the event; one without a message id keeps what it sent (its id is new at
    each render)."""
    class Template:
        renders = 0

        def render(self, url, action, event, message_id=None):
            Template.renders += 1
            return b"|".join((url.encode(), event, (message_id or f"fresh-{self.renders}").encode()))

    durable = job(payload=None, render=Template(), render_args=("http://s/n", "urn:a", b"<e/>",
                                                                "urn:m"))
    assert durable.body() == durable.body() == b"http://s/n|<e/>|urn:m"
    assert durable.payload is None and Template.renders == 2
    volatile = job(payload=None, render=Template(), render_args=("http://s/n", "urn:a", b"<e/>",
                                                                 None))
    first = volatile.body()
    assert volatile.body() == first and volatile.payload == first and Template.renders == 3


def test_unwanted_jobs_are_discarded_without_a_post():
    transport = ScriptedTransport(202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1),
                          is_wanted=lambda subscription_id: subscription_id == "live")
    deliverer.submit(job(subscription_id="gone"))
    deliverer.submit(job(subscription_id="live"))
    deliverer.submit(job(subscription_id="gone", kind=SUBSCRIPTION_END))  # ends always go out
    assert deliverer.drain(5)
    assert len(transport.calls) == 2
    assert deliverer.stats()["discarded"] == 1
    deliverer.close()


def test_refused_target_gives_up_at_once_without_a_post():
    def check(url):
        raise UrlRefused("metadata")
    transport = ScriptedTransport(202)
    given_up = []
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, retries=5), approve_target=check,
                          on_give_up=given_up.append)
    deliverer.submit(job(subscription_id="s", kind=NOTIFICATION))
    assert deliverer.drain(5)
    assert transport.calls == [] and len(given_up) == 1
    assert deliverer.stats()["refused"] == 1
    deliverer.close()


def test_close_finishes_pending_and_refuses_new_work():
    transport = ScriptedTransport(202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=2))
    for _ in range(20):
        deliverer.submit(job())
    assert deliverer.close(timeout=5)
    assert len(transport.calls) == 20
    assert deliverer.submit(job()) is False


def test_workers_are_started_once_not_per_event():
    transport = ScriptedTransport(202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=3))
    deliverer.submit(job())
    threads = set(deliverer._threads)
    assert len(threads) == 4  # 3 workers + the retry timer
    started = {t.ident for t in threading.enumerate()}
    for _ in range(50):
        deliverer.submit(job())
    deliverer.drain(5)
    assert set(deliverer._threads) == threads
    assert {t.ident for t in threading.enumerate()} <= started  # nothing new was started
    deliverer.close()



def test_a_host_made_ready_wakes_one_idle_worker():
    """Waking more than one worker per host made ready would only have the others find
    nothing to take (a worker taking a host with jobs left wakes the next)."""
    transport = HostTransport()
    deliverer = Deliverer(transport, DeliveryPolicy(workers=8, per_host=4, per_host_max=8,
                                                    retries=0))
    try:
        deliverer.submit(job(url="http://warm.test/n"))  # starts the workers
        assert transport.wait(lambda: transport.done.get("warm.test") == 1)
        woken = []
        notify = deliverer._cond.notify
        deliverer._cond.notify = lambda n=1: (woken.append(n), notify(n))
        deliverer.submit_many([job(url="http://slow.test/n") for _ in range(3)]
                              + [job(url="http://two.test/n")])
        assert woken[0] == 2  # two hosts made ready
        assert transport.wait(lambda: transport.in_flight.get("slow.test") == 3)
    finally:
        transport.release.set()
    assert deliverer.drain(10)
    assert deliverer.stats()["delivered"] == 5
    deliverer.close()


# -- through the manager: a dead sink ends the subscription ------------------------------------

@pytest.mark.parametrize("name", ["2004", "2011"])
def test_dead_sink_ends_subscription_with_delivery_failure(tmp_path, name):
    version = {"2004": V2004, "2011": V2011}[name]
    sink = RecordingSink()
    h = Harness(tmp_path, sink=sink)
    try:
        dead = RecordingSink(status=503)
        h.transport.mount("http://dead.test", dead)
        sub = h.client(name).subscribe("http://es.test/topics/stocks", "http://dead.test/notify",
                                       end_to=SINK + "/end")
        other = h.subscribe(name, notify_path="/alive")
        h.publish(quote(1))
        h.drain()
        assert dead.attempts == 3  # first try + 2 retries (FAST settings)
        [end] = sink.envelopes("/end")
        assert end.header(version.wsa.q("Action")).text == version.action("SubscriptionEnd")
        assert end.body.find(version.q("Status")).text == version.action("DeliveryFailure")
        if version is V2004:  # 2004/08 names the subscription in the body
            manager = end.body.find(version.q("SubscriptionManager"))
            assert manager.find(f".//{{{ns.WSE2004}}}Identifier").text == f"urn:uuid:{sub.id}"
        stored = h.manager.store.get(sub.id)
        assert stored.status is State.ENDED and stored.end_reason == "DeliveryFailure"
        assert h.manager.store.get(other.id).status is State.ACTIVE
        counters = h.manager.counters
        assert counters["failed"] == 1 and counters["retries"] == 2
        # Ended: later events are not even queued for it.
        h.publish(quote(2))
        h.drain()
        assert dead.attempts == 3 and len(sink.at("/alive")) == 2
    finally:
        h.close()


def test_many_failures_of_one_subscription_send_one_subscription_end(tmp_path):
    h = Harness(tmp_path)
    try:
        dead = RecordingSink(status=500)
        h.transport.mount("http://dead.test", dead)
        h.client("2011").subscribe("http://es.test/topics/stocks", "http://dead.test/n",
                                   end_to=SINK + "/end")
        for price in range(5):
            h.publish(quote(price))
        h.drain()
        h.drain()
        assert len(h.sink.at("/end")) == 1
    finally:
        h.close()


def test_target_rechecked_at_delivery_time(tmp_path):
    table = {"sink.test": "93.184.216.34"}
    from tests.support.eventing import fake_resolver
    h = Harness(tmp_path, resolver=fake_resolver(table), settings={"target_cache_ttl": 0})
    try:
        sub = h.subscribe("2011", end_to="http://other.test/end")
        table["sink.test"] = "169.254.169.254"  # DNS now points at the metadata service
        h.publish(quote(1))
        h.drain()
        assert h.sink.at("/notify") == []
        assert h.manager.store.get(sub.id).status is State.ENDED
        assert h.manager.counters["refused"] == 1
    finally:
        h.close()


def test_publication_does_not_wait_for_slow_sinks(tmp_path):
    release = threading.Event()

    def slow(url, payload, content_type, action):
        release.wait(5)
        return TransportResponse(202, None, b"")

    h = Harness(tmp_path, settings={"delivery_workers": 1})
    try:
        h.transport.mount("http://slow.test", slow)
        h.client("2011").subscribe("http://es.test/topics/stocks", "http://slow.test/n")
        started = time.monotonic()
        for price in range(20):
            assert h.publish(quote(price)).status == 202
        assert time.monotonic() - started < 2.0
        release.set()
        h.drain()
        assert h.manager.counters["delivered"] == 20
    finally:
        release.set()
        h.close()


def test_notification_envelope_is_well_formed_with_hostile_text(tmp_path):
    h = Harness(tmp_path)
    try:
        h.subscribe("2011", format=ns.WSE2011_FORMAT_WRAP)
        h.publish(quote(1), action='urn:a?x=1&y="<2>"')
        h.drain()
        [(url, payload, _, _)] = h.sink.messages
        envelope = parse_envelope(payload)
        assert envelope.body.get("actionURI") == 'urn:a?x=1&y="<2>"'
    finally:
        h.close()


# -- per-host queues: a slow or silent sink holds only its own workers -------------------------

class HostTransport:
    """Per host (``http://HOST/...``): 'slow' blocks until released, 'dead' raises (the first
    time at once, then after blocking until released), anything else answers 202. Records
    the calls in flight per host and the most seen at once."""

    def __init__(self):
        self.release = threading.Event()
        self.cond = threading.Condition()
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.dead_calls = 0

    def post(self, url, payload, content_type, soap_action=None):
        host = url.split("/")[2]
        with self.cond:
            self.in_flight[host] = self.in_flight.get(host, 0) + 1
            self.most[host] = max(self.most.get(host, 0), self.in_flight[host])
            first_dead = host == "dead.test" and self.dead_calls == 0
            if host == "dead.test":
                self.dead_calls += 1
            self.cond.notify_all()
        try:
            if host in ("slow.test", "dead.test") and not first_dead:
                self.release.wait(10)
            if host == "dead.test":
                raise TransportError("timed out")
            return TransportResponse(202, None, b"")
        finally:
            with self.cond:
                self.in_flight[host] -= 1
                self.done[host] = self.done.get(host, 0) + 1
                self.cond.notify_all()

    def wait(self, predicate, timeout=5.0):
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def close(self):
        pass


def test_a_slow_host_holds_at_most_per_host_workers_and_the_others_flow():
    transport = HostTransport()
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=2, retries=0))
    try:
        deliverer.submit_many([job(url="http://slow.test/n") for _ in range(40)])
        assert transport.wait(lambda: transport.in_flight.get("slow.test") == 2)
        deliverer.submit_many([job(url=f"http://fast{i % 3}.test/n") for i in range(60)])
        assert transport.wait(lambda: sum(transport.done.get(f"fast{i}.test", 0)
                                          for i in range(3)) == 60)
        assert transport.most["slow.test"] == 2 and transport.in_flight["slow.test"] == 2
        assert max(transport.most[f"fast{i}.test"] for i in range(3)) <= 2
    finally:
        transport.release.set()
    assert deliverer.drain(10)
    assert deliverer.stats()["delivered"] == 100
    deliverer.close()


def test_a_silent_host_after_a_transport_error_gets_one_worker_at_a_time():
    transport = HostTransport()
    given_up = []
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=4, retries=0,
                                                    probe_interval=0.01),
                          on_give_up=given_up.append)
    try:
        deliverer.submit(job(url="http://dead.test/n"))  # fails at once: suspect
        assert transport.wait(lambda: len(given_up) == 1)
        deliverer.submit_many([job(url="http://dead.test/n") for _ in range(20)])
        assert transport.wait(lambda: transport.in_flight.get("dead.test") == 1)
        deliverer.submit_many([job(url="http://fast.test/n") for _ in range(50)])
        assert transport.wait(lambda: transport.done.get("fast.test") == 50)
        assert transport.in_flight["dead.test"] == 1  # still only one stuck worker
        assert transport.most["dead.test"] == 1
    finally:
        transport.release.set()
    assert deliverer.drain(10)
    stats = deliverer.stats()
    assert (stats["delivered"], stats["failed"], stats["hosts"]) == (50, 21, 1)  # dead.test: suspect
    deliverer.close()


def test_the_queue_bound_counts_every_host():
    transport = HostTransport()
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, per_host=1, queue_size=5,
                                                    retries=0))
    try:
        deliverer.submit(job(url="http://slow.test/n"))
        assert transport.wait(lambda: transport.in_flight.get("slow.test") == 1)
        accepted = [deliverer.submit(job(url=f"http://h{i}.test/n")) for i in range(8)]
        assert accepted == [True] * 5 + [False] * 3
        assert deliverer.stats()["queue_depth"] == 5 and deliverer.stats()["dropped"] == 3
    finally:
        transport.release.set()
    assert deliverer.drain(10)
    assert deliverer.stats()["delivered"] == 6
    deliverer.close()


def test_host_of_reads_the_authority():
    from subscription_manager.delivery import host_of
    assert host_of("http://Sink.Test:8080/a?b#c") == "sink.test:8080"
    assert host_of("https://[::1]:9/x") == "[::1]:9"
    assert host_of("http://h?x") == "h" and host_of("nonsense") == ""


def test_approvals_are_reused_for_approval_ttl_only():
    now = [100.0]
    approvals = []

    def approve(url):
        approvals.append(url)
        return url

    transport = ScriptedTransport(202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1), approve_target=approve,
                          approval_ttl=1.0, clock=lambda: now[0])
    for _ in range(3):
        deliverer.submit(job())
        assert deliverer.drain(5)
    assert len(approvals) == 1
    now[0] += 1.5  # past the ttl: asked again
    deliverer.submit(job())
    assert deliverer.drain(5)
    assert len(approvals) == 2 and len(transport.calls) == 4
    deliverer.close()

    approvals.clear()
    uncached = Deliverer(ScriptedTransport(202), DeliveryPolicy(workers=1), approve_target=approve)
    for _ in range(3):
        uncached.submit(job())
        assert uncached.drain(5)
    assert len(approvals) == 3
    uncached.close()


# -- which client delivers ----------------------------------------------------------------------

@pytest.mark.parametrize("client, expected", [("lean", "LeanHttpTransport"),
                                              ("requests", "HttpTransport")])
def test_real_http_services_deliver_through_the_chosen_client(tmp_path, client, expected):
    from pathlib import Path

    from subscription_manager.source import build_source
    from tests.support.eventing import BASE, TOKEN, fake_resolver
    from wsframework.service import ServiceConfig
    service = build_source(ServiceConfig(BASE, Path(tmp_path), TOKEN,
                                         settings={"delivery_client": client,
                                                   "delivery_read_timeout": 4,
                                                   "delivery_per_host": 3,
                                                   "delivery_per_host_max": 40}),
                           resolver=fake_resolver(), start_sweeper=False)
    try:
        transport = service.subscription_manager.deliverer.transport
        assert type(transport).__name__ == expected
        if client == "lean":
            # idle connections kept per host: as many as workers may deliver to it
            assert transport.timeout == (3.0, 4.0) and transport.pool_size == 40
        else:
            assert transport is service.transport
        policy = service.subscription_manager.deliverer.policy
        assert (policy.per_host, policy.per_host_max) == (3, 40)
    finally:
        service.close()


def test_in_process_transports_are_kept_and_bad_client_settings_refused(tmp_path):
    from wsframework.settings import SettingsError
    h = Harness(tmp_path)
    try:
        assert h.manager.deliverer.transport is h.transport
    finally:
        h.close()
    for bad in ({"delivery_client": "curl"}, {"delivery_per_host": 0},
                {"delivery_read_timeout": 0}):
        with pytest.raises(SettingsError):
            Harness(tmp_path / "bad", settings=bad)


def test_a_host_that_answers_slowly_gets_one_worker_until_it_answers_in_time():
    """Time is the deliverer's clock, advanced by the transport: no sleeping."""
    now = [0.0]
    seconds = {"slow.test": 5.0, "fast.test": 0.01}
    lock = threading.Lock()
    in_flight = {"slow.test": 0}
    most = {"slow.test": 0}
    gate = threading.Event()

    class Timed(ScriptedTransport):
        def post(self, url, payload, content_type, soap_action=None):
            host = url.split("/")[2]
            with lock:
                now[0] += seconds[host]
                if host == "slow.test":
                    in_flight[host] += 1
                    most[host] = max(most[host], in_flight[host])
            if host == "slow.test" and seconds[host] > 1:
                gate.wait(0.05)  # gives other workers the chance to pile on, if they may
            with lock:
                if host == "slow.test":
                    in_flight[host] -= 1
            return super().post(url, payload, content_type, soap_action)

    transport = Timed(202)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=4, slow_after=1.0),
                          clock=lambda: now[0])
    deliverer.submit(job(url="http://slow.test/n"))
    assert deliverer.drain(10_000)  # fake seconds
    deliverer.submit_many([job(url="http://slow.test/n") for _ in range(12)])
    assert deliverer.drain(10_000)  # fake seconds
    assert most["slow.test"] == 1  # suspect after its first slow answer: one at a time
    seconds["slow.test"] = 0.01  # answers in time again: back to per_host workers
    deliverer.submit(job(url="http://slow.test/n"))
    assert deliverer.drain(10_000)  # fake seconds
    assert deliverer._hosts == {}  # no longer suspect: forgotten once idle
    assert deliverer.stats()["delivered"] == 14 and deliverer.stats()["slow"] == 13
    deliverer.close()


@pytest.mark.sqlite_only("SQLite's connection per thread (PostgreSQL's come from a bounded pool)")
def test_workers_hand_back_the_store_connection_their_outcomes_were_written_through(tmp_path):
    """Of many workers, only the busy ones hold a connection: each writes its batch's
    outcomes, then gives the connection back to the store before it waits for more."""
    from wsframework.store import Store
    store = Store(tmp_path / "outcomes.db")
    store.connection().execute("CREATE TABLE outcomes (url TEXT, outcome TEXT)")
    writers: set[int] = set()

    def record(job, outcome):
        writers.add(threading.get_ident())
        store.connection().execute("INSERT INTO outcomes VALUES (?, ?)", (job.url, outcome))

    deliverer = Deliverer(ScriptedTransport(202), DeliveryPolicy(workers=16), on_finish=record)
    try:
        for k in range(200):
            deliverer.submit(job(url=f"http://sink{k % 40}.test/n"))
        assert deliverer.drain(10)
        assert store.query("SELECT count(*) FROM outcomes")[0][0] == 200
        assert len(writers) > 1  # several workers wrote
        assert len(store._all) == 1  # the test's own; the idle workers hold none
    finally:
        deliverer.close()
        store.close()
