"""One worker thread per upstream dispatcher (a *lane*): the calls to one upstream run on its
own lane, in the order submitted, so an upstream that hangs (a cut link drops every packet:
each call waits for its connect or read timeout) delays only its own calls, never another
upstream's.

A job still waiting for its turn absorbs a later job of the same kind (``merge``), so a lane
stuck in a hung call holds at most one waiting job per kind and, once the call returns,
catches up with the latest work instead of a backlog of rounds.

Callers wait for their jobs as long as they choose (:func:`finished`): a synchronous caller
(a test, a one-off step) waits for all of them; a periodic loop waits for none and lets each
lane report through its own callbacks.

Plain ``threading`` objects: under gunicorn's gevent worker they are monkey-patched into
greenlets, and a lane blocked on a socket yields to the others.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)

__all__ = ["Job", "Lane", "finished"]


class Job:
    """One unit of work on a lane: ``run(payload)``; ``result`` is set once ``done`` is
    (None when it raised or the lane closed before running it)."""

    def __init__(self, kind: str, payload: Any, run: Callable[[Any], Any]):
        self.kind = kind
        self.payload = payload
        self.run = run
        self.result: Any = None
        self.done = threading.Event()

    def finish(self, result: Any) -> None:
        self.result = result
        self.done.set()


class Lane:
    def __init__(self, name: str):
        self.name = name
        self._cond = threading.Condition()
        self._waiting: list[Job] = []
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, kind: str, payload: Any, run: Callable[[Any], Any],
               merge: Callable[[Any, Any], Any] | None = None) -> Job:
        """Queue ``run(payload)``. When a job of ``kind`` is still waiting, ``payload`` is
        folded into it (``merge(waiting, new)``; without ``merge`` the new payload replaces
        the waiting one) and that job is returned: its result answers both callers."""
        with self._cond:
            if self._closed:
                job = Job(kind, payload, run)
                job.finish(None)
                return job
            for job in self._waiting:
                if job.kind == kind:
                    job.payload = merge(job.payload, payload) if merge else payload
                    job.run = run
                    return job
            job = Job(kind, payload, run)
            self._waiting.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=f"edn-lane {self.name}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
            return job

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._waiting.pop(0)
            try:
                result = job.run(job.payload)
            except Exception:
                log.exception("%s: %s failed", self.name, job.kind)
                result = None
            job.finish(result)

    def close(self, timeout: float | None = None) -> None:
        """Stop after the call under way (its job still finishes); waiting jobs finish with
        None at once."""
        with self._cond:
            self._closed = True
            dropped, self._waiting = self._waiting, []
            self._cond.notify_all()
            thread = self._thread
        for job in dropped:
            job.finish(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


def finished(jobs: Iterable[Job], wait: float | None) -> list[Job]:
    """The jobs done within ``wait`` seconds (None: wait for every one), in the order given."""
    jobs = list(jobs)
    deadline = None if wait is None else time.monotonic() + wait
    for job in jobs:
        if deadline is None:
            job.done.wait()
        elif not job.done.wait(max(0.0, deadline - time.monotonic())):
            break
    return [job for job in jobs if job.done.is_set()]
