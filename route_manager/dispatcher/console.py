"""The dispatcher's panels of the web console (:mod:`wsframework.console`): the live figures
with the self-tuning trace, the network below it (servers and child dispatchers: health,
queue depths, summary sizes) and the topics with the subscriptions the servers' summaries
cover. The same numbers as ``GetStats`` / ``edn status`` (:mod:`.stats`), read in process."""
from __future__ import annotations

import re
import time

from wsframework.console import console_of

__all__ = ["install_console"]

TRACE_STEPS = 120  # self-tuning steps a figures answer carries (the chart's width)
# a stored summary's root element says how many subscription rectangles it covers
_RECTANGLES = re.compile(rb'^[^>]*?\srectangles="(\d+)"')


def install_console(service) -> None:
    dispatcher = service.dispatcher
    console = console_of(service)
    console.add_api("figures", lambda call: live_figures(dispatcher))
    console.add_api("network", lambda call: network(dispatcher))
    console.add_api("topics", lambda call: topics(dispatcher))
    console.add_api("summary", lambda call: summary(dispatcher))


def live_figures(dispatcher) -> dict:
    """The numbers the page charts each second: over the measurement window (events/s, hit
    ratio R, CPU in cores, utilization) and the precision in force, with the trace."""
    control = dispatcher.control
    m = control.window.measurement()
    tuner = control.tuner
    trace = list(tuner.trace)[-TRACE_STEPS:] if tuner is not None else []
    return {
        "time": time.time(),
        "events_per_s": m.events_per_s if m is not None else 0.0,
        "hit_ratio": m.hit_ratio if m is not None else 0.0,
        "cpu": m.cpu if m is not None else 0.0,
        "utilization": m.busy if m is not None else 0.0,
        "window_s": m.seconds if m is not None else 0.0,
        "precision": float(control.precision),
        "self_tuning": tuner is not None,
        "trace": [{"step": s.step, "time": round(s.time, 3), "precision": s.precision,
                   "previous": s.previous, "events_per_s": round(s.events_per_s, 2),
                   "cpu": round(s.cpu, 4), "busy": round(s.busy, 4), "signal": s.signal,
                   "reason": s.reason} for s in trace],
    }


def _stored_summaries(dispatcher):
    """(server, route, bytes, rectangles) of every stored summary (only its head is read)."""
    for row in dispatcher.tables.store.query(
            "SELECT server, route, length(summary) AS size, substr(summary, 1, 2048) AS head "
            "FROM edn_summaries"):
        yield row["server"], row["route"], row["size"], _rectangles(row["head"])


def _summary_sizes(dispatcher) -> dict[str, tuple[int, int]]:
    """server -> (bytes, rectangles) of its stored summaries, over every route."""
    sizes: dict[str, tuple[int, int]] = {}
    for server, _, size, rectangles in _stored_summaries(dispatcher):
        total, covered = sizes.get(server, (0, 0))
        sizes[server] = (total + size, covered + rectangles)
    return sizes


def _rectangles(head) -> int:
    if isinstance(head, str):
        head = head.encode()
    match = _RECTANGLES.search(head or b"")
    return int(match.group(1)) if match else 0


def network(dispatcher) -> dict:
    channels = dispatcher.forwarder.stats()
    sizes = _summary_sizes(dispatcher)
    servers = []
    for name, address in sorted(dict(dispatcher.servers).items()):
        channel = channels.get(name, {})
        size, rectangles = sizes.get(name, (0, 0))
        servers.append({"name": name, "address": address,
                        "kind": dispatcher.kinds.get(name, "server"),
                        "up": bool(channel.get("up", True)),
                        "queue_depth": channel.get("depth", 0), "sent": channel.get("sent", 0),
                        "dropped": channel.get("dropped", 0),
                        "failures": channel.get("failures", 0),
                        "load": dispatcher.loads.get(name, 0),
                        "summary_bytes": size, "summary_rectangles": rectangles})
    return {"servers": servers}


def topics(dispatcher) -> dict:
    """Every topic and the subscription rectangles the servers' latest summaries of it cover
    (one per subscription of a range filter): the network's count, as the dispatcher knows
    it, a ``summary_interval`` behind the servers."""
    counts: dict[str, int] = {}
    for _, route, _, rectangles in _stored_summaries(dispatcher):
        counts[route] = counts.get(route, 0) + rectangles
    return {"topics": [{"name": row["name"], "subscriptions": counts.get(row["name"], 0)}
                       for row in dispatcher.tables.topics()]}


def summary(dispatcher) -> dict:
    """A few plain figures of ``edn status`` (cumulative counters, the durable log)."""
    figures = dispatcher.stats(with_trace=False)
    keep = ("events_in", "copies_out", "servers", "precision", "precision_changes",
            "route_us_per_event", "backpressure_timeouts", "link_mbps", "log.on", "log.events",
            "log.bytes", "log.oldest_age_s")
    return {"figures": {key: figures[key] for key in keep if key in figures}}
