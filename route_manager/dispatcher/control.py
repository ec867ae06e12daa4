"""The dispatcher's summary precision and what moves it: operators (``Configure``) and the
self-tuner (:mod:`route_manager.selftuning`), fed every ``monitor_interval`` by the monitor
thread with a reading of the cumulative counters (:mod:`route_manager.models.measurement`).

A precision change builds the new routing tables and swaps one reference per route (cuts and
tables are cached per precision), so every event is routed by exactly one table.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable

from wsframework.settings import read_settings

from ..exceptions import InvalidConfiguration
from ..models.measurement import Counters, SlidingWindow
from ..precision import format_precision, parse_precision
from ..precision_profile import PrecisionProfile
from ..selftuning import SelfTuner, SelfTuningSettings, Ticker
from .settings import DispatcherSettings
from .stats import log_measurement

log = logging.getLogger(__name__)

# The names Configure takes: precision (the precision now) and the --set names of the
# settings that may change at run time (self_tuning, selftuning_<field>). Two aliases are
# accepted too: the dotted selftuning.<field> (the names the figures of GetStats and of the
# Configure answer carry on the wire) and "selftuning" for self_tuning.
_DOTTED = "selftuning."
_ALIASES = {"selftuning": "self_tuning"}


def configure_key(name: str | None) -> str:
    """The --set name of a Configure setting name (case, ``-`` and the aliases above folded)."""
    key = (name or "").strip().lower().replace("-", "_")
    if key.startswith(_DOTTED):
        key = SelfTuningSettings.PREFIX + key[len(_DOTTED):]
    return _ALIASES.get(key, key)


class CounterReader:
    """Readings of one dispatcher's cumulative counters (:class:`Counters`): its traffic
    (``traffic()``: events in, copies out, routing CPU seconds), its forwarding channels
    (``channels()``: their sent copies and bytes, queue depths and sender threads' CPU), how
    many nodes it routes to (``servers()``) and the seconds it was busy (``busy_seconds()``).
    The sender threads' CPU is summed here: a channel that goes keeps what it used."""

    def __init__(self, *, traffic: Callable[[], tuple[int, int, float]],
                 channels: Callable[[], Iterable], servers: Callable[[], int],
                 busy_seconds: Callable[[], float]):
        self.traffic = traffic
        self.channels = channels
        self.servers = servers
        self.busy_seconds = busy_seconds
        self._forward_cpu = 0.0
        self._forward_seen: dict[int, float] = {}
        self._lock = threading.Lock()  # the monitor thread and GetStats both read

    def read(self) -> Counters:
        """One reading of the cumulative counters (:mod:`route_manager.models.measurement`)."""
        events, copies, route = self.traffic()
        sent = bytes_out = backlog = 0
        with self._lock:
            forward = self._forward_cpu
            for channel in self.channels():
                sent += channel.stats.sent
                bytes_out += channel.stats.bytes_out
                if channel.stats.up:  # a dead server's queue says nothing of the link
                    backlog += channel.stats.depth
                key = id(channel.sender_thread)
                now = channel.sender_cpu_seconds()
                seen = self._forward_seen.get(key, 0.0)
                if now > seen:
                    forward += now - seen
                    self._forward_seen[key] = now
            self._forward_cpu = forward
        return Counters(time=time.monotonic(), cpu=time.process_time(), route_cpu=route,
                        forward_cpu=forward, events=events, copies=copies, sent=sent,
                        bytes_out=bytes_out, servers=self.servers(),
                        busy=self.busy_seconds(), backlog=backlog)


class PrecisionControl:
    """Precision, measurement and self-tuning of one dispatcher: it sets the precision of
    every route in ``routes`` (the dispatcher's route namespace) and is fed by
    ``read_counters`` (a :meth:`CounterReader.read`)."""

    def __init__(self, settings: DispatcherSettings, tuning: SelfTuningSettings, *, routes,
                 read_counters: Callable[[], Counters]):
        self.routes = routes
        self.read_counters = read_counters
        self.settings = settings
        self.precision = settings.initial_precision
        self.lock = threading.Lock()  # precision, tuner and tuning_config change together
        self.changes = 0
        self.monitor_interval = settings.monitor_interval
        self.window = SlidingWindow(settings.measure_window)
        self.stats_log_interval = settings.stats_log_interval
        self._last_log = time.monotonic()
        self.tuning_config = tuning
        self.profile: PrecisionProfile | None = None  # the last one applied (Configure)
        self.tuner: SelfTuner | None = None
        self._monitor: Ticker | None = None
        if settings.self_tuning:
            self._start_tuner()

    def start(self) -> None:
        """Start the monitor thread (once the dispatcher is complete)."""
        self._monitor = Ticker(self._tick, self.monitor_interval, name="dispatcher-monitor").start()

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()

    # -- precision and self-tuning -------------------------------------------------------------
    def _start_tuner(self) -> None:
        reading = self.counters_now()
        self.tuner = SelfTuner(self.tuning_config, self.precision, reading)
        if self.profile is not None:
            self.tuner.model = self.profile.model()

    def set_precision(self, precision: float, *, source: str = "operator") -> None:
        """Route every route with summaries cut to ``precision`` (0.0 none .. 1.0 precise)."""
        with self.lock:
            changed = precision != self.precision
            self.precision = precision
            for entry in list(self.routes.entries()):
                if hasattr(entry.matcher, "set_precision"):
                    entry.matcher.set_precision(precision)
            if changed:
                self.changes += 1
        if changed:
            log.log(logging.DEBUG if source == "self-tuning" else logging.INFO,
                    "precision %s (%s)", format_precision(precision), source)

    def set_self_tuning(self, on: bool) -> None:
        with self.lock:
            if on and self.tuner is None:
                self._start_tuner()
            elif not on:
                self.tuner = None

    # -- readings and the monitor thread -------------------------------------------------------
    def counters_now(self) -> Counters:
        """One reading of the dispatcher's cumulative counters."""
        return self.read_counters()

    def _tick(self, now: float) -> None:
        reading = self.counters_now()
        self.window.add(reading)
        tuner = self.tuner
        if tuner is not None:
            with self.lock:
                step = tuner.sample(reading) \
                    if tuner is self.tuner else None
            if step is not None:
                self.set_precision(step.precision, source="self-tuning")
        if self.stats_log_interval and reading.time - self._last_log >= self.stats_log_interval:
            self._last_log = reading.time
            m = self.window.measurement(self.stats_log_interval)
            if m is not None and m.events:
                log_measurement(self.precision, self.tuner is not None, m)

    # -- run-time settings (Configure) ---------------------------------------------------------
    def settings_in_force(self) -> dict[str, str]:
        c = self.tuning_config
        s = self.settings
        in_force = {"precision": format_precision(self.precision),
                "self_tuning": "on" if self.tuner is not None else "off",
                "link_mbps": repr(s.link_mbps) if s.link_mbps else "none",
                "backpressure": str(s.backpressure),
                # the self-tuner's settings under their --set names (selftuning_<field>)
                **{key: value if isinstance(value, str) else repr(value)
                   for key, value in c.as_mapping().items()}}
        if self.profile is not None:
            in_force["profile"] = self.profile.to_text()
        return in_force

    def configure(self, settings: Iterable[tuple[str, str]]) -> dict[str, str]:
        """``Configure`` with ``(name, value)`` pairs: ``precision`` (none | precise | 0..1 |
        N%), ``self_tuning`` (on | off) and ``selftuning_<field>``, read by the settings'
        own parsers. Everything is validated before anything changes; answers
        :meth:`settings_in_force`."""
        try:
            changes, config = self._read_configure(settings)
        except ValueError as exc:  # SettingsError too: the request is refused as a whole
            raise InvalidConfiguration(str(exc)) from exc
        if config is not None:
            with self.lock:
                self.tuning_config = config
                if self.tuner is not None:  # a new tuner with the new parameters
                    self.tuner = None
                    restart = True
                else:
                    restart = False
            if restart:
                self.set_self_tuning(True)
        if "profile" in changes:
            self._take_profile(changes["profile"])
        if "self_tuning" in changes and not changes["self_tuning"]:
            self.set_self_tuning(False)
        if "precision" in changes:
            self.set_precision(changes["precision"])
            tuner = self.tuner
            if tuner is not None:  # self-tuning goes on from the operator's precision
                reading = self.counters_now()
                with self.lock:
                    tuner.reset(self.precision, reading)
        if changes.get("self_tuning"):
            self.set_self_tuning(True)
        return self.settings_in_force()

    def _take_profile(self, profile: PrecisionProfile) -> None:
        """Keep ``profile`` as the one in force, and hand its throughput against precision
        to the self-tuner (a new tuner gets it too). The precision itself is the caller's
        ``precision`` setting: a profile stored and applied again at a restart must not
        undo a precision an operator set since."""
        with self.lock:
            self.profile = profile
            if self.tuner is not None:
                self.tuner.model = profile.model()
        log.info("precision profile applied (recommends %s; %d precisions; from %s)",
                 profile.initial_precision, len(profile.curve), profile.source or "-")

    def _read_configure(self, settings) -> tuple[dict, SelfTuningSettings | None]:
        """The changes asked for (``precision``, ``self_tuning``: those given) and the new
        self-tuning settings (None: unchanged); ValueError for an unknown name or a bad value."""
        changes, tuning = {}, {}
        for name, value in settings:
            key = configure_key(name)
            if key == "precision":
                changes["precision"] = parse_precision(value)
            elif key == "profile":
                changes["profile"] = PrecisionProfile.parse(value)
            elif key == "self_tuning":
                changes["self_tuning"] = DispatcherSettings.parse_value(key, value)
            elif key in SelfTuningSettings.keys():
                tuning[key] = value
            else:
                raise ValueError(f"unknown setting {name!r} (known: precision, profile, self_tuning, "
                                 f"{', '.join(SelfTuningSettings.keys())})")
        if not tuning:
            return changes, None
        config, = read_settings({**self.tuning_config.as_mapping(), **tuning}, SelfTuningSettings)
        return changes, config
