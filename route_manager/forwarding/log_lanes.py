"""The durable log in *lanes*, so that several processes (gunicorn workers, dispatcher hosts
sharing one PostgreSQL database) can each log the events they accept.

A lane is a whole :class:`~.log.EventLog` in a store of its own: lane 0 is the dispatcher's
main store (a dispatcher of one process is what it always was), lane ``k`` the store
``lane_store(k)`` opens (a file beside the main one, or a schema beside the main one on
PostgreSQL). Each lane has its own dispatcher id, so its sequence numbers are its own and a
server keeps its position per lane; nothing is shared between lanes but the servers they
deliver to.

* **Claiming.** A process takes the lowest lane no live process holds (the log's exclusive
  hold: a ``flock``, or a PostgreSQL advisory lock, released when the holder dies). A
  worker restarted after ``kill -9`` so takes back the lane its predecessor left.
* **Adopting.** A lane can be left with undelivered copies and no holder: a reload starts
  new workers before the old ones stop, and a host can be lost. Every process looks for
  such lanes every ``interval`` seconds (:meth:`LogLanes.sweep`), takes the hold of one it
  finds, resends its copies through a forwarder of its own (same seqs, same dispatcher id:
  a server skips what it has), and lets it go once nothing is owed.

Lanes are dense (a lane is made only when every lower one is held), so the search stops at
the first lane that was never made, and ``max_lanes`` bounds them.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from wsframework.store import HeldElsewhere, Store, store_exists

from .log import EventLog

log = logging.getLogger(__name__)

__all__ = ["LogLanes", "MAX_LANES", "NoFreeLane"]

MAX_LANES = 64


class NoFreeLane(RuntimeError):
    """Every one of ``max_lanes`` lanes is held by a live process."""


class _Adopted:
    """A lane this process holds only to deliver what it owes."""

    def __init__(self, index: int, event_log: EventLog, store):
        self.index = index
        self.log = event_log
        self.store = store
        self.forwarder = None

    def owes_nothing(self) -> bool:
        """Every copy acknowledged (read from the store: the in-memory count is only a
        hint, and a lane let go too early would wait for the next sweep to be adopted)."""
        return self.log.events <= 0 and not self.log.copies()

    def close(self, close_store) -> None:
        if self.forwarder is not None:
            self.forwarder.close(timeout=0)
        self.log.close()
        close_store(self.store)


class LogLanes:
    """``main_store``: lane 0's store; ``lane_path(k)``: where lane ``k`` >= 1 is stored (a
    file path, which :func:`~wsframework.store.use_postgresql` may put in a schema);
    ``open_log(store)``: an :class:`EventLog` on a store (raises
    :class:`~wsframework.store.HeldElsewhere` while another process holds it);
    ``forwarder_for(event_log)``: a forwarder delivering an adopted lane's copies.

    A lane's store is opened only to hold it: whether another process holds a lane is asked
    of the main store (:meth:`~wsframework.store.Store.hold_taken`), so a process keeps
    connections only for its own lane and the ones it adopted."""

    def __init__(self, main_store, *, lane_path: Callable[[int], Path],
                 open_log: Callable[[object], EventLog],
                 forwarder_for: Callable[[EventLog], object], max_lanes: int = MAX_LANES):
        self.main_store = main_store
        self._lane_path = lane_path
        self._open_log = open_log
        self._forwarder_for = forwarder_for
        self.max_lanes = max_lanes
        self.own_index: int | None = None
        self._own_store = None
        self.adopted: dict[int, _Adopted] = {}
        self.adoptions = 0  # lanes taken over so far
        self._lock = threading.Lock()  # claims, sweeps and close

    def _path(self, index: int) -> str:
        return self.main_store.path if index == 0 else str(self._lane_path(index))

    def _exists(self, index: int) -> bool:
        return index == 0 or store_exists(self._path(index))

    def _hold(self, index: int) -> tuple[EventLog, object] | None:
        """(the log of lane ``index``, its store), held by this process; None when another
        process holds it."""
        if self.main_store.hold_taken(self._path(index), "log"):
            return None
        store = self.main_store if index == 0 else Store(self._path(index))
        try:
            return self._open_log(store), store
        except HeldElsewhere:  # taken between the look and the hold
            self._close_store(store)
            return None
        except BaseException:
            self._close_store(store)
            raise

    def _close_store(self, store) -> None:
        if store is not self.main_store:
            store.close()

    def claim(self) -> EventLog:
        """The log of the lowest lane no live process holds (made if it never was)."""
        with self._lock:
            for index in range(self.max_lanes):
                if index in self.adopted:  # this process holds it already: take it over
                    lane = self.adopted.pop(index)
                    lane.forwarder.close(timeout=0)
                    held = lane.log, lane.store
                else:
                    held = self._hold(index)
                if held is None:
                    continue
                event_log, self._own_store = held
                self.own_index = index
                if index:
                    log.info("durable log: lane %d (dispatcher id %s)", index,
                             event_log.dispatcher_id)
                return event_log
        raise NoFreeLane(f"every one of the durable log's {self.max_lanes} lanes is held by a "
                         "live process: run fewer dispatcher processes on this store")

    def release_own(self, event_log: EventLog) -> None:
        """This process stops logging in its lane (closed, or taken over by another)."""
        with self._lock:
            event_log.close()
            if self._own_store is not None:
                self._close_store(self._own_store)
            self._own_store = None
            self.own_index = None

    def sweep(self, servers: dict[str, str]) -> None:
        """Deliver through every adopted lane to ``servers`` (name -> address, the nodes
        registered now), let go of the lanes that owe nothing any more, and adopt the lanes
        that owe copies and have no holder."""
        with self._lock:
            for index, lane in list(self.adopted.items()):
                for name, address in servers.items():
                    lane.forwarder.ensure(name, address)
                if not lane.log.lost:
                    lane.log.expire()
                if lane.log.lost or lane.owes_nothing():
                    lane.close(self._close_store)
                    del self.adopted[index]
                    log.info("durable log: adopted lane %d %s; released", index,
                             "taken by another process" if lane.log.lost
                             else "delivered everything")
            for index in range(self.max_lanes):
                if index == self.own_index or index in self.adopted:
                    continue
                if not self._exists(index):
                    break
                self._try_adopt(index, servers)

    def _try_adopt(self, index: int, servers: dict[str, str]) -> None:
        held = self._hold(index)
        if held is None:
            return
        event_log, store = held
        lane = _Adopted(index, event_log, store)
        if lane.owes_nothing():
            lane.close(self._close_store)
            return
        try:
            lane.forwarder = self._forwarder_for(event_log)
            for name, address in servers.items():
                lane.forwarder.ensure(name, address)
        except BaseException:  # let the lane go: a later sweep, here or elsewhere, retries
            lane.close(self._close_store)
            raise
        self.adopted[index] = lane
        self.adoptions += 1
        log.warning("durable log: adopted lane %d, left by a process that is gone, with %d "
                    "undelivered copies", index, event_log.events)

    def figures(self) -> dict[str, int]:
        adopted = list(self.adopted.values())
        return {"log.lane": self.own_index if self.own_index is not None else -1,
                "log.lanes_adopted": len(adopted), "log.lane_adoptions": self.adoptions,
                "log.adopted_events": sum(max(0, lane.log.events) for lane in adopted)}

    def close(self) -> None:
        """Release the adopted lanes and close their stores (this process's own log is
        released by its owner, :meth:`release_own`)."""
        with self._lock:
            for lane in self.adopted.values():
                lane.close(self._close_store)
            self.adopted.clear()
