"""How many deliveries one target host may have in flight: an AIMD limit fed latencies.

Theory of operation. One HTTP request per notification caps a host at ``limit / RTT``
notifications per second: 8 requests in flight to a host 40 ms away make 200/s whatever
the sink could take. :class:`AdaptiveLimit` raises the limit while the host's answers stay
as fast as the fastest seen (the round trip, not a queue at the sink) and lowers it when they
slow down or fail, so a far host gets enough requests in flight to fill its round trip and
an overloaded one gets fewer:

* readings come in windows of ``max(limit, min_window)`` answers; a window counts only if
  the host was using its limit (some attempt started with ``limit`` in flight): an idle
  host's limit says nothing about what it could take and is left as it is;
* the baseline is the fastest answer seen; when answers stay slow with the limit already at
  its floor, the path itself got slower (there is no queue of ours left to blame): that
  window's fastest answer becomes the baseline and slow start begins again (a new path's
  room is unknown: a link whose round trip grew from 80 to 340 ms needs four times the
  requests in flight for the same rate);
* an answer is *slow* when it exceeds ``tolerance`` times the baseline and the baseline
  plus ``min_excess`` seconds. A window whose fastest answer is slow is congestion: a queue
  at the host delays every answer. The limit is multiplied by ``decrease`` (never below
  ``floor``), and from there grows by one a window;
* a window whose mean is slow but whose fastest answer is not holds the limit: packet loss
  delays the answers it hits by a retransmission and leaves the others as fast as ever, so
  a lossy link is not taken for a host with too many requests (measured: under 30% loss
  every window's mean was slow, the limit fell to its floor and after the heal the backlog
  drained at the floor's rate for seconds);
* otherwise, if answers take at least ``grow_above`` seconds (a round trip worth filling),
  the limit grows: doubled each window while below the threshold (slow start: ``ceiling``
  at first), then by one each window (additive increase), up to ``ceiling``. A host that
  answers faster keeps its limit: there the floor already carries thousands a second and
  more requests in flight only cost the sender CPU (measured on loopback: a 10 s outage's
  backlog drained in 4 s at 8 in flight, in 11 s when the limit grew to 96);
* a failed attempt (no answer: a timeout, a refused or broken connection) leaves the limit
  and the threshold as they are: no answer tells of an outage or a cut link, not of a host
  with too many requests (that shows as slower answers, above), and while it lasts the
  deliverer sends one attempt at a time anyway (the host is suspect). When the host answers
  again its backlog goes at the limit it had, not from the floor up, and the first window
  after the outage is never taken for congestion: its requests open new connections (one
  round trip more each) after the old ones broke.

A pure state machine: it is fed readings (:meth:`observe`), keeps no clock and starts no
thread; the deliverer calls it under its own lock.
"""
from __future__ import annotations

__all__ = ["AdaptiveLimit"]


class AdaptiveLimit:
    """The in-flight limit of one host (see the module docstring)."""

    __slots__ = ("floor", "ceiling", "tolerance", "min_excess", "decrease", "min_window",
                 "grow_above", "_limit", "_threshold", "_baseline", "_window_min", "_count",
                 "_total", "_saturated", "_reconnecting", "last_answer")

    def __init__(self, initial: int, *, floor: int = 1, ceiling: int | None = None,
                 tolerance: float = 2.0, min_excess: float = 0.002, decrease: float = 0.75,
                 min_window: int = 8, grow_above: float = 0.002):
        ceiling = initial if ceiling is None else ceiling
        if not 1 <= floor <= initial <= ceiling:
            raise ValueError("need 1 <= floor <= initial <= ceiling")
        if tolerance <= 1 or min_excess < 0 or not 0 < decrease < 1 or min_window < 1:
            raise ValueError("need tolerance > 1, min_excess >= 0, 0 < decrease < 1, "
                             "min_window >= 1")
        self.floor = floor
        self.ceiling = ceiling
        self.tolerance = tolerance
        self.min_excess = min_excess
        self.decrease = decrease
        self.min_window = min_window
        self.grow_above = grow_above
        self._limit = float(initial)
        self._threshold = float(ceiling)  # slow start below it
        self._baseline: float | None = None
        self.last_answer: float | None = None  # seconds the latest answer took
        self._reconnecting = False  # the window after an outage (new connections)
        self._reset_window()

    def _reset_window(self) -> None:
        self._window_min: float | None = None
        self._count = 0
        self._total = 0.0
        self._saturated = False

    @property
    def limit(self) -> int:
        """Deliveries the host may have in flight now."""
        return int(self._limit)

    @property
    def baseline(self) -> float | None:
        """The fastest recent answer (seconds), or None before the first window."""
        return self._baseline

    def observe(self, seconds: float, *, answered: bool = True, in_flight: int = 0) -> int:
        """One attempt ended after ``seconds``; ``answered`` is false when no answer came
        (a transport error); ``in_flight`` is how many attempts to the host were under way
        when it started (itself included). Returns the limit after it."""
        if not answered:
            self._reconnecting = True
            self._reset_window()
            return self.limit
        self.last_answer = seconds
        if in_flight >= self.limit:
            self._saturated = True
        self._count += 1
        self._total += seconds
        if self._window_min is None or seconds < self._window_min:
            self._window_min = seconds
        if self._count >= max(self.limit, self.min_window):
            self._close_window()
        return self.limit

    def _close_window(self) -> None:
        mean = self._total / self._count
        fastest = self._window_min
        self._baseline = fastest if self._baseline is None else min(self._baseline, fastest)
        reconnecting, self._reconnecting = self._reconnecting, False
        if not reconnecting and self._slow(fastest):
            if self._limit <= self.floor:  # slow at the floor: the path is slower now
                self._baseline = fastest
                self._threshold = float(self.ceiling)
            else:
                self._shrink()
        elif not reconnecting and self._slow(mean):
            pass  # some answers slow, not all: loss, not a queue; hold the limit
        elif self._saturated and mean >= self.grow_above:
            if self._limit < self._threshold:
                self._limit = min(self._threshold, self._limit * 2)
            else:
                self._limit = min(float(self.ceiling), self._limit + 1)
        self._reset_window()

    def _slow(self, seconds: float) -> bool:
        baseline = self._baseline
        return seconds > baseline * self.tolerance and seconds > baseline + self.min_excess

    def _shrink(self) -> None:
        self._limit = max(float(self.floor), self._limit * self.decrease)
        self._threshold = self._limit
