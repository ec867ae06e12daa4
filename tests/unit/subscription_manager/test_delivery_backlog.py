"""Delivery behind: a host that gave no answer is parked and probed (its other jobs wait,
their attempts unspent); a far host gets more requests in flight; a backlog larger than the
delivery queue waits in the outbox and is paged in, every row delivered exactly once
(in-process transports, no sockets)."""
from __future__ import annotations

import re
import threading

import pytest

from subscription_manager.delivery import Delivery, Deliverer, DeliveryPolicy
from subscription_manager.delivery_hosts import MAX_STALLED
from subscription_manager.delivery_pipelined import PipeliningDeliverer
from tests.support.eventing import Q, Harness, RecordingSink, quote
from wsframework import ns
from wsframework.settings import SettingsError
from wsframework.transport import TransportError, TransportResponse


def job(url="http://down.test/n", payload=b"<x/>", **kwargs):
    return Delivery(url, "application/soap+xml", "urn:a", payload=payload, **kwargs)


class SwitchedTransport:
    """``down.test`` gives no answer while ``down`` is set; every call, and every call that
    got no answer, is counted."""

    def __init__(self):
        self.down = True
        self.calls = 0
        self.unanswered = 0
        self.cond = threading.Condition()

    def post(self, url, payload, content_type, soap_action=None):
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
            down = self.down
            self.unanswered += down
        if down:
            raise TransportError("connection refused")
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_jobs_of_a_host_that_gives_no_answer_wait_for_a_probe_instead_of_failing():
    transport = SwitchedTransport()
    # a probe interval long enough that a test thread woken late sees no second probe yet
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=4, retries=9,
                                                    backoff=2.0, probe_interval=2.0))
    deliverer.submit_many([job() for _ in range(50)])
    with transport.cond:  # the first attempts, then a probe a parking interval later
        assert transport.cond.wait_for(lambda: transport.calls >= 2, 5)
        calls = transport.calls
    stats = deliverer.stats()
    # without parking one worker would have tried (and failed) every job by now
    assert calls <= 4 and stats["queue_depth"] >= 50 - 4, (calls, stats)
    assert stats["failed"] == 0
    with transport.cond:  # the host answers again: the whole queue flows
        transport.down = False
    assert deliverer.drain(10)
    stats = deliverer.stats()
    assert stats["delivered"] == 50 and stats["failed"] == 0
    # only the attempts that got no answer (the first ones and the probes, however late this
    # thread woke) spent a retry, never the jobs that waited behind the parked host
    assert stats["retries"] <= transport.unanswered < 50 - 4
    deliverer.close()


class FarHost:
    """A host far away: a request is answered once the host's whole limit is in flight (or
    after a short bounded wait), and each attempt measures 40 ms on the deliverer's
    per-thread clock. Records the most requests in flight at once."""

    def __init__(self, limit):
        self.limit = limit  # -> the deliverer's current largest host limit
        self.cond = threading.Condition()
        self.in_flight = 0
        self.most = 0
        self.round = 0
        self.local = threading.local()

    def clock(self) -> float:
        return getattr(self.local, "now", 0.0)

    def post(self, url, payload, content_type, soap_action=None):
        with self.cond:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            mine = self.round
            if self.in_flight >= self.limit():
                self.round += 1
                self.cond.notify_all()
            else:
                self.cond.wait_for(lambda: self.round != mine, 0.05)
            self.in_flight -= 1
        self.local.now = self.clock() + 0.040
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_a_far_host_gets_more_requests_in_flight_than_per_host():
    deliverer = None
    transport = FarHost(lambda: deliverer.stats()["host_limit_max"] or 1)
    deliverer = Deliverer(transport, DeliveryPolicy(workers=32, per_host=2, per_host_max=24),
                          clock=transport.clock)
    deliverer.submit_many([job(url="http://far.test/n") for _ in range(3000)])
    assert deliverer.drain(30)
    assert deliverer.stats()["delivered"] == 3000
    assert deliverer.stats()["host_limit_max"] == 24
    assert transport.most > 2 * 2  # well past per_host
    deliverer.close()


class HeldSink(RecordingSink):
    """A sink that answers nothing until released (the deliverer's workers wait on it)."""

    def __init__(self):
        super().__init__()
        self.open = threading.Event()

    def __call__(self, url, payload, content_type, soap_action):
        assert self.open.wait(10), "the sink was never released"
        return super().__call__(url, payload, content_type, soap_action)


def message_ids(sink) -> list[str]:
    """The wsa:MessageID of every notification the sink accepted (2011: WSA 1.0)."""
    return [env.header(ns.qname(ns.WSA10, "MessageID")).text for env in sink.envelopes()]


def test_a_backlog_past_the_queue_waits_in_the_outbox_and_is_paged_in_exactly_once(tmp_path):
    sink = HeldSink()
    h = Harness(tmp_path, sink=sink, settings={"delivery_queue_size": 20,
                                               "delivery_workers": 2})
    try:
        for n in range(5):
            h.subscribe("2011", filter="q:price > 0", namespaces={"q": Q}, notify_path=f"/n{n}")
        for price in range(1, 41):  # 200 notifications; 2 in flight + 20 fit in memory
            assert h.publish(quote(price)).status == 202
        outbox = h.manager.outbox
        assert outbox.pending() == 200
        stats = h.manager.counters
        assert stats["queue_depth"] <= 20 and stats["dropped"] == 0
        assert stats["outbox_spilled"] >= 200 - 22  # written due, not held in memory
        stored = {r[0] for r in h.service.store.query("SELECT message_id FROM eventing_outbox")}
        assert h.manager.recover_outbox() == 0  # no room: nothing paged in yet
        sink.open.set()
        for _ in range(100):  # each sweep pages in at most the room the queue has
            h.drain(10)
            if len(sink.messages) >= 200:
                break
            assert h.manager.recover_outbox() <= 20
        h.drain(10)
        delivered = message_ids(sink)
        assert len(delivered) == 200 and set(delivered) == stored  # each once, ids kept
        outbox.flush()
        assert outbox.pending() == 0
    finally:
        sink.open.set()
        h.close()


def test_a_backlog_of_large_events_past_the_byte_budget_waits_in_the_outbox(tmp_path):
    """Each event ~20 KB to one subscription (nothing shared): a budget of 64 KB holds three
    in memory, whatever the job room; the rest wait on disk and are each delivered once."""
    sink = HeldSink()
    budget = 64 * 1024
    h = Harness(tmp_path, sink=sink, settings={"delivery_queue_bytes": budget,
                                               "delivery_workers": 2})
    try:
        h.subscribe("2011", filter="q:price > 0", namespaces={"q": Q}, notify_path="/big")
        large = "L" * 10_000
        for price in range(1, 31):
            assert h.publish(quote(price, symbol=large)).status == 202
        deliverer = h.manager.deliverer
        assert 0 < deliverer.held_bytes() <= budget
        assert deliverer.stats()["pending"] <= 3
        assert h.manager.counters["outbox_spilled"] >= 27
        assert h.manager.outbox.pending() == 30
        assert h.manager.recover_outbox() == 0  # the budget is spent: nothing paged in
        sink.open.set()
        for _ in range(100):
            h.drain(10)
            if len(sink.messages) >= 30:
                break
            h.manager.recover_outbox()
            assert deliverer.held_bytes() <= budget
        h.drain(10)
        assert len(sink.messages) == 30 and len(set(message_ids(sink))) == 30
        assert deliverer.held_bytes() == 0
    finally:
        sink.open.set()
        h.close()


def test_an_event_larger_than_the_byte_budget_is_still_delivered(tmp_path):
    sink = RecordingSink()
    h = Harness(tmp_path, sink=sink, settings={"delivery_queue_bytes": 4096})
    try:
        h.subscribe("2011", filter="q:price > 0", namespaces={"q": Q}, notify_path="/huge")
        assert h.publish(quote(5, symbol="H" * 20_000)).status == 202
        for _ in range(20):
            h.drain(10)
            if sink.messages:
                break
            h.manager.recover_outbox()
        assert len(sink.messages) == 1 and b"H" * 20_000 in sink.messages[0][1]
        assert h.manager.deliverer.held_bytes() == 0
    finally:
        h.close()


@pytest.mark.parametrize("bad, named", [
    ({"delivery_per_host_max": 0}, "delivery_per_host(_max)"),
    ({"delivery_queue_bytes": 511}, "delivery_queue_bytes"),
    ({"delivery_probe_interval": 0}, "delivery_probe_interval"),
    ({"delivery_probe_interval": 61}, "delivery_probe_interval"),
])
def test_bad_delivery_settings_are_refused_with_their_names(tmp_path, bad, named):
    with pytest.raises(SettingsError, match=re.escape(named)):
        Harness(tmp_path, settings=bad)


def test_the_host_ceiling_is_at_least_per_host_and_at_most_the_workers(tmp_path):
    for settings, ceiling in (({"delivery_workers": 8, "delivery_per_host_max": 96}, 8),
                              ({"delivery_workers": 32, "delivery_per_host": 16,
                                "delivery_per_host_max": 4}, 16)):
        h = Harness(tmp_path / str(ceiling), settings=settings)
        try:
            assert h.manager.deliverer.policy.per_host_max == ceiling
        finally:
            h.close()
    with pytest.raises(ValueError):
        DeliveryPolicy(per_host=8, per_host_max=4)
    with pytest.raises(ValueError):
        DeliveryPolicy(probe_interval=0)


class PipeliningTransport:
    """Answers pipelined batches, recording their sizes; ``break_after`` answers, then the
    rest of one batch are left unanswered (a connection that broke)."""

    def __init__(self, break_after: int | None = None):
        self.batches: list[int] = []
        self.payloads: list[bytes] = []
        self.break_after = break_after
        self.lock = threading.Lock()

    def post_pipelined(self, requests):
        with self.lock:
            self.batches.append(len(requests))
            answers = []
            for url, payload, content_type, action in requests:
                if self.break_after is not None and len(answers) == self.break_after:
                    self.break_after = None
                    return answers + [TransportError("not answered")] * (len(requests)
                                                                         - len(answers))
                self.payloads.append(payload)
                answers.append(TransportResponse(202, None, b""))
            return answers

    def post(self, url, payload, content_type, soap_action=None):
        return self.post_pipelined([(url, payload, content_type, soap_action)])[0]

    def close(self):
        pass


def test_pipelining_sends_a_batch_per_round_trip_and_retries_the_unanswered_as_they_were():
    transport = PipeliningTransport(break_after=3)
    policy = DeliveryPolicy(workers=1, per_host=1, retries=3, backoff=0.001, pipeline=8)
    deliverer = PipeliningDeliverer(transport, policy)
    jobs = [job(url="http://sink.test/n", payload=b"<m id='%d'/>" % i) for i in range(40)]
    deliverer.submit_many(jobs)
    assert deliverer.drain(10)
    stats = deliverer.stats()
    assert stats["delivered"] == 40 and stats["failed"] == 0
    assert max(transport.batches) == 8  # up to pipeline requests per round trip
    assert sorted(transport.payloads) == sorted(j.payload for j in jobs)  # each once, as it was
    assert stats["retries"] == 5  # the batch's unanswered five, retried
    deliverer.close()


def test_pipelining_to_a_far_host_still_fills_each_round_trip():
    """A worker holds a far host's take for one round trip, whatever its size when the
    take is pipelined: so a take is up to ``pipeline`` jobs there too."""
    now = [0.0]

    class FarPipelining(PipeliningTransport):
        def post_pipelined(self, requests):
            now[0] += 0.080  # each round trip takes 80 ms on the deliverer's clock
            return super().post_pipelined(requests)

    transport = FarPipelining()
    deliverer = PipeliningDeliverer(transport, DeliveryPolicy(workers=1, per_host=1, pipeline=16),
                                    clock=lambda: now[0])
    deliverer.submit_many([job(url="http://far.test/n") for _ in range(64)])
    assert deliverer.drain(10_000)  # fake seconds
    assert deliverer.stats()["delivered"] == 64
    assert max(transport.batches) == 16 and len(transport.batches) <= 1 + 64 // 16
    deliverer.close()


def test_a_deliverer_without_pipelining_posts_one_at_a_time():
    transport = PipeliningTransport()
    deliverer = Deliverer(transport, DeliveryPolicy(workers=1, per_host=1))
    deliverer.submit_many([job(url="http://sink.test/n") for _ in range(10)])
    assert deliverer.drain(10)
    assert transport.batches == [1] * 10
    deliverer.close()


@pytest.mark.parametrize("value", [0, 65, -1])
def test_bad_pipeline_depths_are_refused(tmp_path, value):
    with pytest.raises(SettingsError, match="delivery_pipeline"):
        Harness(tmp_path, settings={"delivery_pipeline": value})


class CutLink:
    """``cut.test`` behind a link that drops packets: the first attempt gets no answer; an
    attempt begun while ``cut`` is set hangs until the end of the test (its packets wait
    out TCP's backoff), one begun after the heal is answered at once."""

    def __init__(self):
        self.cut = True
        self.hanging = 0
        self.calls = 0
        self.cond = threading.Condition()
        self.release = threading.Event()

    def post(self, url, payload, content_type, soap_action=None):
        with self.cond:
            self.calls += 1
            first, cut = self.calls == 1, self.cut
            if cut and not first:
                self.hanging += 1
            self.cond.notify_all()
        if first:
            raise TransportError("connect timed out")
        if cut:
            self.release.wait(30)
            raise TransportError("read timed out")
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_a_probe_hanging_in_a_cut_does_not_hold_the_host_back_after_the_heal():
    link = CutLink()
    deliverer = Deliverer(link, DeliveryPolicy(workers=16, per_host=4, retries=9,
                                               backoff=0.05, probe_interval=0.05))
    try:
        deliverer.submit_many([job(url="http://cut.test/n") for _ in range(40)])
        with link.cond:  # probes that hang: one more each probe interval, a bounded number
            assert link.cond.wait_for(lambda: link.hanging >= 3, 20)
        link.cut = False
        # a fresh probe gets through while the earlier ones still hang, and the rest follow
        with link.cond:
            assert link.cond.wait_for(lambda: link.calls - 1 - link.hanging >= 40 - link.hanging, 20), (
                link.calls, link.hanging, deliverer.stats())
        assert 3 <= link.hanging <= MAX_STALLED + 1
        assert deliverer.stats()["failed"] == 0
    finally:
        link.release.set()
        deliverer.close()


def test_attempts_failing_late_after_the_heal_are_tried_again_at_once():
    """Requests sent into a cut time out after the heal: the host answers fresh attempts by
    then, so those late failures neither set the host back nor wait out a 30 s backoff."""
    link = CutLink()
    deliverer = Deliverer(link, DeliveryPolicy(workers=16, per_host=4, retries=9,
                                               backoff=30.0, probe_interval=0.05))
    try:
        deliverer.submit_many([job(url="http://cut.test/n") for _ in range(40)])
        with link.cond:
            assert link.cond.wait_for(lambda: link.hanging >= 3, 20)
        link.cut = False
        with link.cond:  # every job not hanging is delivered
            assert link.cond.wait_for(lambda: link.calls - 1 - link.hanging >= 40 - link.hanging, 20)
        link.release.set()  # the hanging ones time out now, after the heal
        assert deliverer.drain(10), deliverer.stats()  # not 30 s later
        stats = deliverer.stats()
        assert stats["delivered"] == 40 and stats["failed"] == 0
    finally:
        link.release.set()
        deliverer.close()


def test_a_failure_older_than_a_settled_attempt_leaves_the_host_as_it_was():
    from subscription_manager.delivery_hosts import HostQueue
    host = HostQueue("cut.test", HostQueue.new_limit(DeliveryPolicy()))
    assert host.settled(True, False, started=10.0)
    assert not host.settled(False, False, started=9.0)  # sent before the answered one
    assert not host.suspect and not host.unanswered
    assert host.overtaken(9.0) and not host.overtaken(10.0)
    assert host.settled(False, False, started=11.0)  # sent after it: news of the host
    assert host.suspect and host.unanswered
    assert not host.settled(False, False, started=10.5)  # known already: old news
    assert not host.overtaken(10.5)  # and not overtaken: the host is down


def test_jobs_waiting_out_a_backoff_go_at_once_when_their_host_answers_again():
    transport = SwitchedTransport()
    deliverer = Deliverer(transport, DeliveryPolicy(workers=4, per_host=4, retries=9,
                                                    backoff=30.0, probe_interval=0.05))
    try:
        deliverer.submit_many([job() for _ in range(20)])
        with transport.cond:  # several probes failed: their jobs wait out a 30 s backoff
            assert transport.cond.wait_for(lambda: transport.calls >= 3, 5)
        assert deliverer.stats()["retries"] >= 1
        transport.down = False
        assert deliverer.drain(5), deliverer.stats()  # not 30 s later
        assert deliverer.stats()["delivered"] == 20
    finally:
        deliverer.close()


def test_a_worker_takes_from_a_far_host_one_job_at_a_time_and_from_a_near_one_a_batch():
    """A worker sends its take one job after another: a take to a host 80 ms away holds its
    readings (and the growth of the host's limit) one round trip, not sixteen."""
    from subscription_manager.delivery import _BATCH, _batch_for
    from subscription_manager.delivery_hosts import HostQueue
    host = HostQueue("far.test", HostQueue.new_limit(DeliveryPolicy()))
    assert _batch_for(host) == 1  # nothing known yet
    host.control.observe(0.080)
    assert _batch_for(host) == 1
    host.control.observe(0.005)
    assert _batch_for(host) == 4
    host.control.observe(0.0004)
    assert _batch_for(host) == _BATCH


def test_a_far_healthy_host_is_not_found_stalled_within_one_round_trip():
    from subscription_manager.delivery_hosts import HostQueue
    deliverer = Deliverer(SwitchedTransport(), DeliveryPolicy(probe_interval=0.25))
    host = HostQueue("far.test", HostQueue.new_limit(DeliveryPolicy()))
    assert deliverer._stall_interval(host) == 0.25
    host.control.observe(0.300)  # its answers take 300 ms
    assert deliverer._stall_interval(host) == pytest.approx(0.600)
    deliverer.close()


class GatedSink:
    """Holds the first POST until ``gate`` is set; records each payload in answer order."""

    def __init__(self):
        self.gate = threading.Event()
        self.held = threading.Event()
        self.order: list[bytes] = []
        self.lock = threading.Lock()

    def post(self, url, payload, content_type, soap_action=None):
        if not self.held.is_set():
            self.held.set()
            self.gate.wait(20)
        with self.lock:
            self.order.append(payload)
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_a_new_notification_is_not_held_behind_a_backlog():
    """Adaptive LIFO: while a host's queue exceeds its limit every other take is of its
    newest jobs; the oldest still go in order on the takes between."""
    sink = GatedSink()
    deliverer = Deliverer(sink, DeliveryPolicy(workers=1, per_host=1))
    try:
        deliverer.submit(job(url="http://sink.test/n", payload=b"first"))
        assert sink.held.wait(10)  # the host's one worker is held: a backlog builds
        deliverer.submit_many([job(url="http://sink.test/n", payload=b"old%d" % k)
                               for k in range(50)])
        deliverer.submit(job(url="http://sink.test/n", payload=b"new"))
        sink.gate.set()
        assert deliverer.drain(10)
        order = sink.order
        assert len(order) == 52 and order[0] == b"first"
        assert order[1] == b"new"  # not 52nd, behind the whole backlog
        # the next take is of the oldest (a take is up to 16 jobs to a host this near)
        assert order.index(b"old0") <= 1 + 16
        assert sorted(order[1:]) == sorted([b"new", *(b"old%d" % k for k in range(50))])
    finally:
        sink.gate.set()
        deliverer.close()


def test_a_queue_within_the_limit_is_taken_in_order():
    from subscription_manager.delivery_hosts import HostQueue
    host = HostQueue("sink.test", HostQueue.new_limit(DeliveryPolicy(per_host=4)))
    host.jobs.extend(job() for _ in range(4))
    assert [host.newest_next(4) for _ in range(3)] == [False, False, False]
    host.jobs.extend(job() for _ in range(4))  # a backlog: every other take
    assert [host.newest_next(4) for _ in range(3)] == [True, False, True]


class LossyLink:
    """Answers at once, except: attempt ``slow_at`` is answered after 0.3 s, and attempt
    ``hang_at`` hangs until ``release`` (a request waiting for TCP to send it again)."""

    def __init__(self, slow_at, hang_at):
        self.slow_at, self.hang_at = slow_at, hang_at
        self.calls = 0
        self.answered = 0
        self.cond = threading.Condition()
        self.release = threading.Event()

    def post(self, url, payload, content_type, soap_action=None):
        with self.cond:
            call = self.calls
            self.calls += 1
        if call == self.slow_at:
            self.release.wait(0.3)
        elif call == self.hang_at:
            self.release.wait(30)
        with self.cond:
            self.answered += 1
            self.cond.notify_all()
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_a_host_answering_slowly_gets_a_fresh_attempt_when_its_one_worker_hangs():
    """After a slow answer a host has one worker; when that one's request hangs (a lossy
    link), a fresh attempt goes after twice the host's fastest answer, and its answer
    brings the host's workers back."""
    from subscription_manager.delivery_hosts import MAX_STALLED_SLOW
    link = LossyLink(slow_at=8, hang_at=9)
    deliverer = Deliverer(link, DeliveryPolicy(workers=8, per_host=4, slow_after=0.2,
                                               probe_interval=0.05))
    try:
        deliverer.submit_many([job(url="http://lossy.test/n") for _ in range(8)])
        assert deliverer.drain(10)  # its fastest answers are known
        deliverer.submit(job(url="http://lossy.test/n"))
        assert deliverer.drain(10)  # a slow answer: suspect, one worker
        deliverer.submit_many([job(url="http://lossy.test/n") for _ in range(20)])
        with link.cond:  # all but the hanging one, while it still hangs
            assert link.cond.wait_for(lambda: link.answered == 9 + 19, 10), deliverer.stats()
        assert link.calls - link.answered <= 1 + MAX_STALLED_SLOW
    finally:
        link.release.set()
        deliverer.close()


class PausedLink:
    """``far.test`` answers in 10 ms; while ``paused`` (a cut shorter than the timeout, a
    stopped process) every attempt waits, then is answered when it ends: late, not lost."""

    def __init__(self):
        self.paused = threading.Event()
        self.resumed = threading.Event()
        self.waiting = 0
        self.cond = threading.Condition()

    def post(self, url, payload, content_type, soap_action=None):
        if self.paused.is_set():
            with self.cond:
                self.waiting += 1
                self.cond.notify_all()
            self.resumed.wait(30)
        else:
            threading.Event().wait(0.01)  # the far host's round trip
        return TransportResponse(202, None, b"")

    def close(self):
        pass


def test_answers_that_waited_out_a_silence_do_not_shrink_the_hosts_limit():
    """A 5 s cut heals before its requests time out: they are all answered late. That is an
    outage the host was found silent in, not congestion: the limit it had grown to stays, so
    the backlog drains at it."""
    link = PausedLink()
    deliverer = Deliverer(link, DeliveryPolicy(workers=32, per_host=4, per_host_max=32,
                                               retries=9, backoff=0.05, probe_interval=0.05))
    try:
        deliverer.submit_many([job(url="http://far.test/n") for _ in range(400)])
        assert deliverer.drain(30)
        control = deliverer._limits["far.test"]
        grown = control.limit
        assert grown > 4  # answers of 10 ms with the limit used: it grew
        # a few more than the limit: all of them wait, and answer late; jobs waiting behind
        # them are what makes the host's silence a stall
        link.paused.set()
        deliverer.submit_many([job(url="http://far.test/n") for _ in range(grown + MAX_STALLED + 2)])
        with deliverer._cond:  # the host was found silent while its workers waited
            assert deliverer._cond.wait_for(
                lambda: (deliverer._hosts.get("far.test") is not None
                         and deliverer._hosts["far.test"].silent_at > float("-inf")), 20)
        link.paused.clear()
        link.resumed.set()
        assert deliverer.drain(30)
        assert control.limit >= grown, (control.limit, grown)
    finally:
        link.resumed.set()
        deliverer.close()


def test_an_attempt_begun_before_the_host_was_found_silent_spanned_the_silence():
    from subscription_manager.delivery_hosts import HostQueue
    host = HostQueue("far.test", HostQueue.new_limit(DeliveryPolicy(per_host=4)))
    assert not host.spanned_silence(5.0, now=10.0)  # never found silent
    host.stall(now=8.0)
    assert host.spanned_silence(5.0, now=10.0)      # began at 5, silent at 8: late news
    assert not host.spanned_silence(1.0, now=10.0)  # began at 9, after: a reading as any
