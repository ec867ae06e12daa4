"""The subscription lifecycle, as one table.

Theory of operation
-------------------
A subscription is born ``active`` by Subscribe and stays ``active`` through any number of
Renews. It leaves ``active`` exactly once, for one of three terminal states:

* ``expired``      -- its granted expiry passed (the sweeper notices; no SubscriptionEnd is
                      sent: the subscriber knew the deadline);
* ``unsubscribed`` -- the subscriber asked (Unsubscribe);
* ``ended``        -- the source ended it and says why in a SubscriptionEnd to EndTo
                      (DeliveryFailure, SourceShuttingDown, SourceCancelling).

Nothing leaves a terminal state. Every change is applied in the durable store as a
*conditional* UPDATE (``... WHERE status IN (sources of the event)``) so that when several
worker processes race (two sweepers, a renew against an unsubscribe, two workers noticing a
dead sink) exactly one of them wins, and only the winner sends a SubscriptionEnd: the store
derives those UPDATEs from the table (:func:`next_state`, :func:`sources`). :class:`Lifecycle`
walks one state through the same table; an illegal event raises :class:`IllegalTransition`
and leaves the state unchanged.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["State", "Event", "TRANSITIONS", "IllegalTransition", "next_state", "sources",
           "Lifecycle", "TERMINAL"]


class State(str, enum.Enum):
    ACTIVE = "active"
    EXPIRED = "expired"
    UNSUBSCRIBED = "unsubscribed"
    ENDED = "ended"


class Event(str, enum.Enum):
    SUBSCRIBE = "subscribe"
    RENEW = "renew"
    EXPIRE = "expire"
    UNSUBSCRIBE = "unsubscribe"
    END = "end"


# (state before, event) -> state after. ``None`` is "no subscription yet".
TRANSITIONS: dict[tuple[State | None, Event], State] = {
    (None, Event.SUBSCRIBE): State.ACTIVE,
    (State.ACTIVE, Event.RENEW): State.ACTIVE,
    (State.ACTIVE, Event.EXPIRE): State.EXPIRED,
    (State.ACTIVE, Event.UNSUBSCRIBE): State.UNSUBSCRIBED,
    (State.ACTIVE, Event.END): State.ENDED,
}

TERMINAL = frozenset(State) - {State.ACTIVE}


class IllegalTransition(Exception):
    def __init__(self, state: State | None, event: Event):
        self.state = state
        self.event = event
        super().__init__(f"cannot {event.value} a subscription that is "
                         f"{state.value if state is not None else 'not created'}")


def next_state(state: State | None, event: Event) -> State:
    """The state after ``event``; :class:`IllegalTransition` when the table has no entry."""
    try:
        return TRANSITIONS[(State(state) if state is not None else None, Event(event))]
    except KeyError:
        raise IllegalTransition(state, Event(event)) from None


def sources(event: Event) -> tuple[str, ...]:
    """The states ``event`` may leave, as stored values (for conditional UPDATEs)."""
    return tuple(sorted(s.value for (s, e) in TRANSITIONS if e is Event(event) and s is not None))


@dataclass
class Lifecycle:
    """One subscription's state, advanced only along :data:`TRANSITIONS`."""

    state: State | None = None

    def apply(self, event: Event) -> State:
        self.state = next_state(self.state, event)  # raises before assigning
        return self.state

    @property
    def is_active(self) -> bool:
        return self.state is State.ACTIVE
