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

Each upstream is independent: its calls run on its own lane (:mod:`route_manager.lanes`),
concurrently with the other upstreams', so one that is down, refuses or hangs (a cut link:
every call waits for its timeout) never holds the others back, and it gets everything due
(every route, ``force``) once it is registered again. Rounds reach each upstream in the order
they were made (a round submitted while its lane is busy is merged into the one waiting
there), so the generations one upstream receives only grow. A route is sent
to an upstream when its ``key`` (what the report would hold) changed since the last one that
upstream accepted, or, for a node that ``cuts`` its summaries (a child dispatcher), when the
precision the upstream asks for changed: the ``Precision`` of its answers, and of its
``GetStats`` figure ``precision`` polled by :meth:`Uplink.poll_precisions`.

Everything is a plain method; the caller runs the loop. ``wait`` says how long a method waits
for the upstreams' answers: None (the default; tests, one-off steps) until every upstream
answered or failed, 0 for a periodic loop, which must not wait on a hung upstream to start
its next round (the lanes report what they sent through ``on_sent``). :meth:`Uplink.close`
stops the lanes.
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
from wsframework.migrations import migrate
from wsframework.transport import TransportError

from . import protocol
from .lanes import Lane, finished
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
        migrate(store, "uplink", [_STATE_SCHEMA])
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
    generation: int = 0                 # the highest generation sent to it
    retry_at: float = 0.0               # monotonic time of the next registration attempt
    # route -> ((key, precision) refused, when to offer it again, refusals in a row): a
    # report the upstream refused (its route not created there yet, say) stays due
    refused: dict = field(default_factory=dict)


class _Round:
    """The reports of one push, or of several merged while an upstream's lane was busy:
    ``parts`` are ``(reports, force)`` in the order pushed, ``reports`` a list or a function
    giving it (called once, by the first lane that needs it: after that lane's pending
    registration, so it sees what the upstream announced). The round's summaries are made
    once per route and precision for every upstream."""

    def __init__(self, parts, generation: "_Lazy"):
        self.parts = parts
        self.generation = generation
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[RouteReport, bool]] | None = None
        self._made: dict[tuple[str, float], tuple[etree._Element, int]] = {}

    @classmethod
    def of(cls, reports, generation, force: bool) -> "_Round":
        if not callable(reports):
            reports = list(reports)
        if not isinstance(generation, _Lazy):
            generation = _Lazy(generation if callable(generation) else lambda g=generation: g)
        return cls(((reports, force),), generation)

    @staticmethod
    def merge(waiting: "_Round", newer: "_Round") -> "_Round":
        """The later report of a route wins and is forced when either was; the generation is
        the newer round's (the later view)."""
        return _Round(waiting.parts + newer.parts, newer.generation)

    def entries(self) -> dict[str, tuple[RouteReport, bool]]:
        """route -> (its latest report, forced)."""
        with self._lock:
            if self._entries is None:
                entries: dict[str, tuple[RouteReport, bool]] = {}
                for reports, force in self.parts:
                    for report in (reports() if callable(reports) else reports):
                        forced = force or entries.get(report.route, (None, False))[1]
                        entries[report.route] = (report, forced)
                self._entries = entries
            return self._entries

    def made(self, report: RouteReport, precision: float) -> tuple[etree._Element, int]:
        with self._lock:
            key = (report.route, precision)
            if key not in self._made:
                self._made[key] = report.make(precision)
            return self._made[key]


class Uplink:
    def __init__(self, *, name: str, address: str, kind: str, upstreams: Sequence[str],
                 client_for: Callable[[str], AdminClient],
                 on_registered: Callable[[str, protocol.RegisterServerResponse], None] | None = None,
                 on_sent: Callable[[int], None] | None = None,
                 cuts: bool = False, incarnation: int | None = None):
        """``cuts``: this node cuts its reports to the precision each upstream asks for (a
        child dispatcher); a server sends precise summaries and lets the dispatcher cut.
        ``on_sent(n)``: an upstream's lane sent ``n`` UpdateSummary messages in one round
        (called from that lane, whether or not the pusher still waits). ``incarnation``:
        the node's generation offset (:class:`Generations`), sent when it registers so an
        upstream that kept a wiped node's old generations lets them go."""
        if not upstreams:
            raise ValueError("an uplink needs at least one upstream dispatcher")
        self.name, self.address, self.kind = name, address, kind
        self.client_for = client_for
        self.on_registered = on_registered
        self.on_sent = on_sent
        self.cuts = cuts
        self.incarnation = incarnation
        self.upstreams: dict[str, _Upstream] = {
            url.rstrip("/"): _Upstream(url.rstrip("/")) for url in upstreams}
        self._lanes = {address: Lane(address) for address in self.upstreams}
        # guards an upstream's state against a reset (forget, registration) from another
        # thread; never held across a call, so no upstream waits on another's
        self._lock = threading.RLock()

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
                Name=self.name, Address=self.address, Kind=self.kind,
                Incarnation=self.incarnation))
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

    def register_missing(self, *, wait: float | None = None) -> int:
        """Register with every upstream not registered yet whose retry time has come (the
        wait doubles up to :data:`RETRY_MAX` while it does not answer), each on its lane;
        returns how many answered within ``wait``."""
        now = time.monotonic()
        jobs = [self._lanes[u.address].submit("register", u.address, self._register_if_missing)
                for u in list(self.upstreams.values()) if not u.registered and u.retry_at <= now]
        return sum(bool(job.result) for job in finished(jobs, wait))

    def _register_if_missing(self, upstream: str) -> bool:
        # a registration queued behind another one that succeeded has nothing left to do
        return self.upstreams[upstream].registered or self.register(upstream)

    # -- route updates ---------------------------------------------------------------------
    def push(self, reports: Iterable[RouteReport] | Callable[[], Iterable[RouteReport]], *,
             generation: int | Callable[[], int], force: bool = False,
             wait: float | None = None) -> int:
        """Send every report an upstream has not accepted yet (all of them with ``force``) to
        every registered upstream, each on its lane; returns the number of UpdateSummary
        messages sent by the lanes done within ``wait``. An upstream that does not answer is
        skipped for the rest of its round and tried again next round; one that no longer
        knows us is registered again next round. ``reports``: the reports, or a function
        giving them (called only when some upstream is registered, once per round);
        ``generation``: the round's generation, or a function giving it (called only when
        something is sent, once per round)."""
        round_ = _Round.of(reports, generation, force)
        jobs = [self._lanes[address].submit("push", round_, self._push_to_lane(address),
                                            merge=_Round.merge)
                for address in self.upstreams]
        return sum(job.result or 0 for job in finished(jobs, wait))

    def _push_to_lane(self, address: str) -> Callable[[_Round], int]:
        return lambda round_: self._push_to(self.upstreams[address], round_)

    def _push_to(self, state: _Upstream, round_: _Round) -> int:
        """One round at one upstream (on its lane)."""
        if not state.registered:
            return 0  # registered again first (register_missing), then everything goes
        sent = 0
        for report, force in round_.entries().values():
            precision = state.precision if self.cuts else PRECISE
            wanted = (report.key, precision)
            if not force and state.announced.get(report.route) == wanted:
                continue
            refused = state.refused.get(report.route)
            if (refused is not None and refused[0] == wanted
                    and refused[1] > time.monotonic()):
                continue  # refused lately: offered again when its wait is over
            summary, load = round_.made(report, precision)
            outcome = self._send(state, report.route, summary, load, round_.generation)
            if outcome is None:  # unreachable, forgot us, or a stale round: no more of it
                break
            sent += 1
            with self._lock:
                if outcome is _REFUSED:
                    tries = refused[2] + 1 if refused is not None else 1
                    state.refused[report.route] = (
                        wanted, time.monotonic() + min(REFUSED_MAX, 0.5 * 2 ** tries), tries)
                    continue
                state.refused.pop(report.route, None)
                state.announced[report.route] = (report.key, precision)
        if sent and self.on_sent is not None:
            self.on_sent(sent)
        return sent

    def _send(self, state: _Upstream, route: str, summary, load: int, generation):
        """True/False: accepted (newer than what it held) or not; :data:`_REFUSED`: a fault;
        None: unreachable, or it no longer knows us, or the round is older than one this
        upstream already got."""
        generation = generation.value()
        if generation < state.generation:
            # a round whose generation was drawn after a later round's (another lane drew
            # that one first): sending it would make the later round look stale; its
            # reports stay due and go with the next round
            return None
        state.generation = generation
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
                self.forget(state.address)
                return None
            # refused (e.g. the route is not created there yet): due again after a wait
            tries = state.refused.get(route, (None, 0, 0))[2]
            log.log(logging.WARNING if tries == 0 else logging.DEBUG,
                    "route update for %s refused by %s: %s", route, state.address, fault.reason)
            return _REFUSED
        with self._lock:
            state.failures = 0
            self._learn_precision(state, response.Precision)
        return bool(response.Accepted)

    # -- the precision each upstream asks for ----------------------------------------------
    def poll_precisions(self, *, wait: float | None = None) -> bool:
        """Ask every registered upstream, each on its lane, the precision it routes with now
        (its ``GetStats`` figure ``precision``) and whether it still knows us
        (``server.NAME.kind``: one that restarted without its data does not, and is
        registered with again); True when a precision changed (the next push re-sends to
        it) at an upstream that answered within ``wait``."""
        jobs = [self._lanes[state.address].submit("poll", state, self._poll)
                for state in list(self.upstreams.values()) if state.registered]
        return any(job.result for job in finished(jobs, wait))

    def _poll(self, state: _Upstream) -> bool:
        if not state.registered:
            return False
        client = self.client_for(state.address)
        try:
            figures = client.call(contracts.GetStats(Prefix="precision")).Figure or []
            known = client.call(contracts.GetStats(
                Prefix=f"server.{self.name}.kind")).Figure or []
        except (TransportError, SoapFault) as exc:
            log.debug("precision of %s not read: %s", state.address, exc)
            return False
        if not known:
            log.warning("%s forgot us: registering again", state.address)
            self.forget(state.address)
            return False
        value = next((f.Value for f in figures if f.Name == "precision"), None)
        with self._lock:
            return self._learn_precision(state, value)

    # -- other calls to the upstreams ------------------------------------------------------
    def ask(self, kind: str, call: Callable[[str], object], *,
            wait: float | None = None) -> dict[str, object]:
        """``call(address)`` for every registered upstream, each on its lane (a waiting
        ``kind`` call there is replaced by this one); returns address -> answer for those
        done within ``wait``, in the order of the upstreams. ``call`` handles its own
        errors (an exception is logged and answers None)."""
        jobs = {state.address: self._lanes[state.address].submit(kind, state.address, call)
                for state in list(self.upstreams.values()) if state.registered}
        finished(jobs.values(), wait)
        return {address: job.result for address, job in jobs.items() if job.done.is_set()}

    def close(self, timeout: float = 5.0) -> None:
        """Stop every lane (a call under way still ends with its timeout), waiting at most
        ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        for lane in self._lanes.values():
            lane.close()
        for lane in self._lanes.values():
            lane.close(max(0.0, deadline - time.monotonic()))

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
    """A value computed on first use, once, whichever lane uses it first (the generation of
    a round that may send nothing)."""

    def __init__(self, compute: Callable[[], int]):
        self._compute = compute
        self._value: int | None = None
        self._lock = threading.Lock()

    def value(self) -> int:
        with self._lock:
            if self._value is None:
                self._value = self._compute()
            return self._value
