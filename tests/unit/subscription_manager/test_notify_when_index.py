"""The NotifyWhen index (seed 5.3.1) against a brute-force scan of the plain rule, and the
gate's decision inside a store transaction."""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from subscription_manager.notify_index import NotifyGate, NotifyIndex
from subscription_manager.notify_when import NotifyWhen
from subscription_manager.notify_state import NotifyState
from wsframework.store import Store

NS = (("q", "urn:quotes"),)


def random_condition(rng: random.Random) -> NotifyWhen:
    relative = rng.random() < 0.25
    delta = rng.choice([0.5, 1.0, 2.0, 5.0, rng.uniform(0.01, 20.0)])
    if relative:
        delta = min(delta, 100.0)
    tolerance = rng.choice([0.0, 0.0, delta, rng.uniform(0, delta), delta / 2])
    return NotifyWhen("/q:quote/q:price", NS, delta, relative, tolerance)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 60), steps=st.integers(1, 120))
def test_index_agrees_with_a_scan_of_the_plain_rule(seed, size, steps):
    rng = random.Random(seed)
    index = NotifyIndex()
    shadow: dict[str, tuple[NotifyWhen, float | None]] = {}
    value = rng.uniform(-50, 50)
    for i in range(size):
        cond = random_condition(rng)
        last = None if rng.random() < 0.2 else round(rng.uniform(-50, 50), rng.choice([0, 2]))
        index.add(f"s{i}", cond, last)
        shadow[f"s{i}"] = (cond, last)
    added = size
    for _ in range(steps):
        move = rng.random()
        if move < 0.08 and shadow:  # a subscription leaves
            sid = rng.choice(sorted(shadow))
            index.remove(sid)
            del shadow[sid]
        elif move < 0.16:  # one arrives (nothing notified yet, or L from the store)
            cond = random_condition(rng)
            last = None if rng.random() < 0.5 else value
            index.add(f"s{added}", cond, last)
            shadow[f"s{added}"] = (cond, last)
            added += 1
        # a random walk with jumps, some values repeated exactly
        value = rng.choice([value, value + rng.gauss(0, 3), value + rng.gauss(0, 30),
                            round(value)])
        candidates = None if rng.random() < 0.5 else {s for s in shadow if rng.random() < 0.7}
        expected = {s for s, (cond, last) in shadow.items()
                    if (candidates is None or s in candidates) and cond.fires(last, value)}
        assert index.scan(value) == {s for s, (c, last) in shadow.items() if c.fires(last, value)}
        assert set(index.reached(value)) == index.scan(value)
        assert set(index.notify(value, candidates)) == expected
        for sid in expected:
            shadow[sid] = (shadow[sid][0], value)
        assert {s: index.last(s) for s in shadow} == {s: last for s, (_, last) in shadow.items()}
        assert len(index) == len(shadow)


def test_tolerance_means_fewer_reindexings_on_a_random_walk():
    rng = random.Random(7)
    walk = [100.0]
    for _ in range(3000):
        walk.append(walk[-1] + rng.gauss(0, 0.5))
    counts = {}
    for tolerance in (0.0, 1.0):
        index = NotifyIndex()
        for i in range(400):
            index.add(f"s{i}", NotifyWhen("/q:p", NS, rng.choice([2.0, 3.0, 4.0]), False,
                                          tolerance), 100.0 + rng.uniform(-1, 1))
        notified = sum(len(index.notify(v)) for v in walk)
        counts[tolerance] = (index.reindexings, notified)
    assert counts[1.0][0] < counts[0.0][0] / 2, counts
    # the price: thresholds inside the "may" band notify earlier (here t is a third of
    # delta on average, so markedly more notifications; benchmarks/richer_notify.py)
    assert counts[0.0][1] < counts[1.0][1] < 2 * counts[0.0][1]


def test_index_reaches_only_the_affected_keys():
    index = NotifyIndex()
    for i in range(10_000):
        index.add(f"s{i}", NotifyWhen("/q:p", NS, 1.0 + i % 50), 100.0 + (i % 10) / 100)
    assert index.reached(100.5) == set()
    reached = index.reached(150.0)
    assert reached == index.scan(150.0) and 0 < len(reached) < 10_000


def _store(tmp_path):
    store = Store(tmp_path / "state.db")
    return store, NotifyState(store)


class _Sub:
    def __init__(self, sid, cond, topic="t"):
        self.id, self.notify_when, self.topic_uid = sid, cond, topic


def test_gate_records_l_in_the_callers_transaction(tmp_path):
    store, state = _store(tmp_path)
    gate = NotifyGate()
    cond = NotifyWhen("/q:p", NS, 5.0)
    subs = [_Sub("a", cond), _Sub("b", cond), _Sub("plain", None)]
    values = {cond.value_key: 100.0}
    with store.transaction() as conn:
        assert gate.decide(conn, subs, values) == {"a", "b", "plain"}
    assert state.last_value("a") == (100.0, 0)
    with store.transaction() as conn:
        assert gate.decide(conn, subs, {cond.value_key: 103.0}) == {"plain"}
        assert gate.decide(conn, subs[:1], {cond.value_key: 106.0}) == {"a"}
        assert gate.decide(conn, subs, {cond.value_key: None}) == {"plain"}
    assert state.last_value("a") == (106.0, 1) and state.last_value("b") == (100.0, 1)
    # a transaction that rolls back: the caller resets the gate, the store never saw it
    try:
        with store.transaction() as conn:
            gate.decide(conn, subs, {cond.value_key: 200.0})
            raise RuntimeError("rolled back")
    except RuntimeError:
        gate.reset()
    assert state.last_value("a") == (106.0, 1)
    other = NotifyGate()  # another process: catches up from the store
    with store.transaction() as conn:
        assert other.decide(conn, subs, {cond.value_key: 95.0}) == {"plain", "a", "b"}
    with store.transaction() as conn:  # the first gate learns the new L from the store
        assert gate.decide(conn, subs, {cond.value_key: 99.0}) == {"plain"}
    assert state.last_value("b") == (95.0, 1)
    assert gate.counts["notify_when_unnumbered"] == 2


def test_gate_uses_the_direct_check_for_few_candidates_with_the_same_answer(tmp_path):
    store, state = _store(tmp_path)
    gate = NotifyGate()
    cond = NotifyWhen("/q:p", NS, 5.0)
    subs = [_Sub(f"s{i}", cond) for i in range(40)]
    with store.transaction() as conn:
        gate.load(conn, subs)
        assert gate.decide(conn, subs, {cond.value_key: 100.0}) == {s.id for s in subs}
        # two candidates of forty: checked one by one
        assert gate.decide(conn, subs[:2], {cond.value_key: 110.0}) == {"s0", "s1"}
        assert gate.decide(conn, subs, {cond.value_key: 107.0}) == {s.id for s in subs[2:]}
    assert state.last_value("s0") == (110.0, 0) and state.last_value("s5") == (107.0, 0)
