"""The Publish messages a root dispatcher accepted lately, by topic and ``wsa:MessageID``, so
that a publisher's retry of a message whose answer was lost is acknowledged without being
published twice.

A publisher (:class:`wsframework.publisher.FailoverPublisher`) sends a message again, with
the same MessageID, when the connection failed or the answer did not come: on a lossy link
the first request may have been accepted all the same. :meth:`RecentPublications.begin`
tells the dispatcher what to do with a Publish:

* a MessageID not seen in the window: route it (:meth:`begin` returns a claim; the
  dispatcher calls :meth:`finish` with whether it was accepted, i.e. routed and, with the
  durable log, committed);
* one accepted within the window: a duplicate (:data:`DUPLICATE`): answer as accepted,
  route nothing;
* one still being routed (the retry overtook the first request): wait for it, at most
  ``wait`` seconds; accepted -> a duplicate, refused -> route it now, still going ->
  :class:`StillInProgress` (a Receiver fault: the publisher tries again later).

What it does not cover: the window is this process's memory, so a dispatcher restarted
between the first request and the retry routes the retry again (at least once, as before),
and two roots never know each other's messages (a failover to another root after a lost
answer may publish twice: the publisher lists that root as in doubt). The key is the topic
and the MessageID, not the body: a publisher that reuses a MessageID for another event
within the window loses that event (WS-Addressing requires a MessageID to be unique).

Bounds: at most ``capacity`` messages are remembered (the oldest forgotten first) for at
most ``window`` seconds; a MessageID longer than :data:`MAX_MESSAGE_ID` characters is routed
but never remembered.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

__all__ = ["RecentPublications", "DUPLICATE", "StillInProgress", "MAX_MESSAGE_ID"]

MAX_MESSAGE_ID = 256


class StillInProgress(Exception):
    """A message with this MessageID is being routed by another request."""


class _Claim:
    __slots__ = ("key", "state", "at")

    def __init__(self, key, at: float):
        self.key = key
        self.state = "routing"  # -> "accepted" | "refused"
        self.at = at


DUPLICATE = object()  # begin()'s answer for a message accepted already


class RecentPublications:
    """Accepted Publish messages by (topic, MessageID); thread-safe."""

    def __init__(self, *, window: float = 300.0, capacity: int = 100_000, wait: float = 5.0,
                 clock=time.monotonic):
        if window < 0 or capacity < 1 or wait < 0:
            raise ValueError("window and wait must be >= 0, capacity >= 1")
        self.window = window
        self.capacity = capacity
        self.wait = wait
        self._clock = clock
        self._claims: OrderedDict[tuple[str, str], _Claim] = OrderedDict()
        self._cond = threading.Condition()
        self.duplicates = 0  # messages answered as accepted without routing them again

    def begin(self, topic: str, message_id: str | None):
        """A claim to route the message (pass it to :meth:`finish`), :data:`DUPLICATE`, or
        None when the message cannot be recognized (no MessageID, too long, window 0)."""
        if not message_id or len(message_id) > MAX_MESSAGE_ID or self.window <= 0:
            return None
        key = (topic, message_id)
        with self._cond:
            now = self._clock()
            self._forget_old(now)
            deadline = now + self.wait
            while (claim := self._claims.get(key)) is not None:
                if claim.state == "accepted" and now - claim.at <= self.window:
                    self.duplicates += 1
                    return DUPLICATE
                if claim.state != "routing":  # accepted, but longer ago than the window
                    break
                # the first request is still routing it: its outcome decides (a refused
                # one is removed, and the loop looks again: another retry may own it now)
                if not self._cond.wait_for(lambda: claim.state != "routing",
                                           max(0.0, deadline - self._clock())):
                    raise StillInProgress(message_id)
                now = self._clock()
            claim = _Claim(key, now)
            self._claims[key] = claim
            self._claims.move_to_end(key)
            while len(self._claims) > self.capacity:
                self._claims.popitem(last=False)
            return claim

    def finish(self, claim, accepted: bool) -> None:
        """The routing of ``claim``'s message ended: ``accepted`` (the publisher is answered
        2xx) or not (a fault: a retry routes it again)."""
        if claim is None or claim is DUPLICATE:
            return
        with self._cond:
            claim.state = "accepted" if accepted else "refused"
            claim.at = self._clock()
            if not accepted and self._claims.get(claim.key) is claim:
                del self._claims[claim.key]
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._claims)

    def _forget_old(self, now: float) -> None:
        claims = self._claims
        while claims:
            key, oldest = next(iter(claims.items()))
            if oldest.state == "routing" or now - oldest.at <= self.window:
                return
            del claims[key]
