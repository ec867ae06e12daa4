"""A discrete-event simulator of a wide-area broker network (the Gryphon link-matching paper's
section 4.1), outside the product: the benchmarks and the tests run it, and no product package
imports it (import-linter holds that).

Virtual time, one heapq of events (:mod:`.broker_network`); brokers with an incoming queue and a CPU
that spends a per-message cost plus a cost per matching step; links with one-way delays;
Poisson publishers.  :mod:`.topology` builds Gryphon's 39-broker network and the shortest-path
spanning tree of each publisher broker; :mod:`.workload` draws section 4.1's subscriptions
and events; :mod:`.routing` decides where a broker forwards an event with the real routing
code (flooding, summaries in :class:`matchers.route_set.RTreeRouteSet`, link matching with
:mod:`matchers.pst` when it is installed, any other router registered by name)."""

from .broker_network import BrokerNetwork, Kernel, SimResult
from .routing import ROUTERS, register_router
from .topology import Topology, gryphon_topology
from .workload import Workload, make_workload

__all__ = ["Kernel", "BrokerNetwork", "SimResult", "Topology", "gryphon_topology",
           "Workload", "make_workload", "ROUTERS", "register_router"]
