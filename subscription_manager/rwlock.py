"""A readers-writer lock: matchers may be read (``match``) by many threads at once but must
not be mutated while anyone reads (the :class:`~matchers.Matcher` contract).

Writers are preferred (a waiting writer holds back new readers) so a steady stream of
publications cannot starve a Subscribe. The writer side is re-entrant for its owner, and the
owner may also take the read side.
"""
from __future__ import annotations

import contextlib
import threading

__all__ = ["RWLock"]


class RWLock:
    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._depth = 0
        self._waiting_writers = 0

    @contextlib.contextmanager
    def read(self):
        me = threading.get_ident()
        if self._writer == me:  # the writer already excludes everyone else
            yield
            return
        with self._cond:
            while self._writer is not None or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def write(self):
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                self._waiting_writers += 1
                try:
                    while self._writer is not None or self._readers:
                        self._cond.wait()
                finally:
                    self._waiting_writers -= 1
                self._writer = me
                self._depth = 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._writer = None
                    self._cond.notify_all()
