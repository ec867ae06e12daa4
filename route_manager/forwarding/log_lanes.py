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
from typing import Callable

from .log import EventLog

log = logging.getLogger(__name__)

__all__ = ["LogLanes", "MAX_LANES", "NoFreeLane"]

MAX_LANES = 64


class NoFreeLane(RuntimeError):
    """Every one of ``max_lanes`` lanes is held by a live process."""


class _Adopted:
    """A lane this process holds only to deliver what it owes."""

    def __init__(self, index: int, event_log: EventLog, forwarder):
        self.index = index
        self.log = event_log
        self.forwarder = forwarder

    def close(self) -> None:
        self.forwarder.close()
        self.log.close()


class LogLanes:
    """``main_store``: lane 0's store; ``open_store(k)``: the store of lane ``k`` >= 1
    (opened once, kept until :meth:`close`); ``lane_exists(k)``: whether lane ``k`` >= 1 was
    ever made; ``open_log(store)``: an :class:`EventLog` on a store (raises ``RuntimeError``
    while another process holds it); ``forwarder_for(event_log)``: a forwarder delivering an
    adopted lane's copies."""

    def __init__(self, main_store, *, open_store: Callable[[int], object],
                 lane_exists: Callable[[int], bool], open_log: Callable[[object], EventLog],
                 forwarder_for: Callable[[EventLog], object], max_lanes: int = MAX_LANES):
        self._stores = {0: main_store}
        self._open_store = open_store
        self._lane_exists = lane_exists
        self._open_log = open_log
        self._forwarder_for = forwarder_for
        self.max_lanes = max_lanes
        self.own_index: int | None = None
        self.adopted: dict[int, _Adopted] = {}
        self.adoptions = 0  # lanes taken over so far
        self._lock = threading.Lock()  # sweeps and close

    def _lane_store(self, index: int):
        store = self._stores.get(index)
        if store is None:
            store = self._stores[index] = self._open_store(index)
        return store

    def claim(self) -> EventLog:
        """The log of the lowest lane no live process holds (made if it never was)."""
        for index in range(self.max_lanes):
            try:
                event_log = self._open_log(self._lane_store(index))
            except RuntimeError:
                continue
            self.own_index = index
            if index:
                log.info("durable log: lane %d (dispatcher id %s)", index, event_log.dispatcher_id)
            return event_log
        raise NoFreeLane(f"every one of the durable log's {self.max_lanes} lanes is held by a "
                         "live process: run fewer dispatcher processes on this store")

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
                if lane.log.events == 0 or lane.log.lost:
                    lane.close()
                    del self.adopted[index]
                    log.info("durable log: adopted lane %d %s; released", index,
                             "taken by another process" if lane.log.lost
                             else "delivered everything")
            for index in range(self.max_lanes):
                if index == self.own_index or index in self.adopted:
                    continue
                if index and index not in self._stores and not self._lane_exists(index):
                    break
                self._try_adopt(index, servers)

    def _try_adopt(self, index: int, servers: dict[str, str]) -> None:
        try:
            event_log = self._open_log(self._lane_store(index))
        except RuntimeError:  # a live process holds it
            return
        if event_log.events == 0:
            event_log.close()
            return
        lane = _Adopted(index, event_log, self._forwarder_for(event_log))
        for name, address in servers.items():
            lane.forwarder.ensure(name, address)
        self.adopted[index] = lane
        self.adoptions += 1
        log.warning("durable log: adopted lane %d, left by a process that is gone, with %d "
                    "undelivered copies", index, event_log.events)

    def figures(self) -> dict[str, int]:
        return {"log.lane": self.own_index if self.own_index is not None else -1,
                "log.lanes_adopted": len(self.adopted), "log.lane_adoptions": self.adoptions,
                "log.adopted_events": sum(lane.log.events for lane in self.adopted.values())}

    def close(self) -> None:
        """Release the adopted lanes and close the lanes' stores (lane 0's is the service's;
        this process's own log is closed by its owner first)."""
        with self._lock:
            for lane in self.adopted.values():
                lane.close()
            self.adopted.clear()
            for index, store in list(self._stores.items()):
                if index:
                    store.close()
            self._stores = {0: self._stores[0]}
