"""The subscription lifecycle table, in memory and as conditional store transitions."""
from __future__ import annotations

import itertools

import pytest

from subscription_manager.lifecycle import (TERMINAL, TRANSITIONS, Event, IllegalTransition,
                                            Lifecycle, State, next_state, sources)
from subscription_manager.versions import END_DELIVERY_FAILURE
from tests.support.eventing import Harness

LEGAL = {
    (None, Event.SUBSCRIBE): State.ACTIVE,
    (State.ACTIVE, Event.RENEW): State.ACTIVE,
    (State.ACTIVE, Event.EXPIRE): State.EXPIRED,
    (State.ACTIVE, Event.UNSUBSCRIBE): State.UNSUBSCRIBED,
    (State.ACTIVE, Event.END): State.ENDED,
}


def test_the_table_is_exactly_the_legal_transitions():
    assert TRANSITIONS == LEGAL


@pytest.mark.parametrize("state,event", list(itertools.product([None, *State], Event)))
def test_every_state_event_pair(state, event):
    lifecycle = Lifecycle(state)
    if (state, event) in LEGAL:
        assert lifecycle.apply(event) is LEGAL[(state, event)]
        assert next_state(state, event) is LEGAL[(state, event)]
    else:
        with pytest.raises(IllegalTransition) as info:
            lifecycle.apply(event)
        assert lifecycle.state is state  # unchanged
        assert info.value.state is state and info.value.event is event


def test_terminal_states_have_no_way_out():
    assert TERMINAL == {State.EXPIRED, State.UNSUBSCRIBED, State.ENDED}
    for state, event in itertools.product(TERMINAL, Event):
        with pytest.raises(IllegalTransition):
            next_state(state, event)


def test_sources_are_what_conditional_updates_allow():
    assert sources(Event.RENEW) == ("active",)
    assert sources(Event.END) == ("active",)
    assert sources(Event.SUBSCRIBE) == ()


def test_store_transitions_are_conditional(tmp_path):
    h = Harness(tmp_path)
    store = h.manager.store
    try:
        sub = h.subscribe("2011", expires="PT1H")
        now = h.manager.clock()
        ended = store.end(sub.id, END_DELIVERY_FAILURE)
        assert ended.status is State.ENDED and ended.end_reason == END_DELIVERY_FAILURE
        before = store.get(sub.id)
        # Only the first change wins; the losers see None and the row does not move.
        assert store.end(sub.id, "again") is None
        assert store.renew(sub.id, now + 10, "duration", now) is None
        assert store.unsubscribe(sub.id, now) is None
        assert store.get(sub.id) == before
        assert store.get(sub.id).end_reason == END_DELIVERY_FAILURE
    finally:
        h.close()


def test_each_change_bumps_the_generation_once_and_noops_do_not(tmp_path):
    h = Harness(tmp_path)
    store = h.manager.store
    try:
        start = store.generation()
        sub = h.subscribe("2011", expires="PT1H")
        assert store.generation() == start + 1
        assert store.expire_due(h.manager.clock()) == []
        assert store.generation() == start + 1
        h.client("2011").unsubscribe(sub)
        assert store.generation() == start + 2
        assert store.get(sub.id).seq == start + 2
    finally:
        h.close()
