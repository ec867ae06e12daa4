"""A node's conversation with the dispatchers above it (paper II): registration and route
updates, to one or several upstream dispatchers.

A subscription server reports its summaries to the root dispatcher(s) of the network
(``edn serve server --dispatcher URL1 --dispatcher URL2``); a child dispatcher reports its
sub-tree summaries to its parent(s) (``edn serve dispatcher --parent URL``). Both do it
through an :class:`Uplink`::

    uplink = Uplink(name="s1", address="http://h:8081", kind=KIND_SERVER,
                    upstreams=["http://root-a:8080", "http://root-b:8080"],
                    client_for=lambda url: AdminClient(url, token),
                    on_registered=host_topics)
    uplink.register_missing()                     # RegisterServer where not registered yet
    uplink.push([RouteReport("stocks", key, make)], generation=42)

Each upstream is independent: one that is down or refuses never holds the others back, and
it gets everything due (every route, ``force``) once it is registered again. A route is sent
to an upstream when its ``key`` (what the report would hold) changed since the last one that
upstream accepted, or, for a node that ``cuts`` its summaries (a child dispatcher), when the
precision the upstream asks for changed: the ``Precision`` of its answers, and of its
``GetStats`` figure ``precision`` polled by :meth:`Uplink.poll_precisions`.

Everything is a plain method (tests call them synchronously); the caller runs the loop.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Sequence

from lxml import etree

from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.transport import TransportError

from . import protocol
from .protocol import FAULT_UNKNOWN_SERVER
from .precision import PRECISE, parse_precision

log = logging.getLogger(__name__)

__all__ = ["Generations", "RouteReport", "Uplink"]

_EPOCH_2020 = 1_577_836_800
_INT32_MAX = 2**31 - 1
_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_uplink_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_GENERATION = "edn:uplink"
RETRY_MAX = 5.0  # seconds between registration attempts at an upstream that does not answer
REFUSED_MAX = 10.0  # seconds between offers of a report an upstream refused
_REFUSED = "refused"


class Generations:
    """Generations of route updates that only grow, across restarts and a wiped data dir:
    ``offset + G``, with ``offset`` the second (since 2020) at which the data dir first
    reported and ``G`` a counter bumped once per round that sends (both kept in the store).
    A node whose data dir was wiped starts above its old generations as long as it made
    fewer rounds than seconds have passed (the subscription servers' rule, too)."""

    def __init__(self, store):
        self.store = store
        store.executescript(_STATE_SCHEMA)
        with store.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO edn_uplink_state(key, value) VALUES (?, ?)",
                         ("generation_offset", max(0, int(time.time()) - _EPOCH_2020)))
        self.offset = store.query("SELECT value FROM edn_uplink_state WHERE key = ?",
                                  ("generation_offset",))[0]["value"]

    def next(self) -> int:
        with self.store.transaction() as conn:
            self.store.bump(conn, _GENERATION)
        return min(self.offset + self.store.generation(_GENERATION), _INT32_MAX)


@dataclass(frozen=True)
class RouteReport:
    """What a node would report for one route: ``key`` changes whenever the summary or load
    would; ``make(precision)`` builds ``(edn:Summary element, load)`` at the precision an
    upstream asks for (called only when some upstream needs it, once per precision)."""

    route: str
    key: Hashable
    make: Callable[[float], tuple[etree._Element, int]]


@dataclass
class _Upstream:
    address: str
    registered: bool = False
    precision: float = PRECISE          # the precision this upstream routes us with
    announced: dict = field(default_factory=dict)  # route -> (key, precision) it accepted
    failures: int = 0                   # consecutive unanswered calls (status)
    retry_at: float = 0.0               # monotonic time of the next registration attempt
    # route -> ((key, precision) refused, when to offer it again, refusals in a row): a
    # report the upstream refused (its route not created there yet, say) stays due
    refused: dict = field(default_factory=dict)


class Uplink:
    def __init__(self, *, name: str, address: str, kind: str, upstreams: Sequence[str],
                 client_for: Callable[[str], AdminClient],
                 on_registered: Callable[[str, protocol.RegisterServerResponse], None] | None = None,
                 cuts: bool = False):
        """``cuts``: this node cuts its reports to the precision each upstream asks for (a
        child dispatcher); a server sends precise summaries and lets the dispatcher cut."""
        if not upstreams:
            raise ValueError("an uplink needs at least one upstream dispatcher")
        self.name, self.address, self.kind = name, address, kind
        self.client_for = client_for
        self.on_registered = on_registered
        self.cuts = cuts
        self.upstreams: dict[str, _Upstream] = {
            url.rstrip("/"): _Upstream(url.rstrip("/")) for url in upstreams}
        self._lock = threading.RLock()  # one round at a time; registration re-announces

    # -- registration ----------------------------------------------------------------------
    def is_registered(self, upstream: str | None = None) -> bool:
        """Registered with ``upstream`` (None: with every upstream)."""
        if upstream is not None:
            return self.upstreams[upstream.rstrip("/")].registered
        return all(u.registered for u in self.upstreams.values())

    def any_registered(self) -> bool:
        return any(u.registered for u in self.upstreams.values())

    def forget(self, upstream: str) -> None:
        """``upstream`` no longer knows us (it said so): register again next round."""
        with self._lock:
            state = self.upstreams[upstream.rstrip("/")]
            state.registered = False
            state.announced.clear()
            state.refused.clear()

    def register(self, upstream: str) -> bool:
        """RegisterServer at ``upstream``; ``on_registered`` sees its answer (the topics to
        host, the peers). Everything is re-announced to it next push. False when it did not
        answer or refused."""
        state = self.upstreams[upstream.rstrip("/")]
        try:
            response = self.client_for(state.address).call(protocol.RegisterServer(
                Name=self.name, Address=self.address, Kind=self.kind))
        except (TransportError, SoapFault) as exc:
            state.failures += 1
            state.retry_at = time.monotonic() + min(RETRY_MAX, 0.2 * 2 ** state.failures)
            log.log(logging.WARNING if state.failures == 1 else logging.DEBUG,
                    "registration at %s failed: %s", state.address, getattr(exc, "reason", exc))
            return False
        if self.on_registered is not None:
            self.on_registered(state.address, response)
        with self._lock:
            state.registered = True
            state.failures = 0
            state.announced.clear()
            state.refused.clear()
            self._learn_precision(state, response.Precision)
        log.info("registered with %s as %s (%s)", state.address, self.name, self.kind)
        return True

    def register_missing(self) -> int:
        """Register with every upstream not registered yet whose retry time has come (the
        wait doubles up to :data:`RETRY_MAX` while it does not answer); returns how many
        answered."""
        now = time.monotonic()
        return sum(self.register(u.address) for u in list(self.upstreams.values())
                   if not u.registered and u.retry_at <= now)

    # -- route updates ---------------------------------------------------------------------
    def push(self, reports: Iterable[RouteReport], *, generation: int | Callable[[], int],
             force: bool = False) -> int:
        """Send every report an upstream has not accepted yet (all of them with ``force``) to
        every registered upstream; returns the number of UpdateSummary messages sent. An
        upstream that does not answer is skipped for the rest of the round and tried again
        next round; one that no longer knows us is registered again next round.
        ``generation``: the round's generation, or a function giving it (called only when
        something is sent)."""
        sent = 0
        if callable(generation):
            generation = _Lazy(generation)
        with self._lock:
            live = [u for u in self.upstreams.values() if u.registered]
            for report in reports:
                made: dict[float, tuple[etree._Element, int]] = {}
                for state in list(live):
                    precision = state.precision if self.cuts else PRECISE
                    wanted = (report.key, precision)
                    if not force and state.announced.get(report.route) == wanted:
                        continue
                    refused = state.refused.get(report.route)
                    if (refused is not None and refused[0] == wanted
                            and refused[1] > time.monotonic()):
                        continue  # refused lately: offered again when its wait is over
                    if precision not in made:
                        made[precision] = report.make(precision)
                    summary, load = made[precision]
                    outcome = self._send(state, report.route, summary, load, generation)
                    if outcome is None:  # unreachable or forgot us: no more this round
                        live.remove(state)
                        continue
                    sent += 1
                    if outcome is _REFUSED:
                        tries = refused[2] + 1 if refused is not None else 1
                        state.refused[report.route] = (
                            wanted, time.monotonic() + min(REFUSED_MAX, 0.5 * 2 ** tries), tries)
                        continue
                    state.refused.pop(report.route, None)
                    state.announced[report.route] = (report.key, precision)
        return sent

    def _send(self, state: _Upstream, route: str, summary, load: int, generation):
        """True/False: accepted (newer than what it held) or not; :data:`_REFUSED`: a fault;
        None: unreachable, or it no longer knows us."""
        if isinstance(generation, _Lazy):
            generation = generation.value()
        request = protocol.UpdateSummary(Server=self.name, Route=route, Generation=generation,
                                         Load=load, Summary=summary)
        try:
            response = self.client_for(state.address).call(request)
        except TransportError as exc:
            state.failures += 1
            log.warning("route update for %s not sent to %s: %s", route, state.address, exc)
            return None
        except SoapFault as fault:
            if fault.subcode == FAULT_UNKNOWN_SERVER:
                log.warning("%s does not know us: registering again", state.address)
                state.registered = False
                state.announced.clear()
                state.refused.clear()
                return None
            # refused (e.g. the route is not created there yet): due again after a wait
            tries = state.refused.get(route, (None, 0, 0))[2]
            log.log(logging.WARNING if tries == 0 else logging.DEBUG,
                    "route update for %s refused by %s: %s", route, state.address, fault.reason)
            return _REFUSED
        state.failures = 0
        self._learn_precision(state, response.Precision)
        return bool(response.Accepted)

    # -- the precision each upstream asks for ----------------------------------------------
    def poll_precisions(self) -> bool:
        """Ask every registered upstream the precision it routes with now (its ``GetStats``
        figure ``precision``) and whether it still knows us (``server.NAME.kind``: one that
        restarted without its data does not, and is registered with again); True when a
        precision changed (the next push re-sends to it)."""
        changed = False
        for state in list(self.upstreams.values()):
            if not state.registered:
                continue
            client = self.client_for(state.address)
            try:
                figures = client.call(contracts.GetStats(Prefix="precision")).Figure or []
                known = client.call(contracts.GetStats(
                    Prefix=f"server.{self.name}.kind")).Figure or []
            except (TransportError, SoapFault) as exc:
                log.debug("precision of %s not read: %s", state.address, exc)
                continue
            if not known:
                log.warning("%s forgot us: registering again", state.address)
                self.forget(state.address)
                continue
            value = next((f.Value for f in figures if f.Name == "precision"), None)
            with self._lock:
                changed |= self._learn_precision(state, value)
        return changed

    @staticmethod
    def _learn_precision(state: _Upstream, text: str | None) -> bool:
        if not text:
            return False
        try:
            precision = parse_precision(text)
        except ValueError:
            return False
        if precision <= 0.0:
            # "no summary": the upstream reads none; keep what it has, cut as it was
            return False
        changed = precision != state.precision
        state.precision = precision
        return changed

    # -- status ----------------------------------------------------------------------------
    def figures(self, prefix: str = "upstream") -> dict[str, object]:
        """``upstream.N.*`` figures of ``GetStats`` (N: 0, 1, ... in the order given)."""
        out: dict[str, object] = {}
        for index, state in enumerate(self.upstreams.values()):
            key = f"{prefix}.{index}"
            out[f"{key}.address"] = state.address
            out[f"{key}.registered"] = int(state.registered)
            out[f"{key}.precision"] = state.precision
            out[f"{key}.routes"] = len(state.announced)
            out[f"{key}.failures"] = state.failures
        return out


class _Lazy:
    """A value computed on first use (the generation of a round that may send nothing)."""

    def __init__(self, compute: Callable[[], int]):
        self._compute = compute
        self._value: int | None = None

    def value(self) -> int:
        if self._value is None:
            self._value = self._compute()
        return self._value
