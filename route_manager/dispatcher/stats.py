"""What the dispatcher reports: the figures of ``GetStats`` (and ``edn status``) and the INFO
line the monitor logs while events flow.

==========================  ================================================================
figures                     meaning
==========================  ================================================================
events_in, copies_out, ...  cumulative counters; ``counters.*`` one reading of them
precision, precision_*      the precision in force and how often it changed
bloom.*                     Bloom summaries: the attributes filtered, how many servers'
                            summaries have filters, the largest estimated false-positive
                            rate (on those attributes, what precision means)
measure.*                   the sliding window (:mod:`route_manager.models.measurement`): T_f, T_d,
                            T_c, R, S_m, events/s, CPU, utilization, bytes out
selftuning.*                the self-tuner's parameters, state and trace (one JSON per step)
server.NAME.*               each server's channel, hits and load; ``lag``: logged copies
                            it has not acknowledged; ``kind``: server, or dispatcher (a
                            child of a dispatch tree)
tree.*                      a child dispatcher: its name, ``tree.parent.N.*`` (address,
                            registered, the precision that parent routes it with, routes
                            reported), batches of a parent skipped as replays
topic_sync.*                a root with peer roots: peers, exchanges answered, peer records
                            taken and skipped, ``peer.N.*`` (address, failures in a row),
                            ``conflict.NAME`` (a topic two roots define differently)
log.*                       the durable log (this process's lane): events, bytes,
                            oldest_age_s, appended, dropped (log_full=drop-oldest), refused
                            (edn:LogFull); lane (its index), lanes_adopted and
                            adopted_events (lanes a gone process left, delivered here),
                            lane_adoptions
==========================  ================================================================
"""
from __future__ import annotations

import json
import logging

from ..models.measurement import Measurement
from ..precision import format_precision

log = logging.getLogger(__name__)


def dispatcher_figures(dispatcher, with_trace: bool = True) -> dict[str, object]:
    d, control = dispatcher, dispatcher.control
    with d.counters_lock:
        c = d.counters
        figures = {
            "events_in": c.events_in,
            "copies_out": c.copies_out,
            "servers": len(d.servers),
            "hit_ratio": (c.copies_out / (c.events_in * len(d.servers))
                          if c.events_in and d.servers else 0.0),
            "route_us_per_event": (c.route_seconds / c.events_in * 1e6) if c.events_in else 0.0,
            "route_calibration_seconds": c.calibration_seconds,
            "backpressure_timeouts": d.backpressure_timeouts,
            "publish_duplicates": d.recent.duplicates,
        }
        hits = dict(c.per_server_hits)
    figures.update(d.recorder.figures())
    figures["precision"] = format_precision(control.precision)
    figures["precision_value"] = float(control.precision)
    figures["precision_changes"] = control.changes
    profile = control.profile
    figures["profile.on"] = int(profile is not None)
    if profile is not None:  # the profile in force (edn profile --apply), and when applied
        figures["profile.initial_precision"] = str(profile.initial_precision)
        figures["profile.points"] = len(profile.curve)
        figures["profile.applied_at"] = float(profile.applied_at or 0.0)
        figures["profile.source"] = profile.source
        figures["profile.tuner_model"] = int(control.tuner is not None
                                             and control.tuner.model is not None)
    figures["link_mbps"] = float(d.link_mbps or 0.0)
    described = [e.matcher.describe() for e in list(d.routes.entries())
                 if hasattr(e.matcher, "set_precision")]
    figures["route_boxes"] = sum(int(x.get("boxes", 0)) for x in described)
    # Bloom summaries (equality-tested string attributes): on those attributes precision is
    # the filters' false-positive rate, which the cuts leave as it is
    figures["bloom.dims"] = ",".join(sorted({dim for x in described
                                             for dim in x.get("bloom_dims") or ()})) or "none"
    figures["bloom.servers"] = sum(int(x.get("bloom_servers") or 0) for x in described)
    rates = [x["bloom_false_positive_rate"] for x in described
             if x.get("bloom_false_positive_rate") is not None]
    figures["bloom.false_positive_rate"] = float(max(rates)) if rates else 0.0
    # how single events and batches are matched (measured per table: "undecided" until a
    # table has routed one of that kind)
    figures["route_strategy"] = ",".join(sorted({str(x.get("single_strategy"))
                                                 for x in described})) or "none"
    figures["route_batch_strategy"] = ",".join(sorted({str(x.get("batch_strategy"))
                                                       for x in described})) or "none"
    reading = control.counters_now()
    for name in ("time", "cpu", "route_cpu", "forward_cpu", "events", "copies", "sent",
                 "bytes_out", "busy"):
        figures[f"counters.{name}"] = getattr(reading, name)
    m = control.window.measurement()
    if m is not None:
        figures.update({
            "measure.window_s": m.seconds, "measure.events_per_s": m.events_per_s,
            "measure.cpu": m.cpu, "measure.busy": m.busy, "measure.t_f_us": m.t_f * 1e6,
            "measure.t_d_us": m.t_d * 1e6,
            "measure.t_c_us": m.t_c * 1e6, "measure.hit_ratio": m.hit_ratio,
            "measure.message_bytes": m.message_size,
            "measure.bytes_out_per_s": m.bytes_out_per_s,
            "measure.copies_per_s": m.copies_per_s,
            "measure.tp_d": m.tp_d if m.events else 0.0,
        })
    figures.update(tuning_figures(control, with_trace))
    figures["log.on"] = int(d.event_log is not None)
    if d.event_log is not None:  # size, oldest undelivered age, server.NAME.lag (seqs not acked)
        figures.update(d.event_log.figures())
        figures.update(d.lanes.figures())  # this process's lane, the lanes it adopted
    for server, channel in d.forwarder.stats().items():
        for key, value in channel.items():
            figures[f"server.{server}.{key}"] = value
        figures[f"server.{server}.hits"] = hits.get(server, 0)
        figures[f"server.{server}.load"] = d.loads.get(server, 0)
        figures[f"server.{server}.kind"] = d.kinds.get(server, "server")
    if d.tree is not None:  # a child of a dispatch tree: its parents and what they ask
        figures.update(d.tree.figures())
    if d.peer_roots is not None:  # topics kept the same at the peer roots
        figures.update(d.peer_roots.figures())
    return figures


def tuning_figures(control, with_trace: bool = True) -> dict[str, object]:
    tuner = control.tuner
    c = control.tuning_config
    figures: dict[str, object] = {
        "selftuning.on": int(tuner is not None),
        "selftuning.rule": c.rule, "selftuning.margin": c.margin, "selftuning.hold": c.hold,
        "selftuning.max_hold": c.max_hold, "selftuning.band": c.band,
        "selftuning.threshold": c.threshold, "selftuning.busy_threshold": c.busy_threshold,
        "selftuning.backlog_growth": c.backlog_growth,
        "selftuning.backlog_floor": c.backlog_floor, "selftuning.step_size": c.step,
        "selftuning.base_interval": c.interval, "selftuning.factor": c.factor,
        "selftuning.max_interval": c.max_interval,
    }
    if tuner is not None:
        figures["selftuning.steps"] = tuner.p
        figures["selftuning.interval"] = tuner.t
        figures["selftuning.oscillations"] = tuner.num_oscillations
        if with_trace:
            for step in list(tuner.trace):
                figures[f"selftuning.trace.{step.step:06d}"] = json.dumps(
                    {"step": step.step, "time": round(step.time, 3),
                     "precision": step.precision, "previous": step.previous,
                     "events_per_s": round(step.events_per_s, 2), "cpu": round(step.cpu, 4),
                     "busy": round(step.busy, 4), "backlog": round(step.backlog),
                     "copies": round(step.copies), "signal": step.signal,
                     "cpu_bound": step.cpu_bound, "interval": step.interval,
                     "reason": step.reason, "sustained": round(step.sustained, 2),
                     "decision": step.decision}, separators=(",", ":"))
    return figures


def log_measurement(precision: float, self_tuning: bool, m: Measurement) -> None:
    log.info("precision %s%s: %.1f events/s, cpu %.2f, busy %.2f, T_f %.0f us, "
             "T_d %.1f us, T_c %.1f us, R %.3f, S_m %.0f B, out %.2f MB/s "
             "(last %.0f s)", format_precision(precision),
             " (self-tuning)" if self_tuning else "", m.events_per_s,
             m.cpu, m.busy, m.t_f * 1e6, m.t_d * 1e6, m.t_c * 1e6, m.hit_ratio,
             m.message_size, m.bytes_out_per_s / 1e6, m.seconds)
