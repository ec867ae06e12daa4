"""The matcher interface every filtering engine implements, and the filter it stores."""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from .errors import UnsupportedDialect
from .packed_forms import PackedForms

__all__ = ["FilterSpec", "FilterFailures", "Matcher", "Pacer"]


@dataclass(frozen=True, slots=True)
class FilterSpec:
    """One filter as a subscriber or route administrator gave it.

    ``namespaces`` holds sorted ``(prefix, uri)`` pairs so the spec stays hashable and two
    specs written with the same bindings compare equal.  ``content`` optionally carries the
    original element for dialects that need structure, not just text; it takes no part in
    equality.
    """

    dialect: str
    expression: str
    namespaces: tuple[tuple[str, str], ...] = ()
    content: object = field(default=None, compare=False)

    @property
    def namespace_map(self) -> dict[str, str]:
        return dict(self.namespaces)

    def without_content(self) -> "FilterSpec":
        """This spec without its element: what a store, a view or an engine keeps, since the
        element would keep the whole request document it came in alive."""
        return self if self.content is None else replace(self, content=None)

    @classmethod
    def from_element(cls, element: Any, default_dialect: str) -> "FilterSpec":
        """Build a spec from a ``wse:Filter`` element.

        Prefixes come from the namespaces in scope at the element (lxml's ``nsmap``
        already includes inherited ones) that the expression names (:func:`used_namespaces`).
        The default namespace is dropped: XPath 1.0 has no default namespace, so an
        unprefixed name never means it.
        """
        dialect = element.get("Dialect") or default_dialect
        expression = (element.text or "").strip()
        return cls(dialect, expression, used_namespaces(expression, element.nsmap),
                   content=element)


def used_namespaces(expression: str, nsmap) -> tuple[tuple[str, str], ...]:
    """The ``(prefix, uri)`` pairs of ``nsmap`` whose ``prefix:`` occurs in ``expression``,
    sorted. A subscriber controls how many namespaces are in scope at its Subscribe (the
    envelope's own, and any number it declares); keeping only those the expression can use
    bounds what is stored with a subscription by the expression's length, and lets equal
    expressions compare equal whatever the envelope declared."""
    return tuple(sorted((prefix, uri) for prefix, uri in nsmap.items()
                        if prefix is not None and f"{prefix}:" in expression))


class Pacer:
    """Lets the other requests of a worker run while one long match goes on.

    An engine calls :meth:`tick` between filter evaluations. Every ``interval`` seconds it
    sleeps: under gunicorn's gevent worker (``time`` monkey-patched after the fork) that
    yields to the hub, so ``/health`` and other clients are served between filters instead
    of after the whole match; with real threads ``sleep(0)`` only offers the GIL. One
    evaluation cannot be interrupted; the filter and event limits bound what it costs.
    """

    __slots__ = ("_due",)
    interval = 0.005
    # gevent's sleep(0) only runs ready callbacks: the hub polls sockets and fires timers
    # only for a positive sleep.
    _GEVENT_PAUSE = 1e-5

    def __init__(self) -> None:
        self._due = time.perf_counter() + self.interval

    def tick(self) -> None:
        if time.perf_counter() >= self._due:
            sleep = time.sleep  # looked up now: gevent patches the module after import
            sleep(0 if sleep.__module__ == "time" else self._GEVENT_PAUSE)
            self._due = time.perf_counter() + self.interval


class FilterFailures:
    """What went wrong with single filters during one :meth:`Matcher.match_reporting` call.

    An engine that evaluates per-filter code calls :meth:`add` for a filter that raised (it
    does not match) or took longer than ``budget`` seconds (its answer stands: a budget
    cannot interrupt libxml2 or ``re``, it can only make the caller stop paying for that
    filter on later events). ``failed`` maps filter id to the reason, first one kept.
    """

    __slots__ = ("budget", "failed")

    def __init__(self, budget: float | None = None) -> None:
        self.budget = budget
        self.failed: dict[str, str] = {}

    def add(self, filter_id: str, reason: str) -> None:
        self.failed.setdefault(filter_id, reason)

    def __bool__(self) -> bool:
        return bool(self.failed)


class Matcher(abc.ABC):
    """A store of filters that answers "which filters does this event match".

    Contract:

    * ``add_filter`` validates the dialect (``UnsupportedDialect``) and compiles the
      expression (``InvalidFilter``) before storing anything; an existing id is replaced
      in place (it keeps its position in the insertion order).
    * ``remove_filter`` raises ``UnknownFilter`` for an id it does not hold.
    * ``match`` returns matching filter ids in insertion order, without duplicates, and never
      raises because one filter failed to evaluate on one event (whatever it raised).
    * ``match_reporting`` answers as ``match`` does and tells a :class:`FilterFailures`
      which filters raised or overran its budget; engines that evaluate per-filter code
      override it (the default reports nothing).
    * ``match_many`` / ``match_many_reporting`` answer for a batch of events exactly as
      ``match`` / ``match_reporting`` would for each (one id list per event; one
      :class:`FilterFailures` per event, so a filter failing on two events is reported
      twice). The default is that loop; an engine that can share work across a batch (one
      index pass, say) overrides them.

    Thread safety: callers serialize mutations (add/remove) against everything else; ``match``
    may run concurrently with other ``match`` calls only, so engines must not mutate shared
    state while matching.

    Engines register under ``uri`` through the ``wsframework.matchers`` entry-point group and
    are created by ``matchers.create_matcher(uri, config)``.  Routing capabilities that later
    engines add (summaries for summary-based routing) live in separate optional interfaces,
    not here, so a plain filtering engine stays small.
    """

    uri: ClassVar[str]
    dialects: ClassVar[frozenset[str]]

    def __init__(self, config: Any = None) -> None:
        self.config = config

    @abc.abstractmethod
    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        """Store ``spec`` under ``filter_id``, replacing any filter with that id."""

    def add_filters(self, items: Iterable[tuple[str, FilterSpec]]) -> None:
        """Add many filters under new ids: all of them, or none when one is refused (its
        ``InvalidFilter`` or ``UnsupportedDialect`` raised). Engines with a bulk path (an
        index built once for the whole batch) override it."""
        added: list[str] = []
        try:
            for filter_id, spec in items:
                self.add_filter(filter_id, spec)
                added.append(filter_id)
        except BaseException:
            for filter_id in added:
                self.remove_filter(filter_id)
            raise

    def packed_filter(self, filter_id: str) -> bytes | None:
        """The held filter's compiled form as bytes, for a store to keep beside the filter's
        text and hand back to :meth:`add_packed_filters` (a restart then compiles nothing);
        None when this matcher has no such form for it. Engines whose compiling is costly
        override it."""
        return None

    def add_packed_filters(self, items: Iterable[tuple[str, FilterSpec, bytes | None]]) -> None:
        """:meth:`add_filters` for ``(filter_id, spec, packed)``, where ``packed`` is what
        :meth:`packed_filter` gave for the same spec (or None). A matcher takes a form only
        when it is its own (its version, a fingerprint of its configuration) and well
        formed, and compiles the spec otherwise: a form from another configuration must
        never change what a filter matches."""
        self.add_filters((filter_id, spec) for filter_id, spec, _ in items)

    def add_packed_forms(self, ids: Sequence[str], specs: Sequence[FilterSpec],
                         forms: PackedForms) -> None:
        """:meth:`add_packed_filters` for ``ids``, ``specs`` and ``forms`` side by side, the
        forms in one buffer (what a start hands over): an engine may read them in numpy
        instead of one by one. Engines with packed forms override it."""
        if not len(ids) == len(specs) == len(forms):
            raise ValueError("add_packed_forms takes an id, a spec and a form per filter")
        self.add_packed_filters(zip(ids, specs, forms))

    @abc.abstractmethod
    def remove_filter(self, filter_id: str) -> None:
        """Forget ``filter_id``; ``UnknownFilter`` if it is not held."""

    @abc.abstractmethod
    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        """Ids of the filters ``event`` (an lxml element) satisfies, in insertion order."""

    def match_reporting(self, event: Any, failures: FilterFailures, *,
                        variables: Mapping[str, Any] | None = None) -> list[str]:
        """:meth:`match`, reporting per-filter failures to ``failures``."""
        return self.match(event, variables=variables)

    def match_many(self, events: Sequence[Any], *,
                   variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        """:meth:`match` for each of ``events``: one id list per event."""
        return [self.match(event, variables=variables) for event in events]

    def match_many_reporting(self, events: Sequence[Any], failures: Sequence[FilterFailures], *,
                             variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        """:meth:`match_reporting` for each of ``events``, event ``i`` reporting to
        ``failures[i]``."""
        _check_failures(events, failures)
        return [self.match_reporting(event, failed, variables=variables)
                for event, failed in zip(events, failures)]

    @abc.abstractmethod
    def filter_ids(self) -> list[str]:
        """Ids of all stored filters, in insertion order."""

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        """A few ``(filter, event element, should_match)`` cases for the conformance test.

        Every shipped engine overrides this with at least one matching and one
        non-matching case; the shared conformance test fails for an engine that does not.
        """
        raise NotImplementedError(f"{cls.__name__} provides no example filters")

    def check_dialect(self, spec: FilterSpec) -> None:
        if spec.dialect not in self.dialects:
            raise UnsupportedDialect(spec.dialect, self.dialects)

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "filters": len(self)}

    def __len__(self) -> int:
        return len(self.filter_ids())

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self.filter_ids()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.uri} filters={len(self)}>"


class ReportingMatcher(Matcher):
    """A matcher whose one matching routine, :meth:`_match`, reports per-filter failures
    when given a :class:`FilterFailures` (``None`` when called through :meth:`match`)."""

    @abc.abstractmethod
    def _match(self, event: Any, variables: Mapping[str, Any] | None,
               failures: FilterFailures | None) -> list[str]:
        """Ids of the filters ``event`` satisfies; failures go to ``failures`` if given."""

    def match(self, event: Any, *, variables: Mapping[str, Any] | None = None) -> list[str]:
        return self._match(event, variables, None)

    def match_reporting(self, event: Any, failures: FilterFailures, *,
                        variables: Mapping[str, Any] | None = None) -> list[str]:
        return self._match(event, variables, failures)

    def _match_many(self, events: Sequence[Any], variables: Mapping[str, Any] | None,
                    failures: Sequence[FilterFailures] | None) -> list[list[str]]:
        """:meth:`_match` for each event (``failures[i]`` for event ``i``, or all None); an
        engine that shares work across a batch overrides this one routine."""
        if failures is None:
            return [self._match(event, variables, None) for event in events]
        return [self._match(event, variables, failed) for event, failed in zip(events, failures)]

    def match_many(self, events: Sequence[Any], *,
                   variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        return self._match_many(list(events), variables, None)

    def match_many_reporting(self, events: Sequence[Any], failures: Sequence[FilterFailures], *,
                             variables: Mapping[str, Any] | None = None) -> list[list[str]]:
        events = list(events)
        _check_failures(events, failures)
        return self._match_many(events, variables, list(failures))


def _check_failures(events: Sequence[Any], failures: Sequence[FilterFailures]) -> None:
    if len(failures) != len(events):
        raise ValueError(f"one FilterFailures per event: {len(failures)} for {len(events)} events")
