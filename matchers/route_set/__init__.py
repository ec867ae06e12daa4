"""RTreeRouteSet: the dispatcher's routing table, one summary per subscription server.

::

    routes = RTreeRouteSet(schema_element)            # or no config: schema from summaries
    routes.set_summary("server-1", engine.summary(0.5))
    routes.add_filter("server-2", FilterSpec(SUMMARY_DIALECT, summary.to_text()))
    routes.match(event)                 # -> ["server-1", ...]: servers whose summary holds it
    routes.route(point)                 # -> frozenset of server ids
    routes.route_batch(points)          # (m, d) -> list of m frozensets, one call
    routes.set_summary("server-3", None)  # no summary: every event goes to server-3
    routes.set_summary("server-1", precise, rectangles=10_000)  # for precision cuts
    routes.set_precision(0.3)           # route with every summary cut to 30%
    routes.set_precision(0.0)           # "no summary": every event to every server

Filter ids are server ids; a "filter" is the server's routing summary (dialect
:data:`~matchers.summary.SUMMARY_DIALECT`: an ``edn:Summary`` as the filter's element
content or as its text).  Adding a filter for a known server replaces its summary.
A summary with Bloom filters (:mod:`matchers.summary.bloom`) routes an event to its
server only when its boxes hold the event and its filters hold the event's values;
``describe()`` reports ``bloom_dims``, ``bloom_servers`` and ``bloom_false_positive_rate``.

Modules: :mod:`.matcher` (:class:`RTreeRouteSet`), :mod:`.table` (one immutable table per
precision, and the summary cuts it is built from: "Precision" there), :mod:`.routing` (the
hot path, its strategies and their calibration: "Structure" there), :mod:`.bitmaps` (rank
bitmaps, the fastest batch strategy) and :mod:`.wire` (a summary as a filter).
"""

from .matcher import RTreeRouteSet
from .routing import CALIBRATION_POINTS
from .table import NO_SUMMARY, PRECISE

__all__ = ["RTreeRouteSet", "CALIBRATION_POINTS", "NO_SUMMARY", "PRECISE"]
