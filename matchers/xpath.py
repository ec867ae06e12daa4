"""The default engine: XPath 1.0 filters compiled once with lxml, plus the other dialects
WS-Eventing subscribers send (XPath 2.0 and action lists, see :mod:`matchers.xpath2`)."""

from __future__ import annotations

import copy
import logging
import time
from typing import Any, Mapping

from lxml import etree

from wsframework import ns
from matchers.vocabulary import EXAMPLE_QUOTES
from wsframework.matching.base import FilterFailures, FilterSpec, Pacer, ReportingMatcher
from wsframework.matching.errors import InvalidFilter, UnknownFilter
from .xpath2 import ACTION_DIALECTS, XPATH20_DIALECTS, compile_action, compile_xpath2

__all__ = ["XPATH_MATCHER_URI", "XPATH10_DIALECTS", "XPATH20_DIALECTS", "ACTION_DIALECTS",
           "XPathFilterMatcher", "xpath_boolean"]

log = logging.getLogger(__name__)

XPATH_MATCHER_URI = ns.MATCHER_XPATH
XPATH10_DIALECTS = frozenset(
    {
        ns.XPATH10_DIALECT_2004,  # WS-Eventing 2004/08 default
        ns.XPATH10_DIALECT_2011,  # WS-Eventing 2011 default
    }
)

# libxml2 resolves prefixes and functions only while evaluating, so a probe evaluation at
# add time turns these into InvalidFilter instead of a filter that silently never matches.
# Other evaluation errors (an unbound $variable) depend on the event and are left alone.
_STATIC_EVAL_ERRORS = ("Undefined namespace prefix", "Unregistered function")
_PROBE = etree.Element("probe")


def xpath_boolean(result: Any) -> bool:
    """XPath ``boolean()`` of an lxml XPath result: Python truth agrees for bool, node-set,
    string and number, except NaN, which Python calls true."""
    if result.__class__ is float:
        return bool(result) and result == result
    return bool(result)


class XPathFilterMatcher(ReportingMatcher):
    """XPath 1.0 filters, evaluated with the event element as the context node -- except
    filters in the 2004/08 dialect (``REC-xpath-19991116``), evaluated on the notification's
    SOAP envelope as that submission says (:func:`notification_envelope`).

    A filter matches when XPath ``boolean()`` of its result is true.  ``variables`` given to
    :meth:`match` are bound as ``$name``; a filter that fails to evaluate on an event (for
    example an unbound variable) simply does not match it.

    The same table also holds XPath 2.0 filters (elementpath, compiled once) and action-list
    filters, which read the ``action`` variable; every entry is called as
    ``compiled(event, **variables)``, so XPath 1.0 keeps its direct lxml call on the hot path.
    """

    uri = XPATH_MATCHER_URI
    dialects = XPATH10_DIALECTS | XPATH20_DIALECTS | ACTION_DIALECTS

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self._compiled: dict[str, Any] = {}
        # 2004/08 XPath filters: id -> the SOAP namespace of the envelope they are evaluated on
        self._envelope_ns: dict[str, str] = {}

    def add_filter(self, filter_id: str, spec: FilterSpec) -> None:
        self.check_dialect(spec)
        self._envelope_ns.pop(filter_id, None)
        if spec.dialect in XPATH10_DIALECTS:
            compiled = _compile(spec)
            soap_ns = envelope_namespace(spec)
            if soap_ns is not None:
                self._envelope_ns[filter_id] = soap_ns
        elif spec.dialect in XPATH20_DIALECTS:
            compiled = compile_xpath2(spec)
        else:
            compiled = compile_action(spec)
        self._compiled[filter_id] = compiled  # a replaced filter keeps its place

    def remove_filter(self, filter_id: str) -> None:
        try:
            del self._compiled[filter_id]
        except KeyError:
            raise UnknownFilter(filter_id) from None
        self._envelope_ns.pop(filter_id, None)

    def _match(self, event: Any, variables: Mapping[str, Any] | None,
               failures: FilterFailures | None) -> list[str]:
        hits = []
        budget = failures.budget if failures is not None else None
        clock = time.perf_counter
        envelope_ns = self._envelope_ns
        envelopes: dict = {}
        pacer = Pacer()
        for filter_id, compiled in self._compiled.items():
            pacer.tick()
            context = event
            if envelope_ns and filter_id in envelope_ns:
                context = envelope_of(event, envelope_ns[filter_id], variables, envelopes)
            started = clock() if budget else 0.0
            try:
                result = compiled(context, **variables) if variables else compiled(context)
            except Exception as exc:  # RecursionError, MemoryError inside libxml2 included
                log.debug("filter %r failed on event: %s", filter_id, exc)
                if failures is not None:
                    failures.add(filter_id, f"evaluation failed: {type(exc).__name__}: {exc}")
                continue
            if budget and clock() - started > budget:
                failures.add(filter_id, f"evaluation took {clock() - started:.3f} s, over the "
                                        f"{budget:g} s budget")
            if xpath_boolean(result):
                hits.append(filter_id)
        return hits

    def filter_ids(self) -> list[str]:
        return list(self._compiled)

    def __len__(self) -> int:
        return len(self._compiled)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self._compiled

    @classmethod
    def example_filters(cls) -> list[tuple[FilterSpec, Any, bool]]:
        dialect = ns.XPATH10_DIALECT_2011
        quote = etree.fromstring(
            f'<q:quote xmlns:q="{EXAMPLE_QUOTES}" symbol="ACME"><q:price>42</q:price></q:quote>'
        )
        spec = FilterSpec(dialect, "/q:quote[q:price > 30]", (("q", EXAMPLE_QUOTES),))
        cheap = FilterSpec(dialect, "q:price < 10", (("q", EXAMPLE_QUOTES),))
        return [(spec, quote, True), (cheap, quote, False)]


def envelope_namespace(spec: FilterSpec) -> str | None:
    """For a 2004/08 XPath filter, the SOAP version of the envelope it is evaluated on:
    SOAP 1.1 if it binds a prefix to the 1.1 namespace (and not to 1.2), otherwise SOAP 1.2.
    None for every other dialect (their context node is the event)."""
    if spec.dialect != ns.XPATH10_DIALECT_2004:
        return None
    bound = {uri for _, uri in spec.namespaces}
    return ns.SOAP11 if ns.SOAP11 in bound and ns.SOAP12 not in bound else ns.SOAP12


def envelope_of(event: Any, soap_ns: str, variables: Mapping[str, Any] | None,
                memo: dict) -> etree._Element:
    """:func:`notification_envelope` of ``event``, built once per match and SOAP version
    (``memo`` lives as long as one match of one event)."""
    envelope = memo.get(("envelope", soap_ns))
    if envelope is None:
        envelope = memo[("envelope", soap_ns)] = notification_envelope(
            event, soap_ns, (variables or {}).get("action"))
    return envelope


def notification_envelope(event: Any, soap_ns: str, action: str | None) -> etree._Element:
    """The envelope a 2004/08 XPath filter is evaluated on.

    The 2004/08 submission's XPath dialect takes "the SOAP Envelope containing the
    notification" as the context node (the 2011 Recommendation changed it to the event):
    ``s:Envelope`` with a ``wsa:Action`` header (2004/08 addressing) and a copy of the event
    as the body's child. Per-subscriber headers (reference parameters) differ between
    notifications of one event and are not part of it.
    """
    envelope = etree.Element(etree.QName(soap_ns, "Envelope"),
                             nsmap={"s": soap_ns, "wsa": ns.WSA2004})
    header = etree.SubElement(envelope, etree.QName(soap_ns, "Header"))
    if action:
        etree.SubElement(header, etree.QName(ns.WSA2004, "Action")).text = action
    etree.SubElement(envelope, etree.QName(soap_ns, "Body")).append(copy.deepcopy(event))
    return envelope


def _compile(spec: FilterSpec) -> etree.XPath:
    if not spec.expression.strip():
        raise InvalidFilter("empty filter")
    try:
        compiled = etree.XPath(
            spec.expression, namespaces=spec.namespace_map, smart_strings=False
        )
    except (etree.XPathError, TypeError, ValueError) as exc:
        raise InvalidFilter(f"{exc}: {spec.expression!r}") from None
    try:
        compiled(_PROBE)
    except etree.XPathEvalError as exc:
        if str(exc) in _STATIC_EVAL_ERRORS:
            raise InvalidFilter(f"{exc}: {spec.expression!r}") from None
    except (etree.Error, TypeError, ValueError):
        pass
    return compiled
