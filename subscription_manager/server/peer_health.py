"""Which peers answer: a peer that failed to answer is left out of placement for a while
(five peer intervals), and back as soon as it is heard from again."""
from __future__ import annotations

import time

__all__ = ["PeerHealth"]


class PeerHealth:
    """Peers marked down until a deadline (``clock``: monotonic seconds)."""

    def __init__(self, peer_interval: float, *, clock=time.monotonic):
        self.down_for = 5 * peer_interval
        self.clock = clock
        self._down: dict[str, float] = {}

    def mark_down(self, peer: str) -> None:
        self._down[peer] = self.clock() + self.down_for

    def mark_up(self, peer: str) -> None:
        self._down.pop(peer, None)

    def is_down(self, peer: str) -> bool:
        until = self._down.get(peer)
        return until is not None and until > self.clock()
