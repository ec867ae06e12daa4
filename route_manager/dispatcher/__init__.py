"""The EDN dispatcher (paper sections II, III-B, V-A): summary-based event routing::

    service = build_dispatcher(ServiceConfig(base_url, data_dir, token, role="dispatcher",
                                             settings={"link_mbps": "80"}))
    service.dispatcher.stats()          # the figures of GetStats

``edn serve dispatcher`` runs it (entry point ``route_manager.dispatcher:build_dispatcher``).

The dispatcher's route table is its ``topics`` namespace: one route entry per topic, bound
to an ``RTreeRouteSet`` that holds one routing summary per subscription server. A published
event (a SOAP message to ``{dispatcher}/topics/T``, or an ``edn:EventBatch`` of events) is
matched against the summaries and forwarded once to every server whose summary contains it,
through per-server channels (:mod:`route_manager.forwarding`) so that no server stalls the
others.

==============  ==============================================================================
module          what lives there
==============  ==============================================================================
``core``        :class:`Dispatcher`: servers, summaries, the hot path (publish -> route ->
                forward, backpressure); :func:`build_dispatcher`, the role
``tables``      the durable state (SQLite, the service store): servers, the latest summary
                of every server per route (with its generation), topics
``admin``       the admin operations (topics across the network, membership, UpdateSummary,
                GetStats, Configure)
``control``     precision, the monitor thread and self-tuning
``stats``       the GetStats figures and the INFO line
``settings``    :class:`DispatcherSettings`
==============  ==============================================================================

Precision and self-tuning (paper IV, V; :mod:`route_manager.precision`, :mod:`route_manager.selftuning`)
    Servers send precise summaries and the number of subscription rectangles they cover
    (the summary's ``rectangles`` attribute; else the UpdateSummary ``Load``). Every route
    is routed with all summaries cut to the dispatcher's current precision: ``none`` (no
    summary: every event to every server), 0.1 ... 0.9, ``precise``. A change builds the new
    routing tables and swaps one reference per route (cuts and tables are cached per
    precision): every event is routed by exactly one table. Self-tuning (on by default)
    samples the process's CPU load and its utilization (time with a request in hand,
    :mod:`wsframework.utilization`) every interval and moves precision down when the dispatcher is
    the bottleneck, up otherwise.

Measurement (:mod:`route_manager.models.measurement`)
    A monitor thread reads the counters every ``monitor_interval`` seconds into a sliding
    window: T_f, T_d, T_c, R, S_m, events/s, CPU and bytes out, exposed as ``measure.*``
    figures and logged at INFO every ``stats_log_interval`` seconds while events flow.

Backpressure
    A publish request whose events leave some live server's queue above ``backpressure``
    events waits (at most ``backpressure_timeout`` seconds) until it is below: a publisher
    faster than the outgoing link is slowed down instead of having its events dropped, and
    the dispatcher's CPU then says truthfully that it is not the bottleneck (the
    self-tuning relies on that): the wait does not count as busy time. Servers marked down
    are not waited for.

Settings (``edn serve dispatcher --set KEY=VALUE``; ``--set help`` lists them)
    :class:`DispatcherSettings` (``settings``: ``link_mbps``, ``initial_precision``,
    ``self_tuning``, ``backpressure``, ...) and the self-tuner's
    :class:`route_manager.selftuning.SelfTuningSettings` (``selftuning_threshold``, ...),
    declared as ``build_dispatcher.settings`` and read when the dispatcher is built.
    ``Configure`` changes ``precision``, ``self_tuning`` and ``selftuning_*`` at run time,
    under the same names.
"""
from .core import Dispatcher, DispatcherCounters, build_dispatcher
from .settings import DispatcherSettings

__all__ = ["Dispatcher", "DispatcherCounters", "DispatcherSettings", "build_dispatcher"]
